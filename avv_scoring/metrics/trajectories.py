"""Agent trajectories (scoring layer, pure over pandas): the rows of an agent task's steps summarised per item,
the trajectory metrics (registered like every metric), and per-task disagreements with the baseline.

**Rows.** An agent task is one item (model, vendor, sample_id, repeat) recorded as one row per step (``step``
1, 2, …; written together). A single-request item has ``step`` empty. Scoring keeps, per item, the rows of its
latest trajectory (:func:`avv_scoring.load.dedupe_with_steps`, the trajectory counterpart of
:func:`avv_scoring.load.dedupe_latest`), then :func:`summarise` reduces them to ONE row per item: a trajectory's
FIRST step — the sample's request as written, the same request every vendor got — with the trajectory's summary in
helper columns. Every per-item metric (success rate, trigger F1, tool-call correctness, gold, TTFT, tokens …)
therefore reads the first step of an agent task, exactly as it reads a single request; what happened after it is
in the trajectory metrics below.

**End of a trajectory** (``_tj_end``), the first that applies, from its last step:

- ``failed``: the last step failed (after its retries);
- ``max_steps``: the last step's reply still had tool calls (the harness stops there only at ``max_steps``);
- ``gave_up``: a final answer (a successful reply without tool calls) right after an injected tool error;
- ``wrong_answer``: a final answer that misses the task's gold end: a ``final_calls`` entry no call of the
  trajectory matched (gold rules of :mod:`avv_scoring.metrics.correctness`, each call used once), or no match of
  ``final_text_pattern`` in the answer's content (``re.search``);
- ``completed``: a final answer within ``max_steps`` meeting the gold end where given.

**Metrics per vendor** (over its trajectories, one per agent item; n = trajectories)::

    task_completion_rate = completed / n                                   (failed trajectories count)
    avg_steps            = mean steps over completed trajectories
    steps_delta          = mean over steps_pairs of (vendor steps − baseline steps); steps_pairs = (sample, repeat)
                           where both the vendor's and the baseline's trajectory completed
    recovery_rate        = recovered / error_trajectories; error_trajectories = trajectories in which the injected
                           error was sent (the injection step had tool calls); recovered = the next step made at
                           least one tool call and the trajectory completed (a text answer right after the error
                           is giving up, not a recovery)
    loop_rate            = looping / trajectories that did not end failed; looping = some call (name and canonical
                           arguments) made three or more times in the trajectory (successful steps)
    avg_task_tokens      = mean over completed trajectories of Σ total_tokens of their steps (a trajectory with a
                           step that reported no usage is left out)
    avg_task_wall_s      = mean over completed trajectories of Σ wall_ms of their steps / 1000
    avg_task_cost        = mean over completed trajectories of Σ cost of their steps (a trajectory with a step
                           without cost — no price, no usage — is left out)

Each rate is missing when its denominator is 0 (a run without agent tasks shows none). A vendor's failure never
improves these: a failed step ends its trajectory as ``failed`` (not completed, not recovered); steps, tokens and
time are averaged over completed trajectories only, and a failed trajectory is left out of the loop rate rather
than counted as "no loop".
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Hashable, Sequence

import pandas as pd

from avv_core.agent_task import SOURCE_INJECTED
from avv_core.canonical import parse_json_text
from avv_core.frame_rows import Cell, frame_records
from avv_core.json_types import JSONObject
from avv_core.measures import is_missing
from avv_scoring.load import ITEM_KEY, dedupe_with_steps, is_success, numeric, step_numbers
from avv_scoring.metrics.additive import NAN, Columns, rate
from avv_scoring.metrics.calls import CALLS, GOLD, name_of_row
from avv_scoring.metrics.correctness import Call, call_matches, each_gets_its_own
from avv_scoring.metrics.declaration import Metric
from avv_scoring.metrics.frame_memo import per_frame
from avv_scoring.metrics.registry import produces

ENDS = ("completed", "wrong_answer", "gave_up", "max_steps", "failed")
COMPLETED = "completed"
LOOP_REPEATS = 3  # the same call this many times in one trajectory is a loop

# Helper columns of the per-item frame (not part of the record schema).
TJ = "_tj"  # the row is an agent task's first step
TJ_STEPS = "_tj_steps"
TJ_END = "_tj_end"
TJ_ERROR = "_tj_error"  # the injected error was sent
TJ_RECOVERED = "_tj_recovered"
TJ_LOOP = "_tj_loop"
TJ_TOKENS = "_tj_tokens"
TJ_WALL_MS = "_tj_wall_ms"
TJ_COST = "_tj_cost"  # Σ cost of the steps; missing when a step has none
TJ_SPENT = "_tj_spent"  # Σ cost of the steps that have one (what the trajectory cost); missing when none has
TJ_PATH = "_tj_path"  # "1 name(args) · 2 name(args) · 3 answer" for disagreements.csv
TJ_ANSWER = "_tj_answer"  # the final answer's content ("" without one)
HELPERS = (TJ, TJ_STEPS, TJ_END, TJ_ERROR, TJ_RECOVERED, TJ_LOOP, TJ_TOKENS, TJ_WALL_MS, TJ_COST, TJ_SPENT, TJ_PATH,
           TJ_ANSWER)


def has_steps(frame: pd.DataFrame) -> bool:
    return "step" in frame.columns and bool(step_numbers(frame).notna().any())


def first_steps(frame: pd.DataFrame) -> pd.DataFrame:
    """The rows that stand for their item: single requests and the first step of each trajectory."""
    step = step_numbers(frame)
    return frame[step.isna() | (step <= 1)]


# ------------------------------------------------------------------------------------------- summarise


def _tool_results(cell: object) -> list[JSONObject]:
    if not isinstance(cell, str) or not cell:
        return []
    value = parse_json_text(cell)
    return [a for a in value if isinstance(a, dict)] if isinstance(value, list) else []


def _gold_end_met(steps: list[JSONObject], answer: str) -> bool:
    gold = steps[-1].get(GOLD)
    task = getattr(gold, "agent", None)
    if task is None:
        return True
    if not task.final_text_matches(answer):
        return False
    if not task.final_calls:
        return True
    name_of = name_of_row(steps[-1])
    made = [c for s in steps if s["_ok"] for c in s[CALLS]]
    # each expected call needs its own call among those made
    return each_gets_its_own([[j for j, c in enumerate(made) if call_matches(c, e, name_of)]
                              for e in task.final_calls])


def _show(call: Call) -> str:
    return call.show() if len(call.raw) <= 80 else f"{call.name}({call.raw[:77]}…)"


def _total(values: list[Cell]) -> float:
    """The sum of the steps' values (in step order); missing when a step has none."""
    if any(is_missing(v) for v in values):
        return NAN
    total = 0.0
    for value in values:
        total += float(value)
    return total


