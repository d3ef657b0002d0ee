"""Metrics of the verifiers people already run (scoring layer, pure): MiniMax-Provider-Verifier's language
following, multi-call trigger similarity and Query-Success-Rate under its retry budget.

Registered like every metric (:func:`avv_scoring.metrics.registry.produces`; the registry imports every module of
the package). Each function takes one vendor's de-duplicated rows (record schema), the
multi-call similarity also the baseline's rows. A value that cannot be computed is missing (``nan``).

Sources (docs/scoring.md quotes the wording): MiniMax-AI/MiniMax-Provider-Verifier ``verify.py`` (summary,
``success_rate``), its Cyrillic validator (``language_following_checked`` / ``_valid``) and
``scripts/calculate_toolcall_similarity.py`` (``calculate_multi_toolcall_similarity``: cosine similarity of the
normalised ``tool_calls_count_distribution``).
"""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pandas as pd

from avv_core.language import check_language
from avv_scoring.load import is_success, numeric
from avv_scoring.metrics.additive import NAN, Columns, Sums, additive, count, rate
from avv_scoring.metrics.calls import TC_N, positive
from avv_scoring.metrics.declaration import Metric
from avv_scoring.metrics.registry import produces
from avv_scoring.metrics.schema import parse_tool_calls

#: MiniMax's Query-Success-Rate budget: ``max_retry=10`` (verify.py runs ``range(max_retries)`` attempts).
QSR_MAX_ATTEMPTS = 10


def _language_features(rows: pd.DataFrame) -> pd.DataFrame:
    """``checked`` / ``valid`` per row (see :func:`language_following_rate`)."""
    if "expected_language" not in rows.columns:
        return pd.DataFrame({"checked": 0, "valid": 0}, index=rows.index)
    checked = np.zeros(len(rows), dtype=np.int64)
    valid = np.zeros(len(rows), dtype=np.int64)
    specs, contents = rows["expected_language"].astype("object"), rows["content"].astype("object")
    maybe = (is_success(rows) & specs.notna() & contents.notna()).to_numpy(dtype=bool)  # the rest count 0
    specs, contents = specs.to_numpy(dtype=object), contents.to_numpy(dtype=object)
    for i in np.flatnonzero(maybe):
        spec, content = specs[i], contents[i]
        if isinstance(spec, str) and spec and isinstance(content, str) and content:
            checked[i] = 1
            valid[i] = int(check_language(content, spec).valid)
    return pd.DataFrame({"checked": checked, "valid": valid}, index=rows.index)


@produces(
    Metric("language_following_rate", "Language Following", "rate", "higher", per_repeat=True, order=540,
           needs="language",
           doc="valid / checked; checked = successful responses with content whose sample has a language check "
               "(expected_language, check_type); missing with none"),
    Metric("language_following_checked", "Language checked", "int", "none", count=True, order=550,
           doc="successful responses with non-empty content whose sample has a language check"),
    Metric("language_following_valid", "Language valid", "int", "none", order=560,
           doc="checked responses whose content follows the expected language (avv_core/language.py)"),
)
@additive(_language_features)
def language_following_rate(sums: Sums) -> Columns:
    """MiniMax Language-Following-Success-Rate, with a general script check.

    ``checked`` = successful rows whose ``expected_language`` is set and whose ``content`` is non-empty (as
    MiniMax: ``status == "success" and resp_content``); ``valid`` = checked rows where
    :func:`avv_core.language.check_language` (content, expected_language) holds::

        language_following_rate = valid / checked        (missing when checked = 0)

    A failed response is not checked (its cost is in ``success_rate``); a response with no letter outside
    code is checked and not valid. Rows of a records file without the column are not checked.
    """
    checked, valid = count(sums["checked"]), count(sums["valid"])
    return {
        "language_following_rate": rate(valid, checked),
        "language_following_checked": checked,
        "language_following_valid": valid,
    }


