"""Billing honesty (scoring layer, pure): the prompt tokens a vendor reports against the baseline's for the same items.

The same model reads the same request with the same tokenizer and chat template, so a vendor's ``prompt_tokens``
should equal the baseline's on every item both answered. Per item (same sample and repeat, both successful, both
reporting ``prompt_tokens`` > 0 for the baseline) the ratio vendor / baseline; the vendor's figure is their median,
its spread their interquartile range. A median past the model's tolerance (default ±5 %, ``prompt_tokens_tolerance``
per model in the vendor config, ``avv-score --prompt-tokens-tolerance``) is flagged in the report
(:func:`flagged`): a vendor billing 25 % more prompt tokens shows in every verify run. docs/scoring.md, "Billing
honesty".
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from avv_core.errors import InputError
from avv_core.json_types import JSONObject
from avv_scoring.load import is_success, numeric
from avv_scoring.metrics.additive import NAN
from avv_scoring.metrics.declaration import Metric
from avv_scoring.metrics.frame_memo import per_frame
from avv_scoring.metrics.registry import produces

#: The default tolerance: the largest relative difference of the median ratio from 1 that is not flagged.
DEFAULT_TOLERANCE = 0.05


@per_frame
def _prompt_tokens(frame: pd.DataFrame) -> pd.Series:
    ok = is_success(frame)
    tokens = numeric(frame["prompt_tokens"]).astype(float)
    keys = pd.MultiIndex.from_arrays([frame["sample_id"].astype(str),
                                      numeric(frame["repeat"])])
    out = pd.Series(tokens.where(ok).to_numpy(), index=keys).dropna()
    return out[~out.index.duplicated(keep="last")]


def prompt_token_ratios(rows: pd.DataFrame, baseline_rows: pd.DataFrame) -> np.ndarray:
    """Per item both answered with prompt tokens (baseline's > 0): vendor's / baseline's."""
    mine, theirs = _prompt_tokens(rows), _prompt_tokens(baseline_rows)
    theirs = theirs[theirs > 0]
    common = mine.index.intersection(theirs.index)
    return (mine.loc[common] / theirs.loc[common]).to_numpy(dtype=float)


@produces(
    Metric("prompt_tokens_ratio", "Prompt tokens ratio", "num", "none", order=390, group="field",
           doc="median over items both answered of the vendor's prompt_tokens / the baseline's (billing honesty: "
               "1 for the same model; flagged past the model's tolerance); missing without such items"),
    Metric("prompt_tokens_ratio_iqr", "Ratio IQR", "num", "none", order=391, group="field",
           doc="interquartile range of those ratios (their spread)"),
    Metric("prompt_tokens_pairs", "Prompt token pairs", "int", "none", order=392,
           doc="items both the vendor and the baseline answered with prompt_tokens"),
)
def prompt_tokens_ratio(rows: pd.DataFrame, baseline_rows: pd.DataFrame) -> JSONObject:
    """Billing honesty (module docstring)::

        prompt_tokens_ratio = median over paired items of vendor prompt_tokens / baseline prompt_tokens
        prompt_tokens_ratio_iqr = p75 − p25 of those ratios
    """
    ratios = prompt_token_ratios(rows, baseline_rows)
    if not ratios.size:
        return {"prompt_tokens_ratio": NAN, "prompt_tokens_ratio_iqr": NAN, "prompt_tokens_pairs": 0}
    q1, median, q3 = np.percentile(ratios, [25, 50, 75])
    return {"prompt_tokens_ratio": float(median), "prompt_tokens_ratio_iqr": float(q3 - q1),
            "prompt_tokens_pairs": int(ratios.size)}


@dataclass(frozen=True)
class BillingTolerance:
    """The tolerance of the prompt-token ratio per model (``default`` for the others)."""

    default: float = DEFAULT_TOLERANCE
    per_model: Mapping[str, float] = field(default_factory=dict)
    every_model: bool = False  # the default was given for every model (it wins over a configured model's)

    def of(self, model: str) -> float:
        return float(self.per_model.get(model, self.default))

    def merged(self, configured: Mapping[str, float]) -> BillingTolerance:
        """These tolerances over the vendor config's per model (``configured``): a model named here keeps its own, a
        default given for every model wins, else a configured model's value holds."""
        if self.every_model:
            return self
        return BillingTolerance(self.default, {**configured, **self.per_model})


def check_tolerance(value: object, where: str) -> float:
    """A tolerance: a number from 0 to 1 (exclusive); InputError naming ``where`` otherwise."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or not 0 <= value < 1:
        raise InputError(f"{where}: a tolerance is a number from 0 to 1 (0.05 = ±5 %), got {value!r}")
    return float(value)


def parse_tolerances(items: list[str] | None) -> BillingTolerance:
    """``--prompt-tokens-tolerance`` values: ``X`` (every model) or ``MODEL=X`` (repeatable)."""
    default, per_model, every = DEFAULT_TOLERANCE, {}, False
    for item in items or []:
        model, sep, text = item.rpartition("=")
        try:
            value = float(text)
        except ValueError:
            raise InputError(f"--prompt-tokens-tolerance {item!r}: expected X or MODEL=X (X a number)") from None
        value = check_tolerance(value, f"--prompt-tokens-tolerance {item!r}")
        if sep:
            per_model[model] = value
        else:
            default, every = value, True
    return BillingTolerance(default, per_model, every)


#: Ratios are quotients of whole numbers: 1.05 − 1 is 0.0500000000000000444 in floating point, not past ±5 %.
EPSILON = 1e-9


def flagged(ratio: object, tolerance: float) -> bool:
    """A median ratio past the tolerance (missing: not flagged)."""
    return isinstance(ratio, (int, float)) and math.isfinite(ratio) and abs(float(ratio) - 1.0) > tolerance + EPSILON