def summarise_one(steps: list[JSONObject]) -> JSONObject:
    """The helper columns of one trajectory from its rows (annotated, ordered by step)."""
    last = steps[-1]
    content = last.get("content")
    answer = content if isinstance(content, str) else ""
    injected_at = next((i for i, s in enumerate(steps)
                        if any(a.get("source") == SOURCE_INJECTED for a in _tool_results(s.get("tool_results")))),
                       None)
    if not last["_ok"]:
        end = "failed"
    elif last[CALLS]:
        end = "max_steps"
    elif injected_at is not None and injected_at == len(steps) - 2:
        end = "gave_up"
    elif not _gold_end_met(steps, answer):
        end = "wrong_answer"
    else:
        end = COMPLETED
    after = steps[injected_at + 1] if injected_at is not None and injected_at + 1 < len(steps) else None
    recovered = bool(after is not None and after["_ok"] and after[CALLS] and end == COMPLETED)
    counts = Counter((c.name, c.key) for s in steps if s["_ok"] for c in s[CALLS])
    tokens = [s.get("total_tokens") for s in steps]
    walls = [s.get("wall_ms") for s in steps]
    costs = [s.get("cost") for s in steps]
    priced = [c for c in costs if not is_missing(c)]
    path = []
    for s in steps:
        shown = (", ".join(_show(c) for c in s[CALLS]) if s[CALLS] else
                 "answer" if s["_ok"] else f"failed ({s.get('error_kind')})")
        if any(a.get("source") == SOURCE_INJECTED for a in _tool_results(s.get("tool_results"))):
            shown += " → injected error"
        path.append(f"{int(s['_step'])} {shown}")
    return {
        TJ: True, TJ_STEPS: len(steps), TJ_END: end, TJ_ERROR: injected_at is not None, TJ_RECOVERED: recovered,
        TJ_LOOP: bool(counts) and max(counts.values()) >= LOOP_REPEATS,
        TJ_TOKENS: _total(tokens), TJ_WALL_MS: _total(walls), TJ_COST: _total(costs),
        TJ_SPENT: _total(priced) if priced else NAN,
        TJ_PATH: " · ".join(path), TJ_ANSWER: answer if end != "failed" and not last[CALLS] else "",
    }


