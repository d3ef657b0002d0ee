"""The record schema: one CSV row per work item (vendor, sample, repeat) — per step for an agent task.

This module is the single source of truth for the columns of ``records.csv``. The harness writes rows
with :func:`to_csv_row`; ``avv_scoring`` reads them back with :func:`avv_core.record_file.read_records`
(that module holds the file's writer and readers). It imports neither Locust nor gevent, so the scoring side
stays a plain pandas program.

Definitions (also in docs/reference/records.md):

- ``t0`` = just before the request is handed to the HTTP client (final attempt).
- ``ttfb_ms`` = response headers received − t0.
- ``ttft_ms`` = first SSE event carrying non-empty content, reasoning (``reasoning_content``,
  ``reasoning`` or ``reasoning_details``; Messages' thinking, Responses' reasoning summary), a tool-call delta
  (Messages: a ``tool_use`` block start; Responses: a ``function_call`` item) or (raw mode) completion text − t0;
  a role-only or empty chunk does not count. ``ttft_kind`` says which of ``content``, ``reasoning``, ``tool_call``
  it was.
- ``latency_ms`` = last byte − t0. ``decode_ms`` = last token-bearing event − first token-bearing event.
  ``wall_ms`` = from the first attempt's t0 to the end of the item, retries and back-off included.
- Tokens come from the streamed ``usage``; absent → token columns empty, ``usage_reported=false``.
- ``tps`` = (completion_tokens − 1) / decode seconds; empty when fewer than 2 tokens, decode_ms is 0, or the
  stream was buffered (anomaly ``buffered_stream``).
- ``finish_reason`` = the last non-null ``finish_reason`` seen (Messages / Responses: their stop reason mapped onto
  chat's; the raw one is ``stop_reason``); none → failed, ``error_kind=truncated``.
- Agent tasks (a sample with ``agent``): one row per step (``step`` 1, 2, …), all with the item's key, written
  together in one append when the trajectory ends; a single-request item has ``step`` empty.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from avv_core.json_types import JSONMapping, JSONValue
from avv_core.reasoning import EVENT_FIELDS, RESPONSE_FIELD_NAMES, THINK_FIELD

#: The most tokens one request may report for each of prompt, completion and total: a usage value outside
#: [0, MAX_TOKENS] (or not a whole number, or a total below prompt + completion) is not believed (anomaly
#: ``usage_invalid``; the row's token columns are left empty).
MAX_TOKENS = 100_000_000
#: The largest duration a record may hold, in ms (100 days): a longer one is a corrupt cell, not a measurement.
MAX_MS = 8.64e9


@dataclass(frozen=True)
class Column:
    name: str
    kind: str  # "str" | "int" | "float" | "bool" | "json"
    doc: str
    digits: int = 3  # decimals written for floats (ms values: µs resolution)
    low: float | None = None  # numbers: the least value a row may hold (None: any finite value)
    high: float | None = None  # numbers: the greatest


COLUMNS: tuple[Column, ...] = (
    Column("run_id", "str", "Run identifier (the run folder's name)."),
    Column("model", "str", "Model name: a top-level key of the vendor config."),
    Column("vendor", "str", "Vendor name from the config."),
    Column("is_baseline", "bool", "Whether this vendor is the model's baseline."),
    Column("sample_id", "str", "`data_index` of the sample, else its 1-based line number."),
    Column("repeat", "int", "Repeat number, 1-based.", low=1),
    Column("step", "int", "Agent tasks: the step of the trajectory, 1-based (one row per request; the rows of a "
           "trajectory share the item key); empty for a single-request item.", low=1),
    Column("request_hash", "str", "sha256 of the sample's request body (canonical JSON); resume reruns an item "
           "whose sample changed."),
    Column("endpoint", "str", "The vendor's wire format (its `endpoint` key): `chat` (/v1/chat/completions), "
           "`completions` (raw mode: /v1/completions with a locally rendered prompt, calls parsed from the text), "
           "`messages` (Anthropic Messages) or `responses` (OpenAI Responses); the other columns read the same "
           "whatever the format."),
    Column("transforms", "str", "`;`-joined request transforms applied to the sample body, in order (the "
           "vendor's adapter and `transforms`)."),
    Column("temperature", "float", "The `temperature` the request carried (the sample's, or `--avv-temperature`, "
           "after the vendor's transforms and `--avv-extra-body`); empty when it set none (the vendor's default). The "
           "identity test reads it: at 0 the repeats are not samples.", low=0),
    Column("level", "int", "Stress mode: the concurrency level the request started in; empty in verify mode.", low=0),
    Column("worker", "str", "Host and process that ran the item (`host:pid`)."),
    Column("started_at", "str", "UTC wall-clock time of the first attempt's t0 (ISO 8601)."),
    Column("t0_monotonic", "float", "time.monotonic() at the final attempt's t0, to join with server truth.", 6),
    Column("status", "str", "`success` or `failed`."),
    Column("error_kind", "str", "Empty on success, else one of ERROR_KINDS."),
    Column("error_detail", "str", "Short human-readable reason (keys redacted)."),
    Column("anomalies", "str", "`;`-joined ANOMALIES seen on a response (success or not)."),
    Column("http_status", "int", "HTTP status of the final attempt; empty when no response arrived.", low=100,
           high=999),
    Column("attempts", "int", "Attempts made for this item (1 + retries).", low=1),
    Column("ttfb_ms", "float", "Response headers − t0.", low=0, high=MAX_MS),
    Column("ttft_ms", "float", "First token-bearing SSE event − t0.", low=0, high=MAX_MS),
    Column("ttft_kind", "str", "`content`, `reasoning` or `tool_call`: what the first token-bearing event carried."),
    Column("reasoning_field", "str", "`;`-joined fields that carried reasoning: "
           + ", ".join(f"`{name}`" for name in RESPONSE_FIELD_NAMES) + ", "
           + ", ".join(f"`{f.name}` (endpoint `{f.endpoint}`)" for f in EVENT_FIELDS)
           + f", or `{THINK_FIELD}` (raw mode: a leading `<think>` block); empty without reasoning."),
    Column("latency_ms", "float", "Last byte − t0 (end-to-end latency of the final attempt).", low=0, high=MAX_MS),
    Column("decode_ms", "float", "Last token-bearing event − first token-bearing event.", low=0, high=MAX_MS),
    Column("wall_ms", "float", "First attempt's t0 to item end, including retries and back-off.", low=0, high=MAX_MS),
    Column("chunks", "int", "SSE data events received (excluding [DONE]).", low=0),
    Column("prompt_tokens", "int", "From streamed usage; empty when not reported.", low=0, high=MAX_TOKENS),
    Column("completion_tokens", "int", "From streamed usage; empty when not reported.", low=0, high=MAX_TOKENS),
    Column("total_tokens", "int", "From streamed usage; empty when not reported.", low=0, high=MAX_TOKENS),
    Column("usage_reported", "bool", "Whether the stream carried a usage object."),
    Column("cached_tokens", "int", "Prompt tokens the vendor read from its cache (chat `prompt_tokens_details."
           "cached_tokens`, Responses `input_tokens_details.cached_tokens`, Messages `cache_read_input_tokens`); "
           "empty when not reported or not believed (negative, fractional, above prompt_tokens).", low=0,
           high=MAX_TOKENS),
    Column("cost", "float", "What the request cost in its vendor's price currency: ((prompt_tokens − cached_tokens) "
           "× input + cached_tokens × cached_input + completion_tokens × output) / 10⁶ (docs: Prices, cost and "
           "budgets); empty when the vendor has no `price` or the row has no usage.", 9, low=0),
    Column("tps", "float", "(completion_tokens − 1) / (decode_ms / 1000); empty when undefined or buffered.", low=0),
    Column("finish_reason", "str", "Last non-null finish_reason seen; Messages and Responses stop reasons mapped onto "
           "chat's (`stop`, `tool_calls`, `length`, …; docs: Wire formats)."),
    Column("stop_reason", "str", "The vendor's own word for how the answer ended: chat and raw completions' raw "
           "`finish_reason`, Messages' `stop_reason` (`end_turn`, `tool_use`, `max_tokens` …), Responses' status "
           "(`completed`, `incomplete:max_output_tokens`, `failed`)."),
    Column("saw_tool_call_delta", "bool", "Whether any delta carried tool_calls."),
    Column("tool_calls", "json", "JSON list of {id, name, arguments} with arguments as the raw string."),
    Column("tool_call_count", "int", "Number of assembled tool calls.", low=0),
    Column("tool_results", "json", "Agent tasks: JSON list of the tool answers sent back for this step's calls "
           "({tool_call_id, name, source: matched / default / injected_error, index, content}); empty on the "
           "last step and for single-request items."),
    Column("content", "str", "Assembled assistant content."),
    Column("reasoning_chars", "int", "Characters of reasoning received (whichever field carried it).", low=0),
    Column("reasoning", "str", "Assembled reasoning text (reasoning_content or reasoning deltas), for the K2VV / "
           "MiniMax export."),
    Column("expected_language", "str", "The sample's language check: an ISO 639-1 code or a script name "
           "(`expected_language`, or inferred from the prompt for `check_type: language_following`), or "
           "`minimax:no-cyrillic` (MiniMax's rule); empty when the sample has none."),
    Column("client_lag_ms", "float", "Largest lag of this process's event loop between t0 and the first token (or "
           "the end): an upper bound on how much of the TTFT is the client's own delay.", low=0, high=MAX_MS),
    Column("client_cpu_pct", "float", "CPU of the Locust process that ran the item (last 1 s sample; 100 = one core).",
           low=0),
    Column("stale_conn_retries", "int", "Sends repeated at once because a pooled connection had gone stale while idle "
           "(the client's pool, not a vendor attempt).", low=0),
)

COLUMN_NAMES: tuple[str, ...] = tuple(c.name for c in COLUMNS)
COLUMN_KINDS: dict[str, str] = {c.name: c.kind for c in COLUMNS}

#: Fixed error vocabulary (README: "Error kinds").
ERROR_KINDS: dict[str, str] = {
    "http_429": "HTTP 429 Too Many Requests (after retries).",
    "http_4xx": "Any other HTTP 4xx, e.g. 400 bad request, 401 bad key.",
    "http_5xx": "HTTP 5xx from the vendor (but 529).",
    "overloaded": "The vendor said it is overloaded: HTTP 529, an `overloaded_error` error event (Messages), or an "
                  "overload code (`server_is_overloaded`) in a Responses `error` event or `response.failed`.",
    "timeout": "Connect, header or read timeout (including a stall mid-stream).",
    "connect": "Connection refused, reset before a response, DNS failure.",
    "truncated": "The stream ended (closed or [DONE]) without any finish_reason (Messages: before a `message_delta` "
                 "with a stop reason and `message_stop`; Responses: without `response.completed`, "
                 "`response.incomplete` or `response.failed`; docs/reference/stream-ends.md).",
    "stream_error": "An `error` object arrived inside the stream, or an SSE event of type `error` "
                    "(`event: error`), whatever came before it, or a Responses response whose status is `failed` or "
                    "`cancelled`; `error_detail` keeps its message.",
    "bad_sse": "A response that is not a parseable chat-completions SSE stream: HTTP 200 with a JSON, HTML or "
               "empty body, a `data:` line that is not JSON (or holds `Infinity` / `NaN`, or is nested too deeply), "
               "a field of the wrong JSON type (`choices` not a list, a string `delta`, a tool-call `index` that is "
               "not an integer…), invalid UTF-8, an SSE event or line larger than `--avv-max-event-bytes`; or "
               "whose status line or headers cannot be parsed or break HTTP/1.1's framing (a line over 65,536 bytes, "
               "more than 100 headers, not HTTP, a status outside 100–599, an obs-fold line, `Content-Length` values "
               "that disagree: docs/reference/wire-faults.md), or a `Content-Encoding` the client does not decode; or "
               "a Messages / Responses stream that breaks its protocol (a missing or repeated block or output index, "
               "argument pieces that name no call, `message_stop` without a stop reason, a final event whose status "
               "is not final, chat chunks on a `messages` / `responses` endpoint). "
               "`error_detail` says which.",
    "client_error": "The client itself failed (a request it could not build or send, an unexpected "
                    "exception): not the vendor's fault, never retried; `error_detail` names the exception.",
}

#: Error kinds of rows that scoring builds from other tools' files (never written by the wire client, so
#: they are not in :data:`ERROR_KINDS`, whose kinds are also the stress table's rate columns).
IMPORTED_ERROR_KINDS: dict[str, str] = {
    "imported_failure": "A failed row of a K2VV / MiniMax results file scored with `avv-score --baseline-results` "
                        "(its `status` is not `success`); `error_detail` holds the file's error.",
}

#: Anomaly flags recorded on responses (README: "Anomalies").
ANOMALIES: dict[str, str] = {
    "no_done": "The stream ended without `data: [DONE]` (Messages: without `message_stop`; Responses: without "
               "`response.completed`, `response.incomplete` or `response.failed`).",
    "tool_calls_under_stop": "Tool-call deltas arrived but finish_reason was not `tool_calls`.",
    "usage_missing": "No usage object arrived although include_usage was requested.",
    "buffered_stream": "The tokens were not streamed: every token event arrived in one read (≥ 3 events), or the "
                       "decode phase implies > 10,000 tokens/s. TTFT and latency are kept; `tps` is left empty.",
    "tool_call_as_text": "The content holds a call of one of the request's tools written as text (in one of the "
                         "text tool-call formats, e.g. a fenced JSON block or `<tool_call>…</tool_call>`, or as bare "
                         "JSON with `name` and `arguments`/`parameters`) instead of a `tool_calls` delta.",
    "tool_call_truncated": "finish_reason `length` with a tool call whose arguments do not parse as JSON "
                           "(cut off mid-call).",
    "unknown_tool": "A tool call names a function that is not among the request's tools.",
    "empty_tool_calls": "finish_reason `tool_calls` but no tool call arrived.",
    "usage_invalid": "The streamed usage is not believable: a token count that is negative, fractional, not a "
                     "number or above 100,000,000 (Messages: also each input count summed into `prompt_tokens`), or "
                     "a `total_tokens` below `prompt_tokens` + `completion_tokens`. The row's token columns are left "
                     "empty (missing, never a value); `error_detail` gives the reason when the row has no error of "
                     "its own.",
    "completion_over_max_tokens": "The vendor reported more completion tokens than the request allowed (its "
                                  "`max_tokens` / `max_completion_tokens`; Messages `max_tokens`, Responses "
                                  "`max_output_tokens`): the count, or the limit it honoured, is not the request's. "
                                  "The count is kept (it is what the vendor bills).",
}

STATUS_SUCCESS = "success"
STATUS_FAILED = "failed"


class RecordError(ValueError):
    """A record that does not fit the schema: a bug in the code that made it, never the vendor's fault."""


