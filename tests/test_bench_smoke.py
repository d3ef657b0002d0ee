"""Smoke tests of the benchmark scripts in bench/: a tiny measure.py run and its formulas."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench"
sys.path.insert(0, str(BENCH))

import benchlib as bl  # noqa: E402

pytestmark = pytest.mark.e2e

NUMBER = r"-?\d+(?:\.\d+)?"


@pytest.fixture(scope="module")
def measured(tmp_path_factory) -> tuple[subprocess.CompletedProcess, dict]:
    """One tiny measure.py run read by the two tests below: levels 1 and 4, each over plain TCP and over TLS (the
    same four Locust runs the two tests made apart, in one measure.py process and one json.loads floor)."""
    work = tmp_path_factory.mktemp("measure")
    out = work / "result.json"
    cmd = [sys.executable, str(BENCH / "measure.py"), "--levels", "1,4", "--transports", "plain,tls", "--ttft-ms",
           "40", "--tokens-per-s", "100", "--output-tokens", "8", "--per-user", "2", "--out", str(work),
           "--json", str(out)]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=180, env=bl.clean_env())
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc, json.loads(out.read_text())


def test_measure_tiny_levels_print_a_numeric_table(measured) -> None:
    proc, data = measured
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("$ ") and "measure.py --levels 1,4" in lines[0]
    rows = [row for row in table_rows(lines) if row[1] == "plain"]
    for level, row in zip(("1", "4"), rows, strict=True):
        assert row[:2] == [level, "plain"] and len(row) == 21, row
        assert all(re.fullmatch(NUMBER, cell) for cell in row[2:-1]), row
        assert row[-1] in ("1.00", "-"), row  # × plain of a plain row ("-" when its CPU fell between samples)
        assert row[3] == "0"  # no failed requests
    assert 0 < data["json_loads_us"] < 1000
    plain = [result for result in data["levels"] if result["transport"] == "plain"]
    assert [result["level"] for result in plain] == [1, 4]
    for result in plain:
        assert result["requests"] == result["joined"] == 2 * result["level"]
        assert abs(result["ttft_err_p50_ms"]) < 20
        # a tiny level can fall between two CPU samples (0 %); the figure must still be a measurement
        assert result["events_per_s"] > 0 and result["locust_cpu_pct"] >= 0
        # every record carries the client's own lag estimate; at 1–4 streams it bounds the true error
        assert result["lag_p50_ms"] is not None and result["lag_covers_pct"] >= 50


def table_rows(lines: list[str]) -> list[list[str]]:
    """The rows of measure.py's table (after its header and rule)."""
    header = next(i for i, line in enumerate(lines) if line.split()[:3] == ["level", "transport", "requests"])
    rows = []
    for line in lines[header + 2:]:
        if not line.strip() or not line.split()[0].isdigit():
            break
        rows.append(line.split())
    return rows


def test_measure_over_tls_prints_plain_and_tls_side_by_side(measured) -> None:
    """``--transports plain,tls``: each level over plain TCP and over HTTPS (a certificate made at run time), every
    request measured against the truth in both, the TLS row against the plain one."""
    proc, data = measured
    assert "REQUESTS_CA_BUNDLE=" in proc.stdout  # the TLS run's command line shows how it trusts the certificate
    rows = table_rows(proc.stdout.splitlines())
    assert [row[:2] for row in rows] == [["1", "plain"], ["1", "tls"], ["4", "plain"], ["4", "tls"]], rows
    by_level = [data["levels"][i:i + 2] for i in (0, 2)]
    for level, (plain, tls) in zip((1, 4), by_level, strict=True):
        assert (plain["transport"], tls["transport"]) == ("plain", "tls")
        assert tls["requests"] == tls["joined"] == plain["requests"] == 2 * level and tls["failed"] == 0
        assert abs(tls["ttft_err_p50_ms"]) < 20 and tls["x_json_loads"] >= 0
        run = json.loads((bl.run_dir(Path(tls["work"])) / "run.json").read_text())
        assert run["simulator"]["url"].startswith("https://")


