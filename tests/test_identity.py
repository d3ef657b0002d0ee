"""Is it the same model? The two-sample identity test (avv_scoring/stats/identity.py), its columns
(avv_scoring/metrics/identity.py: same / differs / untested and why), its report section in the three renderings, and
— on answers drawn by the simulator's pure decisions (no HTTP) — its false-alarm rate on twins and its power against
the known shift ``answer_shift_rate`` (bench/identity.py's runs)."""

from __future__ import annotations

import itertools
import math
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from avv_scoring.metrics.identity import MIN_PROMPTS
from avv_scoring.metrics.uncertainty import StatsSettings
from avv_scoring.report.format import palette_for
from avv_scoring.report.markdown import render_markdown
from avv_scoring.report.section import html_sections
from avv_scoring.report.sections.identity import SECTION
from avv_scoring.report.terminal import render_tables
from avv_scoring.score import score_frame
from avv_scoring.stats.identity import (
    PAD,
    PARTS,
    TEXT_CHARS,
    Answers,
    _subsets,
    alike_share,
    answer_codes,
    encode_text,
    halves,
    kernel,
    permutation_sd,
    two_sample_test,
)
from tests.sim_records import sim_records, tools_by_sample

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import identity as bench  # type: ignore[import-not-found]  # noqa: E402

KNOBS = {"sampling_rate": 0.1, "self_flip_rate": 0.05, "output_tokens": 24}
NO_BOOTSTRAP = StatsSettings(resamples=0)


def _answers(texts: list[str], prompt: list[int], labels: list[list[int]] | None = None,
             lengths: list[float] | None = None) -> Answers:
    n = len(texts)
    return Answers(np.array(prompt, dtype=np.int64), encode_text(texts),
                   np.array(labels if labels is not None else [[0, 0, 0, 0]] * n, dtype=np.int64),
                   np.array(lengths if lengths is not None else [math.log1p(len(t)) for t in texts]))


# ------------------------------------------------------------------------------------------ the statistics


def test_text_is_padded_and_the_kernel_is_the_mean_of_its_parts():
    codes = encode_text(["ab", "é" * 150, "a😀b"])
    assert codes.shape == (3, TEXT_CHARS) and codes[0, 2] == PAD and codes[1, -1] == ord("é")
    assert codes[2, :4].tolist() == [ord("a"), 0xD83D, 0xDE00, ord("b")] and codes[2, 4] == PAD  # 😀: two units
    a = _answers(["abcd", "abxy", "abcd"], [0, 0, 0], [[1, 5, 7, 2], [1, 5, 8, 2], [0, 5, 7, 2]],
                 [math.log1p(4), math.log1p(9), math.log1p(4)])
    k = kernel(a, np.array([[0, 1, 2]]))[0]
    # 0 vs 1: text 98 of 100 positions (2 differ), decision, tools and finish equal, calls differ, length e^-ln(10/5)
    assert k[0, 1] == pytest.approx((0.98 + 1 + 1 + 0 + 1 + 0.5) / len(PARTS), abs=1 / 4096)
    assert k[0, 2] == pytest.approx((1 + 0 + 1 + 1 + 1 + 1) / len(PARTS), abs=1 / 4096)
    assert np.allclose(k, k.T) and (np.diag(k) == 0).all()


def _exact_p(answers: Answers, second: np.ndarray) -> float:
    """The permutation p-value by enumerating every within-prompt relabelling (tiny inputs only), each prompt's
    MMD²_u divided by its standard deviation over its own relabellings."""
    per_prompt = []
    for p in sorted(set(answers.prompt.tolist())):
        index = np.flatnonzero(answers.prompt == p)
        k = kernel(answers, index[None, :])[0].astype(np.float64)
        n, m = int((~second[index]).sum()), int(second[index].sum())

        def mmd(first: np.ndarray, k: np.ndarray = k, n: int = n, m: int = m) -> float:
            return (k[np.ix_(first, first)].sum() / (n * (n - 1)) + k[np.ix_(~first, ~first)].sum() / (m * (m - 1))
                    - 2 * k[np.ix_(first, ~first)].sum() / (n * m))

        values = []
        for chosen in itertools.combinations(range(len(index)), n):
            first = np.zeros(len(index), dtype=bool)
            first[list(chosen)] = True
            values.append(mmd(first))
        sd = float(np.std(values))
        per_prompt.append((np.array(values) / sd, mmd(~second[index]) / sd))
    observed = sum(own for _, own in per_prompt)
    totals = np.array([sum(combo) for combo in itertools.product(*(values for values, _ in per_prompt))])
    return float(np.mean(totals >= observed - 1e-9))


