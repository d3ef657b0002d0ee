"""The conformance suite, in process (no socket, no Locust): the probes built from the shipped requests and the demo
samples, and each check judged on the simulator's answers read by the harness's own readers
(:func:`tests.sim_records.probe_records`) — every knob that breaks a check fails exactly that check, a vendor that
honours everything fails none, a check the baseline fails is not applicable, and Messages / Responses vendors get
the checks in their own terms."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from avv_core.samples import load_samples
from avv_harness.run.options import DEFAULT_SAMPLES
from avv_scoring.conformance.checks import BY_NAME, CHECKS, FAIL, NOT_APPLICABLE, PASS, render_check_table
from avv_scoring.conformance.suite import build_probes, conformance_table, failures_by_vendor, write_probe_file
from avv_scoring.probes import PROBE_KEY, Probe, fixed_requests, probes_of
from avv_scoring.score import score_frame
from tests.sim_records import probe_records

FAST = {"ttft_ms": 0, "tokens_per_s": 10_000, "output_tokens": 40}
#: knob → the checks a vendor with it (and nothing else) fails
BREAKS: dict[str, tuple[dict[str, object], set[str]]] = {
    "tool_choice": ({"ignore_tool_choice": True}, {"tool_choice_required", "tool_choice_named", "tool_choice_none"}),
    "parallel": ({"ignore_parallel_tool_calls": True}, {"parallel_tool_calls_false"}),
    "max_tokens": ({"ignore_max_tokens": True}, {"max_tokens"}),
    "stop": ({"ignore_stop": True}, {"stop"}),
    "response_format": ({"ignore_response_format": True},
                        {"response_format_json_object", "response_format_json_schema"}),
    "clamps": ({"clamp_out_of_range": True}, {"out_of_range_rejected"}),
    "overbills": ({"prompt_tokens_factor": 1.25}, {"prompt_tokens_match"}),
    # reporting 1.3× the completion tokens also bills past max_tokens (21 of a 16-token cap): both fail
    "overcounts": ({"completion_tokens_factor": 1.3}, {"completion_tokens_match", "max_tokens"}),
    "other_calls": ({"stream_other_calls": True}, {"stream_parity"}),
    "same_ids": ({"repeat_tool_call_ids": True}, {"tool_call_ids"}),
    "no_usage": ({"omit_usage": True}, {"usage_reported"}),
    "faithful": ({"seed": 1}, set()),
}


@pytest.fixture(scope="module")
def probe_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The probe file a conformance run of the demo samples writes."""
    return Path(write_probe_file(load_samples(DEFAULT_SAMPLES), tmp_path_factory.mktemp("probes")).path)


def results(probe_file: Path, profiles: dict[str, dict[str, object]], baseline: str = "reference",
            endpoints: dict[str, str] | None = None, tolerance: float = 0.05) -> pd.DataFrame:
    records = probe_records(profiles, baseline, probe_file, endpoints)
    probes = probes_of(load_samples(probe_file).samples)
    return conformance_table(records, probes, {"m": baseline}, lambda model: tolerance)


def outcome(table: pd.DataFrame, vendor: str, check: str) -> tuple[str, str]:
    (row,) = table[(table["vendor"] == vendor) & (table["check"] == check)].to_dict("records")
    return row["result"], row["evidence"]


def test_the_probes_cover_every_check_on_the_fixed_requests_and_the_first_samples(probe_file: Path) -> None:
    samples = load_samples(probe_file)
    probes = probes_of(samples.samples)
    assert len(probes) == len(samples.samples) == len({s.sample_id for s in samples.samples})
    checks = {p.check for p in probes.values()}
    assert checks == {c.name for c in CHECKS if not c.suite_wide} | {"tool_call_ids"}
    bases = {p.base for p in probes.values()}
    assert {b.name for b in fixed_requests()} <= bases
    assert {"sample:1", "sample:2", "sample:3"} <= bases and "sample:4" not in bases  # SOURCE_SAMPLES = 3
    parity = [p for p in probes.values() if p.check == "stream_parity"]
    assert {p.variant: p.streamed for p in parity} == {"streamed": True, "whole": False}
    assert all(p.body["temperature"] == 0 for p in probes.values() if p.check != "out_of_range_rejected")
    assert {(p.variant, p.body.get("temperature"), p.body.get("top_p")) for p in probes.values()
            if p.check == "out_of_range_rejected"} == {("temperature", 2.5, None), ("top_p", None, 1.5)}
    named = probes["tool_choice_named:weather"]
    assert named.body["tool_choice"] == {"type": "function", "function": {"name": "search_web"}}
    assert named.gold["expected_calls"][0]["name"] == "get_weather"  # under auto it would call get_weather
    assert all(PROBE_KEY not in p.body for p in probes.values())  # metadata: never sent
    # the same inputs give the same file, kept where it is
    again = write_probe_file(load_samples(DEFAULT_SAMPLES), probe_file.parent)
    assert again.path == str(probe_file) and again.sha256 == samples.sha256
    assert [p.line() for p in build_probes(load_samples(DEFAULT_SAMPLES).samples)] == [
        Probe.of(s).line() for s in samples.samples]  # type: ignore[union-attr]


