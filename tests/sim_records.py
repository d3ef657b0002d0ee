"""What the simulator records, for the tests: its truth log as written by a running simulator (the one reader:
:func:`truth_lines`, :func:`truth_by_tag`, :func:`truth_of`), and records made in-process from its pure
decisions (no HTTP, no Locust): each (profile, sample, repeat) gets the record the harness would write for the
response the simulator would send, plus the truth the simulator would log (reference decision, flips,
self-flips, decision).

The in-process records are used by the statistics tests, which need many seeded score tables quickly. The calls
carry schema-valid arguments drawn by the simulator (``avv_sim.calls.reference_calls``), so faithful profiles
agree exactly.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from os import PathLike
from typing import Any

import pandas as pd

import avv_sim
from avv_harness.run.preflight import is_preflight_tag
from avv_scoring.testing import call, records_frame
from avv_sim import behaviour, read_truth_log
from avv_sim.calls import PlannedCall, reference_calls
from avv_sim.identity import decision_key
from avv_sim.profiles import Profile, make_profile
from avv_sim.writing_systems import WORDS
from tests.builders import chat_body

TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}},
    {"type": "function", "function": {"name": "search", "parameters": {
        "type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}}},
]


def truth_lines(path: str | PathLike[str], preflight: bool = False) -> list[dict[str, Any]]:
    """The simulator's truth log (``--truth-log``, a run's sim_truth.jsonl): one dict per line, in order (the
    simulator's own reader, ``avv_sim.read_truth_log``). The run's pre-flight requests (one per vendor before the
    load, tagged ``…/preflight/0/1``: avv_harness/run/preflight.py) are left out unless ``preflight``: the tests
    compare the truth of the items with their records."""
    return [line for line in read_truth_log(path) if preflight or not is_preflight_tag(line.get("client_tag"))]


def truth_by_tag(path: str | PathLike[str], preflight: bool = False) -> dict[str, dict[str, Any]]:
    """Truth lines by client tag (the ``X-AVV-Item`` header: run/model/vendor/sample/repeat/attempt; a later line
    of a tag replaces an earlier one); lines of requests sent without a tag are left out, and so are the pre-flight's
    (unless ``preflight``)."""
    return {tag: line for tag, line in avv_sim.truth_by_tag(path).items()
            if tag and (preflight or not is_preflight_tag(tag))}


def truth_of(path: str | PathLike[str], tag: str) -> dict[str, Any]:
    """The one truth line of the request tagged ``tag`` (fails unless there is exactly one)."""
    (line,) = [line for line in truth_lines(path) if line["client_tag"] == tag]
    return line


def body(i: int, prefix: str = "question") -> dict[str, Any]:
    return chat_body(f"{prefix} {i}", TOOLS, model=None)


@dataclass(frozen=True)
class Truth:
    """What the simulator's truth log would say of one (profile, sample, repeat)."""

    vendor: str
    sample_id: str
    repeat: int
    reference: bool
    flipped: bool
    self_flipped: bool
    decision: bool


def sim_records(profiles: Mapping[str, Mapping[str, Any] | Profile], baseline: str, samples: int, repeats: int,
                prefix: str = "question", arguments: bool = True, answers: bool = False,
                temperature: float | None = None) -> tuple[pd.DataFrame, list[Truth]]:
    """Records of every profile on ``samples`` bodies × ``repeats`` repeats (all successful, model ``m``), typed
    as the reader types records.csv, and the truth of each. ``profiles`` maps a vendor name to its knobs;
    ``arguments=False`` sends ``{}`` as every call's arguments (faster, for trigger-only sweeps); ``answers=True``
    writes each content answer's words as the simulator draws them (``sampling_rate``, ``answer_shift_rate``:
    :func:`avv_sim.behaviour.answer_words`) instead of "an answer", and ``temperature`` into the body and the
    record (0: greedy)."""
    rows, truth = sim_rows(profiles, baseline, samples, repeats, prefix, arguments, answers, temperature)
    return records_frame(rows), truth


def sim_rows(profiles: Mapping[str, Mapping[str, Any] | Profile], baseline: str, samples: int, repeats: int,
             prefix: str = "question", arguments: bool = True, answers: bool = False,
             temperature: float | None = None) -> tuple[list[dict[str, Any]], list[Truth]]:
    """The record fields of :func:`sim_records` (for :func:`avv_scoring.testing.record`), and the truth."""
    built = {name: p if isinstance(p, Profile) else make_profile(name, p) for name, p in profiles.items()}
    rows: list[dict[str, Any]] = []
    truth: list[Truth] = []
    for i in range(samples):
        b = body(i, prefix)
        if temperature is not None:
            b["temperature"] = temperature
        h = decision_key(b)
        for name, profile in built.items():
            for r in range(1, repeats + 1):
                d = behaviour.decide(profile, b, h, None, r)
                calls = (reference_calls(d.calls, h, None) if arguments else [PlannedCall(t, {}) for t in d.calls]) \
                    if d.decision else []
                content = "an answer"
                if answers:  # the words make_plan writes for a content answer (prompt in Latin script)
                    drawn = behaviour.answer_words(profile, h, profile.output_tokens, WORDS["Latin"], r,
                                                   greedy=temperature == 0)
                    content = " ".join(drawn.words)
                rows.append({
                    "vendor": name, "is_baseline": name == baseline, "sample_id": str(i), "repeat": r,
                    "finish_reason": "tool_calls" if d.decision else "stop",
                    "tool_calls": [call(c.tool.name, json.dumps(c.args), f"call_{k}") for k, c in enumerate(calls)],
                    "content": "" if d.decision else content, "temperature": temperature,
                    "ttft_ms": profile.ttft_ms, "tps": profile.tokens_per_s, "total_tokens": 100,
                })
                truth.append(Truth(name, str(i), r, bool(d.reference), d.flipped, d.self_flipped, d.decision))
    return rows, truth


def tools_by_sample(samples: int) -> dict[str, list[dict[str, Any]]]:
    return {str(i): TOOLS for i in range(samples)}


# ------------------------------------------------------------------------------- conformance probes, in process


def answer_row(profile: Profile, chat_body: Mapping[str, Any], streamed: bool, endpoint: str = "chat",
               gold: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The record fields the harness writes for the simulator's answer to one request, made in process: the body
    in the endpoint's format (the harness's wire format), planned as the simulator plans it (:func:`avv_sim.endpoints.
    plan_request`), written by its writer (the SSE bytes of the stream, or the JSON body) and read back by the
    harness's reader of that format (``attempt.apply_events`` / ``outcome.non_sse_body``) into ``attempt_record``.
    A request the simulator refuses (HTTP 400) is a failed ``http_4xx`` row. No socket, no Locust."""
    from avv_harness.wire.attempt import Attempt, apply_events
    from avv_harness.wire.execute import attempt_record
    from avv_harness.wire.formats import FORMATS
    from avv_harness.wire.outcome import finish, non_sse_body
    from avv_harness.wire.sse import SSEParser
    from avv_sim.endpoints import plan_request, writer_for
    from avv_sim.request import RequestError
    from avv_sim.truth import Exchange

    class Dialect:
        template = None
        tool_parser = None

    wire_format = FORMATS[endpoint]
    chat = {**chat_body, "model": "m", "stream": streamed}
    if streamed:
        chat["stream_options"] = {"include_usage": True}
    sent = wire_format.body(chat, Dialect())
    tools = chat_body.get("tools")
    ex = Exchange(profile.name, endpoint, None, 0.0)
    try:
        plan = plan_request(profile, json.loads(json.dumps(sent)), ex, 1, 1, gold)
    except RequestError as exc:
        return {"status": "failed", "error_kind": "http_4xx", "error_detail": f"HTTP 400: {exc.message}",
                "http_status": 400, "finish_reason": None, "content": None, "endpoint": endpoint}
    writer = writer_for(endpoint, profile, plan, 0, "chatcmpl-test")
    att = Attempt(t0=0.0, t_headers=0.0, http_status=200)
    if streamed:
        reader = wire_format.reader(Dialect())
        n = writer.chunks_to_send()
        make = writer.token_events(n)
        data = writer.role_event() + b"".join(make(j) for j in range(n)) + writer.tail(
            error=False, usage=plan.include_usage and not profile.omit_usage)
        parser = SSEParser(1 << 22)
        att.reads, att.bytes_read = 1, len(data)
        apply_events(att, parser.feed(data) + parser.close(), 1.0, reader)
    else:
        reader = wire_format.whole_reader(Dialect())
        payload = writer.completion_body()
        if profile.omit_usage:
            payload.pop("usage", None)
        non_sse_body(att, json.dumps(payload).encode("utf-8"), "application/json", reader, 1 << 22)
    finish(att, reader)
    return {**attempt_record(att, True, tools), "endpoint": endpoint, "attempts": 1}


def probe_records(profiles: Mapping[str, Mapping[str, Any]], baseline: str, probe_file: str | PathLike[str],
                  endpoints: Mapping[str, str] | None = None) -> pd.DataFrame:
    """Every profile's answer to every probe of a conformance run's probe file (:func:`answer_row`), the simulator
    following the file's gold as the harness makes it; ``endpoints``: vendor → its wire format (default chat)."""
    from avv_core.samples import load_samples
    from avv_sim.sample_file import load_gold

    samples = load_samples(probe_file)
    gold = load_gold(probe_file).entries
    rows = []
    for name, knobs in profiles.items():
        profile = make_profile(name, knobs)
        endpoint = (endpoints or {}).get(name, "chat")
        for sample in samples.samples:
            if endpoint != "chat":
                from avv_scoring.conformance.suite import not_sent_reason

                if not_sent_reason(sample.body, endpoint) is not None:
                    continue  # the harness does not send it (not_sent)
            row = answer_row(profile, sample.body, sample.streamed, endpoint, gold)
            rows.append({**row, "vendor": name, "is_baseline": name == baseline, "sample_id": sample.sample_id,
                         "request_hash": sample.request_hash})
    return records_frame(rows)