_ACCEPTS: dict[str, tuple[type, ...]] = {
    "str": (str,),
    "int": (int,),
    "float": (int, float),
    "bool": (bool,),
    "json": (str, list),
}


def check_value(name: str, value: object) -> None:
    """Raise :class:`RecordError` unless ``value`` fits column ``name`` (``None`` always fits)."""
    kind = COLUMN_KINDS.get(name)
    if kind is None:
        raise RecordError(f"unknown record column {name!r}")
    if value is None:
        return
    if (isinstance(value, bool) and kind != "bool") or not isinstance(value, _ACCEPTS[kind]):
        raise RecordError(f"record column {name!r} ({kind}) got {type(value).__name__} {value!r:.80}")
    if kind == "float" and isinstance(value, float) and math.isinf(value):
        raise RecordError(f"record column {name!r} is infinite")


class Record(dict):
    """One records.csv row as a dict restricted to :data:`COLUMNS`, validated when it is made.

    Keys must be column names and values must fit the column's kind (``None`` = an empty cell): a
    misspelt column or a wrong type fails where the record is made — on the worker, before it is sent —
    not later in a CSV nobody reads. A dict subclass, so it is cheap and sends as a plain mapping.
    """

    __slots__ = ()

    def __init__(self, fields: JSONMapping | None = None, /, **more: object):
        super().__init__(fields or {}, **more)
        for name, value in self.items():
            check_value(name, value)

    def __setitem__(self, name: str, value: object) -> None:
        check_value(name, value)
        super().__setitem__(name, value)

    def update(self, *args: object, **kwargs: object) -> None:  # type: ignore[override]
        for name, value in dict(*args, **kwargs).items():
            self[name] = value


