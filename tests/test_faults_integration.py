"""Every stream fault through one real Locust run: classified, nothing crashes, every item recorded."""

from __future__ import annotations

import json
import socket

import pytest

from avv_core.exit_status import ExitStatus
from avv_core.record_file import read_records
from tests.builders import sim_config, sim_url, vendor_entry, vendors_config, write_yaml
from tests.locust_runs import DEMO_SAMPLES, only_run_dir, run_locust, truth_tag
from tests.sim_records import truth_by_tag
from tests.wire_server import ScriptServer, chunk, headers, sse

pytestmark = pytest.mark.integration  # one Locust process and the simulator

N_SAMPLES = 5
QUICK = {"ttft_ms": 20, "tokens_per_s": 400, "output_tokens": 12, "tool_call_rate": 0.6}
# a tool call on every sample: the demo samples' gold labels (expected_tool_call) would decide otherwise
ALWAYS_CALL = {"tool_call_rate": 1.0, "follow_gold": False}

# vendor → (simulator knobs, expected status, expected error_kind, expected anomaly or detail fragment)
SIM_FAULTS = {
    "r429": ({"rate_limit_rate": 1.0, "retry_after_s": 0.3}, "failed", "http_429", None),
    "r429_no_header": ({"rate_limit_rate": 1.0, "retry_after_s": None}, "failed", "http_429", None),
    "e500": ({"error_rate": 1.0, "error_status": 500}, "failed", "http_5xx", "HTTP 500"),
    "e502": ({"error_rate": 1.0, "error_status": 502}, "failed", "http_5xx", "HTTP 502"),
    "e503": ({"error_rate": 1.0, "error_status": 503}, "failed", "http_5xx", "HTTP 503"),
    "no_headers": ({"header_delay_ms": 3000}, "failed", "timeout", "no response headers"),
    "stall": ({"stall_after_tokens": 1, "stall_ms": 3000}, "failed", "timeout", "stalled"),
    "closed": ({"truncate_rate": 1.0}, "failed", "truncated", "closed mid-stream"),
    "error_event": ({"stream_error_rate": 1.0}, "failed", "stream_error", "error event"),
    "garbage": ({"quirks": ["garbage_line"]}, "failed", "bad_sse", "unparseable"),
    "json_body": ({"quirks": ["json_body"]}, "failed", "bad_sse", "JSON body"),
    "html_body": ({"quirks": ["html_body"]}, "failed", "bad_sse", "non-SSE body"),
    "empty_body": ({"quirks": ["empty_body"]}, "failed", "bad_sse", "empty body"),
    "no_finish": ({"quirks": ["no_finish_reason"]}, "failed", "truncated", "[DONE] without"),
    "comments": ({"quirks": ["comments"]}, "success", None, None),
    "crlf": ({"quirks": ["crlf"]}, "success", None, None),
    "multiline": ({"quirks": ["multiline_data"]}, "success", None, None),
    "dup_done": ({"quirks": ["duplicate_done"]}, "success", None, None),
    "usage_inline": ({"quirks": ["usage_in_last_content_chunk"]}, "success", None, None),
    "llama_repeat": ({"quirks": ["repeat_tool_header"], **ALWAYS_CALL}, "success", None, None),
    "interleaved": ({"quirks": ["interleave_parallel"], **ALWAYS_CALL, "parallel_rate": 1.0}, "success",
                    None, None),
    "under_stop": ({"quirks": ["tool_calls_under_stop"], **ALWAYS_CALL}, "success", None,
                   "tool_calls_under_stop"),
    "huge_args": ({"quirks": ["huge_args"], **ALWAYS_CALL}, "success", None, None),
    "no_usage": ({"omit_usage": True}, "success", None, "usage_missing"),
}


