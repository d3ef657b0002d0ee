"""The simulator's sampling noise (``self_flip_rate``) and the repeat it reads from the ``X-AVV-Item`` tag: the
simulator's own tag parse agrees with the harness's, and the draws are per (body, seed, repeat)."""

from __future__ import annotations

import pytest

from avv_core.items import ItemKey
from avv_sim import behaviour
from avv_sim.decision_key import decision_key
from avv_sim.item_tag import parse_item_tag, repeat_of
from avv_sim.plan import make_plan
from avv_sim.profiles import ProfileError, make_profile
from tests.sim_records import body

NAMES = ["m", "kimi-k2/0905", "vendor with spaces", "ünï/cödé%2F", "a%b", "", "x/y/z", "🙂", "100%"]


@pytest.mark.parametrize("name", NAMES)
def test_the_simulators_tag_parse_agrees_with_the_harness(name):
    for repeat, attempt in ((1, 1), (7, 3), (12, 10)):
        key = ItemKey(name or "m", f"v-{name}", f"s/{name}", repeat)
        tag = key.tag(f"run/{name}", attempt)
        run_id, parsed, parsed_attempt = ItemKey.parse_tag(tag)
        mine = parse_item_tag(tag)
        assert (mine.run_id, mine.model, mine.vendor, mine.sample_id, mine.repeat, mine.attempt) == (
            run_id, *parsed, parsed_attempt)
        assert repeat_of(tag, 99) == (repeat, "tag")


@pytest.mark.parametrize("tag", ["", "a/b/c", "r/m/v/s/x/1", "r/m/v/s/1/y", "r/m/v/s/1/2/x", "r/m/v/s/1/2/3/4",
                                 "t-1"])
def test_bad_tags_are_refused_by_both_and_fall_back_to_the_arrival_count(tag):
    with pytest.raises(ValueError):
        ItemKey.parse_tag(tag)
    with pytest.raises(ValueError):
        parse_item_tag(tag)
    assert repeat_of(tag, 4) == (4, "arrival") and repeat_of(None, 2) == (2, "arrival")


def test_self_flip_rate_is_a_rate_per_body_and_repeat():
    noisy = make_profile("noisy", {"tool_call_rate": 0.6, "self_flip_rate": 0.2, "seed": 4})
    plain = make_profile("plain", {"tool_call_rate": 0.6})
    flips, changed_between_repeats, n = 0, 0, 400
    for i in range(n):
        b = body(i)
        h = decision_key(b)
        decisions = []
        for repeat in (1, 2, 3):
            d = behaviour.decide(noisy, b, h, None, repeat)
            ref = behaviour.decide(plain, b, h, None, repeat)
            assert d.reference == ref.decision and not ref.self_flipped  # self_flip_rate 0 never flips
            assert d.decision == (d.reference ^ d.flipped ^ d.self_flipped)
            assert d.self_flipped == behaviour.self_flip_drawn(h, 4, repeat, 0.2)
            assert behaviour.decide(noisy, b, h, None, repeat) == d  # the same (body, repeat): the same decision
            flips += d.self_flipped
            decisions.append(d.decision)
        changed_between_repeats += len(set(decisions)) > 1
    assert flips / (3 * n) == pytest.approx(0.2, abs=0.03)
    # a body's repeats differ unless all three or none flipped: 1 − 0.2³ − 0.8³ = 0.48
    assert changed_between_repeats / n == pytest.approx(0.48, abs=0.06)


def test_self_flips_apply_to_gold_and_flips_but_never_to_a_forced_call():
    noisy = make_profile("noisy", {"self_flip_rate": 1.0, "flip_rate": 1.0})
    b = body(1)
    h = decision_key(b)
    d = behaviour.decide(noisy, b, h)
    assert d.flipped and d.self_flipped and d.decision == d.reference  # two flips cancel
    forced = {**b, "tool_choice": "required"}
    d = behaviour.decide(noisy, forced, decision_key(forced))
    assert d.decision and not d.flipped and not d.self_flipped
    plan = make_plan(make_profile("n", {"self_flip_rate": 1.0}), b, attempt=1, repeat=2)
    assert plan.decision.self_flipped and plan.decision.decision != plan.decision.reference


def test_self_flip_rate_is_validated():
    with pytest.raises(ProfileError, match="self_flip_rate"):
        make_profile("p", {"self_flip_rate": 1.5})
