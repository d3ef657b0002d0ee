"""records.csv on disk: the append-only writer that never leaves a torn row, and the readers.

The columns and their types are declared once, in :mod:`avv_core.records`; this module only moves rows
between that schema and the file (whole-row appends, torn-tail cuts, column upgrades for a resumed run, the
typed pandas reader ``avv_scoring`` uses).
"""

from __future__ import annotations

import csv
import io
import logging
import os
import re
from collections.abc import Callable, Iterable, Mapping

from avv_core.errors import InputError
from avv_core.json_types import JSONMapping, JSONObject, JSONValue
from avv_core.records import COLUMN_KINDS, COLUMN_NAMES, bounds, encode_cells, encode_rows, header_line, out_of_range

log = logging.getLogger(__name__)

# Tool-call arguments can be megabytes (a vendor streaming a huge argument is a case we record).
csv.field_size_limit(2**31 - 1)


class RecordWriteError(OSError):
    """records.csv could not be written (disk full, folder gone, read-only): the run must stop."""


class RecordWriter:
    """Append-only writer for records.csv that never leaves a torn row.

    Each batch (one item's rows) is one ``os.write`` of whole lines. When a write fails or is short
    (``ENOSPC`` part-way), the file is cut back to its size before the write and
    :class:`RecordWriteError` is raised, so the file holds only whole rows. Opening a file whose last
    line is torn (a process killed mid-write) cuts that tail first, so a resumed run appends after a
    whole row, never onto a fragment.
    """

    def __init__(self, path: str | os.PathLike[str]):
        self.path = os.fspath(path)
        try:
            self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            self._size = os.fstat(self._fd).st_size
            if self._size:
                self._size = cut_torn_tail(self.path, self._fd, self._size)
            if self._size == 0:
                self._append(header_line())
        except OSError as exc:
            raise RecordWriteError(exc.errno, f"cannot write {self.path}: {exc.strerror}") from None
        self.rows_written = 0

    def _append(self, data: bytes) -> None:
        before = self._size
        try:
            written = os.write(self._fd, data)
            if written != len(data):
                raise OSError(28, "No space left on device (short write)")
        except OSError as exc:
            try:
                os.ftruncate(self._fd, before)
            except OSError:
                pass
            raise RecordWriteError(exc.errno, f"cannot write {self.path}: {exc.strerror}") from None
        self._size = before + written

    def write_many(self, records: list[JSONMapping]) -> None:
        """Append the rows of one item in one write (all of them or, on failure, none)."""
        if records:
            self._append(encode_rows(records))
            self.rows_written += len(records)

    def write(self, record: JSONMapping) -> None:
        self.write_many([record])

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def cut_torn_tail(path: str, fd: int, size: int) -> int:
    """Cut a last line without a line end (a torn row) off the file open on ``fd``; the new size."""
    with open(path, "rb") as fh:
        fh.seek(max(0, size - 65536))
        tail = fh.read()
    if tail.endswith(b"\n"):
        return size
    cut = tail.rfind(b"\n")
    if cut < 0 and size > len(tail):  # a torn row longer than 64 KiB: find its start the slow way
        with open(path, "rb") as fh:
            data = fh.read()
        new_size = data.rfind(b"\n") + 1
    else:
        new_size = size - len(tail) + cut + 1
    log.warning("%s: cutting a torn last row (%d bytes without a line end)", path, size - new_size)
    os.ftruncate(fd, new_size)
    return new_size


def _parse(kind: str, text: str) -> JSONValue:
    if text == "":
        return None
    if kind == "bool":
        return text.strip().lower() in ("true", "1", "yes")
    if kind == "int":
        return int(float(text))
    if kind == "float":
        return float(text)
    return text


def parse_row(row: Mapping[str, str]) -> JSONObject:
    """Typed values for one CSV row; empty cells become None."""
    return {name: _parse(COLUMN_KINDS.get(name, "str"), value or "") for name, value in row.items()}


def read_rows(path: str | os.PathLike[str]) -> tuple[list[str], list[list[str]]]:
    """The header and the rows of a records.csv, as text cells: the one reader of records files.

    A torn last line (a process killed mid-write) is dropped with a warning. Any other row whose number
    of cells differs from the header's is an :class:`InputError` naming the file and line (two rows glued
    together by an append onto a torn fragment, a hand edit gone wrong): such rows are never scored.
    """
    path = os.fspath(path)
    with open(path, encoding="utf-8", newline="") as fh:
        text = fh.read()
    if text and not text.endswith("\n"):
        cut = text.rfind("\n") + 1
        log.warning("%s: dropping a torn last row (%d bytes without a line end)", path, len(text) - cut)
        text = text[:cut]
    text, restore = _protect_bare_cr(text)
    reader = csv.reader(io.StringIO(text))
    header = next(reader, None)
    if header is None:
        return list(COLUMN_NAMES), []
    rows = []
    width = len(header)
    for row in reader:
        if len(row) != width:
            raise InputError(f"{path}:{reader.line_num}: {len(row)} cells where the header has {width} "
                             "(a torn or glued row); fix or remove that line")
        rows.append(restore(row) if restore is not None else row)
    return header, rows


