"""Verdicts: pass/fail per vendor against configurable thresholds, naming every failing metric.

Defaults come from the reference material: success rate ≥ 0.99 after retries, trigger F1 ≥ 0.80,
schema accuracy ≥ 0.98 and reasoning-only rate = 0 (MiniMax: any reasoning-only output signals a
deployment problem). A threshold set to None is not checked. A checked metric that is **missing**
fails (a vendor cannot pass a check by producing no data for it).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

PASS = "pass"
FAIL = "fail"


@dataclass(frozen=True)
class Thresholds:
    """Pass/fail limits. ``min_*``: the metric must be ≥ the value; ``max_*``: ≤ the value."""

    min_success_rate: float | None = 0.99
    min_f1: float | None = 0.80
    min_schema_accuracy: float | None = 0.98
    max_reasoning_only_rate: float | None = 0.0
    min_attempt_success_rate: float | None = None
    min_finish_tool_calls_rate: float | None = None
    max_finish_tool_calls_rate: float | None = None

    def checks(self) -> list[tuple[str, str, float]]:
        """``(metric, "min"|"max", limit)`` for every threshold that is set."""
        out = []
        for name, limit in asdict(self).items():
            if limit is None:
                continue
            kind, metric = name.split("_", 1)
            out.append((metric, kind, float(limit)))
        return out

    def to_dict(self) -> dict[str, float | None]:
        return asdict(self)


def _missing(value: Any) -> bool:
    if value is None:
        return True
    try:
        return math.isnan(float(value))
    except (TypeError, ValueError):
        return True


def verdict(metrics: Mapping[str, Any], thresholds: Thresholds | None = None) -> tuple[str, list[str]]:
    """``("pass", [])`` or ``("fail", reasons)`` for one vendor's metrics.

    A reason reads e.g. ``"f1 0.7513 < 0.8"`` or ``"schema_accuracy missing"``.
    """
    thresholds = thresholds or Thresholds()
    reasons: list[str] = []
    for metric, kind, limit in thresholds.checks():
        value = metrics.get(metric)
        if _missing(value):
            reasons.append(f"{metric} missing")
        elif kind == "min" and float(value) < limit:
            reasons.append(f"{metric} {float(value):.6g} < {limit:g}")
        elif kind == "max" and float(value) > limit:
            reasons.append(f"{metric} {float(value):.6g} > {limit:g}")
    return (FAIL if reasons else PASS), reasons
