"""The metric registry (scoring layer, below every metric module): every score column is declared once.

A metric function is decorated with :func:`produces`, which registers it and every column it outputs as a
:class:`~.declaration.Metric` (header, format, direction, IRF input, interval, default verdict limit, which tables
show it, formula); its additive form, when it has one (:mod:`.additive`), is declared with it. Everything else is
derived from :data:`METRICS`: ``SCORE_COLUMNS`` and ``REPEAT_COLUMNS`` (:mod:`avv_scoring.score`),
``REPEAT_METRICS`` (:mod:`.vendor_table`), ``IRF_METRICS`` and ``IRF_TABLE_COLUMNS``
(:mod:`avv_scoring.metrics.irf`), the bootstrap intervals and what is resampled (:mod:`avv_scoring.metrics.uncertainty`,
:mod:`.model_level`), the default :class:`~avv_scoring.verdict.Thresholds`, the report's tables and groups and
the docs metric table (:func:`render_metric_table`).

Registering a column twice, ``irf=True`` with ``better="none"``, or ``interval=True`` on a column no additive
form or percentile computes raises :class:`RegistryError` at import.

The registry fills itself on first use: the first read (:data:`METRICS`, :data:`FUNCTIONS`, :func:`metric`, …)
imports every module of the :mod:`avv_scoring.metrics` package, whose decorators register their metrics, then
resolves the declarations that follow from the others (:meth:`Registry.produces_derived`: the interval columns
of every ``interval=True`` metric). So a new metric module is one file in the package, listed nowhere. A metric
module must not read the registry at import (that read would see it half-filled): it raises. Metrics are ordered
by ``order``; at equal order the derived columns come after the others, the others by registration.
No I/O, no pandas; the registry holds no run state.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from avv_scoring.metrics.additive import Additive, Columns, form_of
from avv_scoring.metrics.declaration import (
    Limit,
    Metric,
    RegistryError,
)

#: What a metric function is called with: one vendor's rows (and the baseline's), or a whole model at once.
Inputs = Literal["rows", "rows+baseline", "model"]

#: Parameter name that marks a function as needing the baseline vendor's rows.
BASELINE_PARAM = "baseline_rows"
#: First-parameter name that marks a model-level function: called once per model with every vendor's rows
#: (an :class:`avv_scoring.metrics.uncertainty.ModelTable`), it returns ``{vendor: {column: value}}`` — for metrics
#: that need all vendors or settings at once (bootstrap intervals, tests, rank stability).
MODEL_PARAM = "model_table"


@dataclass(frozen=True)
class MetricFunction:
    """A registered metric function, the columns it returns and what it is called with."""

    func: Callable[..., Any]
    columns: tuple[str, ...]  # exactly the keys of the dict it returns (of each vendor's dict, for "model")
    inputs: Inputs  # "rows" → func(rows); "rows+baseline" → func(rows, baseline_rows); "model" → func(table)

    @property
    def name(self) -> str:
        return str(self.func.__name__)

    @property
    def additive(self) -> Additive | None:
        """The function's additive form (see :mod:`.additive`), or None."""
        return form_of(self.func)

    def __call__(self, rows: object, baseline_rows: object) -> Columns:
        """Call with the vendor's rows (and the baseline's, when the function needs them); the result must
        hold exactly :attr:`columns`."""
        if self.inputs == "model":
            raise RegistryError(f"{self.name} is a model-level function: call for_model(table)")
        out = self.func(rows, baseline_rows) if self.inputs == "rows+baseline" else self.func(rows)
        self._check(out)
        return dict(out)

    def for_model(self, table: object) -> dict[str, Columns]:
        """Call a model-level function with one model's table; each vendor's dict must hold exactly
        :attr:`columns`."""
        if self.inputs != "model":
            raise RegistryError(f"{self.name} is a per-vendor function: call it with the vendor's rows")
        out = self.func(table)
        for columns in out.values():
            self._check(columns)
        return dict(out)

    def _check(self, out: Columns) -> None:
        if set(out) != set(self.columns):
            extra, missing = sorted(set(out) - set(self.columns)), sorted(set(self.columns) - set(out))
            raise RegistryError(
                f"{self.name} returned columns that differ from its declaration "
                f"(undeclared: {', '.join(extra) or '-'}; not returned: {', '.join(missing) or '-'})"
            )


F = TypeVar("F", bound=Callable[..., object])
#: Declares the columns of a derived function from the metrics declared directly (see ``produces_derived``).
Declare = Callable[[Sequence[Metric]], Sequence[Metric]]


def _inputs_of(func: Callable[..., object]) -> Inputs:
    params = list(inspect.signature(func).parameters)
    if not params:
        raise RegistryError(f"{func.__name__}: a metric function takes the vendor's rows as first argument")
    if params[0] == MODEL_PARAM:
        return "model"
    return "rows+baseline" if BASELINE_PARAM in params[1:2] else "rows"


def _check_intervals(func: Callable[..., object], metrics: Sequence[Metric]) -> None:
    """An interval is resampled from the function's additive form (its sums, or one of its percentiles)."""
    wanted = [m.column for m in metrics if m.interval]
    if wanted and form_of(func) is None:
        raise RegistryError(f"{func.__name__}: an interval ({', '.join(wanted)}) needs an additive form "
                            "(@additive under @produces)")


class Registry:
    """Metrics by column and the functions that produce them. :data:`REGISTRY` is the package's one instance;
    tests may build their own."""

    def __init__(self) -> None:
        self._metrics: dict[str, Metric] = {}
        self._functions: list[MetricFunction] = []
        self._derived: set[str] = set()  # columns declared by produces_derived (after the others at equal order)
        self._pending: list[tuple[Declare, Callable[..., object]]] = []
        self._checked = False  # every column a declaration names is registered (see _resolve)
        self._ordered: tuple[Metric, ...] | None = None  # metrics() until the next registration (read per call)

    def produces(self, *metrics: Metric) -> Callable[[F], F]:
        """Decorator: register the function and every column it returns (one :class:`Metric` each).

        The function is returned unchanged. It is called as ``func(rows)``, or ``func(rows, baseline_rows)``
        when its second parameter is named ``baseline_rows``, or once per model as ``func(model_table)`` when
        its first parameter is named ``model_table`` (see :data:`MODEL_PARAM`). A column already registered (here
        or in the same call), a function registered twice or a non-:class:`Metric` argument raises
        :class:`RegistryError`.
        """
        self._check_metrics(metrics)

        def register(func: F) -> F:
            self._register(func, metrics)
            return func

        return register

    def produces_derived(self, declare: Declare) -> Callable[[F], F]:
        """Decorator for a function whose columns follow from the other declarations (the interval columns of
        every ``interval=True`` metric): ``declare(metrics)`` gets every metric registered with :meth:`produces`
        and returns this function's. It runs once, on the registry's first read after every metric module was
        imported; its columns then register like any other."""

        def register(func: F) -> F:
            self._pending.append((declare, func))
            return func

        return register

    @staticmethod
    def _check_metrics(metrics: Sequence[Metric]) -> None:
        if not metrics:
            raise RegistryError("produces() needs at least one Metric")
        seen: set[str] = set()
        for m in metrics:
            if not isinstance(m, Metric):
                raise RegistryError(f"produces() takes Metric objects, got {m!r}")
            if m.column in seen:
                raise RegistryError(f"metric {m.column!r} is declared twice in one produces()")
            seen.add(m.column)

    def _register(self, func: Callable[..., object], metrics: Sequence[Metric]) -> None:
        for m in metrics:
            if m.column in self._metrics:
                owner = next(f.name for f in self._functions if m.column in f.columns)
                raise RegistryError(f"metric {m.column!r} is already registered (by {owner})")
        if any(f.func is func for f in self._functions):
            raise RegistryError(f"{func.__name__} is already registered")
        _check_intervals(func, metrics)
        entry = MetricFunction(func, tuple(m.column for m in metrics), _inputs_of(func))
        for m in metrics:
            self._metrics[m.column] = m
        self._functions.append(entry)
        self._checked = False
        self._ordered = None

    def _resolve(self) -> None:
        """Register the pending derived declarations (see :meth:`produces_derived`), then check that every column a
        declaration names (a noise floor, its test, a regression test's other metrics) is registered."""
        if self._checked and not self._pending:
            return
        while self._pending:
            declare, func = self._pending.pop(0)
            direct = self._sorted(m for m in self._metrics.values() if m.column not in self._derived)
            metrics = tuple(declare(direct))
            self._check_metrics(metrics)
            self._register(func, metrics)
            self._derived.update(m.column for m in metrics)
        for m in self._metrics.values():
            named = [*((m.noise_floor.column, m.noise_floor.test) if m.noise_floor else ()),
                     *(m.regression.speaks_for if m.regression else ())]
            unknown = [c for c in named if c and c not in self._metrics]
            if unknown:
                raise RegistryError(f"metric {m.column!r} names unregistered columns: {', '.join(unknown)}")
        self._checked = True

    def _sorted(self, metrics: Iterable[Metric]) -> tuple[Metric, ...]:
        index = {c: i for i, c in enumerate(self._metrics)}
        return tuple(sorted(metrics, key=lambda m: (m.order, m.column in self._derived, index[m.column])))

    def metrics(self) -> tuple[Metric, ...]:
        """Every registered metric, by ``order`` (ties: derived columns last, then registration order)."""
        self._resolve()
        if self._ordered is None:
            self._ordered = self._sorted(self._metrics.values())
        return self._ordered

    def functions(self) -> tuple[MetricFunction, ...]:
        """Every registered per-vendor function (``rows`` / ``rows+baseline``), in registration order."""
        self._resolve()
        return tuple(f for f in self._functions if f.inputs != "model")

    def model_functions(self) -> tuple[MetricFunction, ...]:
        """Every registered model-level function, in registration order."""
        self._resolve()
        return tuple(f for f in self._functions if f.inputs == "model")

    def function_of(self, column: str) -> MetricFunction:
        """The function that produces ``column``; KeyError when there is none."""
        self._resolve()
        for function in self._functions:
            if column in function.columns:
                return function
        raise KeyError(f"unknown metric column {column!r}")

    def metric(self, column: str) -> Metric:
        self._resolve()
        try:
            return self._metrics[column]
        except KeyError:
            raise KeyError(f"unknown metric column {column!r}") from None

    def __contains__(self, column: object) -> bool:
        self._resolve()
        return column in self._metrics


