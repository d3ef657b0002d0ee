"""Stress mode: the ladder, the SLO, capacity per vendor; locally and on master + 2 workers."""

from __future__ import annotations

import subprocess

import pandas as pd
import pytest

from avv_core.measures import meets_slo
from avv_harness.run.options import StressSettings as HarnessStressSettings
from avv_harness.run.options import parse_levels
from avv_harness.run.stress_policy import StressPolicy
from avv_scoring.stress import StressSettings, capacity_table, level_table
from tests.builders import sim_config, sim_url, vendor_entry, vendors_config, write_yaml
from tests.e2e_ports import free_port
from tests.locust_runs import DEMO_SAMPLES, clean_env, locust_cmd, only_run_dir, run_locust

SHAPE = {"ttft_ms": 150, "tokens_per_s": 80, "output_tokens": 8, "tokens_per_chunk": 4}
PROFILES = {
    "open": SHAPE,
    "limited": {**SHAPE, "max_concurrency": 8, "over_limit": "429", "retry_after_s": 0.2},
    "queued": {**SHAPE, "max_concurrency": 8, "over_limit": "queue"},
}
ARGS = ["--avv-config", "vendors.yaml", "--avv-sim-config", "sim.yaml", "--avv-samples", str(DEMO_SAMPLES),
        "--avv-mode", "stress",
        "--avv-stress-levels", "1,2,4,8,16", "--avv-stress-step-s", "2", "--avv-slo-ttft-p95-ms", "350",
        "--avv-out", "out", "--avv-no-score"]
EXPECTED = {"open": (16, None), "limited": (8, 16), "queued": (8, None)}


def prepare(work):
    write_yaml(work / "sim.yaml", sim_config(PROFILES))
    vendors = [vendor_entry(n, sim_url(n), is_baseline=n == "open") for n in PROFILES]
    write_yaml(work / "vendors.yaml", vendors_config(vendors))


def capacities(run_dir) -> dict[str, tuple]:
    cap = pd.read_csv(run_dir / "capacity.csv")
    out = {}
    for row in cap.itertuples(index=False):
        first = None if pd.isna(row.first_429_level) else int(row.first_429_level)
        out[row.vendor] = (None if pd.isna(row.capacity) else int(row.capacity), first)
    return out