def _protect_bare_cr(text: str) -> tuple[str, Callable[[list[str]], list[str]] | None]:
    """Files written before cells with ``\\r`` were quoted hold a bare ``\\r`` inside an unquoted cell, which
    Python's csv reader takes for a line end ("new-line character seen in unquoted field"). Rows always end
    with ``\\n``, so a ``\\r`` not followed by ``\\n`` is text: it is swapped for a character the file does not
    hold while parsing, and swapped back in the cells."""
    if "\r" not in text:
        return text, None
    stand_in = next(chr(c) for c in range(0xE000, 0xF900) if chr(c) not in text)
    text = _BARE_CR.sub(stand_in, text)
    return text, lambda row: [cell.replace(stand_in, "\r") if stand_in in cell else cell for cell in row]


_BARE_CR = re.compile("\r(?!\n)")


def upgrade_columns(path: str | os.PathLike[str]) -> bool:
    """Rewrite a records.csv written with other columns (an older avv-locust) into today's columns, so a
    resumed run appends rows of the same width: columns it lacks stay empty (missing), never invented.
    Atomic (a temp file renamed over it). False when nothing had to change. InputError for a column this
    version does not know (a newer file, or not a records.csv)."""
    path = os.fspath(path)
    header, rows = read_rows(path)
    if header == list(COLUMN_NAMES):
        return False
    unknown = [c for c in header if c not in COLUMN_KINDS]
    if unknown:
        raise InputError(f"{path}: unknown column(s) {', '.join(unknown)}: written by another version of avv-locust? "
                         "start a new run folder")
    position = {name: i for i, name in enumerate(header)}
    buf = io.StringIO()
    buf.write(encode_cells(COLUMN_NAMES))
    for row in rows:
        buf.write(encode_cells([row[position[c]] if c in position else "" for c in COLUMN_NAMES]))
    tmp = path + ".tmp"
    try:
        with open(tmp, "w", encoding="utf-8", newline="") as fh:
            fh.write(buf.getvalue())
        os.replace(tmp, path)
    except OSError:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    log.warning("%s: columns upgraded to this version's (%d rows kept; new columns empty)", path, len(rows))
    return True


def _whole_lines(path: str) -> bytes:
    """The file's bytes up to its last line end: a torn last row (a process killed mid-write) is dropped
    with a warning."""
    with open(path, "rb") as fh:
        data = fh.read()
    if data and not data.endswith(b"\n"):
        cut = data.rfind(b"\n") + 1
        log.warning("%s: dropping a torn last row (%d bytes without a line end)", path, len(data) - cut)
        data = data[:cut]
    return data


def read_records(path: str | os.PathLike[str]):
    """Read a records.csv into a pandas DataFrame with typed columns (nullable ints, floats, booleans); rows
    holding a number no record can hold are left out with a warning (see :func:`read_records_checked`)."""
    frame, excluded = read_records_checked(path)
    for problem in excluded:
        log.warning("%s", problem)
    return frame