def test_formulas_on_a_hand_made_run() -> None:
    frame = pd.DataFrame({
        "run_id": ["r", "r"], "model": ["m", "m"], "vendor": ["v", "v"], "sample_id": ["1", "2"],
        "repeat": [1, 1], "attempts": [1, 1], "status": ["success", "success"],
        "t0_monotonic": [10.0, 10.5], "ttft_ms": [100.0, 100.0], "latency_ms": [1000.0, 1500.0], "chunks": [10, 20],
    })
    truth = {
        "r/m/v/1/1/1": {"t_arrival": 10.002, "t_first_token": 10.099, "t_last_byte": 10.9985},
        "r/m/v/2/1/1": {"t_arrival": 10.501, "t_first_token": 10.5995, "t_last_byte": 11.999},
    }
    errs = bl.errors_ms(bl.record_dicts(frame), truth)
    assert errs["ttft_err"] == pytest.approx([1.0, 0.5])
    assert errs["lat_err"] == pytest.approx([1.5, 1.0])
    assert errs["send"] == pytest.approx([3.0, 1.5])  # 100 − (10.099 − 10.002)·1000, …
    assert all(lag != lag for lag in errs["lag"])  # no client_lag_ms column: NaN, aligned with ttft_err
    tracking = bl.lag_tracking([1.0, 0.5, 9.0, 4.0], [0.2, 0.0, 8.5, 1.0])
    assert tracking["lag_covers_pct"] == pytest.approx(75.0)  # 4.0 > 1.0 + 1 ms slack: not covered
    assert tracking["lag_err_corr"] > 0.9
    assert bl.streaming_phase(frame) == pytest.approx((10.0, 12.0))
    assert bl.events_per_second(frame) == pytest.approx(30 / 2.0)
    assert bl.plan_items(50, 3, 32) == (30, 5) and bl.plan_items(1, 3, 32) == (3, 1)
    run = bl.Monitored(0, 0.0, 4.0, [bl.CpuSample(1.0, {7: 1.0}), bl.CpuSample(3.0, {7: 2.0})], {7: "locust"})
    assert bl.cpu_at(run.samples, 7, 2.0) == pytest.approx(1.5)
    assert bl.cpu_percent(run, [7], 1.0, 3.0) == pytest.approx(50.0)


def test_master_ingest_tiny_rate_records_every_item(tmp_path: Path) -> None:
    """bench/master_ingest.py at a tiny rate: the master exits 0, every item is a row, and the figures are there."""
    out = tmp_path / "ingest.json"
    cmd = [sys.executable, str(BENCH / "master_ingest.py"), "--rates", "100", "--workers", "2", "--answer-s", "0.2",
           "--duration-s", "3", "--out", str(tmp_path), "--json", str(out)]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120, env=bl.clean_env())
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (result,) = json.loads(out.read_text())["results"]
    assert result["master_exit"] == 0 and result["rows"] == result["items"] >= 300
    assert result["live_board_rows"] == result["rows"]
    for key in ("kept_per_s", "send_to_row_p99_ms", "handout_p99_ms", "cpu_us_per_record"):
        assert result[key] is not None and result[key] > 0, key
    assert result["send_to_row_p50_ms"] < 1000
    (run_dir,) = [p for p in (tmp_path.glob("ingest-*/rate-100/out/run"))]
    assert len(pd.read_csv(run_dir / "records.csv")) == result["rows"]


def test_wire_cpu_tiny_run_prints_plain_and_tls_per_client(tmp_path: Path) -> None:
    """bench/wire_cpu.py, two streams: both clients over plain TCP and TLS, each row a figure and its ratios."""
    out = tmp_path / "wire.json"
    cmd = [sys.executable, str(BENCH / "wire_cpu.py"), "--instant", "--streams", "2", "--per-stream", "2",
           "--rounds", "2", "--json", str(out)]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120, env=bl.clean_env())
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    data = json.loads(out.read_text())
    configs = [(r["client"], r["transport"]) for r in data["results"]]
    assert configs == [("lean", "plain"), ("requests", "plain"), ("lean", "tls"), ("requests", "tls")]
    assert all(len(r["us_per_event"]) == 2 and r["median_us_per_event"] > 0 for r in data["results"])
    assert len(data["json_loads_us"]) == 2 and all(us > 0 for us in data["json_loads_us"])
