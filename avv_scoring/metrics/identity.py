"""Is it the same model? (scoring layer, model-level metrics): per vendor, do its answers come from the same
distribution as the baseline's on the same prompts? The two-sample test is :mod:`avv_scoring.stats.identity`; this
module declares its columns, reads each vendor's answers off the scored rows and says when a run cannot support the
test. Definitions (docs/scoring.md, "Is it the same model?"):

- **Answers**: the successful items of the model, but those sent at ``temperature`` 0 (records.csv's
  ``temperature``; empty = not set, the vendor's default, kept). Agent tasks count by their first step.
- **identity**: ``untested`` when the run cannot support the test, in this order of reasons — the baseline itself; no
  repeats (no prompt with two answers from each side); temperature 0 (every answer greedy: repeats are not samples);
  the vendor's temperatures differ from the baseline's; too few prompts (fewer than :data:`MIN_PROMPTS` with two
  answers from each side); the baseline's own answers differ between the earlier and the later half of its repeats
  (``identity_self_p`` < α: the baseline drifts, which breaks the test's assumption). Else ``differs`` when
  ``identity_p`` < α (the settings' α, 0.05), else ``same`` — not rejected at this sample size, never proof of
  equality.
- **identity_self_p**, the noise floor: the baseline against itself, each prompt's answers split by time
  (``started_at``, then repeat) into an earlier and a later half — what the noise floor of the agreement metrics
  does with pairs of repeats (:mod:`avv_scoring.metrics.noise_floor`).

The result is informative: no verdict bound reads it (a text column has none).
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Mapping

import numpy as np
import pandas as pd

from avv_scoring.load import is_success, numeric
from avv_scoring.metrics.additive import NAN, Columns
from avv_scoring.metrics.calls import CALLED, CALLS, SIG_CALLS, SIG_TOOLS
from avv_scoring.metrics.declaration import Metric
from avv_scoring.metrics.registry import produces
from avv_scoring.metrics.row_codes import first_rows, identity_codes
from avv_scoring.metrics.uncertainty import ModelTable
from avv_scoring.stats.identity import (
    MIN_ANSWERS,
    PAD,
    Answers,
    alike_share,
    answer_codes,
    answer_lengths,
    distinct_row_codes,
    encode_text,
    halves,
    testable_prompts,
    two_sample_test,
)

#: Prompts with two answers from each side the test needs (fewer: ``untested``).
MIN_PROMPTS = 10
SAME, DIFFERS, UNTESTED = "same", "differs", "untested"

DECLARATIONS: tuple[Metric, ...] = (
    Metric("identity", "Identity", "text", "none", order=880,
           doc="`same` (not rejected), `differs` (identity_p < α: the answers differ from the baseline's) or "
               "`untested` (identity_reason says why); informative, not a verdict bound"),
    Metric("identity_p", "Identity p", "num", "none", order=881,
           doc="p-value of the two-sample test of the vendor's answers against the baseline's: MMD² over text, call "
               "decision, tools, arguments, finish reason and length, labels permuted within each prompt"),
    Metric("identity_reason", "Identity reason", "text", "none", order=882,
           doc="why untested (the baseline, no repeats, temperature 0, temperature differs, too few prompts, the "
               "baseline's halves differ), else what was compared"),
    Metric("identity_prompts", "Identity prompts", "int", "none", order=883,
           doc="prompts the identity test compared (two or more answers from the vendor and from the baseline)"),
    Metric("identity_mmd", "Identity MMD²", "num", "none", order=884,
           doc="the size of the difference: mean over the compared prompts of the unbiased MMD² (about 0 for one "
               "distribution, larger the further apart; the p-value weighs each prompt by its spread)"),
    Metric("identity_alike", "Repeats alike", "rate", "none", order=885,
           doc="share of the vendor's prompts answered in text (two answers or more with content) whose text answers "
               "are all alike in what the test compares: near 1 above temperature 0 means cached or greedy answers"),
    Metric("identity_self_p", "Baseline halves p", "num", "none", order=886,
           doc="the baseline's earlier half of each prompt's answers against its later half (by started_at): the "
               "identity test's noise floor; below α its answers drift and no vendor is tested"),
)


#: The columns :func:`answers_of` and :func:`_time_order` read.
_READ = ("sample_id", "repeat", "started_at", "content", "finish_reason", CALLED, CALLS, SIG_TOOLS, SIG_CALLS)


def _codes(values: pd.Series) -> np.ndarray:
    """One integer per distinct value (a missing value included), for object cells such as call signatures."""
    try:
        return pd.factorize(values, use_na_sentinel=False)[0].astype(np.int64)
    except TypeError:  # an unhashable cell: compared by its text
        return pd.factorize(values.map(repr), use_na_sentinel=False)[0].astype(np.int64)


def _argument_chars(rows: pd.DataFrame) -> np.ndarray:
    """Characters of each row's calls' arguments as sent (0 without calls)."""
    out = np.zeros(len(rows))
    if CALLS not in rows.columns:
        return out
    calls = rows[CALLS].to_numpy(dtype=object)
    called = np.flatnonzero(rows[CALLED].to_numpy(dtype=bool))
    if not len(called):
        return out
    # the annotation shares one list per distinct cell: count each once (the rows keep the lists alive: ids hold)
    codes = identity_codes(calls[called])
    chars = np.array([sum(len(c.raw) for c in cs) if isinstance(cs, (list, tuple)) else 0
                      for cs in calls[called[first_rows(codes)]]], dtype=np.float64)
    out[called] = chars[codes]
    return out


def answers_of(rows: pd.DataFrame) -> Answers:
    """The answers of scored rows (annotated by :func:`avv_scoring.metrics.headline.annotate_tool_calls`), one
    per row, prompts coded by sample id."""
    content = rows["content"].astype("string").fillna("")
    labels = np.stack([rows[CALLED].to_numpy(dtype=bool).astype(np.int64), _codes(rows[SIG_TOOLS]),
                       _codes(rows[SIG_CALLS]), _codes(rows["finish_reason"].astype("string"))], axis=1) \
        if len(rows) else np.zeros((0, 4), np.int64)
    prompt, _ = pd.factorize(rows["sample_id"].astype("string").fillna(""))
    lengths = answer_lengths(content.str.len().to_numpy(dtype=np.float64), _argument_chars(rows))
    # each distinct content encoded once (answers repeat: calls without content, cached answers)
    content_code, contents = pd.factorize(content.to_numpy(dtype=object))
    encoded = encode_text(list(contents))
    text_code = distinct_row_codes(encoded)  # contents alike in their first characters: one code
    # the texts as one row per code, not one per answer (Answers.text_code)
    texts = encoded[first_rows(text_code)]
    return Answers(prompt.astype(np.int64), texts, labels, lengths, text_code[content_code])


def _temperatures(rows: pd.DataFrame) -> np.ndarray:
    if "temperature" not in rows.columns:
        return np.full(len(rows), NAN)
    return numeric(rows["temperature"]).to_numpy(dtype=np.float64)


def _time_order(rows: pd.DataFrame) -> np.ndarray:
    """Each row's rank by (started_at, repeat): the order the baseline's halves are cut in."""
    started = pd.to_datetime(rows["started_at"].astype("object"), utc=True, errors="coerce", format="ISO8601") \
        if "started_at" in rows.columns else pd.Series(pd.NaT, index=rows.index)
    instants = started.to_numpy(dtype="datetime64[ns]").astype(np.int64)  # NaT: the smallest value, first
    repeat = numeric(rows["repeat"]).fillna(0).to_numpy()
    order = np.lexsort((repeat, instants))
    rank = np.empty(len(rows), dtype=np.int64)
    rank[order] = np.arange(len(rows))
    return rank


def _temperature_text(values: np.ndarray) -> str:
    known = sorted(_known(values))
    if not known:
        return "temperature not set (each vendor's default)"
    if len(known) == 1:
        return f"temperature {known[0]:g}"
    return f"temperatures {known[0]:g}–{known[-1]:g}"


def _most_answers(prompt: np.ndarray) -> int:
    return int(np.bincount(prompt).max()) if len(prompt) else 0


def _rng(seed: int, name: str) -> np.random.Generator:
    """The permutations of one test: the settings' seed and the vendor's name, so a vendor's p does not depend on
    which other vendors were scored."""
    return np.random.default_rng([seed, zlib.crc32(name.encode("utf-8"))])


def _untested(reason: str, alike: float = NAN, self_p: float = NAN) -> Columns:
    return {"identity": UNTESTED, "identity_p": NAN, "identity_reason": reason, "identity_prompts": 0,
            "identity_mmd": NAN, "identity_alike": alike, "identity_self_p": self_p}


@produces(*DECLARATIONS)
def identity(model_table: ModelTable) -> dict[str, Columns]:
    """Every identity column of each vendor of one model (definitions in the module docstring)."""
    table = model_table
    rows = table.records
    vendors = list(table.scores) or list(dict.fromkeys(rows["vendor"].astype(str)))
    ok = is_success(rows).to_numpy(dtype=bool)
    temperature = _temperatures(rows)
    kept = np.flatnonzero(ok & ~(temperature == 0))  # an empty temperature is the vendor's default: kept
    # the columns the answers and their time order are read from: a copy of these, not of every column
    kept_rows = rows[[c for c in _READ if c in rows.columns]].iloc[kept]
    answers = answers_of(kept_rows)
    vendor_of = rows["vendor"].astype(str).to_numpy()
    prompt_of, _ = pd.factorize(rows["sample_id"].astype("string").fillna(""))
    alpha, seed = table.settings.alpha, table.settings.seed
    base = vendor_of[kept] == table.baseline
    written = answers.first_units() != PAD  # with content: calls with fixed arguments are alike at any temperature
    codes = answer_codes(answers)
    self_p = _baseline_halves(answers, base, _time_order(kept_rows), seed)
    out: dict[str, Columns] = {}
    for vendor in vendors:
        mine = vendor_of[kept] == vendor
        alike = alike_share(answers.prompt[mine & written], codes[mine & written])[0]
        if vendor == table.baseline:
            out[vendor] = _untested("the baseline (its own halves: identity_self_p)", alike, self_p)
            continue
        answered = {side: prompt_of[ok & (vendor_of == name)] for side, name in (("base", table.baseline),
                                                                              ("vendor", vendor))}
        reason = _why_untested(answered, answers, base, mine, temperature[kept])
        if reason is not None:
            out[vendor] = _untested(reason, alike, self_p)
            continue
        both = np.flatnonzero(base | mine)
        outcome = two_sample_test(answers.take(both), mine[both], _rng(seed, vendor))
        assert outcome is not None  # _why_untested counted its prompts
        drifts = not math.isnan(self_p) and self_p < alpha
        compared = (f"{outcome.prompts} prompts, {outcome.answers[0]} baseline and {outcome.answers[1]} vendor "
                    f"answers, {_temperature_text(temperature[kept][both])}")
        drift = (f"the baseline's own answers differ between the earlier and the later half of its repeats (p = "
                 f"{self_p:.3g}): it drifts, which breaks the test's assumption")
        out[vendor] = {"identity": UNTESTED if drifts else DIFFERS if outcome.p < alpha else SAME,
                       "identity_p": outcome.p, "identity_reason": drift if drifts else compared,
                       "identity_prompts": outcome.prompts, "identity_mmd": outcome.statistic,
                       "identity_alike": alike, "identity_self_p": self_p}
    return out


def _baseline_halves(answers: Answers, base: np.ndarray, time_rank: np.ndarray, seed: int) -> float:
    """``identity_self_p``: the baseline's earlier half of each prompt's answers against its later half; missing
    with fewer than :data:`MIN_PROMPTS` prompts of 2 × :data:`MIN_ANSWERS` answers."""
    index = np.flatnonzero(base)
    later = halves(answers.prompt[index], time_rank[index])
    if testable_prompts(answers.prompt[index], later) < MIN_PROMPTS:
        return NAN
    outcome = two_sample_test(answers.take(index), later, _rng(seed, "baseline halves"))
    return NAN if outcome is None else outcome.p


def _why_untested(answered: Mapping[str, np.ndarray], answers: Answers, base: np.ndarray, mine: np.ndarray,
                  temperature: np.ndarray) -> str | None:
    """Why this vendor cannot be tested against the baseline (the module docstring's order; the baseline's halves
    are judged after the test), or None. ``answered``: the prompt of each successful row of each side, whatever
    its temperature; the other arrays are over the answers kept."""
    if min(_most_answers(prompts) for prompts in answered.values()) < MIN_ANSWERS:
        return "no repeats: one answer per prompt (run with --avv-repeats 10 or more, at a temperature above 0)"
    if min(_most_answers(answers.prompt[base]), _most_answers(answers.prompt[mine])) < MIN_ANSWERS:
        return "temperature 0: greedy answers, the repeats are not samples (set --avv-temperature, e.g. 0.7)"
    theirs, own = _known(temperature[base]), _known(temperature[mine])
    if theirs and own and theirs != own:
        return (f"temperature differs from the baseline's ({', '.join(f'{t:g}' for t in sorted(own))} against "
                f"{', '.join(f'{t:g}' for t in sorted(theirs))})")
    both = base | mine
    prompts = testable_prompts(answers.prompt[both], mine[both])
    if prompts < MIN_PROMPTS:
        return (f"too few prompts: {prompts} with {MIN_ANSWERS} or more answers from the vendor and from the "
                f"baseline (needs {MIN_PROMPTS})")
    return None


def _known(values: np.ndarray) -> frozenset[float]:
    """The distinct temperatures of ``values`` (missing left out)."""
    return frozenset(np.unique(np.round(values[~np.isnan(values)], 6)).tolist())


__all__ = ["DECLARATIONS", "DIFFERS", "MIN_PROMPTS", "SAME", "UNTESTED", "answers_of", "identity"]
