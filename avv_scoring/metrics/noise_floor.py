"""The baseline's noise floor (scoring layer, pure over pandas/numpy): per unit (sample id), the baseline against
itself over all pairs of one sample's successful repeats i < j — the sums behind ``baseline_self_*`` and the noise
tests of :mod:`.uncertainty` (docs/scoring.md, "Is the difference real?")."""

from __future__ import annotations

from collections.abc import Callable, Hashable

import numpy as np
import pandas as pd

from avv_scoring.load import OK_COL, is_success, numeric
from avv_scoring.metrics.additive import Amount, Sums
from avv_scoring.metrics.calls import CALLED, SIG_CALLS, SIG_TOOLS, positive
from avv_scoring.stats.tests import per_unit_sums, ratio

#: Per-unit sums of the baseline against itself (all pairs of repeats i < j).
SELF_SUMS: tuple[str, ...] = ("self_pairs", "self_disc", "self_tp", "self_call_pairs", "self_tool_eq", "self_args_eq")


#: A noise test's two rates (a metric declares the test: ``NoiseFloor(test=...)``): metric → (the vendor's
#: disagreement rate with the baseline, on the sums of the metric's additive form; the baseline's disagreement rate
#: with itself, on :data:`SELF_SUMS`).
DISAGREEMENT: dict[str, tuple[Callable[[Sums], Amount], Callable[[Sums], Amount]]] = {
    "trigger_agreement": (lambda s: ratio(s["fp"] + s["fn"], s["pairs"]),
                          lambda s: ratio(s["self_disc"], s["self_pairs"])),
    "tool_match": (lambda s: 1.0 - ratio(s["tool_eq"], s["pairs"]),
                   lambda s: 1.0 - ratio(s["self_tool_eq"], s["self_call_pairs"])),
    "args_match": (lambda s: 1.0 - ratio(s["args_eq"], s["pairs"]),
                   lambda s: 1.0 - ratio(s["self_args_eq"], s["self_call_pairs"])),
}


def _repeat(frame: pd.DataFrame) -> pd.Series:
    return numeric(frame["repeat"]).fillna(1).astype(int)


#: The record and annotation columns :func:`self_sums` reads (a caller may hand it just these).
SELF_SUM_INPUTS: tuple[str, ...] = ("repeat", "status", "finish_reason", OK_COL, CALLED, SIG_TOOLS, SIG_CALLS)


def _side(frame: pd.DataFrame, unit_of: pd.Series) -> pd.DataFrame:
    called = frame[CALLED].astype(bool).to_numpy()
    # the annotation's signatures (sorted names; sorted (name, canonical arguments)): equal exactly when
    # tools_equal / calls_equal; None where the row called no tool
    tool_key = np.where(called, frame[SIG_TOOLS].to_numpy(dtype=object), None)
    call_key = np.where(called, frame[SIG_CALLS].to_numpy(dtype=object), None)
    return pd.DataFrame({
        "unit": unit_of.loc[frame.index].to_numpy(),
        "repeat": _repeat(frame).to_numpy(),
        "ok": is_success(frame).to_numpy(),
        "pos": positive(frame).to_numpy(),
        "called": called,
        "tool_key": tool_key,
        "call_key": call_key,
    }, index=frame.index).drop_duplicates(subset=["unit", "repeat"], keep="last")


def _equal_pairs(units: np.ndarray, keys: list[Hashable], n: int) -> np.ndarray:
    """Per unit: pairs (i < j) of its rows with equal keys = Σ over distinct keys of C(count, 2)."""
    out = np.zeros(n)
    if not len(keys):
        return out
    ids: dict[Hashable, int] = {}
    codes = np.array([ids.setdefault(key, len(ids)) for key in keys], dtype=np.int64)
    combined = units.astype(np.int64) * len(ids) + codes
    cells, sizes = np.unique(combined, return_counts=True)
    np.add.at(out, cells // len(ids), sizes * (sizes - 1) / 2)
    return out


def self_sums(base_rows: pd.DataFrame, unit_of: pd.Series, n: int) -> np.ndarray:
    """The baseline against itself (``base_rows``, each row's unit in ``unit_of``), (n units, :data:`SELF_SUMS`): per
    unit, over pairs of successful repeats i < j (m repeats, k positive):
    pairs = C(m, 2), discordant = k·(m − k), TP = C(k, 2); over pairs of repeats that both called a tool (c of
    them): call pairs = C(c, 2), equal tools / calls = Σ over distinct keys of C(count, 2)."""
    base = _side(base_rows, unit_of)
    ok = base[base["ok"]]
    m = per_unit_sums(ok["unit"].to_numpy(), np.ones(len(ok)), n)
    k = per_unit_sums(ok["unit"].to_numpy(), ok["pos"].to_numpy(), n)
    called = base[base["called"]]
    cu = called["unit"].to_numpy()
    c = per_unit_sums(cu, np.ones(len(called)), n)
    columns = {
        "self_pairs": m * (m - 1) / 2, "self_disc": k * (m - k), "self_tp": k * (k - 1) / 2,
        "self_call_pairs": c * (c - 1) / 2,
        "self_tool_eq": _equal_pairs(cu, called["tool_key"].tolist(), n),
        "self_args_eq": _equal_pairs(cu, called["call_key"].tolist(), n),
    }
    return np.stack([columns[name] for name in SELF_SUMS], axis=1)


__all__ = ["DISAGREEMENT", "SELF_SUMS", "SELF_SUM_INPUTS", "self_sums"]