#: The registry every metric module of :mod:`avv_scoring.metrics` declares its metrics in.
REGISTRY = Registry()
#: ``@produces(Metric(...), ...)`` on a metric function registers it in :data:`REGISTRY`.
produces = REGISTRY.produces
#: ``@produces_derived(declare)`` registers a function whose columns follow from the others (:mod:`.model_level`).
produces_derived = REGISTRY.produces_derived

METRICS: tuple[Metric, ...]  # every registered metric, in order (lazy: see the module docstring)
FUNCTIONS: tuple[MetricFunction, ...]  # every registered per-vendor function with what it needs (lazy)
MODEL_FUNCTIONS: tuple[MetricFunction, ...]  # every registered model-level function (lazy)

_state = {"loaded": False, "loading": False}


def metric_modules() -> tuple[str, ...]:
    """Every module of the :mod:`avv_scoring.metrics` package (by name): where metrics are declared."""
    package = sys.modules[__package__ or "avv_scoring.metrics"]
    return tuple(f"{package.__name__}.{info.name}" for info in sorted(pkgutil.iter_modules(package.__path__),
                                                                     key=lambda info: info.name)
                 if not info.name.startswith("_"))


def _load() -> Registry:
    """:data:`REGISTRY` with every metric module imported (their decorators fill it)."""
    if _state["loaded"]:
        return REGISTRY
    if _state["loading"]:
        raise RegistryError("the metric registry was read while the metric modules were being imported: "
                            "read it inside a function, not at a metric module's import")
    _state["loading"] = True
    try:
        for name in metric_modules():
            importlib.import_module(name)
    finally:
        _state["loading"] = False
    _state["loaded"] = True
    return REGISTRY


def __getattr__(name: str) -> object:
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


def function_of(column: str) -> MetricFunction:
    """The registered function that produces ``column``; KeyError when there is none."""
    return _load().function_of(column)


def baseline_columns() -> tuple[str, ...]:
    """Columns that compare a vendor with the baseline: those of ``rows+baseline`` and model-level functions."""
    reg = _load()
    return tuple(c for f in (*reg.functions(), *reg.model_functions()) if f.inputs != "rows" for c in f.columns)


# ------------------------------------------------------------------------------------------ derived views


def irf_inputs() -> tuple[Metric, ...]:
    """The default IRF inputs (``irf=True``), in order."""
    return tuple(m for m in _load().metrics() if m.irf)


def interval_metrics() -> tuple[Metric, ...]:
    """The metrics with a bootstrap interval (``interval=True``), by ``interval_order`` (else ``order``)."""
    return intervals_of(_load().metrics())


def intervals_of(metrics: Sequence[Metric]) -> tuple[Metric, ...]:
    """The ``interval=True`` metrics of ``metrics``, by ``interval_order`` (else ``order``)."""
    return tuple(sorted((m for m in metrics if m.interval), key=_interval_position))