def blackhole() -> tuple[socket.socket, list[socket.socket], int]:
    """A listener whose accept queue is full: new connections hang in SYN (a connect timeout)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    fillers = []
    for _ in range(4):
        filler = socket.socket()
        filler.setblocking(False)
        filler.connect_ex(listener.getsockname())
        fillers.append(filler)
    return listener, fillers, listener.getsockname()[1]


@pytest.fixture(scope="module")
def fault_run(tmp_path_factory):
    work = tmp_path_factory.mktemp("faults")
    samples = DEMO_SAMPLES.read_text().splitlines()[:N_SAMPLES]
    (work / "samples.jsonl").write_text("\n".join(samples) + "\n")
    profiles = {"ok": QUICK, **{name: {**QUICK, **knobs} for name, (knobs, *_) in SIM_FAULTS.items()}}
    write_yaml(work / "sim.yaml", sim_config(profiles))
    script = ScriptServer()
    role = sse(chunk({"role": "assistant", "content": ""}))
    script.scripts["/nodone/v1"] = [headers(), role, sse(chunk({"content": "hi"})), sse(chunk({}, "stop")),
                                    sse(chunk(choices=False, usage={"prompt_tokens": 1, "completion_tokens": 1,
                                                                    "total_tokens": 2}))]
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        refused_port = closed.getsockname()[1]
    listener, fillers, hole_port = blackhole()
    vendors = [vendor_entry("ok", sim_url("ok"), is_baseline=True)]
    vendors += [vendor_entry(n, sim_url(n), timeout_s=1.0) for n in SIM_FAULTS]
    vendors += [
        vendor_entry("refused", f"http://127.0.0.1:{refused_port}/v1"),
        vendor_entry("connect_timeout", f"http://127.0.0.1:{hole_port}/v1", timeout_s=0.5),
        vendor_entry("nodone", f"http://127.0.0.1:{script.port}/nodone/v1"),
    ]
    write_yaml(work / "vendors.yaml", vendors_config(vendors))
    try:
        proc = run_locust(["--headless", "--avv-config", "vendors.yaml", "--avv-sim-config", "sim.yaml",
                           "--avv-samples", "samples.jsonl", "--avv-out", "out", "--avv-retries", "1",
                           "--avv-backoff-s", "0.05", "--avv-retry-after-cap-s", "2",
                           # every fault on every item: no pre-flight refusal, no circuit breaker (their own tests:
                           # test_fail_fast*.py); Locust's tables for test_locust_failures_list_the_faults
                           "--avv-preflight", "off", "--avv-breaker", "0", "--only-summary"], cwd=work, timeout=240)
    finally:
        script.stop()
        listener.close()
        for filler in fillers:
            filler.close()
    # vendors whose every item failed are broken setups, not verdicts: exit 6, each named (issue 34)
    assert proc.returncode == ExitStatus.VENDOR_BROKEN, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert "avv-locust: vendor refused (m) is a broken setup, not a verdict" in proc.stdout
    run_dir = only_run_dir(work / "out")
    frame = read_records(run_dir / "records.csv")
    rows = [{k: (None if v is None or v != v else v) for k, v in r.items()}
            for r in frame.astype(object).to_dict("records")]
    return {"proc": proc, "rows": rows, "truth": truth_by_tag(run_dir / "sim_truth.jsonl"), "run_dir": run_dir}


def rows_of(fault_run, vendor):
    rows = [r for r in fault_run["rows"] if r["vendor"] == vendor]
    assert len(rows) == N_SAMPLES, vendor
    return rows


def test_run_completed_with_every_item_recorded(fault_run):
    vendors = {"ok", *SIM_FAULTS, "refused", "connect_timeout", "nodone"}
    keys = [(r["vendor"], r["sample_id"]) for r in fault_run["rows"]]
    assert len(keys) == len(set(keys)) == len(vendors) * N_SAMPLES
    assert json.loads((fault_run["run_dir"] / "run.json").read_text())["completed"] is True
    assert "Traceback" not in fault_run["proc"].stderr


@pytest.mark.parametrize("vendor", sorted(SIM_FAULTS))
def test_simulator_fault_is_classified(fault_run, vendor):
    _, status, kind, note = SIM_FAULTS[vendor]
    for row in rows_of(fault_run, vendor):
        assert (row["status"], row["error_kind"]) == (status, kind), (vendor, row["error_detail"])
        if note and status == "failed":
            assert note in row["error_detail"], row["error_detail"]
        if note and status == "success":
            assert note in (row["anomalies"] or "").split(";")
        if status == "success":  # what the simulator sent is what we recorded
            truth = fault_run["truth"][truth_tag(row)]
            sent = [{"id": c["id"], "name": c["name"], "arguments": c["arguments"]} for c in truth["tool_calls"]]
            assert json.loads(row["tool_calls"]) == sent
            assert row["finish_reason"] == truth["finish_reason"]


def test_retries_and_retry_after(fault_run):
    for row in rows_of(fault_run, "r429"):
        assert row["attempts"] == 2 and row["wall_ms"] >= 300  # Retry-After 0.3 s honoured
    for vendor in ("r429_no_header", "e500", "closed", "no_headers", "refused", "connect_timeout"):
        assert all(r["attempts"] == 2 for r in rows_of(fault_run, vendor)), vendor  # retried once
    for vendor in ("garbage", "json_body", "error_event"):
        assert all(r["attempts"] == 1 for r in rows_of(fault_run, vendor)), vendor  # not retryable


def test_connection_faults(fault_run):
    assert all(r["error_kind"] == "connect" for r in rows_of(fault_run, "refused"))
    for row in rows_of(fault_run, "connect_timeout"):
        assert row["error_kind"] == "timeout" and "connect timeout" in row["error_detail"]
    for row in rows_of(fault_run, "nodone"):
        assert row["status"] == "success" and row["anomalies"] == "no_done"


def test_huge_and_parallel_tool_calls_are_whole(fault_run):
    sizes = [len(c["arguments"]) for r in rows_of(fault_run, "huge_args") for c in json.loads(r["tool_calls"])]
    assert max(sizes) > 1_000_000
    assert any(r["tool_call_count"] == 2 for r in rows_of(fault_run, "interleaved"))
    for row in rows_of(fault_run, "llama_repeat"):
        for call in json.loads(row["tool_calls"]):
            assert call["name"] and call["name"] in DEMO_SAMPLES.read_text()  # a real tool name, not a repeat


def test_locust_failures_list_the_faults(fault_run):
    out = fault_run["proc"].stdout + fault_run["proc"].stderr
    assert "attempt e500" in out and "http_5xx" in out