@pytest.mark.integration  # over a second in one process: the unit tier is sub-second per test
def test_each_knob_fails_exactly_its_checks_and_a_faithful_vendor_none(probe_file: Path) -> None:
    profiles = {"reference": FAST, **{name: {**FAST, **knobs} for name, (knobs, _) in BREAKS.items()}}
    table = results(probe_file, profiles)
    assert list(table.columns) == ["model", "vendor", "check", "result", "evidence"]
    failed = {vendor: set(part.loc[part["result"] == FAIL, "check"]) for vendor, part in table.groupby("vendor")}
    assert failed == {"reference": set(), **{name: checks for name, (_, checks) in BREAKS.items()}}
    assert failures_by_vendor(table)[("m", "tool_choice")] == 3
    for check in CHECKS:  # the faithful vendor passes every check: none of them is a false alarm
        assert outcome(table, "faithful", check.name)[0] == PASS, check.name
        assert outcome(table, "reference", check.name)[0] == PASS, check.name
    # the evidence names the probe and what came back
    result, evidence = outcome(table, "tool_choice", "tool_choice_none")
    assert "tool_choice_none:weather" in evidence and "get_weather" in evidence
    assert "accepted (HTTP 200" in outcome(table, "clamps", "out_of_range_rejected")[1]
    assert "median 1.250" in outcome(table, "overbills", "prompt_tokens_match")[1]
    assert "other calls" in outcome(table, "other_calls", "stream_parity")[1]
    assert "ids repeat" in outcome(table, "same_ids", "tool_call_ids")[1]
    assert "completion_tokens 40 > " not in outcome(table, "max_tokens", "max_tokens")[1]  # it is the story's cut
    assert "max_tokens 16" in outcome(table, "max_tokens", "max_tokens")[1]
    assert "holds 'the'" in outcome(table, "stop", "stop")[1] or "holds 'and'" in outcome(table, "stop", "stop")[1]
    # without usage the token checks have nothing to compare: not applicable, never a pass
    assert outcome(table, "no_usage", "prompt_tokens_match")[0] == NOT_APPLICABLE


def test_a_check_the_baseline_fails_is_not_applicable(probe_file: Path) -> None:
    """The baseline's behaviour is the reference: its own result is not_applicable (never fail), and the other
    vendors', whether they honour the check or not, too."""
    table = results(probe_file, {"reference": {**FAST, "clamp_out_of_range": True, "ignore_stop": True},
                                 "honest": FAST, "clamps": {**FAST, "clamp_out_of_range": True}})
    for vendor in ("reference", "honest", "clamps"):
        for check in ("out_of_range_rejected", "stop"):
            result, evidence = outcome(table, vendor, check)
            assert result == NOT_APPLICABLE, (vendor, check)
            assert "the baseline does not honour it" in evidence
    assert not (table["result"] == FAIL).any()


def test_messages_and_responses_vendors_get_the_checks_in_their_own_terms(probe_file: Path) -> None:
    endpoints = {"messages": "messages", "responses": "responses", "responses_bad": "responses",
                 "messages_bad": "messages"}
    table = results(probe_file, {"reference": FAST, "messages": FAST, "responses": FAST,
                                 "responses_bad": {**FAST, "ignore_tool_choice": True, "stream_other_calls": True},
                                 "messages_bad": {**FAST, "ignore_parallel_tool_calls": True, "ignore_stop": True}},
                    endpoints=endpoints)
    # what the format cannot carry is not sent: not applicable, with the conversion's reason
    for check in ("response_format_json_object", "response_format_json_schema"):
        result, evidence = outcome(table, "messages", check)
        assert result == NOT_APPLICABLE and "not sent (messages" in evidence
    result, evidence = outcome(table, "responses", "stop")
    assert result == NOT_APPLICABLE and "not sent (responses" in evidence
    assert outcome(table, "responses", "response_format_json_schema")[0] == PASS  # text.format
    for vendor in ("messages", "responses"):
        failing = table[(table["vendor"] == vendor) & (table["result"] == FAIL)]
        assert failing.empty, failing.to_dict("records")
        for check in ("tool_choice_required", "tool_choice_named", "tool_choice_none", "parallel_tool_calls_false",
                      "max_tokens", "stream_parity", "out_of_range_rejected", "usage_reported", "tool_call_ids"):
            assert outcome(table, vendor, check)[0] == PASS, (vendor, check)
    bad = table[table["result"] == FAIL]
    assert set(bad.loc[bad["vendor"] == "responses_bad", "check"]) == {
        "tool_choice_required", "tool_choice_named", "tool_choice_none", "stream_parity"}
    assert set(bad.loc[bad["vendor"] == "messages_bad", "check"]) == {"parallel_tool_calls_false", "stop"}