def call_count_distribution(rows: pd.DataFrame) -> Counter[int]:
    """Successful responses finishing with ``tool_calls``, by the number of tool calls they carry (MiniMax's
    ``tool_calls_count_distribution``; an unparseable tool_calls cell counts its ``tool_call_count``)."""
    finished = positive(rows).to_numpy(dtype=bool)  # mask single columns, not the wide frame
    if TC_N in rows.columns:
        counts = rows[TC_N].to_numpy()[finished].astype(int).tolist()
    else:
        counts = [len(c) if (c := parse_tool_calls(cell)) is not None else int(n or 0)
                  for cell, n in zip(rows["tool_calls"].astype("object")[finished],
                                     rows["tool_call_count"].astype("object").fillna(0)[finished], strict=True)]
    return Counter(counts)


def cosine_similarity(a: Counter[int], b: Counter[int]) -> float:
    """Cosine similarity of two count histograms, each normalised to a probability distribution over the
    union of their keys; nan when either is empty."""
    total_a, total_b = sum(a.values()), sum(b.values())
    if not total_a or not total_b:
        return NAN
    keys = sorted(set(a) | set(b))
    pa = [a.get(k, 0) / total_a for k in keys]
    pb = [b.get(k, 0) / total_b for k in keys]
    dot = sum(x * y for x, y in zip(pa, pb, strict=True))
    return dot / (math.sqrt(sum(x * x for x in pa)) * math.sqrt(sum(y * y for y in pb)))


@produces(
    Metric("multi_call_similarity", "Multi-Call Similarity", "rate", "higher", per_repeat=True, order=570,
           doc="cosine similarity of the normalised histograms of tool calls per tool_calls response, vendor vs "
               "baseline (MiniMax); missing when either side has no such response"),
)
def multi_call_similarity(rows: pd.DataFrame, baseline_rows: pd.DataFrame) -> Columns:
    """MiniMax Multi-ToolCalls-Trigger Similarity.

    For each side, ``h[k]`` = successful responses finishing with ``tool_calls`` that carry k tool calls,
    normalised to ``p[k] = h[k] / Σ h``; over the union of the keys::

        multi_call_similarity = Σ p_v[k]·p_b[k] / (‖p_v‖ · ‖p_b‖)

    (1 = the vendor calls one, two, … tools in the same proportions as the baseline). Like MiniMax, the
    histograms are of the whole rows, not of joined pairs. Missing when either histogram is empty.
    """
    return {"multi_call_similarity": cosine_similarity(call_count_distribution(rows),
                                                       call_count_distribution(baseline_rows))}


def _qsr_features(rows: pd.DataFrame) -> pd.DataFrame:
    attempts = numeric(rows["attempts"]).fillna(1)
    within = is_success(rows) & (attempts <= QSR_MAX_ATTEMPTS)
    return pd.DataFrame({"items": 1, "within": within.astype(int)}, index=rows.index)


@produces(
    Metric("query_success_rate", "Query Success Rate", "rate", "higher", per_repeat=True, order=160,
           doc=f"items that succeeded within {QSR_MAX_ATTEMPTS} attempts / items (MiniMax QSR, max_retry="
               f"{QSR_MAX_ATTEMPTS}); a lower bound when the run allowed fewer attempts"),
)
@additive(_qsr_features)
def query_success_rate(sums: Sums) -> Columns:
    """MiniMax Query-Success-Rate: "the probability that a provider can eventually return a valid response
    successfully when allowed up to max_retry=10 attempts"::

        query_success_rate = items whose success came within QSR_MAX_ATTEMPTS (10) attempts / items

    An empty ``attempts`` cell counts as 1. A run made with ``--avv-retries 9`` (10 attempts) measures exactly
    MiniMax's budget; with fewer retries an item that failed might have succeeded later, so the value is a
    lower bound (never an overestimate). Missing with no items.
    """
    return {"query_success_rate": rate(count(sums["within"]), count(sums["items"]))}
