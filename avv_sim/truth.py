"""The truth log (simulator layer): one :class:`TruthRecord` per request to a known profile, as one JSON line.

The record is typed and frozen and has ONE builder, :func:`build_truth`, which reads the request's plan
(:class:`~avv_sim.plan.Plan`, what was decided) and its :class:`Exchange` (what the server saw and sent). Its
fields, in their order, are the JSON keys; each field's ``doc`` is docs/simulator.md's truth-log table
(:func:`render_truth_table`). :func:`read_truth_log` / :func:`truth_by_tag` read a log back (the tests' reader).
:class:`TruthLog` appends the lines (one ``os.write`` each, so concurrent lines never interleave).
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TypeVar, overload

from avv_core.json_types import JSONObject
from avv_sim.plan import Plan, sent_tool_calls
from avv_sim.request import RequestError
from avv_sim.tokens import token_counts

_T = TypeVar("_T")


@overload
def _doc(text: str) -> None: ...


@overload
def _doc(text: str, default: _T) -> _T: ...


def _doc(text: str, default: object = None) -> object:
    return field(default=default, metadata={"doc": text})


@dataclass(frozen=True)
class TruthRecord:
    """What the simulator decided, sent and when, for one request (the JSON keys in this order)."""

    profile: str = _doc("profile name", "")
    endpoint: str = _doc("`chat`, `completions`, `messages` or `responses`", "chat")
    request_hash: str | None = _doc("`request_hash(body)` of the body received (null if the body was not a JSON "
                                    "object)")
    decision_key: str | None = _doc("the decision key every draw used (for completions, messages and responses: of "
                                    "the chat body read back from the prompt / request, so the chat request's)")
    attempt: int | None = _doc("attempt number used for fault draws")
    client_tag: str | None = _doc("the `X-AVV-Item` header, or null")
    repeat: int | None = _doc("the repeat the self-flip draw used: the `X-AVV-Item` tag's, else the body's arrival "
                              "count")
    repeat_source: str | None = _doc("`tag` or `arrival`")
    stream: bool | None = _doc("the request's `stream`")
    has_tools: bool | None = _doc("the request had tools (null when the body could not be planned, e.g. 400)")
    reference_decision: bool | None = _doc("whether the reference model calls a tool (`tool_choice` applied); null "
                                           "without tools")
    decision: bool | None = _doc("whether this profile calls a tool (after flips and `tool_choice`; a "
                                 "reasoning-only response still records the decision it would have made)")
    flipped: bool | None = _doc("decision ≠ reference because of `flip_rate`")
    self_flipped: bool | None = _doc("this (body, repeat) flipped by `self_flip_rate`; `decision = "
                                     "reference_decision XOR flipped XOR self_flipped`")
    gold: bool = _doc("the request matched a gold line and the profile follows gold", False)
    agent: JSONObject | None = _doc(
        "null, or for a step of an agent task: `{\"action\": call / retry / answer / give_up / loop / extra, "
        "\"reference_calls\", \"tool_turns\", \"progress\", \"steps_to_finish\", \"after_error\", \"gold_answer\"}` "
        "— what this profile did, whether the reference would call, the history it saw, and whether the content is "
        "the task's answer")
    call_form: str | None = _doc("for a calling response: `calls`, `text` (written into the content) or "
                                 "`truncated` (cut mid-arguments, finish `length`); null otherwise")
    dropped_calls: int = _doc("reference calls left out (`drop_parallel_rate`): 0 or 1", 0)
    tool_calls: list[JSONObject] = field(default_factory=list, metadata={"doc": (
        "calls whose deltas were sent: `[{\"index\",\"id\",\"name\",\"arguments\",\"broken\",\"wrong_tool\","
        "\"changed\"}]`, `arguments` exactly as sent, `broken` null or `missing_required` / `wrong_type` / "
        "`unparseable`, `wrong_tool` true when another tool than the reference's, `changed` the argument keys whose "
        "value differs from the reference's")})
    text_tool_calls: list[JSONObject] = field(default_factory=list, metadata={"doc": (
        "calls sent as text by the dialect quirks (`broken_template`, completions), as planned: "
        "`[{\"index\",\"id\",\"name\",\"arguments\",\"broken\"}]`")})
    text_calls: list[JSONObject] = field(default_factory=list, metadata={"doc": (
        "calls written into the content (`call_form: text`): `[{\"name\",\"arguments\",\"wrong_tool\","
        "\"changed\"}]`")})
    fault: str | None = _doc("null, `auth`, `error_status`, `rate_limit`, `over_limit_429`, `over_limit_529` "
                             "(messages), `truncate`, `stream_error`, `require_reasoning_content`")
    http_status: int | None = _doc("status sent (null if none)")
    finish_reason: str | None = _doc("finish_reason sent, null if none (messages / responses: the chat "
                                     "finish_reason their stop reason / status was written from)")
    reasoning_only: bool = _doc("the response ended after the reasoning", False)
    prompt_script: str | None = _doc("the script of the last user message (see Determinism)")
    content_script: str | None = _doc("the script the content was written in; null when the response has no "
                                      "content (tool call, reasoning only)")
    language_drift: bool = _doc("the content is in another script than the prompt's (`language_drift_rate`)", False)
    usage_sent: bool = _doc("a usage object was sent (messages: the final count, in `message_delta`)", False)
    prompt_tokens: int = _doc("the server's prompt token count for this request (0 if unparsed)", 0)
    completion_tokens: int = _doc("tokens actually sent (= usage `completion_tokens` when `usage_sent`)", 0)
    content_tokens: int = _doc("of which content", 0)
    reasoning_tokens: int = _doc("of which reasoning", 0)
    queued_ms: float = _doc("time waiting for a `max_concurrency` slot (`over_limit: queue`)", 0.0)
    quirks: list[str] = field(default_factory=list, metadata={"doc": "quirks applied to this response"})
    client_disconnected: bool = _doc("the client went away before the response was complete", False)
    t_arrival: float = _doc("`time.monotonic()` when the handler started (seconds)", 0.0)
    t_first_token: float | None = _doc("when the first token event was written (null for non-stream and "
                                       "token-less responses)")
    t_last_byte: float | None = _doc("when the final bytes were handed to the socket (or the connection was "
                                     "closed)")
    usage_prompt_tokens: int = _doc("the `prompt_tokens` usage reports: `prompt_tokens` × `prompt_tokens_factor`, "
                                    "rounded (whether or not usage was sent)", 0)
    usage_completion_tokens: int = _doc("the `completion_tokens` usage reports: the tokens planned × "
                                        "`completion_tokens_factor`, rounded (whether or not usage was sent)", 0)
    ignored: list[str] = field(default_factory=list, metadata={"doc": (
        "request parameters present but not honoured, by the `ignore_*` knobs and `clamp_out_of_range`: "
        "`tool_choice`, `parallel_tool_calls`, `max_tokens` (or `max_completion_tokens`), `stop`, "
        "`response_format`, `temperature`, `top_p`")})
    other_calls: bool = _doc("a non-streamed answer whose first call had one argument value changed "
                             "(`stream_other_calls`; `tool_calls` shows it as sent): the same request streamed "
                             "sends the unchanged call", False)
    sampled_words: int = _doc("content words drawn by `sampling_rate` instead of the body's most likely word (0 at "
                              "`temperature` 0 and for answers without filler words)", 0)
    answer_shifted: bool = _doc("the content was written around the other most likely word sequence "
                                "(`answer_shift_rate`)", False)
    request: JSONObject | None = _doc("only with `log_request`: `{\"body\": …, \"headers\": {…}}` as received, "
                                          "without `Authorization` and `x-api-key` (the key is absent otherwise)")

    def to_json(self) -> JSONObject:
        """The JSON object of the line: every field in order (``request`` only when logged)."""
        out = {f.name: getattr(self, f.name) for f in FIELDS}
        if self.request is None:
            del out["request"]
        return out

    def line(self) -> str:
        """The truth-log line (without its newline)."""
        return json.dumps(self.to_json(), ensure_ascii=False)

    @classmethod
    def from_json(cls, obj: JSONObject) -> TruthRecord:
        """A record read back from its JSON object (unknown keys refused)."""
        return cls(**obj)


FIELDS: tuple[dataclasses.Field, ...] = dataclasses.fields(TruthRecord)
KEYS: tuple[str, ...] = tuple(f.name for f in FIELDS)


@dataclass
class Exchange:
    """What the server learns about one request as it proceeds (mutable; :func:`build_truth` reads it once)."""

    profile: str
    endpoint: str  # chat | completions | messages | responses
    client_tag: str | None  # the X-AVV-Item header
    t_arrival: float
    request_hash: str | None = None
    decision_key: str | None = None
    attempt: int | None = None
    repeat: int | None = None
    repeat_source: str | None = None
    stream: bool | None = None
    request: JSONObject | None = None  # log_request: the body and headers received
    plan: Plan | None = None  # what was decided (None: the body could not be planned)
    rejection: RequestError | None = None  # why it could not (a quirk's rejection carries a ``fault``)
    refused: str | None = None  # auth | over_limit_429: refused after planning
    text_tool_calls: list[JSONObject] = field(default_factory=list)
    http_status: int | None = None
    finish_reason: str | None = None
    usage_sent: bool = False
    queued_ms: float = 0.0
    chunks_sent: int = 0  # token chunks written (all of them for a JSON body)
    client_disconnected: bool = False
    t_first_token: float | None = None
    t_last_byte: float | None = None
    committed: bool = False  # the truth line is written


def build_truth(ex: Exchange) -> TruthRecord:
    """The truth record of a request: the decisions from its plan, the rest from what the server saw and sent."""
    plan = ex.plan
    rejected = getattr(ex.rejection, "fault", None)
    sent = token_counts(plan.chunks[:ex.chunks_sent]) if plan is not None else {"reasoning": 0, "content": 0,
                                                                                  "tool": 0}
    decided: JSONObject = {"quirks": [rejected] if rejected else [], "fault": rejected}
    if plan is not None:
        d = plan.decision
        decided = {
            "has_tools": d.has_tools, "reference_decision": d.reference, "decision": d.decision, "flipped": d.flipped,
            "self_flipped": d.self_flipped, "gold": plan.gold, "agent": plan.agent, "call_form": plan.call_form,
            "dropped_calls": plan.dropped_calls, "text_calls": plan.text_calls, "fault": plan.fault,
            "reasoning_only": plan.reasoning_only, "prompt_script": plan.prompt_script,
            "content_script": plan.content_script, "language_drift": plan.language_drift,
            "sampled_words": plan.sampled_words, "answer_shifted": plan.answer_shifted,
            "prompt_tokens": plan.prompt_tokens, "quirks": list(plan.quirks),
            "usage_prompt_tokens": plan.usage_prompt_tokens, "usage_completion_tokens": plan.usage_completion_tokens,
            "ignored": list(plan.ignored), "other_calls": plan.other_calls,
            "tool_calls": sent_tool_calls(plan, ex.chunks_sent) if plan.tool_calls else [],
        }
    if ex.refused is not None:
        decided["fault"] = ex.refused
    return TruthRecord(
        profile=ex.profile, endpoint=ex.endpoint, request_hash=ex.request_hash, decision_key=ex.decision_key,
        attempt=ex.attempt, client_tag=ex.client_tag, repeat=ex.repeat, repeat_source=ex.repeat_source,
        stream=ex.stream, text_tool_calls=ex.text_tool_calls, http_status=ex.http_status,
        finish_reason=ex.finish_reason, usage_sent=ex.usage_sent,
        completion_tokens=sent["reasoning"] + sent["content"] + sent["tool"], content_tokens=sent["content"],
        reasoning_tokens=sent["reasoning"], queued_ms=ex.queued_ms, client_disconnected=ex.client_disconnected,
        t_arrival=ex.t_arrival, t_first_token=ex.t_first_token, t_last_byte=ex.t_last_byte, request=ex.request,
        **decided,
    )


class TruthLog:
    """Append-only JSON-lines file; each record is one ``os.write`` (O_APPEND), so lines never interleave."""

    def __init__(self, path: str | os.PathLike[str] | None):
        self.path = os.fspath(path) if path is not None else None
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644) if self.path else -1

    def write(self, record: TruthRecord) -> None:
        if self._fd >= 0:
            os.write(self._fd, (record.line() + "\n").encode("utf-8"))

    def close(self) -> None:
        if self._fd >= 0:
            os.fsync(self._fd)
            os.close(self._fd)
            self._fd = -1


def _lines(path: str | os.PathLike[str]) -> Iterator[JSONObject]:
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                yield json.loads(line)


def read_truth_log(path: str | os.PathLike[str]) -> list[JSONObject]:
    """Every line of a truth log as its JSON object, in order (:meth:`TruthRecord.from_json` types one)."""
    return list(_lines(path))


def truth_by_tag(path: str | os.PathLike[str]) -> dict[str | None, JSONObject]:
    """The lines of a truth log by ``client_tag`` (run/model/vendor/sample/repeat/attempt): a later line for a
    tag replaces an earlier one (the lines without a tag share the key None)."""
    return {rec["client_tag"]: rec for rec in _lines(path)}


def render_truth_table() -> str:
    """docs/simulator.md's truth-log table (``python -m avv_harness.docs``)."""
    rows = ["| field | meaning |", "|---|---|"]
    rows += ["| `{}` | {} |".format(f.name, f.metadata["doc"].replace("|", "\\|")) for f in FIELDS]
    return "\n".join(rows)
