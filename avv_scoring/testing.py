"""Build record tables by hand (for tests and experiments): every record column, schema dtypes.

frame = records_frame([record(vendor="a", sample_id="1", finish_reason="tool_calls",
                              tool_calls=[call("get_weather", {"city": "Paris"})])])
"""

from __future__ import annotations

import json
from collections.abc import Iterable

import pandas as pd

from avv_core.json_types import JSONMapping, JSONObject
from avv_core.record_file import coerce_frame
from avv_core.records import COLUMN_NAMES, to_csv_row

DEFAULTS: JSONObject = {
    "run_id": "run1",
    "model": "m",
    "vendor": "v",
    "is_baseline": False,
    "sample_id": "1",
    "repeat": 1,
    "status": "success",
    "attempts": 1,
    "finish_reason": "stop",
    "saw_tool_call_delta": False,
    "tool_calls": [],
    "content": "ok",
    "reasoning_chars": 0,
    "usage_reported": False,
}


def call(name: str, arguments: object, call_id: str = "call_1") -> JSONObject:
    """A recorded tool call; ``arguments`` that are not a string are JSON-encoded (as streamed)."""
    raw = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {"id": call_id, "name": name, "arguments": raw}


def record(**fields: object) -> JSONObject:
    """One record dict: :data:`DEFAULTS` overridden by ``fields``. A failed record defaults to no
    finish_reason and ``error_kind=timeout``; ``tool_call_count`` follows ``tool_calls``; a
    ``total_tokens`` sets ``usage_reported``."""
    rec = {**DEFAULTS, **fields}
    if rec["status"] != "success":
        rec.setdefault("error_kind", "timeout")
        if "finish_reason" not in fields:
            rec["finish_reason"] = None
        if "content" not in fields:
            rec["content"] = None
    calls = rec.get("tool_calls")
    if isinstance(calls, list):
        rec.setdefault("tool_call_count", len(calls))
        if calls and "saw_tool_call_delta" not in fields:
            rec["saw_tool_call_delta"] = True
    if rec.get("total_tokens") is not None and "usage_reported" not in fields:
        rec["usage_reported"] = True
    return rec


def records_frame(rows: Iterable[JSONMapping]) -> pd.DataFrame:
    """A DataFrame with all record columns, formatted as the harness writes them and read back with
    :func:`avv_core.record_file.coerce_frame` dtypes."""
    table = [to_csv_row(record(**row)) for row in rows]
    return coerce_frame(pd.DataFrame(table, columns=list(COLUMN_NAMES)))