def _text(value: str) -> str:
    """Text as UTF-8 can hold it: a lone surrogate (valid in JSON's ``\\ud800`` escapes) becomes ``?``, so the
    row encodes, and the in-memory copy of a row (the live board) equals what the file holds."""
    return value if value.isascii() else value.encode("utf-8", "replace").decode("utf-8")


def _format(kind: str, value: JSONValue, digits: int = 3) -> str:
    if value is None:
        return ""
    if kind == "bool":
        return "true" if value else "false"
    if kind == "float":
        value = float(value)
        return "" if math.isnan(value) else f"{value:.{digits}f}"
    if kind == "int":
        return str(int(value))
    if kind == "json":
        return _text(value if isinstance(value, str) else json.dumps(value, ensure_ascii=False))
    return _text(str(value))


def to_csv_row(record: JSONMapping) -> list[str]:
    """Order and format a record as a CSV row; unknown keys are an error, missing ones empty."""
    unknown = set(record) - set(COLUMN_NAMES)
    if unknown:
        raise RecordError(f"unknown record column(s): {sorted(unknown)}")
    return [_format(c.kind, record.get(c.name), c.digits) for c in COLUMNS]


#: A cell is quoted when it holds the separator, a quote or any control character. Python's csv writer quotes
#: only the characters of its line terminator, so a bare ``\r`` (Windows line ends in an answer) went out
#: unquoted and every reader took it for a line end: the file could not be read back.
_NEEDS_QUOTES = re.compile(r'[",\x00-\x1f\x7f]')


