"""Tool-call correctness: canonical arguments, agreement of two responses, possible-answer (gold) matching."""

from __future__ import annotations

import hashlib
import json
from datetime import date

import pytest

from avv_core.canonical import canonical_sha256
from avv_scoring.metrics.correctness import (
    UNPARSED,
    Call,
    acceptable,
    args_f1,
    arguments_match,
    calls_equal,
    calls_match_gold,
    canonical_key,
    leaves,
    name_mapper,
    tools_equal,
    tools_match_gold,
)


def c(name, args):
    return Call.of(name, args if isinstance(args, str) else json.dumps(args, ensure_ascii=False))


# ------------------------------------------------------------------------------------------- canonical


@pytest.mark.parametrize("a, b", [
    ('{"a": 1, "b": 2}', '{"b": 2, "a": 1}'),  # key order
    ('{"n": 1}', '{"n": 1.0}'),  # 1 == 1.0
    ('{"n": 0}', '{"n": -0.0}'),
    ('{"n": 1e2}', '{"n": 100}'),
    ('{"x": [[1, 2], {"y": [3.0]}]}', '{"x": [[1.0, 2], {"y": [3]}]}'),  # nested arrays and objects
    ('{"s": "é"}', '{"s": "\\u00e9"}'),  # unicode escapes decode to the same string
    ('{"s": "東京"}', '{"s": "\\u6771\\u4eac"}'),
    ('{ "a" :1 }', '{"a":1}'),  # whitespace
])
def test_canonically_equal(a, b):
    assert c("f", a).key == c("f", b).key
    assert calls_equal([c("f", a)], [c("f", b)])


@pytest.mark.parametrize("a, b", [
    ('{"n": 1}', '{"n": true}'),  # true is not 1
    ('{"n": 1}', '{"n": "1"}'),
    ('{"n": 1.5}', '{"n": 1}'),
    ('{"x": [1, 2]}', '{"x": [2, 1]}'),  # arrays keep their order
    ('{"s": "é"}', '{"s": "e\\u0301"}'),  # no Unicode normalisation: NFC ≠ NFD
    ('{"s": "Paris"}', '{"s": "paris"}'),  # no case folding
    ('{"a": null}', "{}"),
    ('{"a": 1', '{"a": 1}'),  # a broken string never equals a parsed value
])
def test_canonically_different(a, b):
    assert c("f", a).key != c("f", b).key


def test_the_one_canonical_hash_is_sha256_of_sorted_compact_utf8_json():
    # the bytes every hash of a JSON value was taken over before there was one function (sample bodies, the
    # simulator's decision key and gold, node identities): keys sorted, no whitespace, non-ASCII kept
    value = {"b": "é 日本", "a": [1, 2.0, None, {"z": True, "y": {}}]}
    text = '{"a":[1,2.0,null,{"y":{},"z":true}],"b":"é 日本"}'
    assert canonical_sha256(value) == hashlib.sha256(text.encode("utf-8")).hexdigest()
    assert canonical_sha256({"d": date(2024, 1, 2)}, default=str) == \
        hashlib.sha256(b'{"d":"2024-01-02"}').hexdigest()


def test_unparseable_arguments_compare_by_raw_text():
    broken = c("f", '{"a": 1')
    assert broken.args is UNPARSED and not broken.parsed
    assert not calls_equal([broken], [c("f", '{"a":  1')])  # other text
    assert calls_equal([broken], [c("f", ' {"a": 1 ')])  # the same text (stripped): the baseline agrees with itself
    assert canonical_key(1.0) == canonical_key(1) and canonical_key(True) != canonical_key(1)


# ------------------------------------------------------------------------------------------- agreement


def test_tools_calls_and_count():
    a = [c("f", {"x": 1}), c("g", {"y": 2})]
    assert tools_equal(a, [c("g", {"y": 3}), c("f", {"x": 1})])  # names as multisets, any order
    assert not tools_equal(a, [c("f", {"x": 1}), c("f", {"x": 1})])
    assert calls_equal(a, [c("g", {"y": 2.0}), c("f", {"x": 1})])
    assert not calls_equal(a, [c("g", {"y": 3}), c("f", {"x": 1})])


def test_leaves_paths_and_empty_containers():
    got = leaves(c("f", {"a": {"b": [1, {"c": "x"}]}, "e": {}, "l": [], "s/k": 1}))
    assert set(got) == {("f", "/a/b/0", "1"), ("f", "/a/b/1/c", '"x"'), ("f", "/e", "{}"), ("f", "/l", "[]"),
                        ("f", "/s~1k", "1")}
    assert leaves(c("f", {})) == {("f", "", "{}"): 1}
    assert sum(leaves(c("f", '{"a":')).values()) == 1  # unparseable: one leaf


def test_args_f1():
    base = [c("f", {"city": "Paris", "days": 2, "unit": "c"})]
    assert args_f1(base, base) == 1.0
    assert args_f1([c("f", {"city": "Lyon", "days": 2, "unit": "c"})], base) == pytest.approx(2 * 2 / 6)
    assert args_f1([c("f", {"city": "Paris", "days": 2})], base) == pytest.approx(2 * 2 / 5)  # a dropped filter
    assert args_f1([c("g", {"city": "Paris", "days": 2, "unit": "c"})], base) == 0.0  # other tool: no leaf matches
    assert args_f1([], []) == 1.0 and args_f1([], base) == 0.0


