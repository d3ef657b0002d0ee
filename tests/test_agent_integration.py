"""Agent tasks end to end against the simulator: for each agent knob, the trajectory metrics avv-score writes
(completion, steps delta, recovery, loops) equal what the simulator's truth log implies, computed here from the
truth log alone; and the demo run on samples/agent-demo.jsonl prints the trajectory metrics."""

from __future__ import annotations

import json
from collections import Counter
from urllib.parse import unquote

import pandas as pd
import pytest

from avv_core.items import truth_tag
from avv_core.record_file import read_records
from avv_core.samples import load_samples
from tests.builders import sim_config, sim_vendors, write_jsonl, write_yaml
from tests.locust_runs import ROOT, clean_env, only_run_dir, run_locust
from tests.sim_records import truth_lines

pytestmark = pytest.mark.integration

BASE = {"ttft_ms": 5, "tokens_per_s": 4000, "output_tokens": 6}
PROFILES = {
    "ref": BASE,
    "extra": {**BASE, "extra_steps_rate": 0.4, "seed": 1},
    "giveup": {**BASE, "give_up_on_error_rate": 0.5, "seed": 2},
    "loop": {**BASE, "loop_rate": 0.35, "seed": 3},
    "short": {**BASE, "steps_to_finish": 1},
}
DEMO = ROOT / "samples" / "agent-demo.jsonl"


def task_lines() -> list[dict]:
    """The demo tasks, plus a copy of each task without an injected error that has one at step 2."""
    lines = [json.loads(t) for t in DEMO.read_text(encoding="utf-8").splitlines() if t.strip()]
    copies = [{**x, "data_index": x["data_index"] + "-err", "agent": {**x["agent"], "inject_error": {"step": 2}}}
              for x in lines if "inject_error" not in x["agent"]]
    return lines + copies


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    work = tmp_path_factory.mktemp("agent")
    write_jsonl(work / "samples.jsonl", task_lines(), ensure_ascii=True)
    write_yaml(work / "sim.yaml", sim_config(PROFILES))
    write_yaml(work / "vendors.yaml", sim_vendors("m", list(PROFILES), "ref"))
    proc = run_locust(["--headless", "--avv-config", "vendors.yaml", "--avv-sim-config", "sim.yaml",
                       "--avv-samples", "samples.jsonl", "--avv-out", "out", "--avv-retries", "0"], cwd=work)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    run_dir = only_run_dir(work / "out")
    truth: dict[tuple[str, str], dict[int, dict]] = {}
    for line in truth_lines(run_dir / "sim_truth.jsonl"):
        parts = [unquote(p) for p in line["client_tag"].split("/")]
        truth.setdefault((parts[2], parts[3]), {})[int(parts[6])] = line
    return {"run_dir": run_dir, "truth": truth, "stdout": proc.stdout,
            "tasks": {s.sample_id: s.agent for s in load_samples(work / "samples.jsonl").samples},
            "scores": pd.read_csv(run_dir / "scores.csv").set_index("vendor"),
            "records": read_records(run_dir / "records.csv")}


# ----------------------------------------------------------------- what the truth log implies (our own code)


def _calls(line: dict) -> list[tuple[str, dict]]:
    return [(c["name"], json.loads(c["arguments"])) for c in line["tool_calls"]]


def _matches(args: dict, expected: dict) -> bool:
    return set(args) == set(expected) and all(
        args[k] in (v if isinstance(v, list) else [v]) for k, v in expected.items())


def implied(run, vendor: str) -> dict[str, dict]:
    """Per task: steps, completed, error sent, recovered, looped — from the truth lines of the trajectory."""
    out = {}
    for sid, task in run["tasks"].items():
        lines = [run["truth"][(vendor, sid)][s] for s in sorted(run["truth"][(vendor, sid)])]
        made = [c for line in lines for c in _calls(line)]
        final_calls = all(any(n == e["name"] and _matches(a, e["arguments"]) for n, a in made)
                          for e in task.final_calls or [])
        completed = bool(lines[-1]["agent"]["gold_answer"]) and final_calls
        s = task.inject_error.step if task.inject_error else None
        error = s is not None and len(lines) >= s and bool(lines[s - 1]["tool_calls"])
        counts = Counter((n, json.dumps(a, sort_keys=True)) for n, a in made)
        if lines[-1]["tool_calls"]:
            end = "max_steps"
        elif error and len(lines) == s + 1:
            end = "gave_up"
        else:
            end = "completed" if completed else "wrong_answer"
        out[sid] = {"end": end, "steps": len(lines), "completed": completed, "error": error,
                    "recovered": error and len(lines) > s and bool(lines[s]["tool_calls"]) and completed,
                    "loop": max(counts.values(), default=0) >= 3,
                    "extra": sum(line["agent"]["action"] == "extra" for line in lines),
                    "gave_up": lines[-1]["agent"]["action"] == "give_up"}
    return out


def implied_metrics(run, vendor: str) -> dict[str, float]:
    mine, base = implied(run, vendor), implied(run, "ref")
    done = [t for t in mine.values() if t["completed"]]
    pairs = [(mine[s]["steps"], base[s]["steps"]) for s in mine if mine[s]["completed"] and base[s]["completed"]]
    errors = [t for t in mine.values() if t["error"]]
    nan = float("nan")
    return {"task_completion_rate": len(done) / len(mine),
            "avg_steps": sum(t["steps"] for t in done) / len(done) if done else nan,
            "steps_delta": sum(v - b for v, b in pairs) / len(pairs) if pairs else nan,
            "recovery_rate": sum(t["recovered"] for t in errors) / len(errors) if errors else nan,
            "loop_rate": sum(t["loop"] for t in mine.values()) / len(mine)}


