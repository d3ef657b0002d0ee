"""The record schema: one CSV row per work item (vendor, sample, repeat).

This module is the single source of truth for the columns of ``records.csv``. The harness writes rows
with :func:`to_csv_row`; ``avv_scoring`` reads them back with :func:`read_records`. It imports neither
Locust nor gevent, so the scoring side stays a plain pandas program.

Definitions (also in the README):

- ``t0`` = just before the request is handed to the HTTP client (final attempt).
- ``ttfb_ms`` = response headers received − t0.
- ``ttft_ms`` = first SSE event carrying non-empty content, reasoning (``reasoning_content`` or
  ``reasoning``) or a tool-call delta − t0; a role-only or empty chunk does not count. ``ttft_kind``
  says which of ``content``, ``reasoning``, ``tool_call`` it was.
- ``latency_ms`` = last byte − t0. ``decode_ms`` = last token-bearing event − first token-bearing event.
  ``wall_ms`` = from the first attempt's t0 to the end of the item, retries and back-off included.
- Tokens come from the streamed ``usage``; absent → token columns empty, ``usage_reported=false``.
- ``tps`` = (completion_tokens − 1) / decode seconds; empty when fewer than 2 tokens or decode_ms is 0.
- ``finish_reason`` = the last non-null ``finish_reason`` seen; none → failed, ``error_kind=truncated``.
"""

from __future__ import annotations

import csv
import io
import json
import logging
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)

# Tool-call arguments can be megabytes (a vendor streaming a huge argument is a case we record).
csv.field_size_limit(2**31 - 1)


@dataclass(frozen=True)
class Column:
    name: str
    kind: str  # "str" | "int" | "float" | "bool" | "json"
    doc: str
    digits: int = 3  # decimals written for floats (ms values: µs resolution)


COLUMNS: tuple[Column, ...] = (
    Column("run_id", "str", "Run identifier (the run folder's name)."),
    Column("model", "str", "Model name: a top-level key of the vendor config."),
    Column("vendor", "str", "Vendor name from the config."),
    Column("is_baseline", "bool", "Whether this vendor is the model's baseline."),
    Column("sample_id", "str", "`data_index` of the sample, else its 1-based line number."),
    Column("repeat", "int", "Repeat number, 1-based."),
    Column("level", "int", "Stress mode: the concurrency level the request started in; empty in verify mode."),
    Column("worker", "str", "Host and process that ran the item (`host:pid`)."),
    Column("started_at", "str", "UTC wall-clock time of the first attempt's t0 (ISO 8601)."),
    Column("t0_monotonic", "float", "time.monotonic() at the final attempt's t0, to join with server truth.", 6),
    Column("status", "str", "`success` or `failed`."),
    Column("error_kind", "str", "Empty on success, else one of ERROR_KINDS."),
    Column("error_detail", "str", "Short human-readable reason (keys redacted)."),
    Column("anomalies", "str", "`;`-joined ANOMALIES seen on a response (success or not)."),
    Column("http_status", "int", "HTTP status of the final attempt; empty when no response arrived."),
    Column("attempts", "int", "Attempts made for this item (1 + retries)."),
    Column("ttfb_ms", "float", "Response headers − t0."),
    Column("ttft_ms", "float", "First token-bearing SSE event − t0."),
    Column("ttft_kind", "str", "`content`, `reasoning` or `tool_call`: what the first token-bearing event carried."),
    Column("latency_ms", "float", "Last byte − t0 (end-to-end latency of the final attempt)."),
    Column("decode_ms", "float", "Last token-bearing event − first token-bearing event."),
    Column("wall_ms", "float", "First attempt's t0 to item end, including retries and back-off."),
    Column("chunks", "int", "SSE data events received (excluding [DONE])."),
    Column("prompt_tokens", "int", "From streamed usage; empty when not reported."),
    Column("completion_tokens", "int", "From streamed usage; empty when not reported."),
    Column("total_tokens", "int", "From streamed usage; empty when not reported."),
    Column("usage_reported", "bool", "Whether the stream carried a usage object."),
    Column("tps", "float", "(completion_tokens − 1) / (decode_ms / 1000); empty when undefined."),
    Column("finish_reason", "str", "Last non-null finish_reason seen."),
    Column("saw_tool_call_delta", "bool", "Whether any delta carried tool_calls."),
    Column("tool_calls", "json", "JSON list of {id, name, arguments} with arguments as the raw string."),
    Column("tool_call_count", "int", "Number of assembled tool calls."),
    Column("content", "str", "Assembled assistant content."),
    Column("reasoning_chars", "int", "Characters of reasoning (reasoning_content or reasoning) received."),
)

COLUMN_NAMES: tuple[str, ...] = tuple(c.name for c in COLUMNS)
COLUMN_KINDS: dict[str, str] = {c.name: c.kind for c in COLUMNS}

#: Fixed error vocabulary (README: "Error kinds").
ERROR_KINDS: dict[str, str] = {
    "http_429": "HTTP 429 Too Many Requests (after retries).",
    "http_4xx": "Any other HTTP 4xx, e.g. 400 bad request, 401 bad key.",
    "http_5xx": "HTTP 5xx from the vendor.",
    "timeout": "Connect, header or read timeout (including a stall mid-stream).",
    "connect": "Connection refused, reset before a response, DNS failure.",
    "truncated": "The stream ended (closed or [DONE]) without any finish_reason.",
    "stream_error": "An `error` object arrived inside the stream.",
    "bad_sse": "HTTP 200 whose body is not a parseable chat-completions SSE stream.",
}