@pytest.mark.integration  # over a second in one process: the unit tier is sub-second per test
def test_the_verdict_joins_the_conformance_failures(probe_file: Path) -> None:
    """Scored alone, a conformance run judges conformance_failures ≤ 0 and nothing else: the vendor with a failed
    check fails its verdict, the others pass whatever their probes' success rate (the out-of-range probes fail on
    purpose)."""
    records = probe_records({"reference": FAST, "faithful": FAST, "overbills": {**FAST, "prompt_tokens_factor": 1.25}},
                            "reference", probe_file)
    samples = load_samples(probe_file)
    result = score_frame(records, {s.sample_id: s.tools for s in samples.samples}, probes=probes_of(samples.samples))
    scores = result.scores.set_index("vendor")
    assert scores.loc["overbills", "verdict"] == "FAIL"
    assert "conformance_failures 1 > 0" in scores.loc["overbills", "verdict_reasons"]
    assert list(scores.loc[["reference", "faithful"], "verdict"]) == ["PASS", "PASS"]
    assert list(scores["conformance_failures"]) == [0, 0, 1] or sorted(scores["conformance_failures"]) == [0, 0, 1]
    assert (scores["success_rate"] < 1).all()  # the 4xx answers to the out-of-range probes
    assert any(s.startswith("success_rate (a conformance run") for s in result.not_judged["m"])
    assert not result.conformance.empty and set(result.conformance["vendor"]) == {"reference", "faithful", "overbills"}


@pytest.mark.integration  # over a second in one process: the unit tier is sub-second per test
def test_verify_rows_are_scored_without_the_probes_and_the_bound_is_judged(probe_file: Path) -> None:
    """A verify run scored together with a conformance run: the metrics are the samples' (the probes are left out of
    them), and conformance_failures is judged."""
    from tests.sim_records import sim_records, tools_by_sample

    verify, _ = sim_records({"reference": {}, "faithful": {"seed": 1}}, "reference", samples=6, repeats=1)
    probes = probe_records({"reference": FAST, "faithful": {**FAST, "ignore_stop": True}}, "reference", probe_file)
    samples = load_samples(probe_file)
    tools = {**tools_by_sample(6), **{s.sample_id: s.tools for s in samples.samples}}
    result = score_frame(pd.concat([verify, probes], ignore_index=True), tools, probes=probes_of(samples.samples))
    scores = result.scores.set_index("vendor")
    assert list(scores["items"]) == [6, 6]  # the verify rows only
    assert scores.loc["faithful", "conformance_failures"] == 1 and scores.loc["faithful", "verdict"] == "FAIL"
    # 6 samples decide no rate bound yet; the probes hold, so nothing about conformance is said against it
    assert scores.loc["reference", "verdict"] == "INCONCLUSIVE"
    assert "conformance_failures" not in str(scores.loc["reference", "verdict_reasons"])
    assert "conformance_failures" not in " ".join(result.not_judged.get("m", ()))
    # without probes the bound is not judged and not mentioned
    alone = score_frame(verify, tools_by_sample(6))
    assert alone.scores["conformance_failures"].isna().all() and not alone.not_judged


def test_every_check_is_documented() -> None:
    """docs/how-to/conformance.md's table is rendered from the declarations (python -m avv_harness.docs …)."""
    from avv_harness.docs import block

    table = render_check_table()
    docs = (Path(__file__).resolve().parent.parent / "docs" / "how-to" / "conformance.md").read_text(encoding="utf-8")
    assert block(docs, "conformance-checks") == table, \
        "out of date: python -m avv_harness.docs docs/how-to/conformance.md"
    for check in CHECKS:
        assert check.why and check.terms and f"`{check.name}`" in table
    assert set(BY_NAME) == {c.name for c in CHECKS}


def test_what_a_vendor_is_not_sent_and_what_a_conformance_run_refuses() -> None:
    import avv_harness.locust.plugin  # noqa: F401  (registers the --avv-* options)
    from avv_core.errors import InputError
    from avv_harness.run.options import RunOptions, preparse_options
    from avv_scoring.conformance.suite import not_sent_reason

    named = {"messages": [{"role": "user", "content": "x"}], "tool_choice": "required"}
    assert not_sent_reason(named, "chat") is None and not_sent_reason(named, "messages") is None
    assert "raw mode renders the prompt locally, tool_choice" in not_sent_reason(named, "completions")
    assert "stop" in not_sent_reason({**named, "stop": ["x"]}, "responses")
    assert "response_format" in not_sent_reason({**named, "response_format": {"type": "json_object"}}, "messages")
    assert RunOptions.from_parsed(preparse_options(["--avv-mode", "conformance"])).is_conformance
    for extra, flag in ((["--avv-repeats", "2"], "--avv-repeats"), (["--avv-temperature", "0.5"], "--avv-temperature"),
                        (["--avv-max-tokens", "64"], "--avv-max-tokens"), (["--avv-settle"], "--avv-settle")):
        with pytest.raises(InputError, match=flag):
            RunOptions.from_parsed(preparse_options(["--avv-mode", "conformance", *extra]))
