"""One agent trajectory step by step (scoring layer, report): ``avv-score trajectory`` prints it. (The agent metrics
of every vendor are the report's agent section: :mod:`avv_scoring.report.sections.agent`.)"""

from __future__ import annotations

import pandas as pd

from avv_core.canonical import parse_json_text
from avv_core.frame_rows import frame_records
from avv_core.json_types import JSONObject
from avv_core.measures import is_missing
from avv_scoring.load import dedupe_latest
from avv_scoring.metrics.trajectories import step_numbers
from avv_scoring.report.escape import terminal_text

CONTENT_SHOWN = 160  # characters of a tool answer or a final answer in the step-by-step view


# ------------------------------------------------------------------------------------------ one trajectory


def _cut(text: object, chars: int = CONTENT_SHOWN) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= chars else text[: chars - 1] + "…"


def trajectory_steps(frame: pd.DataFrame, vendor: str, sample_id: str, repeat: int = 1) -> pd.DataFrame:
    """The step rows of one trajectory (the latest one of the item), ordered by step."""
    rows = frame[(frame["vendor"].astype(str) == vendor) & (frame["sample_id"].astype(str) == str(sample_id))
                 & (pd.to_numeric(frame["repeat"].astype("object"), errors="coerce").fillna(1) == repeat)]
    rows = dedupe_latest(rows)
    return rows.assign(_s=step_numbers(rows)).sort_values("_s", kind="stable").drop(columns="_s")


def render_trajectory(steps: pd.DataFrame, end: str | None = None) -> str:
    """One trajectory step by step: status, finish, latency, tokens, the calls made and the answers played back;
    ``end`` = how it ended (:func:`avv_scoring.metrics.trajectories.summarise`), printed last."""
    if steps.empty:
        return "no such trajectory\n"
    first = steps.iloc[0]
    lines = [f"{first['model']}/{first['vendor']} · sample {first['sample_id']} · repeat {first['repeat']} · "
             f"{len(steps)} step(s)"]
    for row in frame_records(steps):
        step = "-" if is_missing(row.get("step")) else int(row["step"])
        tokens = "n/a" if is_missing(row.get("total_tokens")) else int(row["total_tokens"])
        latency = "n/a" if is_missing(row.get("latency_ms")) else f"{float(row['latency_ms']):.0f} ms"
        head = (f"step {step}: {row.get('status')}" + (f" ({row.get('error_kind')})" if row.get("status") != "success"
                                                        else f", finish {row.get('finish_reason')}")
                + f", {latency}, {tokens} tokens, {int(row.get('attempts') or 1)} attempt(s)")
        lines.append(head)
        calls, answers = _objects(row.get("tool_calls")), _objects(row.get("tool_results"))
        for i, call in enumerate(calls):
            lines.append(f"  call   {call.get('name')}({_cut(call.get('arguments'), 120)})")
            if i < len(answers):
                a = answers[i]
                source = f"{a.get('source')}" + (f" #{a['index']}" if a.get("index") is not None else "")
                lines.append(f"  result [{source}] {_cut(a.get('content'))}")
        content = row.get("content")
        if not calls and isinstance(content, str) and content:
            lines.append(f"  answer {_cut(content)}")
        if row.get("status") != "success" and row.get("error_detail"):
            lines.append(f"  error  {_cut(row.get('error_detail'))}")
    if end:
        lines.append(f"end: {end}")
    # vendor answers and names reach the terminal: control characters shown escaped, never run
    return "\n".join(terminal_text(line) for line in lines) + "\n"


def _objects(cell: object) -> list[JSONObject]:
    """The objects of a JSON-list cell (``tool_calls``, ``tool_results``); none when it is empty or not one."""
    value = parse_json_text(cell) if isinstance(cell, str) and cell else []
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


__all__ = ["render_trajectory", "trajectory_steps"]

