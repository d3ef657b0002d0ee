"""A metric's additive form (scoring layer, pure; below :mod:`.registry`): the per-item sums it is computed from.

Most metrics are formulas over sums of per-item features: success rate = Σ success / Σ 1, trigger F1 from
Σ TP, Σ FP, Σ FN, a mean TTFT = Σ ttft / Σ present. Declared once with the metric (``@additive(features)`` under
``@produces``), the form computes

- the point value: ``combine(Σ features over the vendor's rows)``;
- each repeat's value: ``combine(Σ over the repeat's rows)`` — one ``groupby(repeat).sum()``
  (:mod:`.vendor_table`);
- each bootstrap resample's value: ``combine(Σ_units weight × Σ over the unit's rows)`` — one matrix product
  for every resample and vendor at once (:mod:`avv_scoring.metrics.uncertainty`).

So ``combine`` is written once for all three: it takes a mapping sum name → a number (a pandas Series of sums)
or an array (one value per resample and vendor) and returns the columns; the helpers below (:func:`rate`,
:func:`count`, :func:`choose`) give a Python number for a number and an elementwise array for an array, the
same IEEE operations either way. A percentile of per-item values (TTFT p50) is not a sum: the form declares it as
a :class:`Quantiles` (the values, the percentile of each column), computed on the rows, a resample's values
weighted by how often their unit was drawn.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

from avv_core.frame_rows import Cell
from avv_core.measures import percentile
from avv_scoring.load import numeric
from avv_scoring.stats.tests import ratio

NAN = float("nan")

#: A sum: a number (the sums of some rows) or an array (one per resample and vendor).
Amount = float | np.ndarray
#: What ``combine`` reads: sum name → an :data:`Amount` (a pandas Series of sums is one too).
Sums = Mapping[str, Amount]
#: The columns a metric function returns (numbers, counts, texts — cells of scores.json): one vendor's row.
Columns = dict[str, Cell]


def rate(num: Amount, den: Amount) -> Amount:
    """``num / den``, missing (NaN) where ``den`` is 0: a float for numbers, elementwise for arrays."""
    if np.ndim(num) == 0 and np.ndim(den) == 0:
        return float(num) / float(den) if den else NAN
    return ratio(num, den)


def count(value: Amount) -> int | np.ndarray:
    """A sum of counts as an ``int`` (a Series of sums upcasts counts next to float sums); arrays unchanged."""
    return int(value) if np.ndim(value) == 0 else np.asarray(value)


def choose(condition: bool | np.ndarray, yes: Amount, no: Amount) -> Amount:
    """``yes`` where ``condition`` holds, else ``no``: a Python value for a number, ``numpy.where`` for arrays."""
    if np.ndim(condition) == 0 and np.ndim(yes) == 0 and np.ndim(no) == 0:
        return yes if condition else no
    return np.where(condition, yes, no)


def numbers(series: pd.Series) -> pd.Series:
    """The cells of ``series`` that hold a number, as floats (text and missing cells dropped), index kept."""
    return numeric(series).dropna().astype(float)


@dataclass(frozen=True)
class Quantiles:
    """Percentile columns of a metric function: ``values(rows, …)`` = the per-item values (a Series indexed like
    the rows they come from, missing ones dropped); column → q (0–100, linear interpolation)."""

    values: Callable[..., pd.Series]
    columns: Mapping[str, float]

    def of(self, values: pd.Series) -> Columns:
        """The percentile columns of ``values`` (those of :attr:`values`)."""
        array = values.to_numpy(dtype=float)
        return {column: percentile(array, q) for column, q in self.columns.items()}

    def point(self, *args: object) -> Columns:
        """The percentile columns of the rows ``args``."""
        return self.of(self.values(*args))


@dataclass(frozen=True)
class Additive:
    """A metric function's additive form (see the module docstring).

    ``features(rows, …)`` returns a numeric frame indexed like (a subset of) ``rows``: one row per item, one
    column per sum; ``combine(sums)`` turns the column sums into the function's columns. ``resampled`` names the
    sums a bootstrap resample needs — those its interval and IRF columns are computed from (None: every sum);
    the others are passed as 0 on a resample, so only counts without an interval may read them. ``quantiles``
    adds percentile columns (whole table and resamples only, never per repeat). ``sequential`` names float sums
    added one by one in row order (Python's ``sum``) for the point value, not by numpy's pairwise sum: a mean
    whose published value was always summed that way (argument F1) keeps its last bit.
    """

    features: Callable[..., pd.DataFrame]
    combine: Callable[[Sums], Columns]
    resampled: tuple[str, ...] | None = None
    quantiles: Quantiles | None = None
    sequential: tuple[str, ...] = ()

    def point(self, frame: pd.DataFrame) -> Columns:
        """``combine`` of the sums of ``frame`` (the features of the rows to summarise)."""
        sums = frame.sum()
        for name in self.sequential:
            sums[name] = sum(frame[name].tolist())
        return self.combine(sums)

    def resampled_sums(self, frame: pd.DataFrame) -> tuple[str, ...]:
        """The sums of ``frame``'s columns that a resample needs, in column order."""
        if self.resampled is None:
            return tuple(frame.columns)
        missing = [c for c in self.resampled if c not in frame.columns]
        if missing:
            raise KeyError(f"{self.combine.__name__}: resampled sum(s) {', '.join(missing)} not among its features")
        return tuple(c for c in frame.columns if c in self.resampled)


def additive(features: Callable[..., pd.DataFrame], resampled: tuple[str, ...] | None = None,
             quantiles: Quantiles | None = None,
             sequential: tuple[str, ...] = ()) -> Callable[[Callable[[Sums], Columns]], Callable[..., Columns]]:
    """Decorator for a ``combine(sums) -> columns`` function: the result is the metric function itself,
    ``f(rows, …) = combine(features(rows, …).sum())`` plus the ``quantiles`` columns, with ``features``' signature
    (so a second parameter ``baseline_rows`` makes it a baseline metric) and ``combine``'s name and docstring
    (the formula). ``f.avv_additive`` holds the :class:`Additive` form."""

    def wrap(combine: Callable[[Sums], Columns]) -> Callable[..., Columns]:
        form = Additive(features, combine, resampled, quantiles, sequential)

        def metric(*args: object, **kwargs: object) -> Columns:
            out = form.point(features(*args, **kwargs))
            if quantiles is not None:
                out.update(quantiles.point(*args, **kwargs))
            return out

        metric.__name__, metric.__qualname__, metric.__doc__ = combine.__name__, combine.__qualname__, combine.__doc__
        metric.__module__ = combine.__module__
        metric.__signature__ = inspect.signature(features)  # type: ignore[attr-defined]
        metric.avv_additive = form  # type: ignore[attr-defined]
        return metric

    return wrap


def form_of(func: Callable[..., object]) -> Additive | None:
    """The :class:`Additive` form of a metric function (see :func:`additive`), or None."""
    form = getattr(func, "avv_additive", None)
    return form if isinstance(form, Additive) else None


__all__ = ["NAN", "Additive", "Columns", "Quantiles", "Sums", "additive", "choose", "count", "form_of", "numbers",
           "rate"]
