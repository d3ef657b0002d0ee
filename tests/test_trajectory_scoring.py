"""Agent trajectories in scoring: de-duplication keeps whole trajectories, every per-item metric reads the first
step, each end and each trajectory metric on a hand-built table with known answers, per-task disagreements, and
the outputs (report.md, terminal, report.html, the Vendors tab) show the agent tables only when there are tasks."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from avv_core.agent_task import parse_agent
from avv_core.samples import Gold
from avv_harness.locust.web_ui import AGENT_COLUMNS, vendor_columns
from avv_scoring.load import dedupe_latest
from avv_scoring.metrics.trajectories import TJ_END, first_steps
from avv_scoring.metrics.uncertainty import StatsSettings
from avv_scoring.report.html import render_html
from avv_scoring.report.markdown import render_markdown
from avv_scoring.report.terminal import render_tables
from avv_scoring.score import score_frame
from avv_scoring.testing import call, record, records_frame
from avv_scoring.verdict import Thresholds

TOOLS = [{"type": "function", "function": {"name": n, "parameters": {"type": "object"}}}
         for n in ("lookup", "search", "rebook")]
TASKS = {
    "T1": {"max_steps": 6},
    "T2": {"max_steps": 6, "inject_error": {"step": 1}, "final_text_pattern": "^OK"},
    "T3": {"max_steps": 6, "final_calls": [{"name": "rebook", "arguments": {"ref": "Q"}}]},
    "T4": {"max_steps": 6},
    "T5": {"max_steps": 3},
}
GOLD = {sid: Gold(agent=parse_agent(task, TOOLS, f"s:{sid}")) for sid, task in TASKS.items()}
TOOLS_BY_SAMPLE = {sid: TOOLS for sid in TASKS}
INJECTED = [{"tool_call_id": "call_1", "name": "lookup", "source": "injected_error", "index": None, "content": "Error"}]


def trajectory(vendor: str, sid: str, steps: list, started: str = "2025-03-01T10:00:00", **common) -> list[dict]:
    """Rows of one trajectory; each step is ("call", name, args[, tool_results]) / ("answer", text) / ("fail",)."""
    rows = []
    for i, step in enumerate(steps, start=1):
        base = {"vendor": vendor, "is_baseline": vendor == "b", "sample_id": sid, "step": i,
                "started_at": f"{started}.{i:03d}+00:00", "total_tokens": 10, "wall_ms": 100.0, **common}
        if step[0] == "call":
            results = step[3] if len(step) > 3 else [{"source": "matched"}]
            rows.append(record(**base, finish_reason="tool_calls", tool_calls=[call(step[1], step[2])],
                               tool_results=json.dumps(results)))
        elif step[0] == "answer":
            rows.append(record(**base, content=step[1]))
        else:
            rows.append(record(**base, status="failed", error_kind="http_5xx"))
    return rows


def baseline_rows() -> list[dict]:
    return (trajectory("b", "T1", [("call", "lookup", {}), ("call", "search", {}), ("answer", "done")])
            + trajectory("b", "T2", [("call", "lookup", {}, INJECTED), ("call", "lookup", {}), ("answer", "OK now")])
            + trajectory("b", "T3", [("call", "search", {"d": 1}), ("call", "rebook", {"ref": "Q"}),
                                     ("answer", "rebooked")])
            + trajectory("b", "T4", [("call", "lookup", {}), ("answer", "done")])
            + trajectory("b", "T5", [("call", "lookup", {}), ("answer", "done")]))


def vendor_rows() -> list[dict]:
    return (trajectory("v", "T1", [("call", "lookup", {}), ("call", "search", {}), ("call", "search", {"x": 1}),
                                   ("answer", "done")])  # one extra step
            + trajectory("v", "T2", [("call", "lookup", {}, INJECTED), ("answer", "OK, sorry")])  # gave up
            + trajectory("v", "T3", [("call", "search", {"d": 1})] * 3 + [("answer", "rebooked")])  # loop, no rebook
            + trajectory("v", "T4", [("call", "lookup", {}), ("fail",)])
            + trajectory("v", "T5", [("call", "lookup", {}), ("call", "search", {}), ("call", "rebook", {})]))


def scored(rows=None):
    frame = records_frame(rows if rows is not None else baseline_rows() + vendor_rows())
    return score_frame(frame, TOOLS_BY_SAMPLE, gold_by_sample=GOLD)


def row_of(result, vendor):
    return result.scores.set_index("vendor").loc[vendor]


# ------------------------------------------------------------------------------------------------- rows


def test_dedupe_keeps_the_whole_latest_trajectory_and_nothing_of_an_older_one():
    older = trajectory("v", "T1", [("call", "lookup", {})] * 4 + [("answer", "a")], started="2025-03-01T09:00:00")
    newer = trajectory("v", "T1", [("call", "lookup", {}), ("answer", "b")], started="2025-03-01T10:00:00")
    single = [record(vendor="v", sample_id="plain", started_at="2025-03-01T08:00:00+00:00")]
    for rows in (older + newer + single, newer + single + older):  # file order does not matter, time does
        kept = dedupe_latest(records_frame(rows))
        t1 = kept[kept["sample_id"] == "T1"]
        assert t1["step"].tolist() == [1, 2] and t1["content"].tolist()[-1] == "b"
        assert (kept["sample_id"] == "plain").sum() == 1


def test_first_steps_stand_for_their_items():
    frame = records_frame(vendor_rows() + [record(vendor="v", sample_id="plain")])
    firsts = first_steps(frame)
    assert sorted(firsts["sample_id"]) == ["T1", "T2", "T3", "T4", "T5", "plain"]


def test_every_per_item_metric_reads_the_first_step():
    result = scored()
    v = row_of(result, "v")
    assert v["items"] == 5 and v["successes"] == 5  # T4 failed at step 2: that is in task_completion_rate
    assert v["success_rate"] == 1.0 and v["f1_pairs"] == 5 and v["tp"] == 5
    assert v["avg_tokens"] == 10.0 and v["call_pairs"] == 5
    assert len(result.records) == 10  # one row per item


# --------------------------------------------------------------------------------------------- metrics


def test_ends_of_trajectories():
    result = scored()
    ends = result.records.set_index(["vendor", "sample_id"])[TJ_END].to_dict()
    assert {sid: ends[("v", sid)] for sid in TASKS} == {
        "T1": "completed", "T2": "gave_up", "T3": "wrong_answer", "T4": "failed", "T5": "max_steps"}
    assert {ends[("b", sid)] for sid in TASKS} == {"completed"}


def test_trajectory_metrics_have_their_documented_values():
    result = scored()
    v, b = row_of(result, "v"), row_of(result, "b")
    assert v["trajectories"] == 5 and v["tasks_completed"] == 1 and v["task_completion_rate"] == pytest.approx(0.2)
    assert v["trajectory_ends"] == "completed:1;wrong_answer:1;gave_up:1;max_steps:1;failed:1"
    assert v["avg_steps"] == 4.0 and v["steps_delta"] == 1.0 and v["steps_pairs"] == 1  # T1: 4 − 3
    assert v["error_trajectories"] == 1 and v["recovery_rate"] == 0.0  # T2: a text answer after the error
    assert v["loop_rate"] == pytest.approx(1 / 4)  # T3 loops; T4 failed is left out of the denominator
    assert v["avg_task_tokens"] == 40.0 and v["avg_task_wall_s"] == pytest.approx(0.4)
    assert b["task_completion_rate"] == 1.0 and b["recovery_rate"] == 1.0 and b["loop_rate"] == 0.0
    assert b["steps_delta"] == 0.0 and b["steps_pairs"] == 5 and b["avg_steps"] == pytest.approx(13 / 5)


def test_a_trajectory_that_ends_before_its_injection_step_is_not_an_error_trajectory():
    rows = baseline_rows() + trajectory("v", "T2", [("fail",)])
    v = row_of(scored(rows), "v")
    assert v["error_trajectories"] == 0 and math.isnan(v["recovery_rate"]) and v["task_completion_rate"] == 0.0
    assert math.isnan(v["loop_rate"]) and math.isnan(v["avg_steps"])  # nothing completed, nothing left to judge


@pytest.mark.integration  # scores a run and draws its figures: seconds
def test_runs_without_agent_tasks_have_no_trajectory_metrics_and_no_agent_tables():
    rows = [record(vendor="b", is_baseline=True, sample_id="1"), record(vendor="v", sample_id="1")]
    result = score_frame(records_frame(rows), {"1": []})
    v = row_of(result, "v")
    assert v["trajectories"] == 0 and math.isnan(v["task_completion_rate"]) and math.isnan(v["steps_delta"])
    assert v["trajectory_ends"] == ""
    assert "Agent trajectories" not in render_markdown(result) and "agent trajectories" not in render_tables(result)
    assert 'id="agent"' not in render_html(result)


def test_a_threshold_on_task_completion_fails_the_vendor():
    thresholds = Thresholds.none().with_bound("task_completion_rate", "min", 0.9)
    result = score_frame(records_frame(baseline_rows() + vendor_rows()), TOOLS_BY_SAMPLE, thresholds=thresholds,
                         gold_by_sample=GOLD, stats=StatsSettings(verdict="point"))  # a handful of tasks: point rule
    assert row_of(result, "b")["verdict"] == "PASS" and row_of(result, "v")["verdict"] == "FAIL"
    assert "task_completion_rate" in row_of(result, "v")["verdict_reasons"]


# ------------------------------------------------------------------------------------ disagreements, outputs


def test_tasks_that_end_otherwise_than_the_baseline_are_disagreements():
    result = scored()
    rows = result.disagreements[result.disagreements["kind"] == "trajectory_end"]
    assert set(rows["vendor"]) == {"v"}
    by_sample = rows.set_index("sample_id")
    assert sorted(by_sample.index) == ["T2", "T3", "T4", "T5"]  # T1 completed on both sides
    assert by_sample.loc["T2", "vendor_finish"] == "gave_up after 2 steps"
    assert by_sample.loc["T2", "baseline_finish"] == "completed after 3 steps"
    assert by_sample.loc["T2", "vendor_calls"] == "1 lookup({}) → injected error · 2 answer"
    assert by_sample.loc["T3", "expected"] == 'calls rebook({"ref": "Q"})'
    assert by_sample.loc["T4", "vendor_calls"] == "1 lookup({}) · 2 failed (http_5xx)"


@pytest.mark.integration  # scores a run and draws its figures: seconds
def test_outputs_show_the_agent_tables_when_there_are_tasks():
    result = scored()
    md = render_markdown(result)
    assert "Agent trajectories" in md and "| v | 0.2000 | 5 | 1 |" in md
    assert "trajectory_end 4" in md
    terminal = render_tables(result)
    assert "m  agent trajectories" in terminal and "completed:1;wrong_answer:1" in terminal
    assert 'id="agent"' in render_html(result)


def test_the_vendors_tab_adds_trajectory_columns_only_for_agent_samples():
    plain = [key for key, _, _ in vendor_columns(False, False)]
    agent = [key for key, _, _ in vendor_columns(False, False, agent=True)]
    assert not set(AGENT_COLUMNS) & set(plain)
    assert [k for k in agent if k not in plain] == list(AGENT_COLUMNS)
    assert agent[-3:] == plain[-3:] == ["anomalies", "irf", "verdict"]


@pytest.mark.integration  # over a second in one process: the unit tier is sub-second per test
def test_scores_of_the_live_board_match_the_file_for_trajectories(tmp_path):
    """The live view scores in-memory rows with the samples' gold, as avv-score scores the file."""
    from avv_core.records import COLUMN_NAMES, to_csv_row
    from avv_scoring.live_scores import LiveRecords, score_live

    rows = baseline_rows() + vendor_rows()
    live = LiveRecords([to_csv_row(r) for r in rows])
    got = score_live(live.frame(), TOOLS_BY_SAMPLE, "", GOLD).scores.set_index("vendor")
    want = scored(rows).scores.set_index("vendor")
    columns = ["task_completion_rate", "steps_delta", "recovery_rate", "loop_rate", "items", "success_rate"]
    pd.testing.assert_frame_equal(got[columns], want[columns])
    assert len(COLUMN_NAMES) == len(to_csv_row(rows[0]))
