"""The metric registry (scoring layer, below :mod:`.metrics`): every per-vendor score column is declared once.

A metric function in :mod:`.metrics` or :mod:`.call_metrics` is decorated with :func:`produces`, which
registers it and every column it outputs as a :class:`Metric` (header, format, direction, IRF input, default
verdict limit, which tables show it, formula). Everything else is derived from :data:`METRICS`:
``SCORE_COLUMNS`` and ``REPEAT_COLUMNS`` (:mod:`.score`), ``REPEAT_METRICS`` (:mod:`.metrics`), ``IRF_METRICS``
and ``IRF_TABLE_COLUMNS`` (:mod:`.irf`), the default :class:`~avv_scoring.verdict.Thresholds`, ``TABLE_LAYOUT``
and ``COUNT_LAYOUT`` (:mod:`.report`), the report groups and the README metric table (:func:`render_metric_table`).

Registering a column twice, or ``irf=True`` with ``better="none"``, raises :class:`RegistryError` at import.

:data:`METRICS` and :data:`FUNCTIONS` are read lazily (module ``__getattr__``): the first read imports
:mod:`.metrics` and :mod:`.call_metrics` (:data:`METRIC_MODULES`), whose decorators fill the registry, so the
import order of the package does not matter.
No I/O, no pandas; the registry holds no run state.
"""

from __future__ import annotations

import importlib
import inspect
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, TypeVar, get_args

Fmt = Literal["rate", "num", "int", "text", "irf"]
Better = Literal["higher", "lower", "none"]
Kind = Literal["min", "max"]
#: A verdict limit: ("min", x) = the metric must be ≥ x; ("max", x) = ≤ x.
Limit = tuple[Kind, float]
#: What a metric function is called with: one vendor's rows (and the baseline's), or a whole model at once.
Inputs = Literal["rows", "rows+baseline", "model"]

FMTS: tuple[str, ...] = get_args(Fmt)
BETTER: tuple[str, ...] = get_args(Better)
KINDS: tuple[str, ...] = get_args(Kind)

_COLUMN_RE = re.compile(r"^[a-z][a-z0-9_]*$")
#: Parameter name that marks a function as needing the baseline vendor's rows.
BASELINE_PARAM = "baseline_rows"
#: First-parameter name that marks a model-level function: called once per model with every vendor's rows
#: (an :class:`avv_scoring.stats.uncertainty.ModelTable`), it returns ``{vendor: {column: value}}`` — for metrics
#: that need all vendors or settings at once (bootstrap intervals, tests, rank stability).
MODEL_PARAM = "model_table"


class RegistryError(ValueError):
    """A metric declaration that contradicts the registry (raised at import of the declaring module)."""


@dataclass(frozen=True)
class Metric:
    """One per-vendor score column and everything the outputs need to know about it."""

    column: str  # the one name: CSV, JSON, README, threshold key
    header: str  # e.g. "TTFT (ms)"
    fmt: Fmt  # "rate" | "num" | "int" | "text" | "irf"
    better: Better  # "higher" | "lower" | "none"
    irf: bool = False  # an input of the default IRF; requires better != "none"
    threshold: Limit | None = None  # default verdict limit, e.g. ("min", 0.99)
    table: bool = False  # shown in the headline table (terminal / markdown / web UI)
    count: bool = False  # shown in the "Counts (excluded and missing)" table
    per_repeat: bool = False  # also computed per repeat and summarised as <column>_mean / _std
    order: int = 1000  # position in SCORE_COLUMNS, the count table, the README table (ties: registration order)
    doc: str = ""  # the formula, one line
    table_order: int | None = None  # position in the headline table when it differs from ``order``
    group: str = ""  # report.md table that shows it besides the headline/count tables ("correctness")

    def __post_init__(self) -> None:
        where = f"metric {self.column!r}"
        if not isinstance(self.column, str) or not _COLUMN_RE.match(self.column):
            raise RegistryError(f"{where}: column must be snake_case ([a-z][a-z0-9_]*)")
        if self.fmt not in FMTS:
            raise RegistryError(f"{where}: fmt {self.fmt!r} is not one of {', '.join(FMTS)}")
        if self.better not in BETTER:
            raise RegistryError(f"{where}: better {self.better!r} is not one of {', '.join(BETTER)}")
        if self.irf and self.better == "none":
            raise RegistryError(f"{where}: an IRF input needs a direction (better='higher' or 'lower')")
        if self.threshold is not None:
            check_limit(self, self.threshold)
        if "\n" in self.doc:
            raise RegistryError(f"{where}: doc is one line (the full formula belongs in the docstring)")

    @property
    def higher_is_better(self) -> bool:
        return self.better == "higher"


def check_limit(metric: Metric, limit: Any) -> Limit:
    """``limit`` as a valid :data:`Limit` for ``metric``; raises :class:`RegistryError` otherwise."""
    where = f"metric {metric.column!r}"
    if not (isinstance(limit, tuple) and len(limit) == 2):
        raise RegistryError(f"{where}: a threshold is ('min'|'max', number), got {limit!r}")
    kind, value = limit
    if kind not in KINDS:
        raise RegistryError(f"{where}: threshold kind {kind!r} is not 'min' or 'max'")
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
        raise RegistryError(f"{where}: threshold limit {value!r} is not a number")
    if metric.fmt == "text":
        raise RegistryError(f"{where}: a text column cannot have a threshold")
    return (kind, float(value))


@dataclass(frozen=True)
class MetricFunction:
    """A registered metric function, the columns it returns and what it is called with."""

    func: Callable[..., dict[str, Any]]
    columns: tuple[str, ...]  # exactly the keys of the dict it returns (of each vendor's dict, for "model")
    inputs: Inputs  # "rows" → func(rows); "rows+baseline" → func(rows, baseline_rows); "model" → func(table)

    @property
    def name(self) -> str:
        return self.func.__name__

    @property
    def additive(self) -> Additive | None:
        """The function's additive form (see :func:`additive`), or None."""
        return getattr(self.func, "avv_additive", None)

    def __call__(self, rows: Any, baseline_rows: Any) -> dict[str, Any]:
        """Call with the vendor's rows (and the baseline's, when the function needs them); the result must
        hold exactly :attr:`columns`."""
        if self.inputs == "model":
            raise RegistryError(f"{self.name} is a model-level function: call for_model(table)")
        out = self.func(rows, baseline_rows) if self.inputs == "rows+baseline" else self.func(rows)
        self._check(out)
        return out

    def for_model(self, table: Any) -> dict[str, dict[str, Any]]:
        """Call a model-level function with one model's table; each vendor's dict must hold exactly
        :attr:`columns`."""
        if self.inputs != "model":
            raise RegistryError(f"{self.name} is a per-vendor function: call it with the vendor's rows")
        out = self.func(table)
        for columns in out.values():
            self._check(columns)
        return out

    def _check(self, out: dict[str, Any]) -> None:
        if set(out) != set(self.columns):
            extra, missing = sorted(set(out) - set(self.columns)), sorted(set(self.columns) - set(out))
            raise RegistryError(
                f"{self.name} returned columns that differ from its declaration "
                f"(undeclared: {', '.join(extra) or '-'}; not returned: {', '.join(missing) or '-'})"
            )


F = TypeVar("F", bound=Callable[..., dict[str, Any]])


@dataclass(frozen=True)
class Additive:
    """A metric function's additive form: per-row features whose column sums determine (some of) its columns.

    ``features(rows, …)`` returns a numeric frame indexed like (a subset of) ``rows``; ``combine(sums)`` turns
    the sums into columns. The metric of any group of rows — a repeat, a sample, a bootstrap resample — is
    ``combine(Σ features over the group)``, so per-repeat tables are one ``groupby(...).sum()``, not a loop.
    ``extra(rows, …)`` adds the columns that are not additive (percentiles) to the whole-table result only.
    """

    features: Callable[..., Any]
    combine: Callable[[Any], dict[str, Any]]
    extra: Callable[..., dict[str, Any]] | None = None


def additive(features: Callable[..., Any], extra: Callable[..., dict[str, Any]] | None = None) -> Callable:
    """Decorator for a ``combine(sums) -> columns`` function: the result is the metric function itself,
    ``f(rows, …) = combine(features(rows, …).sum())`` (plus ``extra(rows, …)``), with ``features``' signature
    (so a second parameter ``baseline_rows`` makes it a baseline metric) and ``combine``'s name and docstring
    (the formula). ``f.avv_additive`` holds the :class:`Additive` form."""

    def wrap(combine: Callable[[Any], dict[str, Any]]) -> Callable[..., dict[str, Any]]:
        def metric(*args: Any, **kwargs: Any) -> dict[str, Any]:
            out = combine(features(*args, **kwargs).sum())
            if extra is not None:
                out.update(extra(*args, **kwargs))
            return out

        metric.__name__, metric.__qualname__, metric.__doc__ = combine.__name__, combine.__qualname__, combine.__doc__
        metric.__module__ = combine.__module__
        metric.__signature__ = inspect.signature(features)  # type: ignore[attr-defined]
        metric.avv_additive = Additive(features, combine, extra)  # type: ignore[attr-defined]
        return metric

    return wrap


def _inputs_of(func: Callable[..., Any]) -> Inputs:
    params = list(inspect.signature(func).parameters)
    if not params:
        raise RegistryError(f"{func.__name__}: a metric function takes the vendor's rows as first argument")
    if params[0] == MODEL_PARAM:
        return "model"
    return "rows+baseline" if BASELINE_PARAM in params[1:2] else "rows"


class Registry:
    """Metrics by column and the functions that produce them. :data:`REGISTRY` is the package's one instance;
    tests may build their own."""

    def __init__(self) -> None:
        self._metrics: dict[str, Metric] = {}
        self._functions: list[MetricFunction] = []

    def produces(self, *metrics: Metric) -> Callable[[F], F]:
        """Decorator: register the function and every column it returns (one :class:`Metric` each).

        The function is returned unchanged. It is called as ``func(rows)``, or ``func(rows, baseline_rows)``
        when its second parameter is named ``baseline_rows``, or once per model as ``func(model_table)`` when
        its first parameter is named ``model_table`` (see :data:`MODEL_PARAM`). A column already registered (here
        or in the same call), a function registered twice or a non-:class:`Metric` argument raises
        :class:`RegistryError`.
        """
        if not metrics:
            raise RegistryError("produces() needs at least one Metric")
        seen: set[str] = set()
        for m in metrics:
            if not isinstance(m, Metric):
                raise RegistryError(f"produces() takes Metric objects, got {m!r}")
            if m.column in seen:
                raise RegistryError(f"metric {m.column!r} is declared twice in one produces()")
            seen.add(m.column)

        def register(func: F) -> F:
            for m in metrics:
                if m.column in self._metrics:
                    owner = next(f.name for f in self._functions if m.column in f.columns)
                    raise RegistryError(f"metric {m.column!r} is already registered (by {owner})")
            if any(f.func is func for f in self._functions):
                raise RegistryError(f"{func.__name__} is already registered")
            entry = MetricFunction(func, tuple(m.column for m in metrics), _inputs_of(func))
            for m in metrics:
                self._metrics[m.column] = m
            self._functions.append(entry)
            return func

        return register

    def metrics(self) -> tuple[Metric, ...]:
        """Every registered metric, by ``order`` (ties: registration order)."""
        index = {c: i for i, c in enumerate(self._metrics)}
        return tuple(sorted(self._metrics.values(), key=lambda m: (m.order, index[m.column])))

    def functions(self) -> tuple[MetricFunction, ...]:
        """Every registered per-vendor function (``rows`` / ``rows+baseline``), in registration order."""
        return tuple(f for f in self._functions if f.inputs != "model")

    def model_functions(self) -> tuple[MetricFunction, ...]:
        """Every registered model-level function, in registration order."""
        return tuple(f for f in self._functions if f.inputs == "model")

    def metric(self, column: str) -> Metric:
        try:
            return self._metrics[column]
        except KeyError:
            raise KeyError(f"unknown metric column {column!r}") from None

    def __contains__(self, column: object) -> bool:
        return column in self._metrics


#: The registry every metric of :mod:`avv_scoring.metrics.headline` and :mod:`avv_scoring.metrics.calls` is declared in.
REGISTRY = Registry()
#: ``@produces(Metric(...), ...)`` on a metric function registers it in :data:`REGISTRY`.
produces = REGISTRY.produces

