"""Scores of the records so far (scoring layer, beside :mod:`.score`): an append-only, in-memory copy of a
run's records.csv that scores exactly as ``avv-score`` scores the file at the same point.

:class:`LiveRecords` keeps each row as the CSV cells the record writer writes
(:func:`avv_core.records.to_csv_row`: floats rounded as written, empty cells for missing values) and types
them in chunks with the same :func:`~avv_core.record_file.coerce_frame` the file reader uses. Adding rows costs
O(new rows); :meth:`LiveRecords.frame` types only the rows added since the last call and appends them to the
frame it keeps. :func:`score_live` then applies the reader's steps (:func:`avv_scoring.load.read_inputs`:
``repeat`` filled with 1, input order columns, the latest row per item) and :func:`~avv_scoring.score.score_frame`
with the run's tool definitions, default thresholds and the baseline marked in the records — the same call
:func:`~avv_scoring.entrypoints.score_paths` makes for a run folder.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace

import pandas as pd

from avv_core.json_types import JSONMapping
from avv_core.record_file import coerce_frame
from avv_core.records import COLUMN_NAMES, to_csv_row
from avv_scoring.load import FILE_ORDER_COL, ROW_ORDER_COL, SOURCE_COL, GoldBySample, ToolsBySample, dedupe_latest
from avv_scoring.metrics.uncertainty import StatsSettings
from avv_scoring.probes import Probe
from avv_scoring.score import ScoreResult, score_frame
from avv_scoring.verdict import Thresholds


class LiveRecords:
    """A run's records as the file holds them, kept in memory (see the module docstring)."""

    def __init__(self, rows: Iterable[Sequence[str]] = ()):
        self._typed: pd.DataFrame | None = None  # the rows typed so far
        self._new: list[list[str]] = []  # rows added since, as CSV cells
        self.count = 0
        self.add_rows(rows)

    def add_rows(self, rows: Iterable[Sequence[str]]) -> None:
        """Add rows given as CSV cells in :data:`~avv_core.records.COLUMN_NAMES` order."""
        for row in rows:
            if len(row) != len(COLUMN_NAMES):
                raise ValueError(f"a records row has {len(row)} cells, the schema {len(COLUMN_NAMES)}")
            self._new.append(list(row))
            self.count += 1

    def add(self, records: Iterable[JSONMapping]) -> None:
        """Add records (dicts of typed values), as the writer would write them."""
        self.add_rows(to_csv_row(record) for record in records)

    def take_new(self) -> list[list[str]]:
        """The rows added since the last :meth:`frame` (handed to :meth:`frame` in another thread)."""
        new, self._new = self._new, []
        return new

    def frame(self, new: list[list[str]] | None = None) -> pd.DataFrame:
        """Every row so far, typed as :func:`avv_core.record_file.read_records` types the file. ``new`` = rows
        already taken with :meth:`take_new` (default: take them now)."""
        rows = self.take_new() if new is None else new
        if rows:
            chunk = coerce_frame(pd.DataFrame(rows, columns=list(COLUMN_NAMES)))
            self._typed = chunk if self._typed is None else pd.concat([self._typed, chunk], ignore_index=True)
        if self._typed is None:
            self._typed = coerce_frame(pd.DataFrame(columns=list(COLUMN_NAMES)))
        return self._typed


def prepare(frame: pd.DataFrame, source: str = "") -> pd.DataFrame:
    """The reader's steps after parsing (:func:`avv_scoring.load.read_one` and ``read_inputs`` for one file)."""
    out = frame.copy()
    out["repeat"] = out["repeat"].fillna(1)
    out[SOURCE_COL] = source
    out[FILE_ORDER_COL] = 0
    out[ROW_ORDER_COL] = range(len(out))
    return dedupe_latest(out)


def score_live(frame: pd.DataFrame, tools_by_sample: ToolsBySample | None, source: str = "",
               gold_by_sample: GoldBySample | None = None, probes: Mapping[str, Probe] | None = None,
               thresholds: Thresholds | None = None, stats: StatsSettings | None = None) -> ScoreResult:
    """Score the records so far as ``avv-score RUN_DIR`` would (InputError as :func:`score_frame`, e.g. while
    the baseline vendor has no record yet); ``gold_by_sample`` = the samples' gold labels and agent tasks;
    ``probes`` = a conformance run's probes; ``thresholds`` and ``stats`` = the run's ``--avv-thresholds``,
    ``--avv-verdict`` and ``--avv-confidence`` (the decision so far follows the run's own rule).

    Why so many parameters: after the records (``frame``, ``source``) they are :func:`score_frame`'s
    options the web UI's live board has for its run (tools, gold, probes, thresholds, stats), each defaulted and passed
    on as they are.
    """
    result = score_frame(prepare(frame, source), tools_by_sample, gold_by_sample=gold_by_sample, probes=probes,
                         thresholds=thresholds, stats=stats)
    return replace(result, inputs=(source,) if source else ())


__all__ = ["LiveRecords", "prepare", "score_live"]
