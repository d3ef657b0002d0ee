"""Pure decisions: hashing, reference decision, flips, faults, token plans (no server)."""

from __future__ import annotations

import hashlib
import json

import pytest

from avv_sim import behaviour, request_hash
from avv_sim.plan import make_plan
from avv_sim.profiles import make_profile
from avv_sim.request import RequestError
from avv_sim.tokens import filler_words
from avv_sim.writing_systems import WORDS as SCRIPT_WORDS
from tests.builders import chat_body

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
        },
    },
    {
        "type": "function",
        "function": {
            "name": "search",
            "parameters": {
                "type": "object",
                "properties": {"q": {"type": "string"}, "n": {"type": "integer"}},
                "required": ["q"],
            },
        },
    },
    {"type": "function", "function": {"name": "noop", "parameters": {"type": "object", "properties": {}}}},
]


def body(i: int, **extra) -> dict:
    return chat_body(f"question {i}", TOOLS, **extra)


BODIES = [body(i) for i in range(600)]


def test_request_hash_ignores_model_stream_and_stream_options() -> None:
    b = body(1)
    h = request_hash(b)
    assert h == request_hash({**b, "model": "other", "stream": True, "stream_options": {"include_usage": True}})
    assert h != request_hash({**b, "temperature": 0.5})
    canonical = json.dumps(
        {k: v for k, v in b.items() if k != "model"}, sort_keys=True, separators=(",", ":"), ensure_ascii=False
    )
    assert h == hashlib.sha256(canonical.encode()).hexdigest()


def test_reference_decision_rate_and_independence_from_seed() -> None:
    ref = make_profile("ref", {"tool_call_rate": 0.6})
    other = make_profile("other", {"tool_call_rate": 0.6, "seed": 99})
    calls = [make_plan(ref, b, 1).decision.reference for b in BODIES]
    assert abs(sum(calls) / len(calls) - 0.6) < 0.06
    assert calls == [make_plan(other, b, 1).decision.reference for b in BODIES]


def test_flip_rate_disagrees_on_exactly_the_flipped_bodies() -> None:
    ref = make_profile("ref", {"tool_call_rate": 0.6})
    flippy = make_profile("flippy", {"tool_call_rate": 0.6, "flip_rate": 0.2, "seed": 5})
    flipped = 0
    for b in BODIES:
        r, f = make_plan(ref, b, 1).decision, make_plan(flippy, b, 1).decision
        assert f.reference == r.decision
        assert (f.decision != r.decision) == f.flipped
        flipped += f.flipped
    assert abs(flipped / len(BODIES) - 0.2) < 0.05


def test_faithful_profiles_emit_identical_tool_calls() -> None:
    a = make_profile("a", {"seed": 1})
    b = make_profile("b", {"seed": 2, "ttft_ms": 5})
    for x in BODIES[:100]:
        pa, pb = make_plan(a, x, 1), make_plan(b, x, 1)
        assert [(c.name, c.arguments, c.id) for c in pa.tool_calls] == [
            (c.name, c.arguments, c.id) for c in pb.tool_calls
        ]


def test_fault_rates_are_exact_marginals_and_depend_on_attempt() -> None:
    p = make_profile("f", {"error_rate": 0.1, "rate_limit_rate": 0.1, "truncate_rate": 0.1, "stream_error_rate": 0.1})
    faults = [behaviour.pick_fault(p, request_hash(b), 1) for b in BODIES]
    for name in behaviour.FAULT_ORDER:
        assert abs(faults.count(name) / len(BODIES) - 0.1) < 0.04, name
    retried = [behaviour.pick_fault(p, request_hash(b), 2) for b in BODIES]
    assert retried != faults  # a retry can get a different fault


def test_tool_choice_none_required_named() -> None:
    never = make_profile("never", {"tool_call_rate": 0.0})
    always = make_profile("always", {"tool_call_rate": 1.0})
    for i in range(30):
        assert not make_plan(always, body(i, tool_choice="none"), 1).tool_calls
        plan = make_plan(never, body(i, tool_choice="required"), 1)
        assert plan.tool_calls and plan.finish_reason == "tool_calls"
        named = make_plan(never, body(i, tool_choice={"type": "function", "function": {"name": "search"}}), 1)
        assert [c.name for c in named.tool_calls] == ["search"]
    with pytest.raises(RequestError):
        make_plan(never, body(1, tool_choice={"type": "function", "function": {"name": "missing"}}), 1)


