"""All metrics of one vendor, pooled and per repeat (scoring layer, pure): runs the functions registered in
:mod:`avv_scoring.metrics.registry` by the metric modules (every module of this package) over the rows of one
(model, vendor) and its baseline, and summarises repeats.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np
import pandas as pd

from avv_core.json_types import JSONObject
from avv_core.samples import Gold
from avv_scoring.load import ToolsBySample
from avv_scoring.metrics import registry
from avv_scoring.metrics.additive import NAN, Additive, Columns, Quantiles, numbers
from avv_scoring.metrics.calls import TC_N
from avv_scoring.metrics.frame_memo import FrameMemo, Store, repeat_numbers
from avv_scoring.metrics.headline import annotate_tool_calls
from avv_scoring.metrics.registry import MetricFunction


def vendor_metrics(
    rows: pd.DataFrame,
    baseline_rows: pd.DataFrame,
    tools_by_sample: ToolsBySample | None = None,
    functions: Sequence[MetricFunction] | None = None,
    gold_by_sample: Mapping[str, Gold] | None = None,
) -> JSONObject:
    """Every registered metric for one vendor, as one flat dict (the baseline passes its own rows).

    Calls each function of ``functions`` (default: every registered one, see :mod:`avv_scoring.metrics.registry`)
    with the vendor's rows, plus the baseline's rows when it needs them. Rows without the columns of
    :func:`annotate_tool_calls` are annotated here (both sides) from ``tools_by_sample`` / ``gold_by_sample``.
    """
    if TC_N not in rows.columns:
        rows = annotate_tool_calls(rows, tools_by_sample, gold_by_sample)
    if TC_N not in baseline_rows.columns:
        baseline_rows = annotate_tool_calls(baseline_rows, tools_by_sample, gold_by_sample)
    out: JSONObject = {}
    for function in registry.FUNCTIONS if functions is None else functions:  # every metric module loaded
        out.update(function(rows, baseline_rows))
    return out


class FeatureFrames:
    """The per-item features (and percentile values) of the additive forms over one vendor's rows and its
    baseline's, each computed once: forms that share a features function read the same frame, and the bootstrap
    (:func:`avv_scoring.metrics.uncertainty.vendor_sums`) reads the frames the point values were computed from.

    ``memo`` keeps what several metric functions derive from the same rows (:mod:`.frame_memo`) while it is open
    (:func:`vendor_tables` opens it; so does the caller for its other tables of the vendor); ``baseline_store``
    keeps the baseline's values for the model's next vendor (pass the same dict for every vendor of a model)."""

    def __init__(self, rows: pd.DataFrame, baseline_rows: pd.DataFrame, baseline_store: Store | None = None) -> None:
        self.rows, self.baseline_rows = rows, baseline_rows
        self._frames: dict[Callable[..., pd.DataFrame], pd.DataFrame] = {}
        self._values: dict[Callable[..., pd.Series], pd.Series] = {}
        self.memo = FrameMemo()
        self.memo.add(baseline_rows, baseline_store)
        self.memo.add(rows)  # the baseline's own rows share its store
        self._samples: tuple[np.ndarray, pd.Index] | None = None

    def samples(self) -> tuple[np.ndarray, pd.Index]:
        """Per row of :attr:`rows` the code of its sample id (text), and the sample ids in order of appearance."""
        if self._samples is None:
            codes, uniques = pd.factorize(self.rows["sample_id"].astype("object").astype(str))
            self._samples = (codes, pd.Index(uniques))
        return self._samples

    def sample_codes(self, index: pd.Index) -> np.ndarray:
        """The sample code (:meth:`samples`) of each row of :attr:`rows` labelled ``index`` (a features frame's)."""
        codes = self.samples()[0]
        own = self.rows.index
        if index is own or (own.is_unique and index.equals(own)):
            return codes
        return pd.Series(codes, index=own).loc[index].to_numpy()

    def args(self, function: MetricFunction) -> tuple[pd.DataFrame, ...]:
        """What ``function`` (and its form's features) is called with."""
        return (self.rows, self.baseline_rows) if function.inputs == "rows+baseline" else (self.rows,)

    def features(self, function: MetricFunction, form: Additive) -> pd.DataFrame:
        """``form.features`` over the rows ``function`` reads."""
        frame = self._frames.get(form.features)
        if frame is None:
            frame = self._frames[form.features] = form.features(*self.args(function))
        return frame

    def values(self, function: MetricFunction, quantiles: Quantiles) -> pd.Series:
        """The per-item values the percentiles of ``quantiles`` are taken of."""
        values = self._values.get(quantiles.values)
        if values is None:
            values = self._values[quantiles.values] = quantiles.values(*self.args(function))
        return values


def vendor_tables(rows: pd.DataFrame, baseline_rows: pd.DataFrame,
                  frames: FeatureFrames | None = None) -> tuple[Columns, pd.DataFrame]:
    """:func:`vendor_metrics` and :func:`per_repeat` of one vendor at once: each additive function's per-row
    features are computed once and give both the whole-table sums and the per-repeat groupby sums. ``frames``
    (of these rows) keeps the features for the caller (the bootstrap's sums)."""
    frames = frames if frames is not None else FeatureFrames(rows, baseline_rows)
    with frames.memo.opened():
        return _vendor_tables(rows, baseline_rows, frames)


def _vendor_tables(rows: pd.DataFrame, baseline_rows: pd.DataFrame,
                   frames: FeatureFrames) -> tuple[Columns, pd.DataFrame]:
    repeats = _repeat_numbers(rows)
    repeat_numbers = sorted(set(repeats.tolist()))
    wanted = set(_repeat_metrics())
    pooled: Columns = {}
    table: dict[int, Columns] = {r: {} for r in repeat_numbers}
    looped = []
    repeat_sums: dict[int, pd.DataFrame] = {}  # id of a features frame → its per-repeat sums
    for function in registry.FUNCTIONS:
        form = function.additive
        per_repeat_too = bool(set(function.columns) & wanted)
        if form is None:
            pooled.update(function(rows, baseline_rows))
            if per_repeat_too:
                looped.append(function)
            continue
        features = frames.features(function, form)
        pooled.update(form.point(features))
        if form.quantiles is not None:
            pooled.update(form.quantiles.of(frames.values(function, form.quantiles)))
        if per_repeat_too:
            sums = repeat_sums.get(id(features))
            if sums is None:
                sums = repeat_sums[id(features)] = features.groupby(repeats.reindex(features.index).to_numpy()).sum()
            empty = features.iloc[:0].sum()
            for r in repeat_numbers:
                table[r].update(form.combine(sums.loc[r] if r in sums.index else empty))
    if looped:
        _call_per_repeat(looped, rows, repeats, baseline_rows, repeat_numbers, table)
    columns = _repeat_metrics()
    by_repeat = pd.DataFrame([{"repeat": r, **{m: table[r].get(m, NAN) for m in columns}} for r in repeat_numbers],
                             columns=["repeat", *columns])
    return pooled, by_repeat


def _repeat_metrics() -> tuple[str, ...]:
    """Metrics computed per repeat (registry: ``per_repeat=True``), every metric module loaded."""
    return tuple(m.column for m in registry.per_repeat_metrics())


def _repeat_functions() -> tuple[MetricFunction, ...]:
    """The functions that produce the per-repeat metrics (per_repeat computes only these)."""
    wanted = set(_repeat_metrics())
    return tuple(f for f in registry.FUNCTIONS if set(f.columns) & wanted)


def __getattr__(name: str) -> object:
    # REPEAT_METRICS is read lazily: metric modules registered after this one (registry.METRIC_MODULES) add to it.
    if name == "REPEAT_METRICS":
        return _repeat_metrics()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


#: Metrics computed per repeat and summarised as mean ± std across repeats (registry: ``per_repeat=True``).
REPEAT_METRICS: tuple[str, ...]  # lazy: see __getattr__


def per_repeat(
    rows: pd.DataFrame,
    baseline_rows: pd.DataFrame,
    tools_by_sample: ToolsBySample | None = None,
) -> pd.DataFrame:
    """One row per repeat number with :data:`REPEAT_METRICS` computed on that repeat's items only
    (F1 joins the vendor's repeat r with the baseline's repeat r): :func:`vendor_tables`' second table.

    Vectorised: a function with an additive form (:func:`avv_scoring.metrics.registry.additive`) computes its
    per-row features once and the repeats are one ``groupby(repeat).sum()``; only a function without one
    (multi-call similarity: a histogram cosine) is called per repeat. Equal to :func:`per_repeat_loop`."""
    if TC_N not in rows.columns:
        rows = annotate_tool_calls(rows, tools_by_sample)
    if TC_N not in baseline_rows.columns:
        baseline_rows = annotate_tool_calls(baseline_rows, tools_by_sample)
    return vendor_tables(rows, baseline_rows)[1]


def _call_per_repeat(functions: Sequence[MetricFunction], rows: pd.DataFrame, repeats: pd.Series,
                     baseline_rows: pd.DataFrame, numbers: Sequence[int], table: dict[int, JSONObject]) -> None:
    """Call non-additive per-repeat ``functions`` on each repeat's rows (vendor repeat r with baseline repeat r)."""
    parts = _repeat_parts(rows, repeats)
    base_parts = _repeat_parts(baseline_rows, _repeat_numbers(baseline_rows))
    for r in numbers:
        base = base_parts.get(r, baseline_rows.iloc[:0])
        table[r].update(vendor_metrics(parts.get(r, rows.iloc[:0]), base, functions=functions))


def _repeat_parts(rows: pd.DataFrame, repeats: pd.Series) -> dict[int, pd.DataFrame]:
    """Each repeat's rows as a slice of one stable sort by repeat: one take of the (wide) frame instead of a
    boolean-mask copy per repeat, which cost ~7 ms per repeat on a 60-column table (2 s at 100 repeats)."""
    keys = repeats.reindex(rows.index).to_numpy()
    if len(keys) and (keys == keys[0]).all():  # one repeat: its rows are the frame itself (the memo knows it)
        return {int(keys[0]): rows}
    order = np.argsort(keys, kind="stable")
    ordered, keys = rows.iloc[order], keys[order]
    cuts = np.flatnonzero(np.diff(keys)) + 1
    starts, ends = np.r_[0, cuts], np.r_[cuts, len(keys)]
    return {int(keys[a]): ordered.iloc[a:b] for a, b in zip(starts, ends, strict=True) if b > a}


def per_repeat_loop(rows: pd.DataFrame, baseline_rows: pd.DataFrame) -> pd.DataFrame:
    """:func:`per_repeat` the slow, obvious way — every per-repeat function called on each repeat's rows —
    kept as the reference the vectorised table is tested against."""
    repeats, base_repeats = _repeat_numbers(rows), _repeat_numbers(baseline_rows)
    columns, functions = _repeat_metrics(), _repeat_functions()
    out = []
    for r in sorted(set(repeats.tolist())):
        metrics = vendor_metrics(rows[repeats == r], baseline_rows[base_repeats == r], functions=functions)
        out.append({"repeat": r, **{m: metrics[m] for m in columns}})
    return pd.DataFrame(out, columns=["repeat", *columns])


def _repeat_numbers(rows: pd.DataFrame) -> pd.Series:
    return repeat_numbers(rows)


def repeat_summary(by_repeat: pd.DataFrame) -> JSONObject:
    """``<metric>_mean`` and ``<metric>_std`` across repeats for each of :data:`REPEAT_METRICS`.

    mean = arithmetic mean of the per-repeat values that are present; std = sample standard deviation
    (ddof = 1) of those values, missing with fewer than two. ``n_repeats`` = number of repeats.
    """
    out: JSONObject = {"n_repeats": len(by_repeat)}
    for m in _repeat_metrics():
        values = numbers(by_repeat[m]).to_numpy() if m in by_repeat.columns else np.array([])
        out[f"{m}_mean"] = float(values.mean()) if values.size else NAN
        out[f"{m}_std"] = float(values.std(ddof=1)) if values.size >= 2 else NAN
    return out