def read_records_checked(path: str | os.PathLike[str]):
    """Read a records.csv: the typed DataFrame and the rows left out, each named by file, line, item and cell.

    Parsed by pandas' C reader (records files reach millions of rows). The rules are :func:`read_rows`'s:
    a torn last row is dropped with a warning; any other row whose number of cells differs from the
    header's is an InputError naming the file and line. Missing values stay missing (NaN / <NA>), never 0.
    Only ``\\n`` ends a row (a bare ``\\r`` in an older file is text), unless the file's lines end in ``\\r\\n``.

    A row whose number cell is not a number, not finite, not whole in an int column or outside the column's
    bounds (:func:`avv_core.records.out_of_range`) cannot be a record: it is left out and named, so one
    bad cell never stops the scoring of a run.
    """
    import pandas as pd

    path = os.fspath(path)
    data = _whole_lines(path)
    if not data or data.isspace():  # not data.strip(): that copied the whole file
        return coerce_frame(pd.DataFrame(columns=list(COLUMN_NAMES))), []
    header_end = data.find(b"\n")
    header = next(csv.reader([data[:header_end].decode("utf-8", "replace")]), [])
    # rows end with \n; a \r elsewhere is text (the C reader would otherwise end a row at it)
    terminator = {} if data[header_end - 1:header_end] == b"\r" else {"lineterminator": "\n"}
    try:
        try:  # numbers parsed by the C reader itself: converting 21 text columns afterwards cost ~5 s per 1 M rows
            dtype, na_values = _typed_columns(header)
            frame = pd.read_csv(io.BytesIO(data), dtype=dtype, keep_default_na=False, na_values=na_values,
                                engine="c", encoding="utf-8", **terminator)
            typed = True
        except (ValueError, OverflowError, TypeError) as exc:
            if isinstance(exc, pd.errors.ParserError):
                raise
            typed = False
            # a cell that is not a number (a hand-edited file): read as text, checked below
            frame = pd.read_csv(io.BytesIO(data), dtype=str, keep_default_na=False, na_filter=False, engine="c",
                                encoding="utf-8", **terminator)
    except pd.errors.ParserError:
        read_rows(path)  # names the line of the row with too many cells
        raise
    # The C reader fills a row with too few cells with empty ones (and refuses one with too many). Only an
    # empty last cell can hide a short row: then the cells are counted, and a short row named by its line.
    last = frame[header[-1]] if len(frame) and header else None
    if last is not None and (last.isna() | (last == "")).any():
        if _separators_outside_quotes(data) != (len(header) - 1) * (len(frame) + 1):
            read_rows(path)  # names the line of a row with too few cells
    frame, excluded = _without_impossible_numbers(frame, path)
    return coerce_frame(frame, copy=False, empties_missing=typed), excluded


def _without_impossible_numbers(frame, path: str):
    """``frame`` without the rows whose number cells no record can hold, and a message per row left out."""
    import numpy as np
    import pandas as pd

    bad = np.zeros(len(frame), dtype=bool)
    reasons: dict[int, tuple[str, str]] = {}
    for col in frame.columns:
        if COLUMN_KINDS.get(col) not in ("int", "float"):
            continue
        series = frame[col]
        if series.dtype == object or pd.api.types.is_string_dtype(series.dtype):
            text = series.astype("string").fillna("").str.strip()
            numbers = pd.to_numeric(text.mask(text == ""), errors="coerce")
            not_number = ((text != "") & numbers.isna()).to_numpy(dtype=bool)
            values = numbers.astype("float64").to_numpy(dtype=float, na_value=np.nan)
        else:
            text = None
            not_number = np.zeros(len(frame), dtype=bool)
            values = series.astype("float64").to_numpy(dtype=float, na_value=np.nan)
        present = ~np.isnan(values)
        candidates = not_number | (present & ~np.isfinite(values))
        low, high = bounds(col)
        with np.errstate(invalid="ignore"):
            if low is not None:
                candidates |= present & (values < low)
            if high is not None:
                candidates |= present & (values > high)
            if COLUMN_KINDS[col] == "int":
                candidates |= present & np.isfinite(values) & (values != np.floor(values))
        for i in np.flatnonzero(candidates):
            why = "is not a number" if not_number[i] else out_of_range(col, float(values[i])) or "is out of range"
            reasons.setdefault(int(i), (col, why))
        bad |= candidates
    if not bad.any():
        return frame, []
    found = _rows_at(path, set(reasons))
    header = list(frame.columns)
    excluded = []
    for row, (col, why) in sorted(reasons.items()):
        line, cells = found[row] if row in found else ("?", [])
        value = dict(zip(header, cells, strict=True)) if len(cells) == len(header) else {}
        item = ", ".join(f"{k} {value.get(k, '?')}" for k in ("model", "vendor", "sample_id", "repeat") if k in header)
        excluded.append(f"{path}:{line}: row left out ({item}): {col} {value.get(col, '?')[:40]!r} {why}")
    return frame.loc[~bad].reset_index(drop=True), excluded


def _rows_at(path: str, rows: set[int]) -> dict[int, tuple[int, list[str]]]:
    """The line (1-based, the header is line 1) where each of the data rows ``rows`` (0-based) begins, and its
    cells as the file holds them (a row is named with the text a user finds in the file)."""
    found: dict[int, tuple[int, list[str]]] = {}
    with open(path, encoding="utf-8", errors="replace", newline="") as fh:
        text = fh.read()
    text, restore = _protect_bare_cr(text)
    reader = csv.reader(io.StringIO(text))
    next(reader, None)
    start = reader.line_num + 1
    for index, cells in enumerate(reader):
        if index in rows:
            found[index] = (start, restore(cells) if restore is not None else cells)
            if len(found) == len(rows):
                break
        start = reader.line_num + 1
    return found


