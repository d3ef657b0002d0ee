"""Rows told apart by codes, not tuples (scoring layer; declares no metric): the helpers the call annotation, the
per-tool table and the disagreements share to work once per distinct row instead of once per row.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pandas as pd

from avv_core.frame_rows import Cell
from avv_core.json_types import JSONObject


def row_codes(*arrays: np.ndarray) -> np.ndarray:
    """Per row the code of its combination of values across ``arrays`` (0, 1, … in order of first appearance, as
    ``MultiIndex.from_arrays(arrays).factorize()`` numbers them, without building a tuple per row)."""
    codes, _ = pd.factorize(arrays[0])
    for values in arrays[1:]:
        more, uniques = pd.factorize(values)
        codes, _ = pd.factorize(codes.astype(np.int64) * len(uniques) + more)  # < rows², one integer per pair
    return codes


def identity_codes(objects: np.ndarray) -> np.ndarray:
    """Per cell of an object array the code of the object it holds, told apart by identity (0, 1, … in order of first
    appearance): :func:`annotate_calls` hands every row with the same (tool set, cell) the same list objects, so
    equal codes mean equal annotations. The rows must keep the objects alive (ids of live objects never repeat)."""
    return row_codes(_ids(objects))


def _ids(objects: np.ndarray) -> np.ndarray:
    return np.fromiter(map(id, objects), dtype=np.int64, count=len(objects))


def per_distinct(objects: np.ndarray, function: Callable[[Any], object], dtype: type = bool) -> np.ndarray:
    """``function`` of each cell of an object array, called once per distinct object (:func:`identity_codes`)."""
    if not len(objects):
        return np.zeros(0, dtype=dtype)
    codes = identity_codes(objects)
    return np.array([function(objects[i]) for i in first_rows(codes)], dtype=dtype)[codes]


def first_rows(codes: np.ndarray) -> np.ndarray:
    """Per code 0 … max of a factorized column, the position of its first row."""
    firsts = np.full(int(codes.max(initial=-1)) + 1, -1, dtype=np.int64)
    firsts[codes[::-1]] = np.arange(len(codes) - 1, -1, -1)  # the last write per code is its first row
    return firsts


def item_codes(sample_ids: np.ndarray, repeats: np.ndarray, split: int) -> tuple[np.ndarray, np.ndarray] | None:
    """Integer codes of the items (sample id text, repeat number) of two sets of rows given end to end (the first
    ``split`` rows, then the others): equal exactly where both parts are equal. None when a sample id is missing
    (how pandas' joins match missing keys is left to them)."""
    ids, _ = pd.factorize(sample_ids)
    if len(ids) and int(ids.min()) < 0:
        return None
    reps, uniques = pd.factorize(repeats)
    codes = ids.astype(np.int64) * (len(uniques) + 1) + reps
    return codes[:split], codes[split:]


def last_rows(codes: np.ndarray) -> np.ndarray:
    """The position of the last row of each code, in row order (``drop_duplicates(keep="last")``'s rows)."""
    firsts_reversed = np.unique(codes[::-1], return_index=True)[1]
    return np.sort(len(codes) - 1 - firsts_reversed)


def positions_in(codes: np.ndarray, among: np.ndarray) -> np.ndarray:
    """Per code, its position in ``among`` (codes without repeats); -1 where ``among`` does not hold it."""
    order = np.argsort(among, kind="stable")
    ordered = among[order]
    at = np.searchsorted(ordered, codes)
    inside = at < len(ordered)
    found = np.zeros(len(codes), dtype=bool)
    found[inside] = ordered[at[inside]] == codes[inside]
    return np.where(found, order[np.minimum(at, len(ordered) - 1)] if len(ordered) else -1, -1)


def distinct_rows(*columns: pd.Series | np.ndarray, by: Sequence[int] | None = None
                  ) -> list[tuple[tuple[Cell, ...], int]]:
    """The distinct rows of annotation objects across ``columns``, each with how many rows hold it.

    :func:`annotate_calls` hands every row with the same (tool set, cell) the same list objects, so rows are
    told apart by the objects' identity: a per-row result computed once per distinct row and weighted is the
    per-row sum. ``by`` = the positions of the columns that decide identity (default: all); the others must
    follow from them (a row's verdicts and signatures come with its calls list)."""
    n = len(columns[0]) if columns else 0
    if not n:
        return []
    objects = [np.asarray(c, dtype=object) for c in columns]
    codes = row_codes(*(_ids(objects[k]) for k in (by or range(len(objects)))))
    firsts = first_rows(codes)
    distinct = zip(*(values[firsts].tolist() for values in objects), strict=True)  # an object array's cells as they are
    return list(zip(distinct, np.bincount(codes).tolist(), strict=True))


def row_dicts(frame: pd.DataFrame, columns: Sequence[str]) -> list[JSONObject]:
    """The rows of ``frame`` as dicts of just ``columns`` (those it has): far cheaper than ``to_dict`` over
    every column when a loop needs a few fields of each row."""
    present = [c for c in columns if c in frame.columns]
    return [dict(zip(present, values, strict=True))
            for values in zip(*(frame[c].astype("object").tolist() for c in present), strict=True)] \
        if present else [{} for _ in range(len(frame))]