#: Anomaly flags recorded on responses (README: "Anomalies").
ANOMALIES: dict[str, str] = {
    "no_done": "The stream ended without `data: [DONE]`.",
    "tool_calls_under_stop": "Tool-call deltas arrived but finish_reason was not `tool_calls`.",
    "usage_missing": "No usage object arrived although include_usage was requested.",
}

STATUS_SUCCESS = "success"
STATUS_FAILED = "failed"


def _format(kind: str, value: Any, digits: int = 3) -> str:
    if value is None:
        return ""
    if kind == "bool":
        return "true" if value else "false"
    if kind == "float":
        return f"{float(value):.{digits}f}"
    if kind == "int":
        return str(int(value))
    if kind == "json":
        return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return str(value)


def to_csv_row(record: Mapping[str, Any]) -> list[str]:
    """Order and format a record dict as a CSV row; unknown keys are an error, missing ones empty."""
    unknown = set(record) - set(COLUMN_NAMES)
    if unknown:
        raise KeyError(f"unknown record column(s): {sorted(unknown)}")
    return [_format(c.kind, record.get(c.name), c.digits) for c in COLUMNS]


def encode_row(record: Mapping[str, Any]) -> bytes:
    """One record as a complete CSV line (bytes), ready for a single atomic append."""
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerow(to_csv_row(record))
    return buf.getvalue().encode("utf-8")


def header_line() -> bytes:
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerow(COLUMN_NAMES)
    return buf.getvalue().encode("utf-8")


class RecordWriter:
    """Append-only writer for records.csv: each row is one ``os.write`` of a whole line, flushed to the
    OS at once, so a killed process leaves only whole rows (at worst a torn final line, which
    :func:`read_records` drops with a warning)."""

    def __init__(self, path: str | os.PathLike[str]):
        self.path = os.fspath(path)
        new = not os.path.exists(self.path) or os.path.getsize(self.path) == 0
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        if new:
            os.write(self._fd, header_line())
        self.rows_written = 0

    def write(self, record: Mapping[str, Any]) -> None:
        os.write(self._fd, encode_row(record))
        self.rows_written += 1

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def _parse(kind: str, text: str) -> Any:
    if text == "":
        return None
    if kind == "bool":
        return text.strip().lower() in ("true", "1", "yes")
    if kind == "int":
        return int(float(text))
    if kind == "float":
        return float(text)
    return text


def parse_row(row: Mapping[str, str]) -> dict[str, Any]:
    """Typed values for one CSV row (as read by csv.DictReader); empty cells become None."""
    return {name: _parse(COLUMN_KINDS.get(name, "str"), value or "") for name, value in row.items()}


def read_records(path: str | os.PathLike[str]):
    """Read a records.csv into a pandas DataFrame with typed columns (nullable ints, floats, booleans).

    A torn last line (a process killed mid-write) is dropped with a warning; every other row is kept.
    Missing values stay missing (NaN / <NA>), never 0.
    """
    import pandas as pd

    path = os.fspath(path)
    with open(path, encoding="utf-8", newline="") as fh:
        text = fh.read()
    if text and not text.endswith("\n"):
        cut = text.rfind("\n") + 1
        log.warning("%s: dropping a torn last row (%d bytes without a line end)", path, len(text) - cut)
        text = text[:cut]
    rows = list(csv.DictReader(io.StringIO(text)))
    if rows and None in rows[-1]:  # more cells than the header: a torn row that happened to end in \n
        log.warning("%s: dropping a malformed last row", path)
        rows.pop()
    frame = pd.DataFrame(rows, columns=list(rows[0].keys()) if rows else list(COLUMN_NAMES))
    return coerce_frame(frame)


def coerce_frame(frame):
    """Give a frame of strings the schema's dtypes (used for CSVs and hand-built test tables)."""
    import pandas as pd

    frame = frame.copy()
    for col in frame.columns:
        kind = COLUMN_KINDS.get(col)
        if kind is None:
            continue
        series = frame[col]
        if series.dtype == object or pd.api.types.is_string_dtype(series.dtype):
            series = series.astype(object).where(series.astype(object) != "", None)  # empty cell = missing
        if kind == "int":
            frame[col] = pd.to_numeric(series, errors="coerce").astype("Int64")
        elif kind == "float":
            frame[col] = pd.to_numeric(series, errors="coerce").astype("float64")
        elif kind == "bool":
            frame[col] = series.map(
                lambda v: None if v is None or (isinstance(v, float) and v != v) else
                (v if isinstance(v, bool) else str(v).strip().lower() in ("true", "1", "yes"))
            ).astype("boolean")
        else:
            frame[col] = series.astype("string")
    return frame


def item_key(record: Mapping[str, Any]) -> tuple[str, str, str, int]:
    """Identity of a work item: (model, vendor, sample_id, repeat)."""
    return (str(record["model"]), str(record["vendor"]), str(record["sample_id"]), int(record["repeat"]))


def iter_csv_rows(path: str | os.PathLike[str]) -> Iterable[dict[str, Any]]:
    """Typed dict per row without pandas (used by resume); skips a torn last line."""
    with open(path, encoding="utf-8", newline="") as fh:
        text = fh.read()
    if text and not text.endswith("\n"):
        text = text[: text.rfind("\n") + 1]
    for row in csv.DictReader(io.StringIO(text)):
        if None in row:
            continue
        yield parse_row(row)
