"""Prometheus metrics (avv_harness/locust/prometheus.py): the declaration, one registry per environment, a scrape of
``/avv/metrics`` mid-run equal to the live board, and a real headless run serving ``--avv-metrics-port``."""

from __future__ import annotations

import subprocess
import sys
import time
import urllib.request

import gevent
import pandas as pd
import pytest
from prometheus_client.parser import text_string_to_metric_families

from avv_core.client_load import client_load
from avv_core.records import ANOMALIES
from avv_harness.locust.live_board import live_board
from avv_harness.locust.prometheus import PROM_METRICS, exporter_for, render_prom_table
from tests.builders import sim_config, sim_vendors, write_inputs, write_yaml
from tests.e2e_ports import free_port
from tests.fake_vendor import ScriptedAdapter, stream_reply
from tests.glue import make_env, options
from tests.locust_runs import DEMO_SAMPLES, clean_env, locust_cmd, only_run_dir
from tests.test_web_ui import paced_answer, sample_lines, start_ui, ui_args, wait_until


def samples_of(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of a scrape: (name, sorted labels) → value."""
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def vendor_labels(vendor: str, model: str = "m", endpoint: str = "chat") -> tuple[tuple[str, str], ...]:
    return tuple(sorted({"model": model, "vendor": vendor, "endpoint": endpoint}.items()))


def test_declaration_names_labels_and_readme_table():
    names = [m.name for m in PROM_METRICS]
    assert len(names) == len(set(names)) and all(n.startswith("avv_") for n in names)
    assert all(m.name.endswith("_total") for m in PROM_METRICS if m.kind == "counter")
    assert all(m.buckets for m in PROM_METRICS if m.kind == "histogram")
    assert all(m.labels[:3] == ("model", "vendor", "endpoint") for m in PROM_METRICS if m.read is not None)
    table = render_prom_table()
    assert all(f"| `{n}` |" in table for n in names)


def test_each_environment_has_its_own_registry(tmp_path):
    """Two environments in one process (as the tests run masters and workers): a record stored by one is not in
    the other's scrape, and neither touches prometheus_client's global registry."""
    from prometheus_client import REGISTRY

    config, samples = write_inputs(tmp_path, ["a", "b"], n_samples=2)
    (env1, ctl1), (env2, ctl2) = (make_env(options(tmp_path / f"w{i}", config, samples)) for i in (1, 2))
    try:
        one, two = exporter_for(ctl1), exporter_for(ctl2)
        assert one.registry is not two.registry and one is exporter_for(ctl1)
        row = {"model": "m", "vendor": "a", "sample_id": "s1", "repeat": 0, "status": "success", "ttft_ms": 250.0,
               "tps": 40.0, "anomalies": "usage_missing;no_done", "worker": "h:1", "client_lag_ms": 3.0}
        ctl1.record_hook.fire(records=[row])
        got1, got2 = samples_of(one.exposition().decode()), samples_of(two.exposition().decode())
        assert got1[("avv_ttft_seconds_count", vendor_labels("a"))] == 1
        assert got1[("avv_ttft_seconds_sum", vendor_labels("a"))] == 0.25
        assert got1[("avv_tps_bucket", tuple(sorted((*vendor_labels("a"), ("le", "50.0")))))] == 1
        kind = tuple(sorted({**dict(vendor_labels("a")), "kind": "no_done"}.items()))
        assert got1[("avv_anomalies_total", kind)] == 1
        assert got1[("avv_client_lag_p99_ms", (("process", "h:1"),))] == 3.0
        assert not any(name.startswith(("avv_ttft", "avv_tps", "avv_anomalies", "avv_client_lag")) for name, _ in got2)
        assert (got1[("avv_records", ())], got2[("avv_records", ())]) == (1, 0)
        assert REGISTRY.get_sample_value("avv_ttft_seconds_count", dict(vendor_labels("a"))) is None
    finally:
        env1.runner.quit()
        env2.runner.quit()


@pytest.fixture(autouse=True)
def locust_argv(monkeypatch):
    monkeypatch.setattr(sys, "argv", ["locust"])  # Locust's web UI parses sys.argv for its form


@pytest.mark.integration  # an in-process master + worker with the web UI: seconds
def test_metrics_mid_run_equal_the_live_board(tmp_path):
    config, samples = write_inputs(tmp_path, ["a", "b", "c"], sample_lines=sample_lines(40))
    args = ui_args(tmp_path, config, samples)
    master_env, master = make_env(args, runner="master")
    worker_env, _ = make_env(args, runner="worker", adapter=ScriptedAdapter(paced_answer),
                             master_port=master_env.runner.server.port)
    client = start_ui(master_env, master)
    try:
        wait_until(lambda: len(master_env.runner.clients) == 1)
        assert client.post("/swarm", data={"user_count": 0, "spawn_rate": 0}).get_json()["success"]
        wait_until(lambda: (s := live_board(master).snapshot())["state"] == "running" and 0 < s["scored_records"] < 120
                   and all(v["scores"] for v in s["vendors"]))
        # the two reads follow each other with no yield to the event loop: the same state of the board
        response = client.get("/avv/metrics")
        snap = client.get("/avv/live.json").get_json()
        assert response.status_code == 200 and response.content_type.startswith("text/plain")
        got = samples_of(response.get_data(as_text=True))
        assert got[("avv_records", ())] == snap["records"] > 0
        assert got[("avv_run_info", (("mode", "verify"), ("run_id", snap["run_id"]), ("state", "running")))] == 1
        for v in snap["vendors"]:
            labels = vendor_labels(v["vendor"])
            assert got[("avv_items_done", labels)] == v["items_done"]
            assert got[("avv_items_total", labels)] == v["items_total"] == 40
            assert got[("avv_items_failed", labels)] == v["failed"]
            for column in ("success_rate", "f1", "schema_accuracy", "tool_match"):
                if v["scores"].get(column) is None:
                    assert ("avv_" + column, labels) not in got
                else:
                    assert got[("avv_" + column, labels)] == pytest.approx(v["scores"][column], abs=1e-12)
            verdict = v["scores"].get("verdict")  # the decision so far, a state set over the three verdicts
            assert {state: got[("avv_verdict", tuple(sorted({**dict(labels), "verdict": state}.items())))]
                    for state in ("PASS", "FAIL", "INCONCLUSIVE")} == {s: float(s == verdict) for s in
                                                                        ("PASS", "FAIL", "INCONCLUSIVE")}
            more = v["scores"].get("samples_to_decide")
            assert got.get(("avv_samples_to_decide", labels)) == (None if more is None else pytest.approx(more))
            anomalies = sum(value for (name, lab), value in got.items()
                            if name == "avv_anomalies_total" and dict(lab)["vendor"] == v["vendor"])
            assert anomalies == v["anomalies"]
        assert got[("avv_items_failed", vendor_labels("c"))] > 0  # c fails every fifth sample
        wait_until(lambda: master_env.runner.state == "stopped" and master.run.finished, timeout=90)
        # at the end: the histograms and the lag gauge hold every stored record
        records = pd.read_csv(master.run.run_dir / "records.csv")
        got = samples_of(client.get("/avv/metrics").get_data(as_text=True))
        for vendor, rows in records.groupby("vendor"):
            ok = rows[(rows["status"] == "success") & rows["ttft_ms"].notna()]
            assert got[("avv_ttft_seconds_count", vendor_labels(vendor))] == len(ok) > 0
            # records.csv holds ttft_ms to the microsecond; the histogram sums the unrounded values
            assert got[("avv_ttft_seconds_sum", vendor_labels(vendor))] == pytest.approx(ok["ttft_ms"].sum() / 1000,
                                                                                         abs=len(ok) * 0.5e-6)
            with_tps = rows[rows["status"] == "success"]["tps"].notna().sum()  # the fake vendor's rows have none
            assert got.get(("avv_tps_count", vendor_labels(vendor)), 0) == with_tps
        load = client_load(records.to_dict("records"))
        for process, entry in load.items():
            lag = got[("avv_client_lag_p99_ms", (("process", process),))]
            assert lag == pytest.approx(entry["lag_p99_ms"], abs=1e-3)
        assert set(ANOMALIES) >= {dict(lab)["kind"] for (name, lab) in got if name == "avv_anomalies_total"}
    finally:
        worker_env.runner.quit()
        master_env.runner.quit()
        gevent.sleep(0.1)


def scrape(port: int) -> str | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as response:
            return response.read().decode()
    except OSError:
        return None


@pytest.mark.integration  # one headless Locust process with the simulator: seconds
def test_headless_run_serves_metrics_port(tmp_path):
    """--avv-metrics-port on a real headless run: a scrape mid-run shows the run's totals and counts no more
    than records.csv ends with."""
    write_yaml(tmp_path / "vendors.yaml", sim_vendors("m", ["ref", "other"], "ref"))
    write_yaml(tmp_path / "sim.yaml", sim_config({name: {"ttft_ms": 40, "tokens_per_s": 2000, "output_tokens": 8}
                                                  for name in ("ref", "other")}))
    port, n = free_port(), 32
    cmd = locust_cmd("--headless", "--avv-config", "vendors.yaml", "--avv-sim-config", "sim.yaml",
                     "--avv-samples", str(DEMO_SAMPLES), "--avv-out", "out", "--avv-no-score",
                     "--avv-start-jitter-s", "0", "--avv-metrics-port", str(port), "--web-host", "127.0.0.1")
    proc = subprocess.Popen(cmd, cwd=tmp_path, env=clean_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True)
    mid = None
    try:
        deadline = time.monotonic() + 60
        while proc.poll() is None and time.monotonic() < deadline:
            text = scrape(port)
            if text is not None and "avv_items_done{" in text:
                got = samples_of(text)
                done = sum(v for (name, _), v in got.items() if name == "avv_items_done")
                if 0 < done < 2 * n:
                    mid = got
                    break
            time.sleep(0.02)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err[-3000:]
    assert mid is not None, "no scrape caught the run mid-way"
    run_dir = only_run_dir(tmp_path / "out")
    records = pd.read_csv(run_dir / "records.csv")
    assert len(records) == 2 * n
    assert mid[("avv_run_info", (("mode", "verify"), ("run_id", run_dir.name), ("state", "running")))] == 1
    for vendor in ("ref", "other"):
        label = vendor_labels(vendor)
        assert mid[("avv_items_total", label)] == n
        assert mid[("avv_items_done", label)] <= (records["vendor"] == vendor).sum()
        assert mid.get(("avv_ttft_seconds_count", label), 0) <= mid[("avv_items_done", label)]


def test_grafana_dashboard_and_scrape_config_use_declared_metrics():
    import json
    import re

    import yaml

    from tests.locust_runs import ROOT

    dashboard = json.loads((ROOT / "deploy/prometheus/grafana-dashboard.json").read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    declared = {m.name for m in PROM_METRICS}
    used = {name for e in exprs for name in re.findall(r"\bavv_[a-z0-9_]+", e)}
    exposed = declared | {f"{m.name}_{s}" for m in PROM_METRICS if m.kind == "histogram" for s in ("bucket", "sum",
                                                                                                      "count")}
    assert used and used <= exposed, used - exposed
    scrape = yaml.safe_load((ROOT / "deploy/prometheus/prometheus.yml").read_text())["scrape_configs"][0]
    assert scrape["metrics_path"] == "/avv/metrics"


@pytest.mark.integration  # an in-process local run: seconds
def test_live_rows_cap_bounds_what_the_board_keeps(tmp_path):
    """--avv-live-rows: past the cap the board keeps counting (items done, avv_records) but holds and scores only
    the first rows, and says so; at the end the run's own scores (from records.csv) cover every row."""
    config, samples = write_inputs(tmp_path, ["a", "b"], n_samples=30)
    env, ctl = make_env(options(tmp_path, config, samples, "--avv-live-rows", "20"),
                        adapter=ScriptedAdapter(lambda request: (gevent.sleep(0.01), stream_reply("hi"))[1]))
    exporter = exporter_for(ctl)
    board = live_board(ctl)
    board.interval_s = 0.05
    try:
        env.runner.start_shape()
        wait_until(lambda: board.rows >= 40 and board.scored_records)
        board.refresh(force=True)
        snap = board.snapshot()
        assert snap["live_rows_cap"] == 20 and board._records.count == 20 < board.rows
        assert snap["scored_records"] == 20 and "first 20 records (--avv-live-rows 20:" in snap["note"]
        got = samples_of(exporter.exposition().decode())
        assert got[("avv_records", ())] == snap["records"] == board.rows
        assert sum(v["items_done"] for v in snap["vendors"]) == board.rows
        shape = env.runner.shape_greenlet
        shape.join(timeout=30)
        ctl.finish()
    finally:
        env.runner.quit()
    assert board._records.count == 20 and board.rows == 60
