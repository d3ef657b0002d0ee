"""frame_records equals DataFrame.to_dict("records"): the same keys, values and value types on every kind of
column scoring makes (numbers, NaN, booleans, strings with NA, objects holding NumPy scalars, timestamps)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from avv_core.frame_rows import frame_records


def _same(a, b) -> bool:
    if type(a) is not type(b):
        return False
    if isinstance(a, float) and math.isnan(a):
        return math.isnan(b)
    return a is b or a == b or (a is pd.NA and b is pd.NA)


FRAMES = {
    "mixed": pd.DataFrame({
        "f": [1.5, float("nan"), 3.0], "i": [1, 2, 3], "b": [True, False, True],
        "s": pd.array(["x", None, "z"], dtype="string"), "o": [np.int64(4), "w", None],
        "of": [np.float64(0.5), np.bool_(True), 7], "t": pd.to_datetime(["2026-01-01", "2026-01-02", None]),
        "n": pd.array([1, None, 3], dtype="Int64"),
    }),
    "one wide row": pd.DataFrame([{f"c{k}": (k if k % 3 else f"v{k}") for k in range(200)}]),
    "no rows": pd.DataFrame({"a": pd.Series([], dtype=float)}),
    "no columns": pd.DataFrame(index=range(2)),
}


@pytest.mark.parametrize("name", list(FRAMES))
def test_frame_records_equals_to_dict_records(name):
    frame = FRAMES[name]
    want, got = frame.to_dict("records"), frame_records(frame)
    assert len(want) == len(got)
    for w, g in zip(want, got, strict=True):
        assert list(w) == list(g)
        assert all(_same(w[k], g[k]) for k in w), [(k, w[k], g[k]) for k in w if not _same(w[k], g[k])]
