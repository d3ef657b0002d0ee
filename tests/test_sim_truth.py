"""The simulator's declarations as plain data: the truth record (its keys and their order, its one builder, its
reader) and the knobs (each declared once with its meaning, check and truth-log key). No server."""

from __future__ import annotations

import json

import pytest

import avv_sim
from avv_sim.plan import make_plan
from avv_sim.profiles import CALL_FORM_KNOBS, FAULT_RATE_KNOBS, KNOBS, RATE_KNOBS, ProfileError, make_profile
from avv_sim.request import RequestError
from avv_sim.truth import KEYS, Exchange, TruthLog, TruthRecord, build_truth, read_truth_log, truth_by_tag

#: The truth log's keys in the order every line has had them (the JSON bytes depend on it).
LINE_KEYS = (
    "profile", "endpoint", "request_hash", "decision_key", "attempt", "client_tag", "repeat", "repeat_source",
    "stream", "has_tools", "reference_decision", "decision", "flipped", "self_flipped", "gold", "agent", "call_form",
    "dropped_calls", "tool_calls", "text_tool_calls", "text_calls", "fault", "http_status", "finish_reason",
    "reasoning_only", "prompt_script", "content_script", "language_drift", "usage_sent", "prompt_tokens",
    "completion_tokens", "content_tokens", "reasoning_tokens", "queued_ms", "quirks", "client_disconnected",
    "t_arrival", "t_first_token", "t_last_byte", "usage_prompt_tokens", "usage_completion_tokens", "ignored",
    "other_calls", "sampled_words", "answer_shifted",
)
TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]


def test_the_record_keeps_the_keys_and_their_order() -> None:
    assert KEYS == (*LINE_KEYS, "request")
    rec = build_truth(Exchange("p", "chat", None, 1.5))
    assert tuple(rec.to_json()) == LINE_KEYS  # ``request`` only when logged
    assert rec.line() == json.dumps(rec.to_json(), ensure_ascii=False)
    logged = build_truth(Exchange("p", "chat", None, 1.5, request={"body": {}, "headers": {}}))
    assert tuple(logged.to_json()) == KEYS


def test_a_request_without_a_plan() -> None:
    """Unparseable, or rejected by a quirk: the decisions stay empty; a refusal after planning names its fault."""
    bare = build_truth(Exchange("p", "chat", "tag", 2.0)).to_json()
    assert bare == {**{k: None for k in LINE_KEYS}, "profile": "p", "endpoint": "chat", "client_tag": "tag",
                    "gold": False, "dropped_calls": 0, "tool_calls": [], "text_tool_calls": [], "text_calls": [],
                    "reasoning_only": False, "language_drift": False, "usage_sent": False, "prompt_tokens": 0,
                    "completion_tokens": 0, "content_tokens": 0, "reasoning_tokens": 0, "queued_ms": 0.0,
                    "quirks": [], "client_disconnected": False, "t_arrival": 2.0, "usage_prompt_tokens": 0,
                    "usage_completion_tokens": 0, "ignored": [], "other_calls": False, "sampled_words": 0,
                    "answer_shifted": False}
    rejection = RequestError("no")
    rejection.fault = "require_reasoning_content"  # type: ignore[attr-defined]
    rejected = build_truth(Exchange("p", "chat", None, 0.0, rejection=rejection))
    assert (rejected.fault, rejected.quirks) == ("require_reasoning_content", ["require_reasoning_content"])
    refused = build_truth(Exchange("p", "chat", None, 0.0, rejection=rejection, refused="auth"))
    assert (refused.fault, refused.quirks) == ("auth", ["require_reasoning_content"])


