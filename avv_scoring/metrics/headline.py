"""Per-vendor metrics (scoring layer, pure): one function per metric over the (de-duplicated) rows of one vendor.

Every function takes a pandas DataFrame with the record columns of :mod:`avv_core.records` — the
rows of ONE (model, vendor), one row per item (sample_id, repeat) — and returns a dict holding the
metric and the counts it was computed from. A metric that cannot be computed is ``nan`` (missing),
never 0 and never 1 by default.

The rule behind every definition: **a vendor's failure never improves its score.** A failed item
counts in the denominators of the rate metrics (success rate, finish-tool-calls rate) and is never
read as a "correct" answer anywhere else; missing token counts and TTFTs are missing, not 0.

Notation: *items* = rows of the vendor; *successful* = rows with ``status == "success"``.

Each function is registered with :func:`avv_scoring.metrics.registry.produces`, which declares every column it returns
(header, format, direction, IRF input, interval, default threshold, tables); most are written as their additive form
(:mod:`avv_scoring.metrics.additive`: per-item features and ``combine(sums)``), which also gives each repeat's value
and each bootstrap resample's. :mod:`avv_scoring.metrics.vendor_table` calls the registered functions, so a new
metric is one decorated function in a module of this package and nothing else.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

import numpy as np
import pandas as pd

from avv_core.json_types import JSONObject
from avv_core.samples import Gold
from avv_scoring.load import COMPARABLE_COL, ToolsBySample, is_success, numeric
from avv_scoring.metrics.additive import NAN, Columns, Quantiles, Sums, additive, choose, count, numbers, rate
from avv_scoring.metrics.calls import TC_INVALID, TC_N, TC_UNCHECKABLE, TC_VALID, annotate_calls, positive
from avv_scoring.metrics.declaration import Metric, NoiseFloor, Ratio, Regression
from avv_scoring.metrics.frame_memo import item_keys, per_frame
from avv_scoring.metrics.normalisers import ArgNormalisation
from avv_scoring.metrics.registry import produces
from avv_scoring.metrics.row_codes import item_codes, last_rows, positions_in
from avv_scoring.metrics.schema import parse_tool_calls

# --------------------------------------------------------------------------------------------------
# Success


def _attempt_features(rows: pd.DataFrame) -> pd.DataFrame:
    attempts = numeric(rows["attempts"]).fillna(1).clip(lower=1)
    return pd.DataFrame({"attempts": attempts.astype(int), "successes": is_success(rows).astype(int)}, index=rows.index)


@produces(
    Metric("success_rate", "Success Rate", "rate", "higher", irf=True, threshold=("min", 0.99), table=True,
           per_repeat=True, order=10, table_order=1, interval=True, interval_order=1,
           ratio=Ratio((("successes", 1.0),), (("items", 1.0),)),
           regression=Regression("rate", "success", 0.05),
           prometheus="success_rate of the records so far (the live board's last scoring; absent until scored).",
           doc="successful items / items (failed items stay in the denominator); missing with no items"),
    Metric("items", "Items", "int", "none", count=True, order=100, doc="rows of the vendor after de-duplication"),
    Metric("successes", "Successes", "int", "none", order=110, doc='items with status == "success"'),
    Metric("failures", "Failed", "int", "none", count=True, order=120, doc="items − successes"),
)
@additive(lambda rows: pd.DataFrame({"items": 1, "successes": is_success(rows).astype(int)}, index=rows.index))
def success_rate(sums: Sums) -> Columns:
    """Item-level success rate (the harness retries before an item counts as failed).

    ``success_rate = successful items / items``. Failed items stay in the denominator, so a vendor
    whose every request fails scores 0. Missing only when the vendor has no items at all.
    """
    items, successes = count(sums["items"]), count(sums["successes"])
    return {
        "items": items,
        "successes": successes,
        "failures": items - successes,
        "success_rate": rate(successes, items),
    }


@produces(
    Metric("attempts", "Attempts", "int", "none", order=140, doc="Σ attempts over all items (an empty cell = 1)"),
    Metric("attempt_success_rate", "Attempt Success Rate", "rate", "higher", per_repeat=True, order=150,
           doc="successful items / attempts (the per-attempt MiniMax query reading, before retries)"),
)
@additive(_attempt_features)
def attempt_success_rate(sums: Sums) -> Columns:
    """Success rate per HTTP attempt (the MiniMax "query" reading before retries are credited).

    ``attempt_success_rate = successful attempts / attempts`` where ``attempts = Σ attempts`` over all
    items (an empty ``attempts`` cell counts as 1) and each successful item contributed exactly one
    successful attempt (its last), so ``successful attempts = successful items``.
    """
    total = count(sums["attempts"])
    return {"attempts": total, "attempt_success_rate": rate(count(sums["successes"]), total)}


@per_frame
def _trigger_side(frame: pd.DataFrame) -> pd.DataFrame:
    out = pd.DataFrame({
        "sample_id": frame["sample_id"].astype("object").astype(str),
        "repeat": numeric(frame["repeat"]).fillna(1).astype(int),
        "ok": is_success(frame),
        "pos": positive(frame),
    }, index=frame.index)
    return out[~out.duplicated(subset=["sample_id", "repeat"], keep="last")]


def _trigger_features(rows: pd.DataFrame, baseline_rows: pd.DataFrame) -> pd.DataFrame:
    """Per vendor item (one per (sample_id, repeat)): matched / pair / excluded and its confusion cell."""
    joined = _trigger_join(rows, baseline_rows)
    if joined is None:  # a missing sample id: pandas' join decides how it matches
        vendor = _trigger_side(rows)
        base = _trigger_side(baseline_rows).set_index(["sample_id", "repeat"])
        keys = pd.MultiIndex.from_frame(vendor[["sample_id", "repeat"]])
        matched = keys.isin(base.index)
        ok_b = base["ok"].reindex(keys).fillna(False).to_numpy(dtype=bool)
        pos_b = base["pos"].reindex(keys).fillna(False).to_numpy(dtype=bool)
        ok_v, pos_v = vendor["ok"].to_numpy(dtype=bool), vendor["pos"].to_numpy(dtype=bool)
        index = vendor.index
    else:
        index, matched, ok_v, pos_v, ok_b, pos_b = joined
    pair = matched & ok_v & ok_b
    return pd.DataFrame({
        "tp": pair & pos_v & pos_b, "fp": pair & pos_v & ~pos_b, "fn": pair & ~pos_v & pos_b,
        "tn": pair & ~pos_v & ~pos_b, "pairs": pair, "excluded": matched & ~(ok_v & ok_b), "unmatched": ~matched,
    }, index=index).astype(int)


#: The vendor's items (index), matched, ok and positive of the vendor, ok and positive of the baseline.
TriggerJoin = tuple[pd.Index, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]


def _trigger_join(rows: pd.DataFrame, baseline_rows: pd.DataFrame) -> TriggerJoin | None:
    """:func:`_trigger_side` of both frames joined on the item, on arrays: the vendor's items (its last row of each,
    in row order: their index), whether the baseline has the item, and ok / positive of each side (the baseline's
    last row of the item; False without one). None when a sample id is missing."""
    (ids_v, reps_v), (ids_b, reps_b) = item_keys(rows), item_keys(baseline_rows)
    codes = item_codes(np.concatenate([ids_v, ids_b]), np.concatenate([reps_v, reps_b]), len(ids_v))
    if codes is None:
        return None
    mine, theirs = last_rows(codes[0]), last_rows(codes[1])
    at = positions_in(codes[0][mine], codes[1][theirs])
    matched = at >= 0
    base_row = theirs[np.where(matched, at, 0)] if len(theirs) else np.zeros(len(mine), dtype=np.int64)
    ok_b = is_success(baseline_rows).to_numpy(dtype=bool)[base_row] & matched if len(theirs) else matched
    pos_b = positive(baseline_rows).to_numpy(dtype=bool)[base_row] & matched if len(theirs) else matched
    return (rows.index[mine], matched, is_success(rows).to_numpy(dtype=bool)[mine],
            positive(rows).to_numpy(dtype=bool)[mine], ok_b, pos_b)


@produces(
    Metric("error_kinds", "Errors", "text", "none", count=True, order=130,
           doc="failed items per error_kind as kind:count;… (most frequent first)"),
)
def error_breakdown(rows: pd.DataFrame) -> JSONObject:
    """Failed items per ``error_kind``, as ``kind:count`` joined by ``;`` (most frequent first)."""
    failed = rows.loc[~is_success(rows), "error_kind"].astype("object").fillna("unknown")
    counts = Counter(failed.tolist())
    return {
        "error_kinds": ";".join(f"{k}:{n}" for k, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))
    }


# --------------------------------------------------------------------------------------------------
# Trigger F1


@produces(
    Metric("f1", "F1", "rate", "higher", irf=True, threshold=("min", 0.80), table=True, per_repeat=True,
           order=20, table_order=2, interval=True, interval_order=2,
           ratio=Ratio((("tp", 2.0),), (("tp", 2.0), ("fp", 1.0), ("fn", 1.0)), item_max=2.0, dice=True),
           noise_floor=NoiseFloor("baseline_self_f1"), power=True,
           prometheus="Tool-trigger F1 against the baseline so far (`f1`).",
           doc="2·TP / (2·TP + FP + FN) over the F1 pairs (joined on sample_id, repeat); missing with no pairs"),
    Metric("precision", "Precision", "rate", "higher", order=200, doc="TP / (TP + FP); missing when TP + FP = 0"),
    Metric("recall", "Recall", "rate", "higher", order=210, doc="TP / (TP + FN); missing when TP + FN = 0"),
    Metric("tp", "TP", "int", "none", order=220, doc="pairs where vendor and baseline finished with tool_calls"),
    Metric("fp", "FP", "int", "none", order=230, doc="pairs where only the vendor finished with tool_calls"),
    Metric("fn", "FN", "int", "none", order=240, doc="pairs where only the baseline finished with tool_calls"),
    Metric("tn", "TN", "int", "none", order=250, doc="pairs where neither finished with tool_calls"),
    Metric("f1_pairs", "F1 pairs", "int", "none", count=True, order=260,
           doc="items joined with a baseline item where both sides succeeded"),
    Metric("trigger_agreement", "Trigger Agreement", "rate", "higher", order=801, interval=True, interval_order=3,
           ratio=Ratio((("tp", 1.0), ("tn", 1.0)), (("pairs", 1.0),)),
           noise_floor=NoiseFloor("baseline_self_agreement", test="noise_p", what="trigger disagreement", beside=False),
           regression=Regression("mcnemar", "called", 0.05, speaks_for=("f1", "precision", "recall")),
           doc="(TP + TN) / f1_pairs: share of pairs where vendor and baseline make the same trigger decision"),
    Metric("f1_excluded", "F1 excluded", "int", "none", count=True, order=270,
           doc="joined items where either side failed (left out of the matrix)"),
    Metric("f1_unmatched", "F1 unmatched", "int", "none", count=True, order=280,
           doc="vendor items with no baseline item of the same (sample_id, repeat)"),
)
@additive(_trigger_features, resampled=("tp", "fp", "fn", "tn", "pairs"))
def trigger_f1(sums: Sums) -> Columns:
    """Tool-call trigger agreement with the baseline (K2VV "ToolCall-Trigger Similarity").

    Items are joined on ``(sample_id, repeat)`` — never by position. Positive = the response finished
    with ``finish_reason == "tool_calls"``. A pair where either side failed is left out of the
    confusion matrix (``f1_excluded``); a vendor item without a baseline item is ``f1_unmatched``.
    Over the ``f1_pairs`` remaining pairs::

        TP = vendor +, baseline +      FP = vendor +, baseline −
        FN = vendor −, baseline +      TN = vendor −, baseline −
        precision = TP / (TP + FP)     (missing when TP + FP = 0)
        recall    = TP / (TP + FN)     (missing when TP + FN = 0)
        F1        = 2·TP / (2·TP + FP + FN)

    which equals 2PR / (P + R) wherever that is defined, and is 0 (not a crash) when P = R = 0.
    F1 is 1.0 when TP + FP + FN = 0 and there is at least one pair; with no pairs F1 is missing.
    Scoring the baseline against itself gives 1.0 whenever it has a successful item.
    ``trigger_agreement = (TP + TN) / f1_pairs`` (missing with no pair).
    """
    tp, fp, fn, tn, n_pairs = (count(sums[k]) for k in ("tp", "fp", "fn", "tn", "pairs"))
    den = 2 * tp + fp + fn
    return {
        "f1": choose(den > 0, rate(2 * tp, den), choose(n_pairs > 0, 1.0, NAN)),
        "precision": rate(tp, tp + fp),
        "recall": rate(tp, tp + fn),
        "tp": tp,
        "fp": fp,
        "fn": fn,
        "tn": tn,
        "f1_pairs": n_pairs,
        "trigger_agreement": rate(tp + tn, n_pairs),
        "f1_excluded": count(sums["excluded"]),
        "f1_unmatched": count(sums["unmatched"]),
    }


# --------------------------------------------------------------------------------------------------
# Schema accuracy


def annotate_tool_calls(
    rows: pd.DataFrame,
    tools_by_sample: ToolsBySample | None,
    gold_by_sample: Mapping[str, Gold] | None = None,
    normalise: ArgNormalisation | None = None,
) -> pd.DataFrame:
    """Copy of ``rows`` with the per-row call columns every call metric reads
    (:func:`avv_scoring.metrics.calls.annotate_calls`): ``_tc_n`` (calls), ``_tc_valid``, ``_tc_invalid``,
    ``_tc_uncheckable``, ``_tc_parse_error`` (the ``tool_calls`` cell is not a JSON list: every call of the
    row counts as invalid), the parsed calls and the gold labels. A sample missing from ``tools_by_sample``
    (or ``tools_by_sample=None``) makes its calls uncheckable. ``normalise`` = the argument normalisers (default:
    all; :mod:`avv_scoring.metrics.normalisers`)."""
    return annotate_calls(rows, tools_by_sample, gold_by_sample, normalise)


def _schema_features(rows: pd.DataFrame, tools_by_sample: ToolsBySample | None = None) -> pd.DataFrame:
    if TC_N not in rows.columns:
        rows = annotate_tool_calls(rows, tools_by_sample)
    ok = is_success(rows).to_numpy(dtype=bool)
    tc = positive(rows).to_numpy(dtype=bool)
    n, valid = rows[TC_N].to_numpy(dtype=int), rows[TC_VALID].to_numpy(dtype=int)
    invalid, unchecked = rows[TC_INVALID].to_numpy(dtype=int), rows[TC_UNCHECKABLE].to_numpy(dtype=int)
    empty = tc & (n == 0)
    bad = tc & ((invalid > 0) | (n == 0))
    unknown = tc & ~bad & (unchecked > 0)
    return pd.DataFrame({
        "valid_calls": ok * valid, "invalid_calls": ok * invalid + empty, "good_responses": tc & ~bad & ~unknown,
        "bad_responses": bad, "unknown_responses": unknown, "unchecked_calls": ok * unchecked,
        "other_finish_calls": (ok & ~tc) * n,
    }, index=rows.index).astype(int)


@produces(
    Metric("schema_accuracy", "Schema Accuracy", "rate", "higher", irf=True, threshold=("min", 0.98), table=True,
           per_repeat=True, order=30, table_order=4, interval=True, interval_order=4,
           ratio=Ratio((("valid_calls", 1.0),), (("valid_calls", 1.0), ("invalid_calls", 1.0)), item_max=2.0),
           power=True,
           prometheus="Share of tool calls whose arguments fit the tool's schema so far (`schema_accuracy`).",
           doc="valid calls / checkable calls of successful responses, whatever the finish_reason (a tool_calls "
               "finish without a call = 1 invalid call); missing with none"),
    Metric("schema_response_accuracy", "Schema Response Accuracy", "rate", "higher", per_repeat=True, order=290,
           group="correctness", regression=Regression("rate", "schema_valid", 0.05, speaks_for=("schema_accuracy",)),
           doc="tool_calls responses whose every call is valid / checkable tool_calls responses (K2VV, MiniMax)"),
    Metric("schema_responses", "Schema responses", "int", "none", count=True, order=300,
           doc="checkable successful responses finishing with tool_calls"),
    Metric("schema_valid_responses", "Valid responses", "int", "none", order=310,
           doc="schema_responses whose every tool call is valid"),
    Metric("schema_uncheckable_responses", "Uncheckable responses", "int", "none", order=320,
           doc="tool_calls responses with no invalid call but an uncheckable one (left out)"),
    Metric("schema_calls", "Schema calls", "int", "none", count=True, order=340,
           doc="valid + invalid calls of successful responses (the schema_accuracy denominator)"),
    Metric("schema_valid_calls", "Valid calls", "int", "none", order=350, doc="calls valid against the schema"),
    Metric("schema_uncheckable_calls", "Uncheckable calls", "int", "none", count=True, order=360,
           doc="calls whose request schema is invalid or whose sample is unknown (left out)"),
    Metric("tool_calls_other_finish", "Calls under other finish", "int", "none", count=True, order=370,
           doc="calls of successful responses finishing other than tool_calls (length, stop; scored)"),
)
@additive(_schema_features, resampled=("valid_calls", "invalid_calls"))
def schema_accuracy(sums: Sums) -> Columns:
    """Schema accuracy of tool calls against the request's tool definitions (:mod:`avv_scoring.metrics.schema`).

    Call level, the headline and IRF input (AVV's definition: valid tool calls / total tool calls), over
    every call of every successful response **whatever its finish_reason** — a call cut off under
    ``length`` or sent under ``stop`` is checked like any other::

        schema_accuracy = valid calls / (valid + invalid calls)            (schema_calls in the denominator)

    A ``tool_calls`` finish with no call at all counts as one invalid call; an unparseable ``tool_calls``
    cell counts its calls as invalid. Uncheckable calls (invalid request schema, unknown sample) are left
    out and counted in ``schema_uncheckable_calls``; ``tool_calls_other_finish`` counts the calls of
    responses finishing otherwise (scored, shown for reference). Failed responses are not scored.

    Response level (K2VV / MiniMax's reading, kept for comparison), over successful responses with
    ``finish_reason == "tool_calls"``::

        schema_response_accuracy = responses whose every call is valid / such responses (schema_responses)

    A ``tool_calls`` finish with no call is invalid; a response with no invalid call but an uncheckable one
    is left out (``schema_uncheckable_responses``). Each is missing when its denominator is 0.

    ``rows`` may already carry the columns of :func:`annotate_tool_calls`; otherwise they are computed
    here from ``tools_by_sample``.
    """
    valid, invalid = count(sums["valid_calls"]), count(sums["invalid_calls"])
    good, responses = count(sums["good_responses"]), count(sums["good_responses"] + sums["bad_responses"])
    return {
        "schema_accuracy": rate(valid, valid + invalid),
        "schema_response_accuracy": rate(good, responses),
        "schema_responses": responses,
        "schema_valid_responses": good,
        "schema_uncheckable_responses": count(sums["unknown_responses"]),
        "schema_calls": valid + invalid,
        "schema_valid_calls": valid,
        "schema_uncheckable_calls": count(sums["unchecked_calls"]),
        "tool_calls_other_finish": count(sums["other_finish_calls"]),
    }


# --------------------------------------------------------------------------------------------------
# Cost and performance


@per_frame
def compared_rows(rows: pd.DataFrame) -> pd.Series:
    """The rows cost and speed are measured on: successful, and (when scoring a whole model) successful for
    every vendor of the model — see :func:`avv_scoring.score.comparable_items`."""
    ok = is_success(rows)
    return ok & rows[COMPARABLE_COL].astype(bool) if COMPARABLE_COL in rows.columns else ok


def mean_features(rows: pd.DataFrame, column: str) -> pd.DataFrame:
    """``value`` (0 where absent) and ``present`` per row: compared rows (:func:`compared_rows`) with a value (none
    when the records predate ``column``)."""
    cells = rows[column] if column in rows.columns else pd.Series(NAN, index=rows.index)
    values = numeric(cells).to_numpy(dtype=float)
    present = compared_rows(rows).to_numpy(dtype=bool) & ~np.isnan(values)
    return pd.DataFrame({"value": np.where(present, values, 0.0), "present": present.astype(int)}, index=rows.index)


def _present_values(rows: pd.DataFrame, column: str) -> pd.Series:
    """The values of ``column`` on the compared rows that have one (the rows of :func:`mean_features`)."""
    return numbers(rows.loc[compared_rows(rows), column])


@produces(
    Metric("avg_tokens", "Avg Token", "num", "lower", irf=True, table=True, per_repeat=True, order=40, table_order=6,
           doc="mean total_tokens over compared items (successful for every vendor of the model) that reported usage; "
               "missing when none did (never 0)"),
    Metric("usage_rows", "Usage rows", "int", "none", order=400, doc="successful rows with total_tokens"),
)
@additive(lambda rows: mean_features(rows, "total_tokens"))
def avg_tokens(sums: Sums) -> Columns:
    """Mean total tokens per request (prompt + completion, as reported in the streamed usage).

    ``avg_tokens = mean(total_tokens)`` over the *compared* items whose ``total_tokens`` is present
    (``usage_rows`` of them): items that succeeded for every vendor of the model (a vendor that fails the long
    requests cannot look cheap by it; see ``score.comparable_items``). A vendor that reports no usage has a
    missing avg_tokens — never 0, which would be the best rank.
    """
    n = count(sums["present"])
    return {"avg_tokens": rate(sums["value"], n), "usage_rows": n}


@produces(
    Metric("avg_ttft_ms", "TTFT (ms)", "num", "lower", irf=True, table=True, per_repeat=True, order=50,
           table_order=5,
           doc="mean ttft_ms over compared items (successful for every vendor of the model) that have one"),
    Metric("ttft_p50_ms", "TTFT p50 (ms)", "num", "lower", order=410, interval=True, interval_order=7, web=2,
           regression=Regression("median", "ttft_ms", 0.20, min_abs=20.0, speaks_for=("avg_ttft_ms",)),
           doc="median ttft_ms over compared items that have one (linear interpolation)"),
    Metric("ttft_p90_ms", "TTFT p90 (ms)", "num", "lower", order=420,
           doc="90th percentile of ttft_ms over the same rows"),
    Metric("ttft_p95_ms", "TTFT p95 (ms)", "num", "lower", order=425, web=3,
           doc="95th percentile of ttft_ms over the same rows (the stress SLO's percentile)"),
    Metric("ttft_p99_ms", "TTFT p99 (ms)", "num", "lower", order=430,
           doc="99th percentile of ttft_ms over the same rows"),
    Metric("ttft_rows", "TTFT rows", "int", "none", order=440, doc="successful rows with a ttft_ms"),
)
@additive(lambda rows: mean_features(rows, "ttft_ms"),
          quantiles=Quantiles(lambda rows: _present_values(rows, "ttft_ms"),
                              {f"ttft_p{q}_ms": q for q in (50, 90, 95, 99)}))
def ttft_stats(sums: Sums) -> Columns:
    """Time to first token over successful rows that have one (``ttft_rows``).

    Over the *compared* items that have one (successful for every vendor of the model, so a vendor that fails
    the slow requests cannot look fast by it): ``avg_ttft_ms = mean(ttft_ms)``; ``ttft_p50_ms``,
    ``ttft_p90_ms``, ``ttft_p95_ms``, ``ttft_p99_ms`` = percentiles with linear interpolation. Missing when no
    compared item has a TTFT (never 0).
    """
    n = count(sums["present"])
    return {"avg_ttft_ms": rate(sums["value"], n), "ttft_rows": n}


def _reasoning_only_features(rows: pd.DataFrame) -> pd.DataFrame:
    ok = is_success(rows)
    reasoning = numeric(rows["reasoning_chars"]).fillna(0) > 0
    maybe = (ok & reasoning).to_numpy(dtype=bool, copy=True)  # content and calls are looked at on these rows only
    annotated = TC_N in rows.columns
    if annotated:
        maybe &= ~(rows[TC_N] > 0).to_numpy(dtype=bool)
    only = np.zeros(len(rows), dtype=bool)
    contents = rows["content"].astype("object").to_numpy(dtype=object)
    cells = None if annotated else rows["tool_calls"].astype("object").to_numpy(dtype=object)
    for i in np.flatnonzero(maybe):
        if cells is not None and ((c := parse_tool_calls(cells[i])) is None or len(c) > 0):
            continue  # a call (or an unreadable one) is an answer
        only[i] = not (isinstance(contents[i], str) and contents[i].strip())
    return pd.DataFrame({"successes": ok.to_numpy(dtype=bool), "reasoning_only": only}, index=rows.index).astype(int)


@produces(
    Metric("tps", "TPS", "num", "higher", irf=True, table=True, per_repeat=True, order=60, table_order=3,
           interval=True, interval_order=8,
           doc="mean per-request tps = (completion_tokens − 1) / decode s over compared items; missing with none"),
    Metric("tps_p50", "TPS p50", "num", "higher", order=450,
           regression=Regression("median", "tps", 0.20, speaks_for=("tps",)),
           doc="median per-request tps over compared items that have one"),
    Metric("tps_rows", "TPS rows", "int", "none", order=460, doc="successful rows with a tps"),
)
@additive(lambda rows: mean_features(rows, "tps"),
          quantiles=Quantiles(lambda rows: _present_values(rows, "tps"), {"tps_p50": 50}))
def tps_stats(sums: Sums) -> Columns:
    """Decode throughput: mean of the per-request ``tps`` over successful rows that have one.

    Per request (computed by the harness) ``tps = (completion_tokens − 1) / (decode_ms / 1000)``; a buffered
    stream has none (its tokens were not streamed: anomaly ``buffered_stream``), so it is left out here.
    ``tps = mean(tps)``, ``tps_p50 = median(tps)`` over the ``tps_rows`` compared items that have one (as for
    TTFT: items that succeeded for every vendor of the model); missing when there are none.
    """
    n = count(sums["present"])
    return {"tps": rate(sums["value"], n), "tps_rows": n}


# --------------------------------------------------------------------------------------------------
# MiniMax extras


@produces(
    Metric("finish_tool_calls", "Finish tool_calls", "int", "none", order=500,
           doc='successful items finishing with "tool_calls"'),
    Metric("finish_tool_calls_rate", "Finish-ToolCalls Rate", "rate", "none", per_repeat=True, order=510,
           ratio=Ratio((("finish", 1.0),), (("items", 1.0),)),
           doc="finish_tool_calls / items (MiniMax Finish-ToolCalls-Rate; failed items stay in the denominator)"),
)
@additive(lambda rows: pd.DataFrame({"items": 1, "finish": positive(rows).astype(int)}, index=rows.index))
def finish_tool_calls_rate(sums: Sums) -> Columns:
    """MiniMax Finish-ToolCalls-Rate.

    ``finish_tool_calls_rate = successful items finishing with "tool_calls" / items``; failed items
    stay in the denominator.
    """
    finished = count(sums["finish"])
    return {"finish_tool_calls": finished, "finish_tool_calls_rate": rate(finished, count(sums["items"]))}


@produces(
    Metric("reasoning_only", "Reasoning-only", "int", "none", count=True, order=520,
           doc="successful responses with reasoning, blank content and no tool call"),
    Metric("reasoning_only_rate", "Reasoning-only Rate", "rate", "lower", threshold=("max", 0.0), per_repeat=True,
           order=530, ratio=Ratio((("reasoning_only", 1.0),), (("successes", 1.0),)),
           defect="a reasoning-only answer (reasoning, then no content and no tool call)",
           doc="reasoning_only / successful responses (MiniMax); missing with no successful response"),
)
@additive(_reasoning_only_features)
def reasoning_only_rate(sums: Sums) -> Columns:
    """MiniMax reasoning-only pattern: reasoning arrived but no answer and no tool call.

    ``reasoning_only_rate = successful responses with reasoning_chars > 0, empty (or blank) content and
    no tool call / successful responses``. Missing when there is no successful response.
    """
    only = count(sums["reasoning_only"])
    return {"reasoning_only": only, "reasoning_only_rate": rate(only, count(sums["successes"]))}