# ------------------------------------------------------------------------------------------------- tests


def test_every_step_row_is_a_request_the_simulator_answered(run):
    records = run["records"]
    assert records["step"].notna().all() and (records["status"] == "success").all()
    by_tag = {line["client_tag"]: line for steps in run["truth"].values() for line in steps.values()}
    assert len(records) == len(by_tag)
    for row in records.to_dict("records"):
        line = by_tag[truth_tag(row)]
        assert row["finish_reason"] == line["finish_reason"]
        assert row["tool_call_count"] == len(line["tool_calls"])


@pytest.mark.parametrize("vendor", list(PROFILES))
def test_trajectory_metrics_equal_what_the_truth_log_implies(run, vendor):
    got = run["scores"].loc[vendor]
    want = implied_metrics(run, vendor)
    for column, value in want.items():
        assert got[column] == pytest.approx(value, nan_ok=True), column
    assert got["trajectories"] == len(run["tasks"]) and got["items"] == len(run["tasks"])


def test_each_knob_moves_its_metric_and_nothing_else_moves_the_reference(run):
    scores, tasks = run["scores"], run["tasks"]
    ref = scores.loc["ref"]
    assert ref["task_completion_rate"] == 1.0 and ref["recovery_rate"] == 1.0 and ref["loop_rate"] == 0.0
    assert ref["error_trajectories"] == sum(t.inject_error is not None for t in tasks.values())
    # extra steps: on every task both completed, the vendor's extra steps are exactly its "extra" actions
    extra, base = implied(run, "extra"), implied(run, "ref")
    both = [s for s in extra if extra[s]["completed"] and base[s]["completed"]]
    assert both and all(extra[s]["steps"] - base[s]["steps"] == extra[s]["extra"] for s in both)
    assert scores.loc["extra", "steps_delta"] > 0
    # giving up after an error: every give-up right after the injected error is a trajectory not recovered
    giveup = implied(run, "giveup")
    gave_up = [s for s, t in giveup.items() if t["error"] and t["gave_up"]]
    assert gave_up and 0 < scores.loc["giveup", "recovery_rate"] < 1
    assert scores.loc["giveup", "task_completion_rate"] == pytest.approx(1 - len(gave_up) / len(tasks))
    # loops: some trajectories repeat one call three times
    assert 0 < scores.loc["loop", "loop_rate"] < 1
    # stopping after one tool turn: tasks whose gold end needs a later call never complete
    short = implied(run, "short")
    assert all(not short[s]["completed"] for s, t in tasks.items() if t.final_calls)
    assert scores.loc["short", "task_completion_rate"] < 1
    # one tool turn, then the answer; a retry after an error at step 1 is one more
    assert all(t["steps"] == 2 + t["error"] for t in short.values() if t["completed"])


def test_tasks_ending_otherwise_than_the_baseline_are_in_disagreements(run):
    frame = pd.read_csv(run["run_dir"] / "disagreements.csv", dtype=str, keep_default_na=False)
    rows = frame[frame["kind"] == "trajectory_end"]
    for vendor in PROFILES:
        mine, base = implied(run, vendor), implied(run, "ref")
        differing = {s for s in mine if mine[s]["end"] != base[s]["end"]}
        assert set(rows[rows["vendor"] == vendor]["sample_id"]) == differing
        ends = Counter(t["end"] for t in mine.values())
        assert run["scores"].loc[vendor, "trajectory_ends"] == ";".join(
            f"{e}:{ends[e]}" for e in ("completed", "wrong_answer", "gave_up", "max_steps") if ends[e])


# -------------------------------------------------------------------------------------------------- demo


def test_the_agent_demo_against_the_demo_vendors_prints_the_trajectory_metrics(tmp_path):
    proc = run_locust(["--headless", "--avv-samples", str(DEMO), "--avv-out", "out"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert "demo-model  agent trajectories" in proc.stdout and "Task Completion" in proc.stdout
    run_dir = only_run_dir(tmp_path / "out")
    scores = pd.read_csv(run_dir / "scores.csv").set_index("vendor")
    assert scores.loc["reference", "task_completion_rate"] == 1.0
    assert scores.loc["faithful", "task_completion_rate"] == 1.0 and scores.loc["faithful", "steps_delta"] == 0
    assert scores.loc["flaky", "task_completion_rate"] < 1.0
    assert (scores["trajectories"] == 10).all()
    shown = run_locust_score(tmp_path, run_dir, "flaky", "rebook-cancelled-flight")
    assert "step 1:" in shown and "end: " in shown
    assert "## Agent trajectories" not in (run_dir / "report.md").read_text()  # a per-model table, not a section
    assert "Agent trajectories (one per agent task" in (run_dir / "report.md").read_text()


def run_locust_score(cwd, run_dir, vendor: str, sample: str) -> str:
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-m", "avv_scoring.cli", "trajectory", str(run_dir), "--vendor", vendor,
                           "--sample", sample], cwd=cwd, env=clean_env(), capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout
