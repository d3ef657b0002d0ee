"""A table's rows as dicts, as ``DataFrame.to_dict("records")`` gives them, ten times faster on the wide tables
scoring makes (scores.csv has ~180 columns: pandas reads each column through ``iloc``, ~26 ms for one row, and
every report section asked again). Values are Python scalars exactly as pandas boxes them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeAlias

if TYPE_CHECKING:
    import pandas as pd

#: One cell of a table (records.csv read back, scores.csv about to be written): a Python scalar as pandas boxes
#: it, or None; like a CSV cell, its reader checks its type.
Cell: TypeAlias = Any
#: One row of such a table: column → cell.
TableRow: TypeAlias = dict[str, Cell]


def frame_records(frame: pd.DataFrame) -> list[TableRow]:
    """``frame.to_dict("records")``: the same keys, values and value types. One conversion of the whole table to
    Python objects (NumPy's ``astype(object)`` makes numbers Python scalars), then object and extension columns
    boxed with pandas' own ``maybe_box_native``, as ``to_dict`` does; no column is read as a Series."""
    from pandas.api.types import is_extension_array_dtype, is_object_dtype
    from pandas.core.dtypes.cast import maybe_box_native

    names = list(frame.columns)
    if not names:
        return [{} for _ in range(len(frame))]
    boxed = [i for i, dtype in enumerate(frame.dtypes) if is_object_dtype(dtype) or is_extension_array_dtype(dtype)]
    rows = frame.to_numpy(dtype=object).tolist()
    for row in rows:
        for i in boxed:
            row[i] = maybe_box_native(row[i])
    return [dict(zip(names, row, strict=True)) for row in rows]