def summarise(records: pd.DataFrame) -> pd.DataFrame:
    """One row per item (see the module docstring): single requests as they are (``_tj`` False) and each
    trajectory's first step with its summary. ``records`` = the rows after
    :func:`~avv_scoring.load.dedupe_with_steps`, annotated by :func:`avv_scoring.metrics.calls.annotate_calls`."""
    step = step_numbers(records)
    blank = {TJ: False, TJ_STEPS: NAN, TJ_END: None, TJ_ERROR: False, TJ_RECOVERED: False, TJ_LOOP: False,
             TJ_TOKENS: NAN, TJ_WALL_MS: NAN, TJ_COST: NAN, TJ_SPENT: NAN, TJ_PATH: None, TJ_ANSWER: None}
    if not step.notna().any():
        return records.assign(**{k: pd.Series([v] * len(records), index=records.index, dtype="object")
                                 for k, v in blank.items()})
    work = records.assign(_step=step, _ok=is_success(records))
    summaries: dict[Hashable, JSONObject] = {}
    trajectories = work[step.notna()]
    for _, group in trajectories.groupby(list(ITEM_KEY), sort=False, dropna=False):
        ordered = group.sort_values("_step", kind="stable")
        summaries[ordered.index[0]] = summarise_one(frame_records(ordered))
    keep = step.isna() | step.index.isin(list(summaries))
    out = records[keep].copy()
    for column, default in blank.items():
        out[column] = pd.Series([summaries[i][column] if i in summaries else default for i in out.index],
                                index=out.index, dtype="object")
    return out


@per_frame
def trajectories_of(rows: pd.DataFrame) -> pd.DataFrame:
    """The trajectory rows of a per-item frame (summarised when it was not yet)."""
    if TJ not in rows.columns:
        from avv_scoring.metrics.calls import ensure_annotated

        rows = summarise(ensure_annotated(rows))
    return rows[rows[TJ].astype(bool)]


# --------------------------------------------------------------------------------------------- metrics


@produces(
    Metric("task_completion_rate", "Task Completion", "rate", "higher", order=800, group="agent", needs="agent", web=10,
           doc="completed trajectories / trajectories (final answer within max_steps meeting the gold end; "
               "failed ones count)"),
    Metric("trajectories", "Trajectories", "int", "none", order=805, group="agent",
           doc="agent-task items of the vendor (one trajectory each)"),
    Metric("tasks_completed", "Tasks completed", "int", "none", order=806, group="agent",
           doc="trajectories that ended completed"),
    Metric("trajectory_ends", "Trajectory ends", "text", "none", order=807, group="agent",
           doc="trajectories per end (completed, wrong_answer, gave_up, max_steps, failed) as end:count;…"),
)
def task_completion(rows: pd.DataFrame) -> Columns:
    """``task_completion_rate = completed / trajectories`` (module docstring: how a trajectory ends); every
    trajectory is in the denominator, a failed one too. ``trajectory_ends`` = ``end:count`` joined by ``;`` in
    the order completed, wrong_answer, gave_up, max_steps, failed (ends with no trajectory left out)."""
    tj = trajectories_of(rows)
    ends = Counter(tj[TJ_END].tolist())
    return {"task_completion_rate": rate(ends[COMPLETED], len(tj)), "trajectories": len(tj),
            "tasks_completed": ends[COMPLETED], "trajectory_ends": ";".join(f"{e}:{ends[e]}" for e in ENDS if ends[e])}