def _cell(text: str) -> str:
    return '"' + text.replace('"', '""') + '"' if _NEEDS_QUOTES.search(text) else text


def encode_cells(cells: Iterable[str]) -> str:
    """One CSV line (RFC 4180 quoting, ``\\n`` line end) of text cells."""
    return ",".join(map(_cell, cells)) + "\n"


def _cell_encoder(column: Column) -> Callable[[JSONValue], str]:
    """A column's cell text for a value, as :func:`_format` then :func:`_cell` make it, worked out per column once:
    numbers and booleans never hold a character that needs quotes, so only text is searched."""
    kind, spec = column.kind, f".{column.digits}f"
    if kind == "bool":
        return lambda value: "" if value is None else ("true" if value else "false")
    if kind == "int":
        return lambda value: "" if value is None else str(int(value))  # type: ignore[arg-type]
    if kind == "float":
        def float_cell(value: JSONValue) -> str:
            if value is None:
                return ""
            number = float(value)  # type: ignore[arg-type]
            return "" if math.isnan(number) else format(number, spec)
        return float_cell
    if kind == "json":
        return lambda value: "" if value is None else _cell(_text(
            value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)))
    return lambda value: "" if value is None else _cell(_text(str(value)))


_ENCODERS: tuple[tuple[str, Callable[[JSONValue], str]], ...] = tuple((c.name, _cell_encoder(c)) for c in COLUMNS)
_NAME_SET = frozenset(COLUMN_NAMES)