def test_parallel_calls_have_distinct_indexes_and_tools() -> None:
    p = make_profile("par", {"tool_call_rate": 1.0, "parallel_rate": 0.5})
    n_parallel = 0
    for b in BODIES[:200]:
        calls = make_plan(p, b, 1).tool_calls
        assert [c.index for c in calls] == list(range(len(calls)))
        assert len({c.name for c in calls}) == len(calls)
        n_parallel += len(calls) == 2
    assert 70 < n_parallel < 130
    assert all(len(make_plan(p, {**b, "parallel_tool_calls": False}, 1).tool_calls) == 1 for b in BODIES[:50])


def test_token_plan_counts_and_max_tokens() -> None:
    p = make_profile("p", {"tool_call_rate": 0.0, "output_tokens": 20, "reasoning_tokens": 4, "tokens_per_chunk": 3})
    plan = make_plan(p, body(3), 1)
    assert plan.completion_tokens == 24 and plan.finish_reason == "stop"
    assert sum(c.n_tokens for c in plan.chunks) == 24
    assert all(c.n_tokens <= 3 for c in plan.chunks)
    capped = make_plan(p, body(3, max_tokens=10), 1)
    assert capped.completion_tokens == 10 and capped.finish_reason == "length"
    capped = make_plan(p, body(3, max_completion_tokens=3), 1)
    assert capped.completion_tokens == 3 and {c.kind for c in capped.chunks} == {"reasoning"}
    with pytest.raises(RequestError):
        make_plan(p, body(3, max_tokens=0), 1)


def test_tool_call_tokens_are_header_plus_fragments() -> None:
    p = make_profile("p", {"tool_call_rate": 1.0, "parallel_rate": 0.0})
    plan = make_plan(p, body(8), 1)
    (call,) = plan.tool_calls
    assert plan.completion_tokens == 1 + len(call.fragments)
    assert "".join(call.fragments) == call.arguments
    assert call.id.startswith("call_") and len(call.id) == 29


def test_max_tokens_cuts_tool_arguments() -> None:
    p = make_profile("p", {"tool_call_rate": 1.0, "parallel_rate": 0.0})
    named = {"type": "function", "function": {"name": "get_weather"}}
    full = make_plan(p, body(8, tool_choice=named), 1).tool_calls[0].arguments
    plan = make_plan(p, body(8, tool_choice=named, max_tokens=3), 1)
    assert plan.finish_reason == "length" and plan.completion_tokens == 3
    assert full.startswith(plan.tool_calls[0].arguments) and plan.tool_calls[0].arguments != full


def test_reasoning_only_rate() -> None:
    p = make_profile("r", {"reasoning_tokens": 3, "reasoning_only_rate": 0.25, "seed": 4})
    plans = [make_plan(p, b, 1) for b in BODIES[:400]]
    only = [pl for pl in plans if pl.reasoning_only]
    assert abs(len(only) / len(plans) - 0.25) < 0.06
    assert all(not pl.tool_calls and {c.kind for c in pl.chunks} == {"reasoning"} for pl in only)


@pytest.mark.integration  # over a second in one process: the unit tier is sub-second per test
def test_language_drift_rate_writes_the_content_in_another_script() -> None:
    from avv_sim import writing_systems as scripts

    prompts = {"Japanese": "今日は何曜日ですか？", "Cyrillic": "Какой сегодня день?",
               "Hangul": "오늘은 무슨 요일인가요?", "Greek": "Τι μέρα είναι σήμερα;",
               "Latin": "What day is it today?", "Han": "今天星期几？"}
    bodies = [chat_body(f"{text} ({i})", model=None) for text in prompts.values() for i in range(100)]
    steady = make_profile("s")
    for b in bodies:
        plan = make_plan(steady, b, 1)
        assert not plan.language_drift and plan.content_script == plan.prompt_script
    assert {make_plan(steady, b, 1).prompt_script for b in bodies} == set(prompts)
    drifty = make_profile("d", {"language_drift_rate": 0.3, "seed": 9})
    plans = [make_plan(drifty, b, 1) for b in bodies]
    drifted = [pl for pl in plans if pl.language_drift]
    assert abs(len(drifted) / len(plans) - 0.3) < 0.06
    for pl in plans:
        want = scripts.drift_script(pl.prompt_script) if pl.language_drift else pl.prompt_script
        words = scripts.WORDS.get(want, scripts.WORDS["Latin"])
        assert pl.content_script == want and all(t.text.strip() in words for t in pl.tokens)
    assert {pl.content_script for pl in drifted} == {"Cyrillic", "Latin"}  # Latin for the Cyrillic prompts
    again = [make_plan(drifty, b, 1).language_drift for b in bodies]
    assert again == [pl.language_drift for pl in plans]  # deterministic per (seed, body, attempt)
    calling = make_plan(make_profile("c", {"language_drift_rate": 1.0, "tool_call_rate": 1.0}), body(1), 1)
    assert calling.tool_calls and not calling.language_drift and calling.content_script is None


