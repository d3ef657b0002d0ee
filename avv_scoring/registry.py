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
#: What a metric function is called with.
Inputs = Literal["rows", "rows+baseline"]

FMTS: tuple[str, ...] = get_args(Fmt)
BETTER: tuple[str, ...] = get_args(Better)
KINDS: tuple[str, ...] = get_args(Kind)

_COLUMN_RE = re.compile(r"^[a-z][a-z0-9_]*$")
#: Parameter name that marks a function as needing the baseline vendor's rows.
BASELINE_PARAM = "baseline_rows"


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
    columns: tuple[str, ...]  # exactly the keys of the dict it returns
    inputs: Inputs  # "rows" → func(rows); "rows+baseline" → func(rows, baseline_rows)

    @property
    def name(self) -> str:
        return self.func.__name__

    def __call__(self, rows: Any, baseline_rows: Any) -> dict[str, Any]:
        """Call with the vendor's rows (and the baseline's, when the function needs them); the result must
        hold exactly :attr:`columns`."""
        out = self.func(rows, baseline_rows) if self.inputs == "rows+baseline" else self.func(rows)
        if set(out) != set(self.columns):
            extra, missing = sorted(set(out) - set(self.columns)), sorted(set(self.columns) - set(out))
            raise RegistryError(
                f"{self.name} returned columns that differ from its declaration "
                f"(undeclared: {', '.join(extra) or '-'}; not returned: {', '.join(missing) or '-'})"
            )
        return out


F = TypeVar("F", bound=Callable[..., dict[str, Any]])


def _inputs_of(func: Callable[..., Any]) -> Inputs:
    params = list(inspect.signature(func).parameters)
    if not params:
        raise RegistryError(f"{func.__name__}: a metric function takes the vendor's rows as first argument")
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
        when its second parameter is named ``baseline_rows``. A column already registered (here or in the
        same call), a function registered twice or a non-:class:`Metric` argument raises :class:`RegistryError`.
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
        """Every registered function, in registration order."""
        return tuple(self._functions)

    def metric(self, column: str) -> Metric:
        try:
            return self._metrics[column]
        except KeyError:
            raise KeyError(f"unknown metric column {column!r}") from None

    def __contains__(self, column: object) -> bool:
        return column in self._metrics


#: The registry every metric of :mod:`avv_scoring.metrics` and :mod:`avv_scoring.call_metrics` is declared in.
REGISTRY = Registry()
#: ``@produces(Metric(...), ...)`` on a metric function registers it in :data:`REGISTRY`.
produces = REGISTRY.produces

METRICS: tuple[Metric, ...]  # every registered metric, in order (lazy: see the module docstring)
FUNCTIONS: tuple[MetricFunction, ...]  # every registered function with what it needs (lazy)


#: Modules whose ``@produces`` decorators fill :data:`REGISTRY` (imported on first use).
METRIC_MODULES: tuple[str, ...] = ("metrics", "call_metrics", "client_metrics", "verifier_metrics", "trajectories")


def _load() -> Registry:
    for name in METRIC_MODULES:
        importlib.import_module(f"{__package__}.{name}")  # their decorators fill REGISTRY
    return REGISTRY


def __getattr__(name: str) -> Any:
    if name == "METRICS":
        return _load().metrics()
    if name == "FUNCTIONS":
        return _load().functions()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def metric(column: str) -> Metric:
    """The registered :class:`Metric` of ``column``; KeyError when there is none."""
    return _load().metric(column)


def is_metric(column: str) -> bool:
    return column in _load()


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