def _encode_line(record: JSONMapping) -> str:
    if not _NAME_SET.issuperset(record):
        raise RecordError(f"unknown record column(s): {sorted(set(record) - _NAME_SET)}")
    get = record.get
    return ",".join([encode(get(name)) for name, encode in _ENCODERS]) + "\n"


def encode_rows(records: Iterable[JSONMapping]) -> bytes:
    """Records as complete CSV lines (bytes), ready for a single append: the line :func:`encode_cells` makes of
    :func:`to_csv_row`, written with per-column encoders (it runs for every record a Locust process stores)."""
    return "".join(map(_encode_line, records)).encode("utf-8")


def encode_row(record: JSONMapping) -> bytes:
    return encode_rows([record])


def header_line() -> bytes:
    return encode_cells(COLUMN_NAMES).encode("utf-8")


# ----------------------------------------------------------------------------- numbers a row may hold

_BOUNDS: dict[str, tuple[float | None, float | None]] = {
    c.name: (c.low, c.high) for c in COLUMNS if c.kind in ("int", "float")}


def bounds(name: str) -> tuple[float | None, float | None]:
    """(least, greatest) value of the number column ``name``; None = unbounded."""
    return _BOUNDS.get(name, (None, None))


def out_of_range(name: str, value: float) -> str | None:
    """Why ``value`` cannot be a cell of the number column ``name`` (not finite, not whole for an int column,
    outside the column's bounds), or None when it can."""
    if not math.isfinite(value):
        return "is not a finite number"
    if COLUMN_KINDS[name] == "int" and value != int(value):
        return "is not a whole number"
    low, high = bounds(name)
    if low is not None and value < low:
        return f"is below {low:g}"
    if high is not None and value > high:
        return f"is above {high:g}"
    return None