def test_the_p_value_is_the_stratified_permutation_p_value():
    """Against every relabelling within each prompt (2 prompts of 3 + 3 answers: 400 of them), each prompt weighed by
    the standard deviation :func:`permutation_sd` computes in closed form."""
    rng = np.random.default_rng(3)
    texts = ["".join(rng.choice(list("abc"), 12)) for _ in range(12)]
    answers = _answers(texts, [0] * 6 + [1] * 6)
    second = np.array([0, 0, 0, 1, 1, 1] * 2, dtype=bool)
    exact = _exact_p(answers, second)
    outcome = two_sample_test(answers, second, np.random.default_rng(0), permutations=20_000, stop_after=10**9)
    assert outcome is not None and outcome.prompts == 2 and outcome.answers == (6, 6)
    assert outcome.p == pytest.approx(exact, abs=0.01)
    slots = np.array([[0, 1, 2, 3, 4, 5], [6, 7, 8, 9, 10, 11]])
    k0 = kernel(answers, slots)
    relabelled = [[_mmd_of(k0[p], list(c)) for c in itertools.combinations(range(6), 3)] for p in (0, 1)]
    assert permutation_sd(k0, 3, 3) == pytest.approx(np.std(relabelled, axis=1), rel=1e-4)
    stopped = two_sample_test(answers, second, np.random.default_rng(0))  # sequential: stops at the 20th reach
    assert stopped is not None and stopped.permutations < 500 and stopped.p == pytest.approx(20 / stopped.permutations)


def _mmd_of(k: np.ndarray, first: list[int]) -> float:
    x = np.zeros(len(k), dtype=bool)
    x[first] = True
    n, m = int(x.sum()), int((~x).sum())
    return float(k[np.ix_(x, x)].sum() / (n * (n - 1)) + k[np.ix_(~x, ~x)].sum() / (m * (m - 1))
                 - 2 * k[np.ix_(x, ~x)].sum() / (n * m))


def test_every_labelling_is_drawn_alike_and_too_few_answers_are_not_tested():
    table = _subsets(6, 3)
    assert table is not None and len(table) == math.comb(6, 3) == len(set(table.tolist()))
    assert all(bin(int(mask)).count("1") == 3 for mask in table)
    assert _subsets(40, 20) is None  # too many: drawn by shuffling instead
    one_each = _answers(["a", "b", "c", "d"], [0, 0, 1, 1])
    assert two_sample_test(one_each, np.array([0, 1, 0, 1], dtype=bool), np.random.default_rng(0)) is None


def test_shuffled_labels_for_many_repeats_give_the_same_answer():
    """More than 22 answers per prompt: labels drawn by shuffling, not from the subset table; identical answers on
    both sides are never flagged and clearly different ones always are."""
    same = _answers(["x" * 20] * 48, [0] * 24 + [1] * 24)
    side = np.array(([0] * 12 + [1] * 12) * 2, dtype=bool)
    assert two_sample_test(same, side, np.random.default_rng(0)).p == 1.0
    apart = _answers(["x" * 20] * 12 + ["y" * 20] * 12 + ["x" * 20] * 12 + ["y" * 20] * 12, [0] * 24 + [1] * 24)
    outcome = two_sample_test(apart, side, np.random.default_rng(0))
    assert outcome.p == pytest.approx(1 / 501) and outcome.permutations == 500


def test_halves_cut_each_prompt_by_time_and_alike_counts_identical_answers():
    later = halves(np.array([1, 1, 1, 1, 2, 2, 2]), np.array([4, 3, 2, 1, 1, 2, 3]))
    assert later.tolist() == [True, True, False, False, False, True, True]
    cached = _answers(["same"] * 3 + ["a", "b", "c"] + ["one"], [0, 0, 0, 1, 1, 1, 2])
    codes = answer_codes(cached)
    assert len(set(codes.tolist())) == 5 and alike_share(cached.prompt, codes) == (0.5, 2)  # prompt 2: one answer


# ------------------------------------------------------------------------------- the columns and the report


def _score(profiles: dict, samples: int, repeats: int, temperature: float | None = 0.7, **kw):
    records, _ = sim_records(profiles, "base", samples, repeats, answers=True, temperature=temperature, **kw)
    return score_frame(records, tools_by_sample(samples), stats=NO_BOOTSTRAP)


def _row(result, vendor: str) -> dict:
    return next(r for r in result.scores.to_dict("records") if r["vendor"] == vendor)


@pytest.mark.integration  # over a second in one process: the unit tier is sub-second per test
def test_twins_are_same_and_another_word_distribution_differs():
    result = _score({"base": {**KNOBS, "seed": 1}, "twin": {**KNOBS, "seed": 2},
                     "other": {**KNOBS, "seed": 3, "answer_shift_rate": 1.0}}, 20, 4)
    twin, other, base = _row(result, "twin"), _row(result, "other"), _row(result, "base")
    assert twin["identity"] == "same" and twin["identity_p"] >= 0.05 and twin["identity_prompts"] == 20
    assert other["identity"] == "differs" and other["identity_p"] < 0.01
    assert other["identity_mmd"] > twin["identity_mmd"]
    assert twin["identity_reason"] == "20 prompts, 80 baseline and 80 vendor answers, temperature 0.7"
    assert base["identity"] == "untested" and base["identity_reason"].startswith("the baseline")
    assert base["identity_self_p"] >= 0.05 and twin["identity_self_p"] == base["identity_self_p"]
    assert "identity" not in str(twin["verdict_reasons"])  # informative: no verdict bound reads it
    parts = SECTION.parts(result)
    assert parts is not None and SECTION in html_sections()  # report.html renders it (its figures cost seconds)
    html = SECTION.html(parts, palette_for(["base", "twin", "other"]))
    md, term = render_markdown(result), render_tables(result)
    for text in (md, html, term):
        assert "answers differ from the baseline&#x27;s" in text or "answers differ from the baseline's" in text
        assert "another model" not in text and "no drift seen" in text
    assert html.startswith("<h3>m</h3>") and "<td>differs</td>" in html
    assert "| other | differs |" in md


@pytest.mark.parametrize(("kind", "why"), [
    ("no repeats", "no repeats: one answer per prompt"),
    ("temperature 0", "temperature 0: greedy answers"),
    ("too few prompts", f"too few prompts: 4 with 2 or more answers from the vendor and from the baseline (needs "
                        f"{MIN_PROMPTS})"),
])
@pytest.mark.integration  # over a second in one process: the unit tier is sub-second per test
def test_untested_says_why(kind, why):
    samples, repeats, temperature = {"no repeats": (12, 1, 0.7), "temperature 0": (12, 3, 0.0),
                                     "too few prompts": (4, 3, 0.7)}[kind]
    result = _score({"base": {**KNOBS, "seed": 1}, "v": {**KNOBS, "seed": 2}}, samples, repeats, temperature)
    row = _row(result, "v")
    assert row["identity"] == "untested" and row["identity_reason"].startswith(why)
    assert math.isnan(row["identity_p"])
    md = render_markdown(result)
    assert f"Not tested: {why}" in md
    assert ("same model?" in render_tables(result)) is (kind != "no repeats")  # the default run's terminal: as before


def test_a_vendor_at_another_temperature_is_not_compared():
    records, _ = sim_records({"base": {**KNOBS, "seed": 1}, "v": {**KNOBS, "seed": 2}}, "base", 12, 3, answers=True,
                             temperature=0.7)
    records.loc[records["vendor"] == "v", "temperature"] = 1.0
    result = score_frame(records, tools_by_sample(12), stats=NO_BOOTSTRAP)
    assert _row(result, "v")["identity_reason"] == "temperature differs from the baseline's (1 against 0.7)"


