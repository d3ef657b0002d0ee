"""Defect checks on the calls (scoring layer, pure over pandas): proven defects, counted per successful response.

One occurrence proves the defect exists in the deployment — a broken chat template or tool parser, a token limit
that cuts calls — so each is declared a *defect check* (``Metric(defect=…)``): its default bound is ``≤ 0``, any
occurrence FAILs the vendor naming the sample, and none seen reads "0 in n (rate < 3/n at 95 %)"
(:mod:`avv_scoring.decision`, docs/explanation/decision.md). The reasoning-only answer (MiniMax) is the fourth,
declared with its rate in :mod:`.headline`.

Per successful response (failed items are the success rate's, never a defect here):

- ``tool_call_as_text``: no tool call, and the content holds a call of one of the request's tools written as text
  (the as-text detector of :mod:`avv_core.tool_formats`; anomaly ``tool_call_as_text``);
- ``tool_call_truncated``: finish_reason ``length`` with a call whose arguments do not parse as JSON (cut off
  mid-call; anomaly ``tool_call_truncated``);
- ``invalid_json_calls``: any other finish with a call whose arguments do not parse as JSON.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from avv_scoring.load import is_success
from avv_scoring.metrics.additive import Columns, Sums, additive, count, rate
from avv_scoring.metrics.calls import AS_TEXT, CALLS, TC_N, annotate_calls
from avv_scoring.metrics.correctness import Call
from avv_scoring.metrics.declaration import Metric, Ratio
from avv_scoring.metrics.registry import produces
from avv_scoring.metrics.row_codes import per_distinct


def _call_defect_features(rows: pd.DataFrame) -> pd.DataFrame:
    if TC_N not in rows.columns:
        rows = annotate_calls(rows, None)
    ok = is_success(rows).to_numpy(dtype=bool)
    # annotate_calls hands rows with the same cell the same calls list: each distinct list is looked at once
    unparsed = per_distinct(rows[CALLS].to_numpy(dtype=object), _has_unparsed_call)
    length = (rows["finish_reason"].astype("object") == "length").to_numpy(dtype=bool)
    return pd.DataFrame({
        "successes": ok,
        "as_text": ok & rows[AS_TEXT].to_numpy(dtype=bool),
        "truncated": ok & length & unparsed,
        "invalid_json": ok & ~length & unparsed,
    }, index=rows.index).astype(int)


def _has_unparsed_call(calls: Sequence[Call] | None) -> bool:
    return any(not c.parsed for c in calls) if calls else False


@produces(
    Metric("tool_call_as_text", "Calls as text", "int", "none", count=True, order=531,
           doc="successful responses without a tool call whose content holds a call of a request tool as text"),
    Metric("tool_call_as_text_rate", "Calls-as-text Rate", "rate", "lower", threshold=("max", 0.0), order=532,
           ratio=Ratio((("as_text", 1.0),), (("successes", 1.0),)),
           defect="a tool call written into the content as text instead of a tool_calls delta",
           doc="tool_call_as_text / successful responses (defect check); missing with no successful response"),
    Metric("tool_call_truncated", "Calls cut off", "int", "none", count=True, order=533,
           doc="successful responses finishing length with a call whose arguments do not parse as JSON"),
    Metric("tool_call_truncated_rate", "Cut-call Rate", "rate", "lower", threshold=("max", 0.0), order=534,
           ratio=Ratio((("truncated", 1.0),), (("successes", 1.0),)),
           defect="a tool call cut off mid-arguments (finish_reason length)",
           doc="tool_call_truncated / successful responses (defect check); missing with no successful response"),
    Metric("invalid_json_calls", "Invalid-JSON calls", "int", "none", count=True, order=535,
           doc="successful responses (not cut by length) with a call whose arguments do not parse as JSON"),
    Metric("invalid_json_call_rate", "Invalid-JSON Rate", "rate", "lower", threshold=("max", 0.0), order=536,
           ratio=Ratio((("invalid_json", 1.0),), (("successes", 1.0),)),
           defect="a tool call whose arguments are not JSON",
           doc="invalid_json_calls / successful responses (defect check); missing with no successful response"),
)
@additive(_call_defect_features)
def call_defects(sums: Sums) -> Columns:
    """Proven call defects per successful response (module docstring)::

        tool_call_as_text_rate   = responses with a call written as text / successful responses
        tool_call_truncated_rate = responses finishing length with an unparseable call / successful responses
        invalid_json_call_rate   = other responses with an unparseable call / successful responses

    Each is missing with no successful response.
    """
    ok = count(sums["successes"])
    as_text, cut, bad = (count(sums[k]) for k in ("as_text", "truncated", "invalid_json"))
    return {
        "tool_call_as_text": as_text, "tool_call_as_text_rate": rate(as_text, ok),
        "tool_call_truncated": cut, "tool_call_truncated_rate": rate(cut, ok),
        "invalid_json_calls": bad, "invalid_json_call_rate": rate(bad, ok),
    }