def test_bad_args_rate_marks_broken_calls() -> None:
    p = make_profile("b", {"tool_call_rate": 1.0, "bad_args_rate": 0.3, "seed": 3})
    calls = [c for b in BODIES[:400] for c in make_plan(p, b, 1).tool_calls]
    broken = [c for c in calls if c.broken]
    assert abs(len(broken) / len(calls) - 0.3) < 0.06
    assert {c.broken for c in broken} == {"missing_required", "wrong_type", "unparseable"}


def test_prompt_tokens_estimate() -> None:
    b = body(2)
    shown = json.dumps({"messages": b["messages"], "tools": b["tools"]}, sort_keys=True, separators=(",", ":"))
    assert make_plan(make_profile("p"), b, 1).prompt_tokens == -(-len(shown) // 4)


WORDS = SCRIPT_WORDS["Latin"]


def _content(plan) -> str:
    return "".join(t.text for t in plan.tokens if t.kind == "content")


def _answer(i: int, **extra) -> dict:
    return chat_body(f"tell me about {i}", **extra)  # no tools: every response is a content answer


def test_default_answers_are_the_bodys_most_likely_words_on_every_repeat() -> None:
    """With ``sampling_rate`` and ``answer_shift_rate`` at 0 the content is the filler it always was."""
    profile = make_profile("p", {"output_tokens": 12})
    for i in range(5):
        plans = [make_plan(profile, _answer(i), 1, repeat=r) for r in (1, 2, 3)]
        assert len({_content(p) for p in plans}) == 1
        assert all(p.sampled_words == 0 and not p.answer_shifted for p in plans)
        words = behaviour.answer_words(profile, plans[0].request_hash, 12, ("a", "b", "c"), 7, False).words
        assert words == filler_words(plans[0].request_hash, "content", 12, ("a", "b", "c"))


def test_sampling_rate_varies_the_words_per_repeat_and_temperature_0_is_greedy() -> None:
    profile = make_profile("p", {"output_tokens": 20, "sampling_rate": 0.3})
    sampled = total = 0
    for i in range(60):
        plans = [make_plan(profile, _answer(i), 1, repeat=r) for r in range(1, 6)]
        sampled += sum(p.sampled_words for p in plans)
        total += 20 * len(plans)
        assert len({_content(p) for p in plans}) > 1  # five repeats of 20 words at 0.3: never all alike
        again = make_plan(profile, _answer(i), 2, repeat=3)  # a retry of repeat 3 meets the same words
        assert _content(again) == _content(plans[2])
        greedy = [make_plan(profile, _answer(i, temperature=0), 1, repeat=r) for r in (1, 2, 3)]
        assert len({_content(p) for p in greedy}) == 1 and all(p.sampled_words == 0 for p in greedy)
    assert 0.26 < sampled / total < 0.34


def test_twins_answer_from_one_distribution_with_their_own_draws() -> None:
    """Two seeds of one profile: different answers, the same share of each position's most likely word."""
    a = make_profile("a", {"output_tokens": 10, "sampling_rate": 0.5, "seed": 1})
    b = make_profile("b", {"output_tokens": 10, "sampling_rate": 0.5, "seed": 2})
    kept = {"a": 0, "b": 0}
    differ = 0
    for i in range(200):
        h = make_plan(a, _answer(i), 1).request_hash
        likely = filler_words(h, "content", 10, WORDS)
        wa = behaviour.answer_words(a, h, 10, WORDS, 1, False).words
        wb = behaviour.answer_words(b, h, 10, WORDS, 1, False).words
        differ += wa != wb
        kept["a"] += sum(x == y for x, y in zip(wa, likely, strict=True))
        kept["b"] += sum(x == y for x, y in zip(wb, likely, strict=True))
    assert differ > 190
    for name in kept:  # 0.5 kept + 0.5 × 1/68 drawn back: ≈ 0.507 of 2000 words
        assert 0.46 < kept[name] / 2000 < 0.56, name


def test_answer_shift_rate_draws_the_other_words_on_its_share_of_answers() -> None:
    profile = make_profile("p", {"output_tokens": 8, "answer_shift_rate": 0.25})
    plain = make_profile("q", {"output_tokens": 8})
    shifted = 0
    for i in range(100):
        for r in (1, 2, 3, 4):
            plan = make_plan(profile, _answer(i), 1, repeat=r)
            base = make_plan(plain, _answer(i), 1, repeat=r)
            shifted += plan.answer_shifted
            assert (_content(plan) != _content(base)) == plan.answer_shifted
            words = filler_words(plan.request_hash, "content:shifted" if plan.answer_shifted else "content",
                                           8, WORDS)
            assert _content(plan) == " ".join(words)
    assert 0.20 < shifted / 400 < 0.30