def _separators_outside_quotes(data: bytes) -> int:
    """Commas outside quoted fields in CSV bytes: every quote toggles "inside" (an escaped "" toggles twice),
    so a running XOR of the quote flags marks the quoted bytes. ~1 s per 1 M records, in 16 MiB chunks."""
    import numpy as np

    array = np.frombuffer(data, dtype=np.uint8)
    count, inside = 0, 0
    for start in range(0, len(array), 1 << 24):
        chunk = array[start:start + (1 << 24)]
        quoted = np.bitwise_xor.accumulate((chunk == ord('"')).view(np.uint8))
        if inside:
            quoted ^= 1
        count += int(np.count_nonzero((chunk == ord(",")) & (quoted == 0)))
        inside = int(quoted[-1])
    return count


def _typed_columns(header: list[str]) -> tuple[JSONObject, dict[str, list[str]]]:
    """read_csv's dtype and na_values for a header: numbers typed, text as pandas' string dtype, everything else
    text, the last column text too (see :func:`read_records`); an empty cell is missing in every column the schema
    knows (as :func:`coerce_frame` makes it: masking ``""`` afterwards cost ~0.5 s per 1 M rows), text in the
    others."""
    dtype: dict[str, str | type[str]] = {}
    na_values: dict[str, list[str]] = {}
    for col in header:
        kind = COLUMN_KINDS.get(col)
        if kind in ("int", "float") and col != header[-1]:
            dtype[col] = "Int64" if kind == "int" else "float64"
        elif kind in ("str", "json"):
            dtype[col] = "string"  # the schema's text dtype straight from the reader, not converted afterwards
        else:
            dtype[col] = str
        if kind is not None:
            na_values[col] = [""]
    return dtype, na_values


_TRUE = frozenset({"true", "1", "yes"})


def coerce_frame(frame, *, copy: bool = True, empties_missing: bool = False):
    """Give a frame of strings the schema's dtypes (used for CSVs and hand-built test tables): an empty cell
    is missing; ints are nullable, bools are ``true`` / ``1`` / ``yes`` (any case) or false, text is
    pandas' string dtype. ``copy=False`` converts a frame nobody else holds in place. ``empties_missing``: the
    reader already made every empty cell missing (text is not searched for ``""`` again). A column that already
    has its dtype (the C reader typed it) is left as it is."""
    import pandas as pd

    frame = frame.copy() if copy else frame
    for col in frame.columns:
        kind = COLUMN_KINDS.get(col)
        if kind is None:
            continue
        series = frame[col]
        if (kind, str(series.dtype)) in (("int", "Int64"), ("float", "float64")):
            continue
        text = series.dtype == object or pd.api.types.is_string_dtype(series.dtype)
        if kind in ("int", "float"):
            numbers = pd.to_numeric(series, errors="coerce")  # "" → NaN
            if kind == "int" and not pd.api.types.is_integer_dtype(numbers.dtype):
                numbers = numbers.astype("float64")  # a cell no int can hold is missing here (the file reader names it)
                numbers = numbers.where(numbers.abs().lt(2.0**63) & numbers.eq(numbers.round()))
            frame[col] = numbers.astype("Int64") if kind == "int" else numbers.astype("float64")
        elif kind == "bool":
            if text:
                frame[col] = _flags(series)
            else:
                frame[col] = series.astype("boolean")
        else:
            values = series.astype("string")
            frame[col] = values.mask(values == "") if text and not empties_missing else values
    return frame


def _flags(series):
    """Text → nullable booleans: "true" / "1" / "yes" (any case; a Python True reads "True") → True, empty or
    missing → missing, anything else False. Each distinct text is looked at once (a column holds a handful)."""
    import numpy as np
    import pandas as pd

    codes, uniques = pd.factorize(series)
    words = [str(u).strip().lower() for u in uniques]
    truth = np.array([w in _TRUE for w in words] + [False], dtype=bool)
    missing = np.array([w == "" for w in words] + [True], dtype=bool)  # code -1 (missing) → the last entry
    return pd.Series(pd.arrays.BooleanArray(truth[codes], missing[codes]), index=series.index)


def iter_csv_rows(path: str | os.PathLike[str]) -> Iterable[JSONObject]:
    """Typed dict per row without pandas (used by resume)."""
    header, rows = read_rows(path)
    for row in rows:
        yield parse_row(dict(zip(header, row, strict=True)))