def test_a_drifting_baseline_breaks_the_test_and_the_report_says_so():
    """The baseline's later half of repeats answers from another word distribution: its halves differ, so no vendor is
    tested against it (the twin of its first half is untested, not flagged)."""
    early, _ = sim_records({"base": {**KNOBS, "seed": 1}, "v": {**KNOBS, "seed": 2}}, "base", 20, 3, answers=True,
                           temperature=0.7)
    late, _ = sim_records({"base": {**KNOBS, "seed": 1, "answer_shift_rate": 1.0}, "v": {**KNOBS, "seed": 2}}, "base",
                          20, 6, answers=True, temperature=0.7)
    late = late[late["repeat"] > 3]
    records = pd.concat([early, late], ignore_index=True)
    result = score_frame(records, tools_by_sample(20), stats=NO_BOOTSTRAP)
    base, vendor = _row(result, "base"), _row(result, "v")
    assert base["identity_self_p"] < 0.05
    assert vendor["identity"] == "untested" and "the baseline's own answers differ" in vendor["identity_reason"]
    assert "Not tested: the baseline's own answers differ between the earlier and the later half" in \
        render_markdown(result)


def test_a_cached_baseline_shows_as_alike_repeats():
    """The baseline answers every repeat alike (no sampling, as a cache would); a sampling vendor differs from it, and
    the report points at the baseline's alike repeats."""
    result = _score({"base": {**KNOBS, "sampling_rate": 0.0, "seed": 1}, "v": {**KNOBS, "sampling_rate": 0.5,
                                                                             "seed": 2}}, 20, 4)
    base, vendor = _row(result, "base"), _row(result, "v")
    assert base["identity_alike"] == 1.0 and vendor["identity_alike"] < 0.5
    assert vendor["identity"] == "differs"
    assert "The baseline's repeats are all alike on 100% of its prompts" in render_markdown(result)


def test_failed_items_are_left_out_never_counted_alike():
    records, _ = sim_records({"base": {**KNOBS, "seed": 1}, "v": {**KNOBS, "seed": 2}}, "base", 12, 3, answers=True,
                             temperature=0.7)
    failed = (records["vendor"] == "v") & (records["repeat"] == 3)
    records.loc[failed, "status"] = "failed"
    records.loc[failed, "content"] = ""
    result = score_frame(records, tools_by_sample(12), stats=NO_BOOTSTRAP)
    row = _row(result, "v")
    assert row["identity"] == "same" and row["identity_reason"].startswith("12 prompts, 36 baseline and 24 vendor")


# ------------------------------------------------------------------------ calibration and power (bench runs)


@pytest.mark.integration  # seconds of work: 200 seeded runs of 200 answers each, in-process
def test_twins_are_flagged_at_most_alpha():
    """Issue 38's bar: twins (one profile under two seeds) flagged in ≤ 5 % of 200 seeded runs at α = 0.05."""
    flagged, runs = bench.flagged_share(200, 20, 5, {}, first_run=10_000)
    assert runs == 200 and flagged / runs <= 0.05


@pytest.mark.integration  # seconds of work: 50 seeded runs of 1,000 answers each, in-process
def test_the_documented_shift_is_flagged_at_least_80_percent():
    """docs/scoring.md's documented point: a 30 % shift (answer_shift_rate 0.3) at 50 prompts × 10 repeats is flagged
    in ≥ 80 % of runs (bench/identity.py: 99 % of 100 runs)."""
    flagged, runs = bench.flagged_share(50, 50, 10, {"answer_shift_rate": 0.3}, first_run=30_000)
    assert flagged / runs >= 0.80


@pytest.mark.integration  # seconds of work: a 180-record run scored in-process
def test_the_bench_cpu_part_runs_and_names_its_share(capsys):
    """bench/identity.py's CPU part on a small run (the lead measures the 1,000 × 10 × 5 figure on a quiet machine):
    it scores the run, times the identity columns against the whole and prints both."""
    bench.cpu_share(12, 3, 5, 1.0)
    out = capsys.readouterr().out
    assert "180 records (12 prompts × 3 repeats × 5 vendors" in out and "of which the identity columns" in out
    assert out.count("differs") == 3 and "same" in out
