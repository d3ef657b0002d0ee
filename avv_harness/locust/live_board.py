"""The live view of the current run (harness layer): what the web UI's Vendors tab and JSON route show.

:class:`LiveBoard` listens to the controller's ``avv_record`` hook (the records of every stored item) and
its run hook (a run begins / ends). Per run it keeps

- an in-memory copy of the records as records.csv holds them (:class:`avv_scoring.live_scores.LiveRecords`;
  a resumed run starts from the rows already in its file, read once when the run begins), up to ``max_rows``
  (``--avv-live-rows``): past that the copy stops growing, so the master's memory and the cost of each scoring
  stay bounded however long the run (the snapshot then scores the first ``max_rows`` rows and says so; the
  counts go on; the run's final scores are made from records.csv as always);
- per-vendor counts updated as records arrive: items done, failed, anomaly flags;
- a snapshot: the scores of the records so far (:func:`avv_scoring.live_scores.score_live`, the same numbers
  ``avv-score`` gives for the same rows), provisional IRF and verdicts, and in stress mode the per-level table.

A web request only reads the last snapshot; nothing is scored or read from disk in a request. The records
so far are scored again only when records arrived since, at most every ``interval_s`` seconds and never
more often than every 5 × the last scoring's duration (so scoring takes at most ~1/6 of the time however
large the run grows), in a thread of gevent's pool: the event loop — users' streams, the master's messages —
keeps running while pandas works. When a run ends, the snapshot takes the run's final scores (the ones
written to scores.csv).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

import gevent

from avv_core.errors import InputError
from avv_core.frame_rows import frame_records
from avv_core.items import ItemKey, VendorId
from avv_core.json_types import JSONObject, JSONValue
from avv_core.measures import is_missing
from avv_core.record_file import read_rows
from avv_core.records import COLUMN_NAMES, STATUS_SUCCESS, Record

if TYPE_CHECKING:  # scoring is imported when a run is scored (module docstring): its types only here
    import pandas as pd

    from avv_harness.run.controller import RunController
    from avv_harness.run.options import DecisionSettings
    from avv_harness.run.state import RunState
    from avv_scoring.live_scores import LiveRecords
    from avv_scoring.load import GoldBySample, ToolsBySample
    from avv_scoring.probes import Probe
    from avv_scoring.score import ScoreResult

log = logging.getLogger("avv")

#: Rows shown at most (Locust truncates its own tables at 500 for the same reason: rendering cost).
MAX_ROWS = 500
#: Least seconds between two scorings of the records so far.
SCORE_INTERVAL_S = 3.0
#: Scoring waits at least this many times its last duration.
COST_FACTOR = 5.0


@dataclass
class VendorCounts:
    done: int = 0  # items recorded (an agent task is one item, whatever its steps)
    failed: int = 0  # items recorded as failed (an agent task: its last step failed)
    anomalies: int = 0  # anomaly flags on the records


def jsonable(value: object) -> JSONValue:
    """A JSON value: missing → None, numpy scalars → Python."""
    if is_missing(value):
        return None
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        return value.item()
    return value


class LiveBoard:
    """Counts and scores of the current run, kept up to date from the controller's hooks."""

    def __init__(self, ctl: RunController, *, interval_s: float = SCORE_INTERVAL_S, threaded: bool = True,
                 max_rows: int | None = None):
        from avv_scoring.load import gold_from_sample_set, tools_from_sample_set
        from avv_scoring.probes import probes_of

        self.ctl = ctl
        self.interval_s = interval_s
        self.threaded = threaded
        self.max_rows = ctl.options.live_rows if max_rows is None else max_rows  # 0: no limit
        self.rows = 0  # rows of the current run (held or not)
        self.tools = tools_from_sample_set(ctl.samples) if ctl.samples is not None else None
        self.gold = gold_from_sample_set(ctl.samples) if ctl.samples is not None else None
        self.probes = probes_of(ctl.samples.samples) if ctl.samples is not None else None  # a conformance run's
        self.run: RunState | None = None
        self.result: ScoreResult | None = None  # of the records so far (None: not scored yet, or not scorable)
        self.levels: pd.DataFrame | None = None  # stress: the per-level table of the records so far (DataFrame)
        self.note = "no run yet: press START"
        self.scored_records = 0  # rows the last scoring saw
        self.scored_at: float | None = None
        self._records: LiveRecords | None = None
        self._final = False
        self._counts: dict[VendorId, VendorCounts] = {}
        self._dirty = False
        self._busy = False
        self._last_start = 0.0
        self._last_cost = 0.0
        ctl.record_hook.add_listener(self._on_records)
        ctl.run_hook.add_listener(self._on_run)
        if ctl.run is not None:
            self._begin(ctl.run)
        self._loop = gevent.spawn(self._refresh_loop)

    def close(self) -> None:
        self._loop.kill(block=False)

    # ------------------------------------------------------------------------------------------- inputs

    def _begin(self, run: RunState) -> None:
        from avv_scoring.live_scores import LiveRecords

        self.run, self.result, self.levels, self.scored_records, self.scored_at = run, None, None, 0, None
        self._final = False  # the run's own final scores are in: a live scoring still running is stale
        self._counts = {vid: VendorCounts() for vid in map(self.ctl.vendor_id, self.ctl.vendors)}
        self._records = LiveRecords()
        self.rows = 0
        self.note = "waiting for the first records"
        path = run.run_dir / "records.csv"
        if path.is_file() and path.stat().st_size:  # a resumed run: its earlier rows count too
            header, rows = read_rows(path)
            if tuple(header) == COLUMN_NAMES:
                self.rows = len(rows)
                self._records.add_rows(rows[: self.max_rows or None])
                self._dirty = True
            else:
                self.note = f"{path} has other columns than this version writes: scores start with this session"

    def _on_run(self, run: RunState, phase: str, **_: object) -> None:
        if phase == "begin":
            self._begin(run)
        elif phase == "end" and run is self.run:
            if run.result is not None and run.result.scored:
                self.result, self._final = run.result, True  # scored from the file, as avv-score would
                if run.result.stress is not None:
                    self.levels = run.result.stress.levels
                self.scored_records = self.rows
                self.scored_at = time.time()
                self.note = f"final scores ({run.run_dir / 'scores.csv'})"
                self._dirty = False
            else:
                self._dirty = True
                gevent.spawn(self.refresh, True)

    def _on_records(self, records: list[Record], **_: object) -> None:
        if self._records is None:
            return
        self.rows += len(records)
        if not self.capped:  # an item's rows are all in or all out
            self._records.add(records)
            self._dirty = True
        last_rows = {ItemKey.from_record(record): record for record in records}  # an agent task: one row per step
        for key, last in last_rows.items():
            counts = self._counts.setdefault(key.vendor_id, VendorCounts())
            counts.done += 1
            counts.failed += last.get("status") != STATUS_SUCCESS
        for record in records:
            counts = self._counts.setdefault(VendorId(record["model"], record["vendor"]), VendorCounts())
            counts.anomalies += len([a for a in (record.get("anomalies") or "").split(";") if a])

    @property
    def capped(self) -> bool:
        """The copy holds ``max_rows`` rows: later records are counted, not kept."""
        return bool(self.max_rows) and self._records is not None and self._records.count >= self.max_rows

    # ------------------------------------------------------------------------------------------ scoring

    def _refresh_loop(self) -> None:
        while True:
            gevent.sleep(0.5)
            try:
                self.refresh()
            except Exception:  # never let the live view take the run down
                log.exception("avv: live scores failed")

    def refresh(self, force: bool = False) -> bool:
        """Score the records so far when due (see the module docstring); True when a new snapshot was made."""
        if self._busy or self.run is None or self._records is None or not (self._dirty or force):
            return False  # (run and records are set together, at the run's beginning)
        now = time.monotonic()
        if not force and now - self._last_start < max(self.interval_s, COST_FACTOR * self._last_cost):
            return False
        self._busy, self._dirty, self._last_start = True, False, now
        run, records, new = self.run, self._records, self._records.take_new()
        stress = self.ctl.lifecycle.stress_summary() if run.stress is not None else None
        try:
            args = (records, new, self.tools, str(run.run_dir), stress, self.gold, self.probes,
                    self.ctl.options.decision)
            out = gevent.get_hub().threadpool.apply(_score, args) if self.threaded else _score(*args)
        finally:
            self._busy = False
            self._last_cost = time.monotonic() - now
        if run is not self.run or self._final:
            return False
        self.result, self.levels, self.scored_records, note = out
        self.scored_at = time.time()
        self.note = note or (_capped_note(self.scored_records, self.max_rows) if self.capped
                             else _note_after_scoring(run))
        return True

    # ------------------------------------------------------------------------------------------ reading

    def _score_row(self, vid: VendorId) -> JSONObject:
        result = self.result
        if result is None or result.scores.empty:
            return {}
        rows = result.scores[(result.scores["model"] == vid.model) & (result.scores["vendor"] == vid.vendor)]
        if rows.empty:
            return {}
        return {k: jsonable(v) for k, v in rows.astype("object").iloc[0].to_dict().items()}

    def snapshot(self) -> JSONObject:
        """The JSON route's content: the run, and per vendor its counts and every score column (raw numbers)."""
        run = self.run
        state = "idle" if run is None else "finished" if run.finished else "running"
        out: JSONObject = {
            "state": state, "note": self.note, "run_id": run.run_id if run else None,
            "run_dir": str(run.run_dir.resolve()) if run else None, "mode": self.ctl.options.mode,
            "records": self.rows, "live_rows_cap": self.max_rows or None,
            "scored_records": self.scored_records, "scored_at": self.scored_at,
            "level": run.stress.level if run is not None and run.stress is not None else None,
            "vendors": [], "levels": [],
        }
        if run is None:
            return out
        for class_name in list(self.ctl.vendors)[:MAX_ROWS]:
            vid = self.ctl.vendor_id(class_name)
            counts = self._counts.get(vid, VendorCounts())
            stopped = run.stress.stopped_after.get(class_name) if run.stress is not None else None
            down = run.vendors_down.get(vid)
            out["vendors"].append({
                "model": vid.model, "vendor": vid.vendor, "is_baseline": bool(self.ctl.vendors[class_name].is_baseline),
                "items_done": counts.done, "items_total": run.vendor_totals.get(vid) if run.stress is None else None,
                "failed": counts.failed, "anomalies": counts.anomalies, "stopped_after_level": stopped,
                "vendor_down": dict(down) if down is not None else None,  # the circuit breaker stopped it: why
                "scores": self._score_row(vid),
            })
        if self.levels is not None:
            out["levels"] = [{k: jsonable(v) for k, v in row.items()}
                             for row in frame_records(self.levels.astype("object").head(MAX_ROWS))]
        return out