METRICS: tuple[Metric, ...]  # every registered metric, in order (lazy: see the module docstring)
FUNCTIONS: tuple[MetricFunction, ...]  # every registered per-vendor function with what it needs (lazy)
MODEL_FUNCTIONS: tuple[MetricFunction, ...]  # every registered model-level function (lazy)


#: Modules whose ``@produces`` decorators fill :data:`REGISTRY` (imported on first use).
METRIC_MODULES: tuple[str, ...] = ("avv_scoring.metrics.headline", "avv_scoring.metrics.calls",
                                  "avv_scoring.metrics.client", "avv_scoring.metrics.verifiers",
                                  "avv_scoring.stats.uncertainty", "avv_scoring.metrics.trajectories")


def _load() -> Registry:
    for name in METRIC_MODULES:
        importlib.import_module(name)  # their decorators fill REGISTRY
    return REGISTRY


def __getattr__(name: str) -> Any:
    if name == "METRICS":
        return _load().metrics()
    if name == "FUNCTIONS":
        return _load().functions()
    if name == "MODEL_FUNCTIONS":
        return _load().model_functions()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def metric(column: str) -> Metric:
    """The registered :class:`Metric` of ``column``; KeyError when there is none."""
    return _load().metric(column)


def is_metric(column: str) -> bool:
    return column in _load()


def baseline_columns() -> tuple[str, ...]:
    """Columns that compare a vendor with the baseline: those of ``rows+baseline`` and model-level functions."""
    reg = _load()
    return tuple(c for f in (*reg.functions(), *reg.model_functions()) if f.inputs != "rows" for c in f.columns)


# ------------------------------------------------------------------------------------------ derived views


def irf_inputs() -> tuple[Metric, ...]:
    """The default IRF inputs (``irf=True``), in order."""
    return tuple(m for m in _load().metrics() if m.irf)


def table_metrics() -> tuple[Metric, ...]:
    """The headline table's metrics (``table=True``), by ``table_order`` (else ``order``)."""
    shown = [m for m in _load().metrics() if m.table]
    return tuple(sorted(shown, key=lambda m: m.order if m.table_order is None else m.table_order))


def count_metrics() -> tuple[Metric, ...]:
    """The count table's metrics (``count=True``), in order."""
    return tuple(m for m in _load().metrics() if m.count)


def group_metrics(group: str) -> tuple[Metric, ...]:
    """The metrics of a report group (``group=...``), in order."""
    return tuple(m for m in _load().metrics() if m.group == group)


def model_functions() -> tuple[MetricFunction, ...]:
    """The model-level functions (first parameter ``model_table``), every metric module loaded."""
    return _load().model_functions()


def per_repeat_metrics() -> tuple[Metric, ...]:
    """Metrics computed per repeat (``per_repeat=True``), in order."""
    return tuple(m for m in _load().metrics() if m.per_repeat)


def order_index() -> dict[str, int]:
    """Metric column → its position in :data:`METRICS`."""
    return {m.column: i for i, m in enumerate(_load().metrics())}


def default_thresholds() -> dict[str, Limit]:
    """Metric column → its default verdict limit, in order."""
    return {m.column: m.threshold for m in _load().metrics() if m.threshold is not None}


def limit_text(limit: Limit) -> str:
    """``("min", 0.99)`` → ``"≥ 0.99"``."""
    kind, value = limit
    return f"{'≥' if kind == 'min' else '≤'} {value:g}"


def render_metric_table(metrics: tuple[Metric, ...] | None = None) -> str:
    """The README metric table (Markdown, no trailing newline): column, header, better, IRF input, default
    threshold, formula; one row per registered metric, in order."""
    rows = ["| Column | Header | Better | IRF input | Default threshold | Formula |", "|---|---|---|---|---|---|"]
    for m in metrics if metrics is not None else _load().metrics():
        cells = [
            f"`{m.column}`",
            m.header,
            m.better,
            "yes" if m.irf else "",
            limit_text(m.threshold) if m.threshold else "",
            m.doc,
        ]
        rows.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(rows)

