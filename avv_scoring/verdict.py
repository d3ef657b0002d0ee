"""Verdicts (scoring layer, pure): pass/fail per vendor against thresholds, naming every failing metric.

:class:`Thresholds` maps a metric column to one bound, ``("min", x)`` (the metric must be ≥ x) or
``("max", x)`` (≤ x). The defaults are the registry's ``threshold`` values (:mod:`avv_scoring.registry`),
taken from the reference material: success rate ≥ 0.99 after retries, trigger F1 ≥ 0.80, schema accuracy
≥ 0.98 and reasoning-only rate ≤ 0 (MiniMax: any reasoning-only output signals a deployment problem). Any
registered metric can be bounded; a bound set to None is not checked. A checked metric that is **missing**
fails (a vendor cannot pass a check by producing no data for it).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from avv_harness.measures import is_missing

from .registry import (
    KINDS,
    Limit,
    RegistryError,
    check_limit,
    default_thresholds,
    is_metric,
    limit_text,
    metric,
    order_index,
)

PASS = "pass"
FAIL = "fail"


def _known(column: str) -> None:
    if not is_metric(column):
        raise ValueError(f"thresholds: {column!r} is not a metric column")


def _limit(column: str, bound: Any) -> Limit:
    _known(column)
    try:
        return check_limit(metric(column), tuple(bound) if isinstance(bound, list) else bound)
    except RegistryError as exc:
        raise ValueError(f"thresholds: {exc}") from None


def _split_keyword(name: str) -> tuple[str, str]:
    """``"min_success_rate"`` → ``("min", "success_rate")``; ValueError for anything else."""
    kind, sep, column = name.partition("_")
    if not sep or kind not in KINDS or not column:
        raise ValueError(f"threshold {name!r}: expected min_<metric> or max_<metric>")
    return kind, column


class Thresholds(Mapping[str, Limit]):
    """Pass/fail limits: a frozen mapping metric column → ``("min"|"max", limit)``, one bound per metric.

    ``Thresholds()`` holds the registry defaults. Overrides, applied on top of the defaults:

    - a mapping: ``Thresholds({"tps": ("min", 20.0), "f1": None})`` (None removes the metric's bound);
    - keywords ``min_<column>`` / ``max_<column>``: ``Thresholds(min_success_rate=0.9, min_f1=None)``.

    ``Thresholds.none()`` starts from no bounds instead. ``with_bound`` / ``without`` return changed copies.
    An unknown column (or one both ``min_`` and ``max_`` bounded in one call) raises ValueError.
    """

    __slots__ = ("_bounds",)

    def __init__(self, bounds: Mapping[str, Limit | None] | None = None, /, **limits: float | None) -> None:
        merged = self._apply(default_thresholds(), bounds or {}, limits)
        object.__setattr__(self, "_bounds", merged)

    # construction ----------------------------------------------------------------------------------

    @classmethod
    def none(cls) -> Thresholds:
        """No bound at all (every vendor passes)."""
        return cls({column: None for column in default_thresholds()})

    @classmethod
    def from_mapping(cls, bounds: Mapping[str, Limit | None], defaults: bool = True) -> Thresholds:
        """``bounds`` (column → ``(kind, limit)`` or None) on top of the defaults, or of no bound."""
        return cls(bounds) if defaults else cls({**{c: None for c in default_thresholds()}, **bounds})

    def with_bound(self, column: str, kind: str, limit: float | None) -> Thresholds:
        """A copy where ``column`` has the bound ``(kind, limit)`` (``limit=None``: no bound)."""
        return self._derive({column: None if limit is None else (kind, limit)})

    def without(self, column: str) -> Thresholds:
        """A copy where ``column`` has no bound."""
        return self._derive({column: None})

    def _derive(self, changes: Mapping[str, Limit | None]) -> Thresholds:
        return Thresholds({**{c: None for c in default_thresholds()}, **self._bounds, **changes})

    @staticmethod
    def _apply(
        base: Mapping[str, Limit], bounds: Mapping[str, Limit | None], limits: Mapping[str, float | None]
    ) -> dict[str, Limit]:
        out: dict[str, Limit] = dict(base)
        for column, bound in bounds.items():  # the mapping sets (or, with None, removes) a column's bound
            if bound is None:
                _known(column)
                out.pop(column, None)
            else:
                out[column] = _limit(column, bound)
        keyword_bounds: dict[str, tuple[str, float]] = {}
        for name, value in limits.items():  # keyword removals first: min_x=None, max_x=0.5 means "max 0.5"
            kind, column = _split_keyword(name)
            _known(column)
            if value is None:
                if column in out and out[column][0] == kind:
                    del out[column]
            elif column in keyword_bounds:
                raise ValueError(f"thresholds: {column!r} gets both a min and a max bound (one bound per metric)")
            else:
                keyword_bounds[column] = (kind, value)
        for column, (kind, value) in keyword_bounds.items():
            current = out.get(column)
            if current is not None and current[0] != kind:
                raise ValueError(
                    f"thresholds: {column!r} already has the bound {limit_text(current)}; pass "
                    f"{current[0]}_{column}=None to replace it with a {kind} bound (one bound per metric)"
                )
            out[column] = _limit(column, (kind, value))
        position = order_index()
        return dict(sorted(out.items(), key=lambda item: position[item[0]]))

    # the mapping -----------------------------------------------------------------------------------

    def __getitem__(self, column: str) -> Limit:
        return self._bounds[column]

    def __iter__(self) -> Iterator[str]:
        return iter(self._bounds)

    def __len__(self) -> int:
        return len(self._bounds)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("Thresholds is frozen; use with_bound() / without()")

    def __hash__(self) -> int:
        return hash(tuple(self._bounds.items()))

    def __reduce__(self) -> tuple[Any, ...]:
        return (Thresholds.from_mapping, (dict(self._bounds), False))

    def __repr__(self) -> str:
        return f"Thresholds({self._bounds!r})"

    def __getattr__(self, name: str) -> float | None:
        """``thresholds.min_success_rate`` → the limit when success_rate has a min bound, else None."""
        if name.startswith("_"):
            raise AttributeError(name)
        try:
            kind, column = _split_keyword(name)
        except ValueError:
            raise AttributeError(name) from None
        bound = self._bounds.get(column)
        return bound[1] if bound is not None and bound[0] == kind else None

    # reading ---------------------------------------------------------------------------------------

    def checks(self) -> list[tuple[str, str, float]]:
        """``(metric, "min"|"max", limit)`` for every bound, in registry order."""
        return [(column, kind, limit) for column, (kind, limit) in self._bounds.items()]

    def to_dict(self) -> dict[str, float | None]:
        """``{"min_success_rate": 0.99, …}``: every bound as a keyword, and None for each default bound that is
        off, so ``Thresholds(**t.to_dict()) == t``."""
        out: dict[str, float | None] = {f"{kind}_{column}": limit for column, (kind, limit) in self._bounds.items()}
        for column, (kind, _) in default_thresholds().items():
            if column not in self._bounds or self._bounds[column][0] != kind:
                out[f"{kind}_{column}"] = None
        return out


def verdict(metrics: Mapping[str, Any], thresholds: Thresholds | None = None) -> tuple[str, list[str]]:
    """``("pass", [])`` or ``("fail", reasons)`` for one vendor's metrics.

    A reason reads e.g. ``"f1 0.7513 < 0.8"`` or ``"schema_accuracy missing"``.
    """
    thresholds = thresholds if thresholds is not None else Thresholds()
    reasons: list[str] = []
    for column, kind, limit in thresholds.checks():
        value = metrics.get(column)
        if is_missing(value):
            reasons.append(f"{column} missing")
        elif kind == "min" and float(value) < limit:
            reasons.append(f"{column} {float(value):.6g} < {limit:g}")
        elif kind == "max" and float(value) > limit:
            reasons.append(f"{column} {float(value):.6g} > {limit:g}")
    return (FAIL if reasons else PASS), reasons