def _capped_note(scored: int, cap: int) -> str:
    return (f"scores of the first {scored:,} records (--avv-live-rows {cap}: the live view keeps no more in memory); "
            "the counts include every record; the run's scores at its end use all of records.csv")


def _note_after_scoring(run: RunState) -> str:
    if not run.finished:
        return "scores of the records so far (provisional)"
    problem = getattr(run, "scoring_problem", None)
    # the run's own scoring (from records.csv) is what report.html and scores.csv hold; say when it did not happen
    return f"scores of the records in memory: the run's {problem}" if problem else "final scores"


def _score(records: LiveRecords, new: list[list[str]], tools: ToolsBySample | None, run_dir: str,
           stress: JSONObject | None, gold: GoldBySample | None = None, probes: dict[str, Probe] | None = None,
           decision: DecisionSettings | None = None) -> tuple[ScoreResult | None, pd.DataFrame | None, int, str]:
    """(scores, stress levels, rows scored, note) of the records so far, decided by the run's ``decision`` options
    (:class:`~avv_harness.run.options.DecisionSettings`); runs in a worker thread."""
    from avv_scoring.live_scores import prepare, score_live
    from avv_scoring.metrics.uncertainty import StatsSettings
    from avv_scoring.stress import settings_from_run_json, stress_result

    frame = records.frame(new)
    if frame.empty:
        return None, None, 0, "waiting for the first records"
    note = ""
    thresholds = decision.thresholds_object() if decision is not None else None
    stats = StatsSettings(verdict=decision.verdict, level=decision.confidence) if decision is not None else None
    try:
        result = score_live(frame, tools, f"{run_dir}/records.csv", gold, probes, thresholds, stats)
    except InputError as exc:  # e.g. the baseline has no record yet
        result, note = None, f"not scored yet: {exc}"
    levels = None
    if stress is not None:
        settings, _ = settings_from_run_json({"mode": "stress", "stress": stress})
        levels = stress_result(prepare(frame), settings).levels
    return result, levels, len(frame), note


def live_board(ctl: RunController, interval_s: float | None = None) -> LiveBoard:
    """The controller's live board (:meth:`~avv_harness.run.controller.RunController.view`: one per process, which
    the web UI and the Prometheus exporter both read), made on first use; ``interval_s`` (seconds between
    scorings) applies then."""
    return ctl.view(LiveBoard, lambda: LiveBoard(ctl) if interval_s is None else LiveBoard(ctl, interval_s=interval_s))
