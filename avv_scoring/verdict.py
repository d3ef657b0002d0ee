"""Verdicts (scoring layer, pure): pass/fail per vendor against thresholds, naming every failing metric.

:class:`Thresholds` maps a metric column to its bounds: ``("min", x)`` (the metric must be ≥ x), ``("max", x)``
(≤ x), or both — a band, e.g. MiniMax's Finish-ToolCalls-Rate 80 % ± 2.5 is ``min 0.775, max 0.825``. The
defaults (preset ``avv``) are the registry's ``threshold`` values (:mod:`avv_scoring.metrics.registry`), taken from the
reference material: success rate ≥ 0.99 after retries, trigger F1 ≥ 0.80, schema accuracy ≥ 0.98 and
reasoning-only rate ≤ 0 (MiniMax: any reasoning-only output signals a deployment problem). Any registered metric
can be bounded; a bound set to None is not checked. A checked metric that is **missing** fails (a vendor cannot
pass a check by producing no data for it). The named presets (``k2vv``, ``k2vv-thinking``, ``minimax``) and YAML
files are read by :mod:`avv_scoring.presets`.

**Not judged.** Some bounds cannot apply to every sample set, and :func:`judged_thresholds` drops them for one
model's verdicts, naming each (``ScoreResult.not_judged``, report.md), instead of failing every vendor:

- a bound on a metric the scored samples cannot produce (the registry's ``needs``: language following without a
  sample that has a language check, gold accuracy without gold labels, agent metrics without agent tasks);
- a bound tied to a sample set (``sample_set``: MiniMax's Finish-ToolCalls-Rate band is tuned to MiniMax's own
  samples) when the scored samples are not all marked as that set (sample metadata ``_sample_set``);
- in a conformance run scored alone, every bound but the conformance checks' (``conformance_failures``): its probes
  are no replay of the samples. Without a conformance run, ``conformance_failures`` is dropped without a word.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

from avv_core.json_types import JSONMapping, JSONObject
from avv_core.measures import is_missing
from avv_scoring.metrics.declaration import KINDS, NEEDS, Kind, Limit, RegistryError, check_limit
from avv_scoring.metrics.registry import default_thresholds, is_metric, metric, order_index

PASS = "pass"
FAIL = "fail"

#: A metric's bounds: one Limit, or a min and a max (min first).
Bounds = tuple[Limit, ...]
#: The name of the registry defaults.
DEFAULT_PRESET = "avv"


def _known(column: str) -> None:
    if not is_metric(column):
        raise ValueError(f"thresholds: {column!r} is not a metric column")


def _limit(column: str, bound: object) -> Limit:
    _known(column)
    try:
        return check_limit(metric(column), tuple(bound) if isinstance(bound, list) else bound)
    except RegistryError as exc:
        raise ValueError(f"thresholds: {exc}") from None


def _bounds(column: str, bound: object) -> dict[str, float]:
    """A mapping value — one ``(kind, limit)`` or a sequence of them — as ``{kind: limit}``."""
    if isinstance(bound, (tuple, list)) and bound and all(isinstance(b, (tuple, list)) for b in bound):
        limits = [_limit(column, b) for b in bound]
    else:
        limits = [_limit(column, bound)]
    out: dict[str, float] = {}
    for kind, value in limits:
        if kind in out:
            raise ValueError(f"thresholds: {column!r} gets two {kind} bounds")
        out[kind] = value
    return out


def _kind(kind: str) -> Kind:
    """A bound kind already checked to be one of :data:`KINDS`, as a :data:`Kind`."""
    return "min" if kind == "min" else "max"


def _split_keyword(name: str) -> tuple[str, str]:
    """``"min_success_rate"`` → ``("min", "success_rate")``; ValueError for anything else."""
    kind, sep, column = name.partition("_")
    if not sep or kind not in KINDS or not column:
        raise ValueError(f"threshold {name!r}: expected min_<metric> or max_<metric>")
    return kind, column


def bounds_text(column: str, bounds: Bounds) -> str:
    """``f1 ≥ 0.8``, ``avg_ttft_ms ≤ 500`` or, for a band, ``0.775 ≤ finish_tool_calls_rate ≤ 0.825``."""
    kinds = dict(bounds)
    if "min" in kinds and "max" in kinds:
        return f"{kinds['min']:g} ≤ {column} ≤ {kinds['max']:g}"
    kind, value = bounds[0]
    return f"{column} {'≥' if kind == 'min' else '≤'} {value:g}"


class Thresholds(Mapping[str, Bounds]):
    """Pass/fail limits: a frozen mapping metric column → its bounds, ``(("min", x),)``, ``(("max", y),)`` or
    ``(("min", x), ("max", y))`` (a band), plus the :attr:`name` of the preset they came from.

    ``Thresholds()`` holds the registry defaults (preset ``avv``). Overrides, applied on top of the defaults:

    - a mapping: ``Thresholds({"tps": ("min", 20.0), "f1": None})`` sets (replaces) a column's bounds — one
      ``(kind, limit)`` or a list of them for a band — and None removes them;
    - keywords ``min_<column>`` / ``max_<column>`` set that one bound and keep the other:
      ``Thresholds(min_success_rate=0.9, min_f1=None)``; ``min_x=a, max_x=b`` is a band.

    ``Thresholds.none()`` starts from no bounds instead. ``with_bound`` / ``without`` / ``named`` return changed
    copies. An unknown column, or a band whose min exceeds its max, raises ValueError.
    """

    __slots__ = ("_bounds", "_margins", "_name", "_sets")
    _bounds: dict[str, Bounds]  # column → its bounds, in registry order
    _name: str  # the preset or file they came from
    _sets: dict[str, str]  # column → the sample set its bounds are for (judged only on that set)
    _margins: dict[str, float]  # column → δ of a non-inferiority bound against the baseline (:meth:`with_margin`)

    def __init__(self, bounds: JSONMapping | None = None, /, **limits: float | None) -> None:
        merged = self._apply({c: {k: v} for c, (k, v) in default_thresholds().items()}, bounds or {}, limits)
        object.__setattr__(self, "_bounds", merged)
        object.__setattr__(self, "_name", DEFAULT_PRESET)
        object.__setattr__(self, "_sets", {})
        object.__setattr__(self, "_margins", {})

    # construction ----------------------------------------------------------------------------------

    @classmethod
    def none(cls) -> Thresholds:
        """No bound at all (every vendor passes)."""
        return cls({column: None for column in default_thresholds()}).named("none")

    @classmethod
    def from_mapping(cls, bounds: JSONMapping, defaults: bool = True) -> Thresholds:
        """``bounds`` (column → ``(kind, limit)``, a list of them, or None) on top of the defaults, or of no
        bound."""
        return cls(bounds) if defaults else cls({**{c: None for c in default_thresholds()}, **bounds})

    def with_bound(self, column: str, kind: str, limit: float | None) -> Thresholds:
        """A copy where ``column`` has the ``kind`` bound ``limit`` (``limit=None``: no such bound); its other
        bound, if any, is kept."""
        return self._derive({}, {f"{kind}_{column}": limit})

    def without(self, column: str) -> Thresholds:
        """A copy where ``column`` has no bound (nor margin)."""
        out = self._derive({column: None}, {})
        return out.without_margin(column) if column in self._margins else out

    def for_sample_set(self, column: str, sample_set: str | None) -> Thresholds:
        """A copy whose bounds on ``column`` are judged only on samples marked as ``sample_set`` (metadata
        ``_sample_set``; None: on any samples)."""
        out = self._derive({}, {})
        sets = {c: s for c, s in self._sets.items() if c != column}
        if sample_set is not None and column in self._bounds:
            sets[column] = str(sample_set)
        object.__setattr__(out, "_sets", sets)
        return out

    def with_margin(self, column: str, margin: float | None) -> Thresholds:
        """A copy with a **non-inferiority** bound on ``column`` against the baseline: the vendor's value may be at
        most ``margin`` worse than the baseline's (higher is better: vendor ≥ baseline − δ; lower: ≤ baseline + δ);
        None removes it. Only a metric of the vendor's own behaviour that is a proportion (a ratio form, not a
        comparison with the baseline) takes one: ValueError otherwise (docs/explanation/decision.md)."""
        _known(column)
        m = metric(column)
        if margin is not None:
            if m.ratio is None or m.better == "none" or column in baseline_comparisons():
                raise ValueError(f"thresholds: {column!r} cannot take a margin against the baseline (a margin needs a "
                                 "rate of the vendor's own behaviour, such as success_rate or schema_accuracy)")
            if isinstance(margin, bool) or not isinstance(margin, (int, float)) or not 0 <= float(margin) < 1:
                raise ValueError(f"thresholds: {column!r}: a margin is a number from 0 to 1, got {margin!r}")
        out = self._derive({}, {})
        margins = {c: d for c, d in self._margins.items() if c != column}
        if margin is not None:
            margins[column] = float(margin)
        position = order_index()
        object.__setattr__(out, "_margins", dict(sorted(margins.items(), key=lambda cd: position[cd[0]])))
        return out

    def margins(self) -> list[tuple[str, float]]:
        """``(metric, δ)`` of every non-inferiority bound, in registry order."""
        return list(self._margins.items())

    def without_margin(self, column: str) -> Thresholds:
        return self.with_margin(column, None)

    def sample_set_of(self, column: str) -> str | None:
        """The sample set ``column``'s bounds are for, or None (any samples)."""
        return self._sets.get(column)

    def named(self, name: str) -> Thresholds:
        """A copy called ``name`` (the preset or file shown in report.md and scores.json)."""
        out = self._derive({}, {})
        object.__setattr__(out, "_name", str(name))
        return out

    def _derive(self, changes: JSONMapping, limits: Mapping[str, float | None]) -> Thresholds:
        out = Thresholds.__new__(Thresholds)
        current: dict[str, dict[str, float]] = {c: dict(b) for c, b in self._bounds.items()}
        object.__setattr__(out, "_bounds", self._apply(current, changes, limits))
        object.__setattr__(out, "_name", self._name)
        object.__setattr__(out, "_margins", dict(getattr(self, "_margins", {})))
        touched = set(changes) | {_split_keyword(name)[1] for name in limits}  # an explicit bound holds on any set
        object.__setattr__(out, "_sets", {c: s for c, s in self._sets.items() if c in out._bounds and c not in touched})
        return out

    @staticmethod
    def _apply(
        base: Mapping[str, dict[str, float]], bounds: JSONMapping, limits: Mapping[str, float | None]
    ) -> dict[str, Bounds]:
        out: dict[str, dict[str, float]] = {c: dict(b) for c, b in base.items()}
        for column, bound in bounds.items():  # the mapping sets (or, with None, removes) a column's bounds
            _known(column)
            if bound is None:
                out.pop(column, None)
            else:
                out[column] = _bounds(column, bound)
        for name, value in limits.items():  # keywords set or remove one bound of a column
            kind, column = _split_keyword(name)
            _known(column)
            if value is None:
                out.get(column, {}).pop(kind, None)
            else:
                out.setdefault(column, {})[kind] = _limit(column, (kind, value))[1]
        position = order_index()
        result: dict[str, Bounds] = {}
        for column in sorted((c for c, b in out.items() if b), key=position.__getitem__):
            kinds = out[column]
            if "min" in kinds and "max" in kinds and kinds["min"] > kinds["max"]:
                raise ValueError(f"thresholds: {column!r} has min {kinds['min']:g} above max {kinds['max']:g}")
            result[column] = tuple((_kind(k), kinds[k]) for k in KINDS if k in kinds)
        return result

    # the mapping -----------------------------------------------------------------------------------

    def __getitem__(self, column: str) -> Bounds:
        return self._bounds[column]

    def __iter__(self) -> Iterator[str]:
        return iter(self._bounds)

    def __len__(self) -> int:
        return len(self._bounds)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("Thresholds is frozen; use with_bound() / without() / named()")

    def __hash__(self) -> int:
        return hash((tuple(self._bounds.items()), tuple(sorted(self._sets.items())), tuple(self._margins.items())))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Thresholds):
            return self._bounds == other._bounds and self._sets == other._sets and self._margins == other._margins
        return super().__eq__(other)

    def __reduce__(self) -> tuple[Callable[..., Thresholds], tuple[object, ...]]:
        return (_rebuild, (dict(self._bounds), self._name, dict(self._sets), dict(self._margins)))

    def __repr__(self) -> str:
        margins = f", margins={self._margins!r}" if self._margins else ""
        return f"Thresholds({self._bounds!r}, name={self._name!r}{margins})"

    def __getattr__(self, name: str) -> float | None:
        """``thresholds.min_success_rate`` → the limit when success_rate has a min bound, else None."""
        if name.startswith("_"):
            raise AttributeError(name)
        try:
            kind, column = _split_keyword(name)
        except ValueError:
            raise AttributeError(name) from None
        bounds: dict[str, float] = dict(self._bounds.get(column, ()))
        return bounds.get(kind)

    # reading ---------------------------------------------------------------------------------------

    @property
    def name(self) -> str:
        """The preset (``avv``, ``k2vv``, ``minimax``, ``none``) or file these thresholds came from."""
        return self._name

    def checks(self) -> list[tuple[str, str, float]]:
        """``(metric, "min"|"max", limit)`` for every bound, in registry order (a band gives two)."""
        return [(column, kind, limit) for column, bounds in self._bounds.items() for kind, limit in bounds]

    def to_dict(self) -> dict[str, float | None]:
        """``{"min_success_rate": 0.99, …}``: every bound as a keyword, and None for each default bound that is
        off, so ``Thresholds(**t.to_dict()) == t``."""
        out: dict[str, float | None] = {f"{kind}_{column}": limit for column, kind, limit in self.checks()}
        for column, (kind, _) in default_thresholds().items():
            out.setdefault(f"{kind}_{column}", None)
        return out

    def to_yaml_data(self) -> JSONObject:
        """The YAML form read by :func:`avv_scoring.presets.load_thresholds` (no base: every bound listed)."""
        data: dict[str, JSONObject] = {}
        for column, bounds in self._bounds.items():
            data[column] = {**dict(bounds), **({"sample_set": self._sets[column]} if column in self._sets else {})}
        for column, margin in self._margins.items():
            data.setdefault(column, {})["margin"] = margin
        return {"name": self._name, "thresholds": data}

    def text(self) -> str:
        """One line for reports: ``f1 ≥ 0.8, 0.775 ≤ finish_tool_calls_rate ≤ 0.825, …`` (``none`` when empty)."""
        parts = [bounds_text(c, b) + (f" (on sample set {self._sets[c]})" if c in self._sets else "")
                 for c, b in self._bounds.items()]
        parts += [margin_text(c, d) for c, d in self._margins.items()]
        return ", ".join(parts) or "none"


