"""bench/peers.py (issue 39.5): its readers of the peers' outputs, its join with the truth log and its figures on
hand-made data (unit), and a tiny run with avv-locust alone, the peers absent as in CI (e2e)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench"
sys.path.insert(0, str(BENCH))

import benchlib as bl  # noqa: E402
import peers  # noqa: E402

OFFSET = 1_795_000_000.0  # wall − monotonic in these hand-made outputs


def body(i: int) -> dict:
    return {"model": "bench", "stream": True, "stream_options": {"include_usage": True},
            "messages": [{"role": "user", "content": [{"type": "text", "text": f"prompt {i}"}]}]}


def test_guidellm_report_gives_each_successful_request_its_body_hash_start_and_ttft() -> None:
    # the shape guidellm 0.8.1 writes with --output kind=json (fields the script reads; the rest left out)
    report = {"benchmarks": [{"requests": {
        "successful": [
            {"request_args": json.dumps({"method": None, "stream": True, "body": body(0)}),
             "info": {"timings": {"request_start": OFFSET + 100.25}}, "time_to_first_token_ms": 211.5},
            {"request_args": json.dumps({"body": body(1)}), "info": {"timings": {"request_start": None}},
             "time_to_first_token_ms": 200.0},  # no start stamp: not a measurement
        ],
        "errored": [{"request_args": json.dumps({"body": body(2)}), "info": {"timings": {"request_start": 1.0}},
                     "time_to_first_token_ms": None}],
    }}]}
    [rec] = peers.guidellm_records(report, OFFSET)
    # the model and stream options do not enter the simulator's hash: the body's content does
    assert rec.key == peers.body_hash({"messages": body(0)["messages"]})
    assert rec.start == pytest.approx(100.25) and rec.ttft_ms == 211.5


def test_aiperf_export_is_joined_to_the_payload_it_sent() -> None:
    # profile_export.jsonl lines and inputs.json as aiperf 0.13.0 writes them (fields the script reads)
    inputs = {"data": [{"session_id": "s0", "payloads": [body(0)]}, {"session_id": "s1", "payloads": [body(1)]}]}
    lines = [
        json.dumps({"metadata": {"conversation_id": "s1", "turn_index": 0, "benchmark_phase": "profiling",
                                 "request_start_ns": int((OFFSET + 7.5) * 1e9)},
                    "metrics": {"time_to_first_token": {"value": 213.8, "unit": "ms"}}}),
        json.dumps({"metadata": {"conversation_id": "s0", "turn_index": 0, "benchmark_phase": "warmup",
                                 "request_start_ns": int(OFFSET * 1e9)},
                    "metrics": {"time_to_first_token": {"value": 1.0, "unit": "ms"}}}),  # warm-up: not counted
        json.dumps({"metadata": {"conversation_id": "s0", "turn_index": 0, "request_start_ns": 1},
                    "metrics": {}, "error": {"code": 500}}),  # failed: no TTFT
        "",
    ]
    [rec] = peers.aiperf_records(lines, inputs, OFFSET)
    assert rec.key == peers.body_hash(body(1))
    assert rec.start == pytest.approx(7.5, abs=1e-6) and rec.ttft_ms == 213.8


def test_avv_records_keep_successful_rows_by_their_item_tag() -> None:
    rows = [{"run_id": "r", "model": "m", "vendor": "v", "sample_id": "3", "repeat": 1, "attempts": 1,
             "status": "success", "t0_monotonic": 5.0, "ttft_ms": 200.0},
            {"run_id": "r", "model": "m", "vendor": "v", "sample_id": "4", "repeat": 1, "attempts": 1,
             "status": "timeout", "t0_monotonic": 5.0, "ttft_ms": None}]
    assert peers.avv_records(rows) == [peers.ClientRecord("r/m/v/3/1/1", 5.0, 200.0)]


def test_join_pairs_requests_sharing_a_body_in_time_order_and_errors_follow_the_formulas() -> None:
    truth = [{"request_hash": "h", "t_arrival": 11.0, "t_first_token": 11.2, "t_last_byte": 13.0},
             {"request_hash": "h", "t_arrival": 10.0, "t_first_token": 10.2, "t_last_byte": 12.0},
             {"request_hash": "g", "t_arrival": 10.5, "t_first_token": None, "t_last_byte": 10.6},  # no token
             {"request_hash": "x", "t_arrival": 10.5, "t_first_token": 10.7, "t_last_byte": 10.9}]  # not the tool's
    records = [peers.ClientRecord("h", 10.9995, 201.0), peers.ClientRecord("h", 9.999, 202.0),
               peers.ClientRecord("g", 10.4, 50.0)]
    pairs = peers.join(records, truth, "request_hash")
    assert [(r.start, t["t_arrival"]) for r, t in pairs] == [(9.999, 10.0), (10.9995, 11.0)]
    errors = peers.ttft_errors_ms(pairs)
    # (start + ttft) − t_first_token: 9.999 + 0.202 − 10.2 = 1 ms; 10.9995 + 0.201 − 11.2 = 0.5 ms
    assert errors["ttft_err"] == pytest.approx([1.0, 0.5])
    # ttft − (t_first_token − t_arrival): 202 − 200, 201 − 200
    assert errors["ttft_vs_server"] == pytest.approx([2.0, 1.0])


def test_events_phase_and_streams_in_flight_come_from_the_server_side() -> None:
    answer = {"t_first_token": 1.0, "completion_tokens": 40, "finish_reason": "stop", "usage_sent": True}
    assert peers.events_written(answer) == bl.events_per_request(40, 1) == 43
    assert peers.events_written({**answer, "usage_sent": False}) == 42
    assert peers.events_written({**answer, "completion_tokens": 40}, tokens_per_chunk=8) == 8
    assert peers.events_written({**answer, "t_first_token": None}) == 0
    # three streams open over [1, 3), one stops at 2; the window is first end (2) → last arrival (2.5)
    truth = [{"t_arrival": 0.0, "t_last_byte": 2.0}, {"t_arrival": 1.0, "t_last_byte": 3.0},
             {"t_arrival": 1.0, "t_last_byte": 3.5}, {"t_arrival": 2.5, "t_last_byte": 4.0}]
    assert peers.server_phase(truth) == (0.0, 4.0)
    flight = peers.in_flight(truth, points=11)
    assert flight == {"in_flight_p50": 2, "in_flight_max": 3.0}
    assert peers.in_flight([]) == {"in_flight_p50": None, "in_flight_max": None}


def test_rounds_alternate_the_order_and_the_table_has_the_issue_rows() -> None:
    assert peers.round_order(["avv", "guidellm", "aiperf"], 0) == ["avv", "guidellm", "aiperf"]
    assert peers.round_order(["avv", "guidellm", "aiperf"], 1) == ["aiperf", "guidellm", "avv"]
    run = {"streams_asked": 500, "us_per_event": 50.0, "ttft_err_p50_ms": 0.3, "ttft_err_p99_ms": 4.0,
           "ttft_vs_server_p50_ms": 1.0, "ttft_vs_server_p99_ms": 9.0, "in_flight_p50": 500}
    results = [{**run, "tool": "avv", "scenario": "paced", "us_per_event": 49.0},
               {**run, "tool": "avv", "scenario": "paced", "us_per_event": 56.0, "ttft_err_p99_ms": 7.0},
               {**run, "tool": "avv", "scenario": "instant", "us_per_event": 18.4},
               {**run, "tool": "aiperf", "scenario": "paced", "us_per_event": None, "ttft_err_p50_ms": None,
                "ttft_err_p99_ms": None, "ttft_vs_server_p50_ms": None, "ttft_vs_server_p99_ms": None,
                "in_flight_p50": None}]
    table = peers.summary_table(results, {"avv": "avv-locust", "guidellm": "guidellm", "aiperf": "aiperf"})
    assert table.splitlines() == [
        "| | avv-locust | aiperf |",  # a tool without runs has no column
        "|---|---|---|",
        "| CPU per streamed event, instant server | 18 µs | - |",
        "| CPU per event, paced, 500 streams | 49–56 µs | - |",
        "| TTFT error p50 / p99 at 500 streams | 0.3 / 4.0–7.0 ms | - |",
        "| TTFT − server TTFT p50 / p99 at 500 streams | 1.0 / 9.0 ms | - |",
        "| streams in flight, asked 500 | 500 | - |",
    ]


def test_a_peer_is_found_by_option_then_environment_then_path(tmp_path, monkeypatch) -> None:
    exe = tmp_path / "guidellm"
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("AVV_BENCH_GUIDELLM", raising=False)
    assert peers.find_peer("guidellm", None) == (str(exe), "PATH")
    assert peers.find_peer("guidellm", str(exe)) == (str(exe), "--guidellm")
    monkeypatch.setenv("AVV_BENCH_GUIDELLM", str(tmp_path / "absent"))
    found, why = peers.find_peer("guidellm", None)
    assert found is None and "$AVV_BENCH_GUIDELLM" in why and "absent" in why
    monkeypatch.delenv("AVV_BENCH_GUIDELLM")
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert peers.find_peer("aiperf", None) == (None, "not on PATH; give --aiperf or $AVV_BENCH_AIPERF")


def test_the_word_tokenizer_is_a_loadable_spec(tmp_path) -> None:
    folder = peers.word_tokenizer(tmp_path / "tok")
    spec = json.loads((folder / "tokenizer.json").read_text())
    assert spec["model"]["type"] == "WordLevel" and spec["pre_tokenizer"] == {"type": "Whitespace"}
    assert json.loads((folder / "tokenizer_config.json").read_text())["tokenizer_class"] == "PreTrainedTokenizerFast"


@pytest.mark.e2e
def test_tiny_run_with_avv_locust_alone_skips_absent_peers(tmp_path: Path) -> None:
    """The script end to end at tiny sizes, as CI has it: no guidellm, no aiperf."""
    out = tmp_path / "peers.json"
    env = {**bl.clean_env(), "PATH": os.defpath}
    cmd = [sys.executable, str(BENCH / "peers.py"), "--rounds", "1", "--paced-streams", "3", "--per-stream", "2",
           "--instant-streams", "2", "--instant-requests", "6", "--ttft-ms", "40", "--tokens-per-s", "100",
           "--output-tokens", "8", "--out", str(tmp_path), "--json", str(out)]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=180, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    said = proc.stdout
    assert "guidellm: skipped (not on PATH; give --guidellm or $AVV_BENCH_GUIDELLM)" in said
    assert "aiperf: skipped (not on PATH; give --aiperf or $AVV_BENCH_AIPERF)" in said
    rows = [line for line in said.splitlines() if line.startswith("| CPU per") or line.startswith("| TTFT error")]
    assert len(rows) == 3 and all(re.search(r"\| -?\d+(\.\d+)? (µs|/)", row) for row in rows), rows
    data = json.loads(out.read_text())
    assert [(r["tool"], r["scenario"]) for r in data["runs"]] == [("avv", "instant"), ("avv", "paced")]
    for run in data["runs"]:
        assert run["exit"] == 0 and run["joined"] == run["requests_asked"] == run["answered"]
        assert run["events"] == run["answered"] * bl.events_per_request(8, 1)
        assert run["us_per_event"] > 0 and run["cpu_life_s"] > run["cpu_phase_s"]
        assert abs(run["ttft_err_p50_ms"]) < 50  # the tool saw the first token soon after the server wrote it
    paced = data["runs"][1]
    assert 1 <= paced["in_flight_max"] <= 3  # never more open at the server than streams asked
