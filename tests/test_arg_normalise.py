"""Argument normalisers (avv_scoring/metrics/normalisers.py): each normaliser with the token-level eval article's
cases, gold argument F1 (required keys weigh 2, optional 1; BFCL possible answers), the baseline's args_match /
args_f1 under ``--arg-normalise default|none|FILE``, and the docs table rendered from the declarations."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from avv_core.errors import InputError
from avv_core.samples import Gold
from avv_scoring import score_frame
from avv_scoring.arg_normalise import resolve_arg_normalise
from avv_scoring.metrics.correctness import Call, calls_match_gold, name_mapper
from avv_scoring.metrics.gold_f1 import gold_args_f1
from avv_scoring.metrics.normalisers import (
    NORMALISERS,
    ArgNormalisation,
    CallNormaliser,
    canonical_date,
    example_outcome,
    normalise_value,
    render_normaliser_table,
)
from avv_scoring.testing import call, records_frame

ROOT = Path(__file__).resolve().parent.parent
DEFAULT = ArgNormalisation()


def _same(a, b, schema, key="value", settings=DEFAULT):
    return normalise_value(a, schema, settings, key) == normalise_value(b, schema, settings, key)


# ------------------------------------------------------------------------------------------ each normaliser


@pytest.mark.parametrize("text, canonical", [
    ("2026-05-26", "2026-05-26"), ("May 26, 2026", "2026-05-26"), ("26 May 2026", "2026-05-26"),
    ("2026/05/26", "2026-05-26"), ("Tue, May 26th 2026", "2026-05-26"), (" sept 3 2026 ", "2026-09-03"),
    ("2026-05-26T10:00:00+02:00", "2026-05-26T08:00:00Z"), ("2026-05-26T08:00Z", "2026-05-26T08:00:00Z"),
    ("2026-05-25T23:30:00-0130", "2026-05-26T01:00:00Z"), ("2026-05-26 10:00", "2026-05-26T10:00:00"),
    ("2026-05-26T10:00:00.5", "2026-05-26T10:00:00.500000"),
    ("05/26/2026", None), ("2026-02-30", None), ("May 2026", None), ("next Tuesday", None), ("2026", None),
])
def test_dates_become_one_canonical_form(text, canonical):
    assert canonical_date(text) == canonical


def test_dates_match_by_meaning_not_spelling():
    string = {"type": "string"}
    assert _same("2026-05-26", "May 26, 2026", string, "date")  # the article's case
    assert _same("2026-05-26T10:00:00+02:00", "2026-05-26T08:00:00Z", string, "start")  # timezone-aware
    assert not _same("2026-05-26T10:00:00", "2026-05-26T08:00:00Z", string)  # local time is not an instant
    assert not _same("2026-05-26", "2026-05-26T00:00:00", string)  # a date is not a date-time
    assert _same("2026-05-26", "May 26, 2026", None)  # no schema known: still a date
    assert normalise_value("May 26, 2026", {"type": "integer"}, DEFAULT) == "May 26, 2026"  # not where a number is
    assert not _same("2026-05-26", "May 26, 2026", string, settings=ArgNormalisation.none())


def test_numbers_only_where_the_schema_says_number():
    assert _same("5", 5, {"type": "integer"}) and _same("5.0", 5, {"type": "number"})
    assert _same(" 5 ", 5.0, {"type": ["number", "null"]}) and _same("1e3", 1000, {"type": "number"})
    assert not _same("5", 5, {"type": "string"}) and not _same("5", 5, None)
    assert normalise_value("five", {"type": "integer"}, DEFAULT) == "five"  # a broken value stays broken
    assert normalise_value("nan", {"type": "number"}, DEFAULT) == "nan"


def test_booleans_only_where_the_schema_says_boolean():
    assert _same("true", True, {"type": "boolean"}) and _same(" FALSE ", False, {"type": "boolean"})
    assert not _same("true", True, {"type": "string"}) and not _same("yes", True, {"type": "boolean"})
    assert not _same("1", True, {"type": "boolean"})


def test_case_and_whitespace_for_enums_and_ids_only():
    enum = {"type": "string", "enum": ["FRA", "JFK"]}
    assert _same("FRA", "fra", enum, "origin")  # the issue's case, on an enum
    assert _same(" FRA", "fra", {"type": "string"}, "airport_code")  # on an ID (by its name)
    for key in ("id", "user_id", "userId", "order_ids", "countryCode"):
        assert _same("AbC", "abc", {"type": "string"}, key), key
    assert _same("A-1", "a-1", {"type": "string", "format": "uuid"}, "ref")
    for key in ("city", "valid", "paid", "name"):
        assert not _same("Berlin", "berlin", {"type": "string"}, key), key
    assert _same("FRA", "fra", {"anyOf": [{"type": "string", "enum": ["FRA"]}, {"type": "null"}]}, "origin")


def test_nested_objects_and_arrays_follow_the_schema():
    schema = {"type": "object", "properties": {
        "legs": {"type": "array", "items": {"type": "object", "properties": {
            "date": {"type": "string"}, "airport_code": {"type": "string"}, "seats": {"type": "integer"}}}}}}
    a = {"legs": [{"date": "May 26, 2026", "airport_code": "FRA", "seats": "2"}]}
    b = {"legs": [{"date": "2026-05-26", "airport_code": "fra", "seats": 2}]}
    assert _same(a, b, schema)
    settings = ArgNormalisation(("dates",), source="test")  # one normaliser only: the others stay exact
    assert normalise_value(a, schema, settings) == {"legs": [{"date": "2026-05-26", "airport_code": "FRA",
                                                             "seats": "2"}]}


def test_the_declared_examples_differ_exactly_and_match_normalised():
    for normaliser in NORMALISERS:
        settings = ArgNormalisation((normaliser.name,), source=normaliser.name)
        outcomes = [example_outcome(ex, settings) for ex in normaliser.examples]
        assert outcomes and all(not exact for exact, _ in outcomes), normaliser.name
        assert outcomes[0] == (False, True), normaliser.name


def test_the_docs_show_the_declared_table():
    assert render_normaliser_table() in (ROOT / "docs" / "scoring.md").read_text(encoding="utf-8"), \
        "docs/scoring.md: paste avv_scoring.metrics.normalisers.render_normaliser_table()"


# -------------------------------------------------------------------------------------------- gold F1

FLIGHTS = {"type": "function", "function": {"name": "search_flights", "parameters": {
    "type": "object", "required": ["origin", "date"],
    "properties": {"origin": {"type": "string", "enum": ["FRA", "JFK", "LHR"]}, "date": {"type": "string"},
                   "cabin": {"type": "string"}, "passengers": {"type": "integer"}}}}}
SCHEMAS = {"search_flights": (repr(FLIGHTS), FLIGHTS["function"]["parameters"])}


def _f1(arguments, expected, settings=DEFAULT):
    norm = CallNormaliser(settings)
    raw = Call.of("search_flights", json.dumps(arguments))
    gold = norm.expected(expected, lambda n: n, SCHEMAS)
    return gold_args_f1([norm.call(raw, SCHEMAS)], gold, name_mapper(None, {}))


GOLD_CALL = ({"name": "search_flights", "arguments": {"origin": ["FRA"], "date": ["2026-05-26"],
                                                      "cabin": ["economy", ""], "passengers": [2]}},)


def test_gold_f1_matches_by_meaning_where_exact_gold_fails():
    sent = {"origin": "fra", "date": "May 26, 2026", "cabin": "economy", "passengers": "2"}
    assert _f1(sent, GOLD_CALL) == 1.0
    assert not calls_match_gold([Call.of("search_flights", json.dumps(sent))], GOLD_CALL, name_mapper(None, {}))
    # exact values: only cabin (weight 1) of 2 + 2 + 1 + 1 matches
    assert _f1(sent, GOLD_CALL, ArgNormalisation.none()) == pytest.approx(2 * 1 / (6 + 6))


def test_a_wrong_required_key_costs_more_than_a_wrong_optional_one():
    right = {"origin": "FRA", "date": "2026-05-26", "cabin": "economy", "passengers": 2}
    wrong_required = {**right, "origin": "JFK"}  # weight 2
    wrong_optional = {**right, "passengers": 3}  # weight 1
    assert _f1(right, GOLD_CALL) == 1.0
    assert _f1(wrong_required, GOLD_CALL) == pytest.approx(2 * 4 / 12)
    assert _f1(wrong_optional, GOLD_CALL) == pytest.approx(2 * 5 / 12)
    assert _f1(wrong_required, GOLD_CALL) < _f1(wrong_optional, GOLD_CALL)


def test_bfcl_possible_answers_in_gold_f1():
    base = {"origin": "FRA", "date": "2026-05-26", "passengers": 2}
    assert _f1(base, GOLD_CALL) == 1.0  # cabin may be left out ("" is acceptable): not a miss
    assert _f1({**base, "cabin": "first"}, GOLD_CALL) == pytest.approx(2 * 5 / 12)  # given, and wrong
    two = ({"name": "search_flights", "arguments": {"origin": ["FRA", "LHR"], "date": ["2026-05-26"]}},)
    assert _f1({"origin": "lhr", "date": "2026-05-26"}, two) == 1.0  # any acceptable value
    missing = {"origin": "FRA"}  # the required date left out: gold 4, predicted 2, matched 2
    assert _f1(missing, two) == pytest.approx(2 * 2 / 6)
    nested = ({"name": "search_flights", "arguments": {"origin": [{"code": ["FRA"], "terminal": [1, ""]}],
                                                        "date": ["2026-05-26"]}},)
    assert _f1({"origin": {"code": "FRA"}, "date": "2026-05-26"}, nested) == 1.0  # object answers key by key


def test_gold_f1_pairs_calls_and_counts_extra_and_missing_calls():
    norm = CallNormaliser(DEFAULT)
    gold = norm.expected(GOLD_CALL * 2, lambda n: n, SCHEMAS)
    right = norm.call(Call.of("search_flights", json.dumps({"origin": "FRA", "date": "2026-05-26",
                                                           "passengers": 2})), SCHEMAS)
    assert gold_args_f1([right, right], gold, name_mapper(None, {})) == 1.0
    assert gold_args_f1([right], gold, name_mapper(None, {})) == pytest.approx(2 * 6 / 18)  # one call dropped
    assert gold_args_f1([], gold, name_mapper(None, {})) == 0.0
    other = Call.of("book", "{}")
    assert gold_args_f1([other], (), name_mapper({"book"}, {})) == 0.0  # a call where none is expected
    assert gold_args_f1([], (), name_mapper(None, {})) == 1.0


# ------------------------------------------------------------------------------- through score_frame

TC = "tool_calls"


def _frame():
    sent = [("1", {"origin": "FRA", "date": "2026-05-26", "passengers": 2},
             {"origin": "fra", "date": "May 26, 2026", "passengers": "2"}),
            ("2", {"origin": "JFK", "date": "2026-06-01"}, {"origin": "JFK", "date": "2026-06-02"})]
    rows = []
    for sid, base, ven in sent:
        rows.append({"sample_id": sid, "vendor": "base", "is_baseline": True, "finish_reason": TC,
                     "tool_calls": [call("search_flights", base)]})
        rows.append({"sample_id": sid, "vendor": "ven", "finish_reason": TC,
                     "tool_calls": [call("search_flights", ven)]})
    return records_frame(rows)


TOOLS = {"1": [FLIGHTS], "2": [FLIGHTS]}
GOLDS = {"1": Gold(True, ({"name": "search_flights", "arguments": {"origin": ["FRA"], "date": ["2026-05-26"],
                                                                   "passengers": [2]}},)),
         "2": Gold(True, ({"name": "search_flights", "arguments": {"origin": ["JFK"], "date": ["2026-06-01"]}},))}


def _vendor(result):
    return result.scores.set_index("vendor").loc["ven"]


@pytest.mark.integration  # over a second in one process: the unit tier is sub-second per test
def test_scores_default_normalises_and_none_keeps_the_exact_figures():
    normal = _vendor(score_frame(_frame(), TOOLS, gold_by_sample=GOLDS))
    exact = _vendor(score_frame(_frame(), TOOLS, gold_by_sample=GOLDS, arg_normalise=ArgNormalisation.none()))
    assert normal["args_match"] == 0.5 and exact["args_match"] == 0.0  # sample 1 differs in spelling only
    assert normal["args_f1"] == pytest.approx((1 + 1 / 2) / 2) and exact["args_f1"] == pytest.approx((0 + 1 / 2) / 2)
    assert normal["gold_args_accuracy"] == exact["gold_args_accuracy"] == 0.0  # exact either way
    assert normal["gold_args_f1"] == pytest.approx((1 + 2 * 2 / 8) / 2)  # sample 2: the required date is wrong
    assert exact["gold_args_f1"] == pytest.approx((0 + 2 * 2 / 8) / 2)


def test_report_and_json_name_the_normalisers(tmp_path):
    from avv_scoring.report.markdown import render_markdown
    from avv_scoring.report.outputs import result_dict

    result = score_frame(_frame(), TOOLS, gold_by_sample=GOLDS)
    assert "dates, numbers, booleans, case (--arg-normalise default)" in render_markdown(result)
    assert "| Gold Args Acc | Gold Args F1 |" in render_markdown(result)
    assert result_dict(result)["arg_normalise"]["normalisers"] == ["dates", "numbers", "booleans", "case"]


def test_arg_normalise_option_values(tmp_path):
    assert resolve_arg_normalise(None) == resolve_arg_normalise("default") == ArgNormalisation()
    assert resolve_arg_normalise("none").names == ()
    good = tmp_path / "norm.yaml"
    good.write_text("normalisers: [dates, case]\nid_keys: '(?:^|_)iata$'\n", encoding="utf-8")
    chosen = resolve_arg_normalise(str(good))
    assert chosen.names == ("dates", "case") and chosen.source == str(good)
    assert _same("FRA", "fra", {"type": "string"}, "origin_iata", chosen)
    assert not _same("FRA", "fra", {"type": "string"}, "airport_code", chosen)
    for text, wanted in (("normalisers: [dates, colours]\n", "unknown colours"), ("speed: 3\n", "unknown key"),
                         ("id_keys: '('\n", "id_keys"), ("normalisers: dates\n", "list of names")):
        bad = tmp_path / "bad.yaml"
        bad.write_text(text, encoding="utf-8")
        with pytest.raises(InputError, match=wanted) as err:
            resolve_arg_normalise(str(bad))
        assert str(bad) in str(err.value)
    with pytest.raises(InputError, match="nor a YAML file"):
        resolve_arg_normalise(str(tmp_path / "missing.yaml"))