def margin_text(column: str, margin: float) -> str:
    """``schema_accuracy ≥ baseline − 0.02`` (a lower-is-better metric: ``≤ baseline + δ``)."""
    higher = metric(column).better == "higher"
    return f"{column} {'≥' if higher else '≤'} baseline {'−' if higher else '+'} {margin:g}"


def baseline_comparisons() -> frozenset[str]:
    """Metrics that already compare a vendor with the baseline (F1, tool_match…): no margin on them."""
    from avv_scoring.metrics.registry import baseline_columns

    return frozenset(baseline_columns())


def _rebuild(bounds: dict[str, Bounds], name: str, sets: dict[str, str] | None = None,
             margins: dict[str, float] | None = None) -> Thresholds:
    out = Thresholds.from_mapping({c: list(b) for c, b in bounds.items()}, defaults=False).named(name)
    for column, sample_set in (sets or {}).items():
        out = out.for_sample_set(column, sample_set)
    for column, margin in (margins or {}).items():
        out = out.with_margin(column, margin)
    return out


#: The marks of what a sample set holds (:func:`judged_thresholds`): the registry's ``needs`` keys, and
#: ``set:<name>`` when every scored sample is marked ``_sample_set: <name>``.
SET_MARK = "set:"
#: The mark of a conformance run scored alone: its probes are no replay of the samples, so only the bounds on the
#: conformance metrics (``needs="conformance"``) are judged.
CONFORMANCE_ONLY = "conformance-only"


