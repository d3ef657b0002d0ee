"""The interface every wire format implements (wire-client layer, pure: no I/O): how a request is sent in the format
and how its stream is read into an :class:`~avv_harness.wire.attempt.Attempt`.

A format is one module of :mod:`avv_harness.wire.formats` declaring ``FORMAT``, an instance of a
:class:`WireFormat` subclass: its ``name`` (the vendor's ``endpoint`` key and the record's ``endpoint`` column),
the URL path after the vendor's base URL, the request body made from the chat body the samples are written in,
the credential and default headers, and a fresh :class:`~avv_harness.wire.attempt.EventReader` per attempt.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from avv_core.json_types import JSONMapping, JSONObject
from avv_harness.wire.attempt import Attempt, EventReader, StreamFailure, WholeBody, json_kind
from avv_harness.wire.sse import MalformedStream

if TYPE_CHECKING:
    from avv_harness.dialects.chat_template import ChatTemplate


class DialectView(Protocol):
    """What a format may read of the vendor's dialect (:class:`avv_harness.dialects.dialect.Dialect`)."""

    @property
    def template(self) -> ChatTemplate: ...  # the loaded chat template (raw completions)

    @property
    def tool_parser(self) -> str | None: ...  # the text tool-call format (raw completions)


@dataclass(frozen=True)
class StreamEnd:
    """One documented way a format's stream ends, and what the record says: declared once per format
    (:attr:`WireFormat.ends`), read by the format's reader, rendered into the docs
    (:func:`render_stream_ends`) and checked case by case by the tests."""

    key: str  # the reader's (and its test's) name for it
    how: str  # how the stream ended (Markdown, for the docs)
    kind: str | None  # the error kind; None: the answer is whole
    detail: str  # error_detail, with {fields} the reader fills in; for a whole answer, what the record holds

    def failure(self, **fields: object) -> StreamFailure:
        """This end as the failure of an attempt (raised by a reader's event handler)."""
        assert self.kind is not None, f"{self.key}: a whole answer is not a failure"
        return StreamFailure(self.kind, self.detail.format(**fields))

    def fail(self, att: Attempt, **fields: object) -> None:
        """This end as the attempt's failure, after the last event (a reader's ``end``)."""
        failure = self.failure(**fields)
        att.fail(failure.kind, failure.detail)


def ends_by_key(ends: tuple[StreamEnd, ...]) -> dict[str, StreamEnd]:
    """A format's ends by key (a key declared twice is an error)."""
    out = {end.key: end for end in ends}
    if len(out) != len(ends):
        raise ValueError("a stream end is declared twice")
    return out


class WireFormat:
    """One wire format (see the module docstring). Subclasses set the class attributes and override what differs
    from chat completions."""

    name: str = ""  # the ``endpoint`` value that selects it
    path: str = ""  # after the vendor's base URL (``…/v1``)
    summary: str = ""  # one line for the README's ``endpoint`` row
    converts: bool = False  # the body is converted from the chat body by avv_core.api_formats (checked at start-up)
    ends: tuple[StreamEnd, ...] = ()  # the documented ends of its stream (chat's: [DONE] and finish_reason)
    limit_keys: tuple[str, ...] = ("max_completion_tokens", "max_tokens")  # the body's caps on completion tokens

    def body(self, chat_body: JSONObject, dialect: DialectView) -> JSONObject:
        """The request body sent, made from the chat body (sample, transforms, overrides)."""
        return chat_body

    def auth_headers(self, api_key: str) -> dict[str, str]:
        """The header(s) carrying the vendor's key."""
        return {"Authorization": f"Bearer {api_key}"}

    def default_headers(self) -> dict[str, str]:
        """Headers the format needs, unless the vendor's ``headers`` (or ``--avv-header``) set the same name."""
        return {}

    def reader(self, dialect: DialectView) -> EventReader:
        """A reader for one attempt's stream."""
        raise NotImplementedError

    def completion_limit(self, body: JSONMapping) -> int | None:
        """The most completion tokens the request sent as ``body`` allows (the least of its :attr:`limit_keys`
        that are whole numbers); None when it sets none."""
        limits = [body[k] for k in self.limit_keys if type(body.get(k)) is int]
        return min(limits) if limits else None

    def response_events(self, body: JSONObject) -> list[JSONObject]:
        """The events a non-streamed answer's JSON body stands for, as the stream would have sent them (chat and raw
        completions: the body is one chunk, its ``message`` read as the delta). :class:`MalformedStream` for a field
        of the wrong type."""
        return [body]

    def whole_reader(self, dialect: DialectView) -> EventReader:
        """A reader for one attempt of a non-streamed request: its JSON body read as :meth:`response_events` by
        :meth:`reader` (:class:`~avv_harness.wire.attempt.WholeBody`)."""
        return WholeBody(self.reader(dialect), self.response_events)


# ----------------------------------------------------------------------------- reading fields of an event


def obj_field(obj: JSONMapping, key: str, where: str) -> JSONMapping:
    """``obj[key]`` as an object: missing or null is ``{}``; any other type is :class:`MalformedStream`."""
    value = obj.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise MalformedStream(f"{where}.{key} is {json_kind(value)}, not an object")
    return value


def str_field(obj: JSONMapping, key: str, where: str) -> str:
    """``obj[key]`` as a string: missing or null is ``""``; any other type is :class:`MalformedStream`."""
    value = obj.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise MalformedStream(f"{where}.{key} is {json_kind(value)}, not a string")
    return value


def int_field(obj: JSONMapping, key: str, where: str) -> int | None:
    """``obj[key]`` as an integer: missing or null is None; any other type is :class:`MalformedStream`."""
    value = obj.get(key)
    if value is None:
        return None
    if type(value) is not int:  # a bool is an int to isinstance
        raise MalformedStream(f"{where}.{key} is {json_kind(value)}, not an integer")
    return value


#: Error types and codes that mean "overloaded, try again" (Anthropic's ``overloaded_error``, OpenAI's
#: ``server_is_overloaded``): the ``overloaded`` error kind, retried like 429 / 5xx.
OVERLOAD_WORDS = frozenset({"overloaded", "overloaded_error", "server_is_overloaded", "server_overloaded"})


def overload_or_stream_error(error: object) -> str:
    """``overloaded`` when an error event's JSON says so (its ``type`` or ``code``, or its ``error`` object's),
    else ``stream_error``."""
    if isinstance(error, dict):
        for holder in (error, error.get("error")):
            if isinstance(holder, dict) and any(isinstance(holder.get(k), str) and holder[k] in OVERLOAD_WORDS
                                                for k in ("type", "code")):
                return "overloaded"
    return "stream_error"



def render_stream_ends(formats: Mapping[str, WireFormat], retried: frozenset[str]) -> str:
    """The Markdown table of every format's :attr:`~WireFormat.ends` (``retried``: the error kinds retried)."""
    rows = ["| `endpoint` | how the stream ends | `status` / `error_kind` | retried | `error_detail` or what is kept |",
            "|---|---|---|---|---|"]
    for wire in formats.values():
        for end in wire.ends:
            outcome = "`success`" if end.kind is None else f"`{end.kind}`"
            again = "—" if end.kind is None else ("yes" if end.kind in retried else "no")
            detail = end.detail if end.kind is None else f"`{end.detail}`"
            rows.append(f"| `{wire.name}` | {_cell(end.how)} | {outcome} | {again} | {_cell(detail)} |")
    return "\n".join(rows)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")
