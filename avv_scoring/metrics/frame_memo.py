"""Values derived from one vendor's rows that several metric functions read, computed once per frame (scoring layer,
pure; declares no metric; below every metric module).

On a few dozen records a metric's cost is pandas' per-call overhead, not work per row, and many functions start
from the same derived values: the repeat numbers, the trigger side of the baseline, the call pairs, the
trajectories. A function decorated with :func:`per_frame` (one frame in) or read through :func:`shared` is computed
once per frame while a :class:`FrameMemo` is open (:class:`avv_scoring.metrics.vendor_table.FeatureFrames` opens one
for one vendor's rows and its baseline's; the baseline's values are kept for the model's next vendor). Frames are
told apart by identity, so a value is only reused for the very frame it was computed from; outside an open memo,
or for another frame (a repeat's rows, a test's frame), the function is simply called. Callers must not modify a
value they are handed: the next caller gets the same object.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from functools import wraps
from typing import TypeVar, cast

import numpy as np
import pandas as pd

from avv_scoring.load import numeric

T = TypeVar("T")
#: What is kept for one frame: key → value.
Store = dict[Hashable, object]


class FrameMemo:
    """The stores of the frames one scoring step reads (each frame's values by key)."""

    def __init__(self) -> None:
        self._frames: dict[int, tuple[pd.DataFrame, Store]] = {}

    def add(self, frame: pd.DataFrame, store: Store | None = None) -> Store:
        """Keep values for ``frame`` in ``store`` (a new one by default; a shared one keeps them beyond this memo)."""
        entry = self._frames.get(id(frame))
        if entry is not None and entry[0] is frame:
            return entry[1]
        kept = store if store is not None else {}
        self._frames[id(frame)] = (frame, kept)
        return kept

    def store_of(self, frame: pd.DataFrame) -> Store | None:
        entry = self._frames.get(id(frame))
        return entry[1] if entry is not None and entry[0] is frame else None

    @contextmanager
    def opened(self) -> Iterator[FrameMemo]:
        """Make this memo the one :func:`shared` reads, until the block ends."""
        token = _OPEN.set(self)
        try:
            yield self
        finally:
            _OPEN.reset(token)


_OPEN: ContextVar[FrameMemo | None] = ContextVar("avv_frame_memo", default=None)


def store_for(frame: pd.DataFrame) -> Store | None:
    """The open memo's store of ``frame`` (None: no memo open, or ``frame`` is not one of its frames)."""
    memo = _OPEN.get()
    return memo.store_of(frame) if memo is not None else None


def shared(frame: pd.DataFrame, key: Hashable, compute: Callable[[], T]) -> T:
    """``compute()``, kept under ``key`` in the open memo's store of ``frame`` (computed each time without one)."""
    store = store_for(frame)
    if store is None:
        return compute()
    if key not in store:
        store[key] = compute()
    return cast(T, store[key])  # stored by this function under this key, so of compute's type


def per_frame(function: Callable[[pd.DataFrame], T]) -> Callable[[pd.DataFrame], T]:
    """Decorator: ``function(frame)`` computed once per frame of the open memo (see the module docstring)."""

    @wraps(function)
    def once(frame: pd.DataFrame) -> T:
        return shared(frame, once, lambda: function(frame))

    return once


@per_frame
def repeat_numbers(frame: pd.DataFrame) -> pd.Series:
    """Each row's repeat number as an int (a missing or unreadable cell = 1), indexed like ``frame``."""
    return numeric(frame["repeat"]).fillna(1).astype(int)


@per_frame
def item_keys(frame: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Each row's item as (sample id as text, repeat number: :func:`repeat_numbers`), two arrays."""
    return (frame["sample_id"].astype("object").astype(str).to_numpy(dtype=object),
            repeat_numbers(frame).to_numpy())


__all__ = ["FrameMemo", "Store", "item_keys", "per_frame", "repeat_numbers", "shared", "store_for"]