def test_args_f1_pairs_same_name_calls_by_best_overlap_whatever_the_order():
    base = [c("f", {"a": 1, "b": 1}), c("f", {"a": 2, "b": 2})]
    swapped = [c("f", {"a": 2, "b": 2}), c("f", {"a": 1, "b": 9})]
    assert args_f1(swapped, base) == pytest.approx(2 * 3 / 8)  # (2,2)↔(2,2): 2 leaves, (1,9)↔(1,1): 1 leaf
    assert args_f1([c("f", {"a": 1, "b": 1})], base) == pytest.approx(2 * 2 / 6)  # a dropped parallel call


# ------------------------------------------------------------------------------------------------ gold


def test_acceptable_values():
    assert acceptable(["a", "b"]) == ["a", "b"] and acceptable("a") == ["a"] and acceptable([[3, 5]]) == [[3, 5]]


@pytest.mark.parametrize("args, ok", [
    ({"base": 10, "height": 5}, True),  # the optional unit left out
    ({"base": 10, "height": 5, "unit": "units"}, True),
    ({"base": 10.0, "height": 5}, True),  # 10 == 10.0
    ({"base": 10, "height": 5, "unit": ""}, True),  # "" is acceptable
    ({"base": 10, "height": 5, "unit": "cm"}, False),  # not an acceptable value
    ({"base": 10}, False),  # a required argument missing
    ({"base": 10, "height": 5, "color": "red"}, False),  # an unexpected argument
    ({"base": 10, "height": 6}, False),
    ({"base": "10", "height": 5}, False),  # a string is not the number
])
def test_optional_arguments_and_alternatives(args, ok):
    expected = {"base": [10], "height": [5], "unit": ["units", ""]}
    assert arguments_match(args, expected) is ok


def test_several_acceptable_values_and_single_values():
    expected = {"city": ["New York", "NYC", "New York City"], "days": 3}  # a non-list is the one acceptable value
    for city in ("New York", "NYC", "New York City"):
        assert arguments_match({"city": city, "days": 3}, expected)
    assert not arguments_match({"city": "new york", "days": 3}, expected)  # strings are exact
    assert not arguments_match({"city": "NYC", "days": 4}, expected)


def test_list_values_nested_objects_and_empty_alternatives():
    assert arguments_match({"multiples": [3, 5]}, {"multiples": [[3, 5], [5, 3]]})
    assert not arguments_match({"multiples": [3]}, {"multiples": [[3, 5]]})
    table = {"table": [[[10, 20], [30, 40]]]}
    assert arguments_match({"table": [[10, 20], [30, 40.0]]}, table)
    prefs = {"drink_id": ["latte"], "new_preferences": [{"size": ["large"], "milk": ["coconut", ""]}]}
    assert arguments_match({"drink_id": "latte", "new_preferences": {"size": "large"}}, prefs)
    assert arguments_match({"drink_id": "latte", "new_preferences": {"size": "large", "milk": "coconut"}}, prefs)
    assert not arguments_match({"drink_id": "latte", "new_preferences": {"size": "large", "sugar": 1}}, prefs)
    rows = {"data": [[{"name": ["Jane"], "age": [43]}, {"name": ["Chester"], "age": [42]}]]}
    assert arguments_match({"data": [{"name": "Jane", "age": 43}, {"name": "Chester", "age": 42.0}]}, rows)
    assert not arguments_match({"data": [{"name": "Chester", "age": 42}, {"name": "Jane", "age": 43}]}, rows)
    assert not arguments_match({"x": 1}, {"x": []})  # no acceptable value at all
    assert not arguments_match([1], {}) and arguments_match({}, {})


def test_parallel_calls_match_in_any_order_one_to_one():
    expected = [{"name": "spotify.play", "arguments": {"artist": ["Taylor Swift"], "duration": [20]}},
                {"name": "spotify.play", "arguments": {"artist": ["Maroon 5"], "duration": [15]}}]
    name_of = name_mapper({"spotify_play"}, {"spotify_play": "spotify.play"})
    a = c("spotify_play", {"artist": "Taylor Swift", "duration": 20})
    b = c("spotify_play", {"artist": "Maroon 5", "duration": 15})
    assert calls_match_gold([a, b], expected, name_of) and calls_match_gold([b, a], expected, name_of)
    assert not calls_match_gold([a, a], expected, name_of)  # one to one: the same call cannot cover both
    assert not calls_match_gold([a], expected, name_of)  # a dropped parallel call
    assert tools_match_gold([a, b], expected, name_of) and not tools_match_gold([a], expected, name_of)


def test_names_map_back_only_for_the_requests_tools():
    expected = [{"name": "math.factorial", "arguments": {"number": [5]}}]
    name_of = name_mapper({"math_factorial"}, {"math_factorial": "math.factorial"})
    assert calls_match_gold([c("math_factorial", {"number": 5})], expected, name_of)
    # sending the dotted original (not a tool of the request) is a failure, even though gold uses that name
    assert not calls_match_gold([c("math.factorial", {"number": 5})], expected, name_of)
    assert not tools_match_gold([c("math.factorial", {"number": 5})], expected, name_of)
    assert not calls_match_gold([c("math_factorial", '{"number": 5')], expected, name_of)  # broken arguments
    unknown = name_mapper(None, {})  # the request's tools unknown: names map to themselves
    assert calls_match_gold([c("math.factorial", {"number": 5})], expected, unknown)