def _interval_position(m: Metric) -> int:
    return m.order if m.interval_order is None else m.interval_order


def _all(metrics: Sequence[Metric] | None) -> Sequence[Metric]:
    return _load().metrics() if metrics is None else metrics


def power_metrics(metrics: Sequence[Metric] | None = None) -> tuple[Metric, ...]:
    """The metrics with sample-size columns (``power=True``) of ``metrics`` (default: the registry's), in order."""
    return tuple(m for m in _all(metrics) if m.power)


def noise_floor_metrics(metrics: Sequence[Metric] | None = None) -> tuple[Metric, ...]:
    """The metrics with a noise floor (``noise_floor=NoiseFloor(...)``), by ``interval_order`` (else ``order``)."""
    return tuple(sorted((m for m in _all(metrics) if m.noise_floor is not None), key=_interval_position))


def noise_test_metrics(metrics: Sequence[Metric] | None = None) -> tuple[Metric, ...]:
    """The metrics whose noise floor has a noise test, in the order of :func:`noise_floor_metrics`."""
    return tuple(m for m in noise_floor_metrics(metrics) if m.noise_floor is not None and m.noise_floor.test)


def regression_metrics(metrics: Sequence[Metric] | None = None) -> tuple[Metric, ...]:
    """The metrics the history tests between runs (``regression=Regression(...)``), in order."""
    return tuple(m for m in _all(metrics) if m.regression is not None)


def web_metrics(agent: bool = False, metrics: Sequence[Metric] | None = None) -> tuple[Metric, ...]:
    """The web UI's Vendors tab's metrics: the headline table's (:func:`table_metrics`), then those with a ``web``
    position (by it); a metric that needs agent tasks only when ``agent`` (the run's samples have them)."""
    chosen = _all(metrics)
    headline = _headline(chosen)
    more = sorted((m for m in chosen if m.web is not None and not m.table and (agent or m.needs != "agent")),
                  key=lambda m: m.web or 0)
    return (*headline, *more)


def prometheus_metrics(metrics: Sequence[Metric] | None = None) -> tuple[Metric, ...]:
    """The metrics exported as Prometheus gauges ``avv_<column>`` (``prometheus=`` their HELP line), in order."""
    return tuple(m for m in _all(metrics) if m.prometheus)


def render_statistics_table(metrics: Sequence[Metric] | None = None) -> str:
    """The docs table of what each metric has besides its value (docs/reference/metrics.md; Markdown, no trailing
    newline): interval, noise floor and its test, power estimate, history test, web UI, Prometheus; one row per
    metric that has any of them, in order."""
    rows = ["| Column | 95 % interval | Noise floor (test) | Sample size | History test | Web UI | Prometheus |",
            "|---|---|---|---|---|---|---|"]
    web = {m.column for m in web_metrics(agent=True, metrics=metrics)}
    for m in _all(metrics):
        floor = m.noise_floor
        cells = [
            "yes" if m.interval else "",
            (f"`{floor.column}`" + (f" (`{floor.test}`)" if floor.test else "")) if floor else "",
            "yes" if m.power else "",
            m.regression.kind if m.regression else "",
            ("agent runs" if m.needs == "agent" else "yes") if m.column in web else "",
            f"`avv_{m.column}`" if m.prometheus else "",
        ]
        if any(cells):
            rows.append("| " + " | ".join([f"`{m.column}`", *cells]) + " |")
    return "\n".join(rows)


def interval_sentence(metrics: Sequence[Metric] | None = None) -> str:
    """The docs' list of the metrics with an interval, by their headers: "A, B and C"."""
    headers = [m.header for m in intervals_of(_all(metrics))]
    return ", ".join(headers[:-1]) + (" and " if len(headers) > 1 else "") + headers[-1] if headers else "none"


def table_metrics() -> tuple[Metric, ...]:
    """The headline table's metrics (``table=True``), by ``table_order`` (else ``order``)."""
    return _headline(_load().metrics())


def _headline(metrics: Sequence[Metric]) -> tuple[Metric, ...]:
    return tuple(sorted((m for m in metrics if m.table), key=lambda m: m.order if m.table_order is None
                        else m.table_order))


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
    """The docs metric table (docs/reference/metrics.md; Markdown, no trailing newline): column, header, better, IRF
    input, default threshold, formula; one row per registered metric, in order."""
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