@per_frame
def _completed_steps(rows: pd.DataFrame) -> dict[tuple[str, int], int]:
    """(sample_id, repeat) → steps of each completed trajectory of ``rows``."""
    done = trajectories_of(rows)
    done = done[done[TJ_END] == COMPLETED]
    repeats = numeric(done["repeat"]).fillna(1).astype(int)
    return {(str(s), int(r)): int(n) for s, r, n in zip(done["sample_id"], repeats, done[TJ_STEPS], strict=True)}


@produces(
    Metric("avg_steps", "Avg Steps", "num", "lower", order=810, group="agent", needs="agent", web=11,
           doc="mean steps (requests) over completed trajectories"),
    Metric("steps_delta", "Steps Δ", "num", "lower", order=815, group="agent", needs="agent", web=12,
           doc="mean over steps_pairs of vendor steps − baseline steps (trajectory length against the baseline)"),
    Metric("steps_pairs", "Steps pairs", "int", "none", order=816, group="agent",
           doc="(sample_id, repeat) where the vendor's and the baseline's trajectories both completed"),
)
def trajectory_steps(rows: pd.DataFrame, baseline_rows: pd.DataFrame) -> JSONObject:
    """``avg_steps`` = mean ``steps`` over completed trajectories; ``steps_delta`` = mean over the pairs
    (sample_id, repeat) where both the vendor's and the baseline's trajectories completed of vendor steps − baseline
    steps (0 for the baseline itself; positive = the vendor needs more steps). Missing without such trajectories."""
    mine, theirs = _completed_steps(rows), _completed_steps(baseline_rows)
    pairs = [(n, theirs[key]) for key, n in mine.items() if key in theirs]
    return {"avg_steps": rate(sum(mine.values()), len(mine)),
            "steps_delta": rate(sum(v - b for v, b in pairs), len(pairs)), "steps_pairs": len(pairs)}


@produces(
    Metric("recovery_rate", "Recovery", "rate", "higher", order=820, group="agent", needs="agent", web=13,
           doc="recovered / error_trajectories: after the injected tool error at least one more tool call, then "
               "completed"),
    Metric("error_trajectories", "Error trajectories", "int", "none", order=821, group="agent",
           doc="trajectories in which the injected tool error was sent"),
    Metric("loop_rate", "Loop Rate", "rate", "lower", order=825, group="agent", needs="agent", web=14,
           doc="trajectories with one call (name, canonical arguments) made ≥ 3 times / trajectories not ended failed"),
)
def trajectory_recovery(rows: pd.DataFrame) -> JSONObject:
    """``recovery_rate = recovered / error_trajectories`` and ``loop_rate = looping / trajectories that did not end
    failed`` (module docstring). A trajectory that ends before its injection step is not an error trajectory."""
    tj = trajectories_of(rows)  # masks over its columns, not copies of the frame
    errors = tj[TJ_ERROR].to_numpy(dtype=bool)
    working = tj[TJ_END].to_numpy(dtype=object) != "failed"
    return {"recovery_rate": rate(int(tj[TJ_RECOVERED].to_numpy(dtype=bool)[errors].sum()), int(errors.sum())),
            "error_trajectories": int(errors.sum()),
            "loop_rate": rate(int(tj[TJ_LOOP].to_numpy(dtype=bool)[working].sum()), int(working.sum()))}


