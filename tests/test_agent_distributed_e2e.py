"""End to end: agent trajectories on a master + 2 workers, one worker killed mid-run. Every trajectory is recorded
exactly once, as one block of consecutive steps 1..n; a trajectory the lost worker had in flight restarted at step 1
elsewhere and none of its partial rows reached records.csv."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import pytest

from avv_core.items import truth_tag
from avv_core.record_file import read_records
from tests.builders import sim_config, sim_vendors, write_yaml
from tests.e2e_ports import free_port
from tests.locust_runs import ROOT, only_run_dir
from tests.sim_records import truth_lines
from tests.test_distributed_e2e import start

pytestmark = pytest.mark.e2e

PROFILES = {
    "ref": {"ttft_ms": 120, "tokens_per_s": 400, "output_tokens": 8},
    "alt": {"ttft_ms": 100, "tokens_per_s": 400, "output_tokens": 8, "loop_rate": 0.2, "extra_steps_rate": 0.2,
            "give_up_on_error_rate": 0.5, "seed": 4},
}
REPEATS = 3


def test_worker_killed_mid_run_every_trajectory_exactly_once(tmp_path: Path):
    write_yaml(tmp_path / "sim.yaml", sim_config(PROFILES))
    write_yaml(tmp_path / "vendors.yaml", sim_vendors("m", list(PROFILES), "ref",
                                                      **{n: {"concurrency": 2} for n in PROFILES}))
    args = ["--avv-config", "vendors.yaml", "--avv-sim-config", "sim.yaml", "--avv-out", "out",
            "--avv-samples", str(ROOT / "samples" / "agent-demo.jsonl"), "--avv-repeats", str(REPEATS),
            "--avv-no-score", "--avv-retries", "0"]
    port = free_port()
    master = start(["--headless", "--master", "--expect-workers", "2", "--master-bind-port", str(port), *args],
                   tmp_path, "master.log")
    victim = start(["--worker", "--master-port", str(port), *args], tmp_path, "victim.log")
    survivor = start(["--worker", "--master-port", str(port), *args], tmp_path, "survivor.log")
    records = None
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:  # kill once some trajectories are recorded and others are in flight
        runs = list((tmp_path / "out").glob("*/records.csv")) if (tmp_path / "out").exists() else []
        if runs and len(runs[0].read_text().splitlines()) > 40:
            records = runs[0]
            break
        time.sleep(0.2)
    assert records is not None, (tmp_path / "master.log").read_text()[-2000:]
    victim.send_signal(signal.SIGKILL)
    assert master.wait(timeout=240) == 0, (tmp_path / "master.log").read_text()[-3000:]
    survivor.wait(timeout=30)

    frame = read_records(records)
    keys = list(zip(frame["vendor"], frame["sample_id"], frame["repeat"], strict=True))
    items = list(dict.fromkeys(keys))
    assert len(items) == 2 * 10 * REPEATS  # every trajectory recorded
    for key in items:
        rows = frame[[k == key for k in keys]]
        n = len(rows)
        assert rows["step"].tolist() == list(range(1, n + 1)), key  # exactly once, steps 1..n
        assert list(rows.index) == list(range(rows.index[0], rows.index[0] + n)), key  # one block (one write)
        assert rows["tool_results"].iloc[:-1].notna().all() and rows["tool_results"].isna().iloc[-1]
        assert len(rows["worker"].unique()) == 1  # one process ran the whole trajectory
    assert (frame["status"] == "success").all()

    truth = {}
    for line in truth_lines(records.parent / "sim_truth.jsonl"):
        truth.setdefault(line["client_tag"], []).append(line)
    for row in frame.to_dict("records"):
        assert row["finish_reason"] == truth[truth_tag(row)][-1]["finish_reason"]
    run = json.loads((records.parent / "run.json").read_text())
    assert run["completed"] is True and run["items_requeued"] >= 1 and run["items_recorded"] == len(items)
    assert "handed out again" in (tmp_path / "master.log").read_text()
    # the simulator answered every recorded step (and the lost worker's partial steps, which are not recorded)
    assert sum(len(lines) for lines in truth.values()) >= len(frame)
    assert only_run_dir(tmp_path / "out") == records.parent