def judged_thresholds(thresholds: Thresholds, holds: frozenset[str] | set[str]) -> tuple[Thresholds, list[str]]:
    """The bounds one model's verdicts check, and what is not judged (module docstring), each as
    ``"column (why)"``. ``holds`` = what the scored samples hold: registry ``needs`` keys (``language``, ``gold``,
    ``gold_calls``, ``agent``) and ``set:<name>`` when every scored sample is marked as sample set ``name``."""
    out, skipped = thresholds, []
    for column, _ in thresholds.margins():
        needs = metric(column).needs
        if needs and needs not in holds:
            out = out.without_margin(column)
            skipped.append(f"{column} (margin; {NEEDS[needs]})")
    for column in list(thresholds):
        needs, sample_set = metric(column).needs, thresholds.sample_set_of(column)
        if needs == "conformance" and needs not in holds:  # a verify run: nothing to say about it
            out = out.without(column)
            continue
        if CONFORMANCE_ONLY in holds and needs != "conformance":
            why = "a conformance run: its probes are no replay of the samples; only the conformance checks are judged"
        elif needs and needs not in holds:
            why = NEEDS[needs]
        elif sample_set is not None and SET_MARK + sample_set not in holds:
            why = (f"its bound is tuned to the {sample_set!r} sample set and the samples are not all marked "
                   f"_sample_set: {sample_set}; a bound given on the command line (--ftr-band) holds on any samples")
        else:
            continue
        out = out.without(column)
        skipped.append(f"{column} ({why})")
    return out, skipped


def verdict(metrics: JSONMapping, thresholds: Thresholds | None = None) -> tuple[str, list[str]]:
    """``("pass", [])`` or ``("fail", reasons)`` for one vendor's metrics.

    A reason reads e.g. ``"f1 0.7513 < 0.8"`` or ``"schema_accuracy missing"``.
    """
    thresholds = thresholds if thresholds is not None else Thresholds()
    reasons: list[str] = []
    for column, kind, limit in thresholds.checks():
        value = metrics.get(column)
        if value is None or is_missing(value):
            if f"{column} missing" not in reasons:  # a band names a missing metric once
                reasons.append(f"{column} missing")
        elif kind == "min" and float(value) < limit:
            reasons.append(f"{column} {float(value):.6g} < {limit:g}")
        elif kind == "max" and float(value) > limit:
            reasons.append(f"{column} {float(value):.6g} > {limit:g}")
    return (FAIL if reasons else PASS), reasons