@pytest.mark.integration
def test_stress_finds_each_vendors_capacity(tmp_path):
    prepare(tmp_path)
    proc = run_locust(["--headless", *ARGS], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    run_dir = only_run_dir(tmp_path / "out")
    assert capacities(run_dir) == EXPECTED
    levels = pd.read_csv(run_dir / "stress.csv")
    assert {"vendor", "level", "requests", "success_rate", "rate_429", "ttft_p95_ms", "tokens_per_s"} <= set(levels)
    limited = levels[levels.vendor == "limited"].set_index("level")
    assert limited.loc[8, "rate_429"] == 0 and limited.loc[16, "rate_429"] > 0.2
    queued = levels[levels.vendor == "queued"].set_index("level")
    assert queued.loc[8, "ttft_p95_ms"] <= 350 < queued.loc[16, "ttft_p95_ms"]
    records = pd.read_csv(run_dir / "records.csv")
    assert records["level"].notna().all() and set(records["level"]) == {1, 2, 4, 8, 16}
    assert (run_dir / "stress_ttft_p95.png").stat().st_size > 5000
    assert (run_dir / "stress_tokens_per_s.png").stat().st_size > 5000
    assert "Stress: capacity per vendor" in (run_dir / "report.md").read_text()
    assert "Stress: capacity per vendor" in proc.stdout


@pytest.mark.e2e
def test_distributed_stress_gives_the_same_capacities(tmp_path):
    prepare(tmp_path)
    port = free_port()
    master = subprocess.Popen(locust_cmd("--headless", "--master", "--expect-workers", "2", "--master-bind-port",
                                         str(port), *ARGS), cwd=tmp_path, env=clean_env(),
                              stdout=subprocess.DEVNULL, stderr=open(tmp_path / "master.log", "w"))
    workers = [subprocess.Popen(locust_cmd("--worker", "--master-port", str(port), *ARGS), cwd=tmp_path,
                                env=clean_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
               for _ in range(2)]
    assert master.wait(timeout=180) == 0, (tmp_path / "master.log").read_text()[-3000:]
    assert [w.wait(timeout=30) for w in workers] == [0, 0]
    run_dir = only_run_dir(tmp_path / "out")
    assert capacities(run_dir) == EXPECTED
    assert pd.read_csv(run_dir / "records.csv")["worker"].nunique() == 2


def policy(vendors):
    settings = HarnessStressSettings(levels=(1, 2, 4, 8), step_s=10.0, slo_ttft_p95_ms=100.0, slo_error_rate=0.01)
    return StressPolicy(settings, tuple(vendors))


def test_vendor_breaking_the_slo_twice_is_not_escalated():
    plan = policy(["good", "bad"])
    first = plan.tick(0.0)
    assert (first.level, first.users, first.classes, first.stop) == (1, 2, ("good", "bad"), False)
    for level, t in ((1, 10.0), (2, 20.0), (4, 30.0)):
        for _ in range(10):
            plan.observe("good", level, True, 50.0)
            plan.observe("bad", level, level == 1, 50.0)
        decision = plan.tick(t)
        assert decision.closed_level == level
    # bad broke the SLO at levels 2 and 4 (all failed): stopped after 4; good goes on alone at level 8
    assert plan.stopped_after == {"bad": 4} and decision.newly_stopped == ("bad",)
    assert (decision.level, decision.users, decision.classes) == (8, 8, ("good",))
    later = plan.tick(35.0)  # within a level nothing changes
    assert (later.level, later.users, later.classes, later.closed_level) == (8, 8, ("good",), None)
    end = plan.tick(40.0)
    assert end.stop and end.closed_level == 8 and plan.done
    assert plan.level_durations_s == {1: 10.0, 2: 10.0, 4: 10.0, 8: 10.0}
    assert plan.summary()["stopped_after"] == {"bad": 4}


def test_run_stopping_early_closes_the_level_with_its_measured_duration():
    plan = policy(["v"])
    plan.tick(0.0)
    plan.tick(10.0)
    plan.stop_now(13.5)
    assert plan.done and plan.level_durations_s == {1: 10.0, 2: 3.5}


def test_ladder_parsing_and_slo_rule():
    assert parse_levels("") == (1, 2, 4, 8, 16, 32)
    assert parse_levels("1, 3,9") == (1, 3, 9)
    for bad in ("4,2", "0,1", "a"):
        with pytest.raises(Exception, match="--avv-stress-levels"):
            parse_levels(bad)
    assert meets_slo([(True, 90.0)] * 99 + [(False, None)], 100, 0.01)
    assert not meets_slo([(True, 90.0)] * 98 + [(False, None)] * 2, 100, 0.01)
    assert not meets_slo([(True, 90.0)] * 90 + [(True, 150.0)] * 10, 100, 0.01)
    assert not meets_slo([], 100, 0.01)


def test_level_and_capacity_tables_from_hand_made_records():
    rows = []
    for level, n_ok, n_429, ttft in ((1, 10, 0, 100.0), (2, 20, 0, 120.0), (4, 20, 20, 130.0)):
        rows += [{"vendor": "v", "level": level, "status": "success", "error_kind": None, "ttft_ms": ttft,
                  "latency_ms": ttft * 2, "completion_tokens": 10, "tps": 50.0}] * n_ok
        rows += [{"vendor": "v", "level": level, "status": "failed", "error_kind": "http_429", "ttft_ms": None,
                  "latency_ms": 5.0, "completion_tokens": None, "tps": None}] * n_429
    settings = StressSettings(levels=(1, 2, 4), step_s=10.0, slo_ttft_p95_ms=125.0, slo_error_rate=0.01)
    levels = level_table(pd.DataFrame(rows), settings)
    assert list(levels["requests"]) == [10, 20, 40]
    assert list(levels["tokens_per_s"]) == [10.0, 20.0, 20.0]  # Σ completion tokens / 10 s
    assert list(levels["rate_429"]) == [0.0, 0.0, 0.5]
    assert list(levels["meets_slo"]) == [True, True, False]
    cap = capacity_table(levels).iloc[0]
    assert (cap["capacity"], cap["first_429_level"], cap["peak_tokens_per_s"]) == (2, 4, 20.0)