TOKEN_COLUMNS = ("prompt_tokens", "completion_tokens", "total_tokens")
#: A chat usage's key for the counts its ``prompt_tokens`` is the sum of, when the vendor reports the prompt in
#: parts (Messages: ``input_tokens``, ``cache_creation_input_tokens``, ``cache_read_input_tokens``): each is
#: checked like a token count, and the sum must be ``prompt_tokens``.
PROMPT_PARTS = "prompt_tokens_parts"


def cached_tokens(usage: JSONMapping | None, prompt_tokens: int | None) -> int | None:
    """``usage.prompt_tokens_details.cached_tokens`` (the wire formats map theirs onto it) when believable: a whole
    number from 0 to ``prompt_tokens``; else None (the cost then prices every prompt token at the input price)."""
    details = usage.get("prompt_tokens_details") if usage else None
    value = details.get("cached_tokens") if isinstance(details, Mapping) else None
    if prompt_tokens is None or isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if not math.isfinite(value) or value != int(value) or not 0 <= value <= prompt_tokens:
        return None
    return int(value)


def _count_problem(key: str, value: object) -> str | None:
    """Why ``value`` is not a believable count for the token column ``key`` (None: it is)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return f"is {type(value).__name__}, not a number"
    if isinstance(value, int) and not -2**63 < value < 2**63:
        return "is out of range"
    return out_of_range(key, float(value))


def usage_counts(usage: JSONMapping | None) -> tuple[dict[str, int | None], str | None]:
    """The token columns of a response's usage object, and why they are not believed (None: they are).

    Each count must be absent / null, or a whole number in [0, MAX_TOKENS] (``12.0`` is 12; a bool, a string or
    ``-1`` is not); ``total_tokens`` missing = prompt + completion; a total below prompt + completion is not
    believed either. So must each part of a prompt reported in parts (:data:`PROMPT_PARTS`), whose sum must be
    ``prompt_tokens``. When any count is not believed, every count is None: a vendor's numbers count as missing,
    never as a value (a negative count would make it look cheap and let a run spend past its token budget)."""
    counts: dict[str, int | None] = dict.fromkeys(TOKEN_COLUMNS)
    if not usage:
        return counts, None
    parts = usage.get(PROMPT_PARTS)
    if parts is not None:
        if not isinstance(parts, Mapping):
            return dict.fromkeys(TOKEN_COLUMNS), f"usage {PROMPT_PARTS} is {type(parts).__name__}, not an object"
        for name, value in parts.items():
            problem = _count_problem("prompt_tokens", value)
            if problem is not None:
                return dict.fromkeys(TOKEN_COLUMNS), f"usage {name} {str(value)[:40]} {problem}"
        if usage.get("prompt_tokens") != sum(parts.values()):
            return (dict.fromkeys(TOKEN_COLUMNS), f"usage prompt_tokens {str(usage.get('prompt_tokens'))[:40]} is not "
                    f"the sum of its parts ({', '.join(map(str, parts))})")
    for key in TOKEN_COLUMNS:
        value = usage.get(key)
        if value is None:
            continue
        problem = _count_problem(key, value)
        if problem is not None:
            return dict.fromkeys(TOKEN_COLUMNS), f"usage {key} {str(value)[:40]} {problem}"
        counts[key] = int(value)
    prompt, completion, total = counts["prompt_tokens"], counts["completion_tokens"], counts["total_tokens"]
    if prompt is not None and completion is not None:
        if total is None:
            counts["total_tokens"] = prompt + completion
        elif total < prompt + completion:
            return (dict.fromkeys(TOKEN_COLUMNS),
                    f"usage total_tokens {total} is below prompt_tokens + completion_tokens ({prompt + completion})")
    return counts, None