def test_the_builder_reads_the_plan_and_what_was_sent() -> None:
    profile = make_profile("p", {"tool_call_rate": 1.0, "reasoning_tokens": 2, "quirks": ["comments"]})
    body = {"messages": [{"role": "user", "content": "hi"}], "tools": TOOLS, "stream": True}
    plan = make_plan(profile, body, 1)
    full = build_truth(Exchange("p", "chat", None, 0.0, plan=plan, chunks_sent=len(plan.chunks), refused=None))
    assert (full.decision, full.reference_decision, full.has_tools, full.quirks) == (True, True, True, ["comments"])
    assert full.completion_tokens == plan.completion_tokens and full.reasoning_tokens == 2
    assert [c["name"] for c in full.tool_calls] == ["get_weather"]
    assert full.tool_calls[0]["arguments"] == plan.tool_calls[0].arguments
    none_sent = build_truth(Exchange("p", "chat", None, 0.0, plan=plan))
    assert none_sent.completion_tokens == 0 and none_sent.tool_calls == []
    over = build_truth(Exchange("p", "chat", None, 0.0, plan=plan, refused="over_limit_429"))
    assert (over.fault, over.quirks) == ("over_limit_429", ["comments"])


def test_one_reader_reads_what_the_log_wrote(tmp_path) -> None:
    path = tmp_path / "truth.jsonl"
    log = TruthLog(path)
    records = [build_truth(Exchange("p", "chat", tag, float(i))) for i, tag in enumerate(["a", "b", "a", None])]
    for rec in records:
        log.write(rec)
    log.close()
    lines = read_truth_log(path)
    assert lines == [r.to_json() for r in records] and [TruthRecord.from_json(x) for x in lines] == records
    assert path.read_text(encoding="utf-8") == "".join(r.line() + "\n" for r in records)
    by_tag = avv_sim.truth_by_tag(path)
    assert by_tag is not None and truth_by_tag(path)["a"]["t_arrival"] == 2.0 and set(by_tag) == {"a", "b", None}


def test_every_knob_is_declared_with_its_meaning_check_and_truth_key() -> None:
    for knob in KNOBS.values():
        assert knob.doc, knob.name
        if knob.truth is not None:
            field = knob.truth.split(".")[0].split("[")[0]
            assert field in KEYS, (knob.name, knob.truth)
    # what used to be written out by hand: the rates, the non-negative and the positive knobs
    assert set(RATE_KNOBS) == {
        "tool_call_rate", "flip_rate", "self_flip_rate", "bad_args_rate", "parallel_rate", "wrong_tool_rate",
        "wrong_value_rate", "drop_parallel_rate", "tool_as_text_rate", "truncate_call_rate", "extra_steps_rate",
        "give_up_on_error_rate", "loop_rate", "reasoning_only_rate", "language_drift_rate", "sampling_rate",
        "answer_shift_rate", "error_rate",
        "rate_limit_rate", "truncate_rate", "stream_error_rate", "quirk_rate"}
    assert {k.name for k in KNOBS.values() if k.check == "non_negative"} == {
        "ttft_ms", "ttft_jitter_ms", "output_tokens", "reasoning_tokens", "seed", "header_delay_ms", "stall_ms",
        "retry_after_s", "stall_after_tokens", "steps_to_finish"}
    assert {k.name for k in KNOBS.values() if k.check == "positive"} == {
        "tokens_per_s", "tokens_per_chunk", "max_concurrency", "prompt_tokens_factor", "completion_tokens_factor"}
    assert FAULT_RATE_KNOBS == ("error_rate", "rate_limit_rate", "truncate_rate", "stream_error_rate")
    assert CALL_FORM_KNOBS == ("tool_as_text_rate", "truncate_call_rate")


@pytest.mark.parametrize(("knobs", "message"), [
    ({"flip_rate": 1.5}, "knob 'flip_rate': must be within [0, 1], got 1.5"),
    ({"ttft_ms": -1}, "knob 'ttft_ms': must be >= 0, got -1.0"),
    ({"tokens_per_chunk": 0}, "knob 'tokens_per_chunk': must be > 0, got 0"),
    ({"error_status": 42}, "knob 'error_status': must be an HTTP status (100-599), got 42"),
    ({"over_limit": "drop"}, "knob 'over_limit': must be one of ('429', 'queue'), got 'drop'"),
    ({"quirks": ["nope"]}, "knob 'quirks': unknown quirk(s) ['nope']"),
    ({"error_rate": 0.6, "truncate_rate": 0.6}, "error_rate + rate_limit_rate + truncate_rate + stream_error_rate"),
])
def test_the_declared_checks_refuse_bad_values(knobs, message) -> None:
    with pytest.raises(ProfileError) as err:
        make_profile("p", knobs)
    assert message in str(err.value)