@produces(
    Metric("avg_task_tokens", "Tokens / Task", "num", "lower", order=830, group="agent", needs="agent",
           doc="mean over completed trajectories of Σ total_tokens of their steps (left out: a step without usage)"),
    Metric("avg_task_wall_s", "Wall s / Task", "num", "lower", order=835, group="agent", needs="agent",
           doc="mean over completed trajectories of Σ wall_ms of their steps / 1000"),
    # no group: the Cost section is the one place a cost is shown (an agent table of runs without prices
    # would carry a column of n/a)
    Metric("avg_task_cost", "Cost / Task", "num", "lower", order=838, needs="agent",
           doc="mean over completed trajectories of Σ cost of their steps (left out: a step without cost); missing "
               "without a price"),
)
def task_cost(rows: pd.DataFrame) -> JSONObject:
    """``avg_task_tokens`` = mean Σ ``total_tokens`` per completed trajectory (one whose steps did not all report
    usage is left out); ``avg_task_wall_s`` = mean Σ ``wall_ms`` / 1000 per completed trajectory (retries and
    back-off included); ``avg_task_cost`` = mean Σ ``cost`` per completed trajectory (one with a step without cost
    is left out: no price, or no usage)."""
    done = trajectories_of(rows)
    done = done[done[TJ_END] == COMPLETED]
    return {"avg_task_tokens": _mean(done, TJ_TOKENS), "avg_task_wall_s": _mean(done, TJ_WALL_MS) / 1000.0,
            "avg_task_cost": _mean(done, TJ_COST)}


def _mean(done: pd.DataFrame, column: str) -> float:
    """The mean of the numbers in ``column``; missing without one (an empty frame is read no further)."""
    if not len(done):
        return NAN
    values = pd.to_numeric(done[column], errors="coerce").dropna()
    return float(values.mean()) if len(values) else NAN


# ----------------------------------------------------------------------------------------- disagreements

#: The disagreement kind of a task whose trajectory ended otherwise than the baseline's.
TRAJECTORY_KIND = "trajectory_end"


def _expected(row: JSONObject) -> str:
    task = getattr(row.get(GOLD), "agent", None)
    if task is None:
        return ""
    parts = []
    if task.final_calls:
        parts.append("calls " + "; ".join(f"{c['name']}({json.dumps(c['arguments'], ensure_ascii=False)})"
                                          for c in task.final_calls))
    if task.final_text_pattern:
        parts.append(f"answer /{task.final_text_pattern}/")
    return " and ".join(parts) or "a final answer"


def trajectory_disagreements(model: str, vendor: str, vendor_rows: pd.DataFrame, baseline_rows: pd.DataFrame,
                             is_baseline: bool, content_chars: int = 300) -> list[JSONObject]:
    """One row per agent task (sample, repeat) whose trajectory ended otherwise than the baseline's (its end, or
    only one side has a trajectory), in the columns of :data:`avv_scoring.metrics.breakdown.DISAGREEMENT_COLUMNS`:
    ``*_finish`` = "<end> after <n> steps", ``*_calls`` = the steps ("1 read_file({…}) · 2 answer"),
    ``expected`` = the gold end, ``vendor_content`` = the vendor's final answer."""
    if is_baseline:
        return []
    mine = trajectories_of(vendor_rows)
    if mine.empty:
        return []
    theirs = trajectories_of(baseline_rows)
    base = {(str(r["sample_id"]), int(r["repeat"])): r for r in frame_records(theirs)}
    out = []
    for row in frame_records(mine):
        other = base.get((str(row["sample_id"]), int(row["repeat"])))
        if other is not None and other[TJ_END] == row[TJ_END]:
            continue
        answer = row[TJ_ANSWER] if isinstance(row[TJ_ANSWER], str) else ""
        out.append({
            "model": model, "vendor": vendor, "sample_id": str(row["sample_id"]), "repeat": int(row["repeat"]),
            "kind": TRAJECTORY_KIND, "against": "baseline",
            "baseline_finish": None if other is None else f"{other[TJ_END]} after {int(other[TJ_STEPS])} steps",
            "baseline_calls": None if other is None else other[TJ_PATH],
            "vendor_finish": f"{row[TJ_END]} after {int(row[TJ_STEPS])} steps", "vendor_calls": row[TJ_PATH],
            "expected": _expected(row), "vendor_content": answer[:content_chars],
        })
    return out


def ends_text(ends: Sequence[str]) -> str:
    counts = Counter(ends)
    return ", ".join(f"{e} {counts[e]}" for e in ENDS if counts[e])


__all__ = ["ENDS", "TRAJECTORY_KIND", "dedupe_with_steps", "first_steps", "has_steps", "step_numbers", "summarise",
           "trajectory_disagreements"]
