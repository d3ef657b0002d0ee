"""One run's state (harness layer, held by the controller): its folder, record writer, work ledger, manifest,
stress policy and counters.

A run is one run folder. A headless process has exactly one; in the web UI each START begins a new one and
each STOP ends it, while the process (and the simulator) keeps running. The controller keeps the current
:class:`RunState` and replaces it when a new run begins, so nothing of one run leaks into the next.

No Locust and no logging here: the controller feeds records in and decides when a run begins and ends.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from avv_core.exit_status import ExitStatus, most_serious
from avv_core.items import ItemKey, VendorId
from avv_core.json_types import JSONObject
from avv_core.manifest import RunManifest, utc_now
from avv_core.record_file import RecordWriteError, RecordWriter
from avv_core.records import STATUS_SUCCESS, Record
from avv_harness.run.breaker import CircuitBreaker
from avv_harness.run.budget import Budget, Spend
from avv_harness.run.ledger import Ledger
from avv_harness.run.settle_policy import SettlePolicy
from avv_harness.run.stress_policy import StressPolicy
from avv_harness.wire.execute import ExecContext

if TYPE_CHECKING:
    from avv_scoring.score import ScoreResult

EXIT_OK, EXIT_INCOMPLETE, EXIT_INPUT, EXIT_WRITE, EXIT_SCORING = 0, 1, 2, 3, 4
#: Stop reasons that mean an item's rows could not be stored (exit status 3, ExitStatus.WRITE): ``disk`` (records.csv
#: could not be written: disk full, folder not writable) and ``store_failed`` (anything else while pricing, redacting
#: or writing them). The item is then not recorded: run.json's counts agree with records.csv.
STORE_STOPS = frozenset({"disk", "store_failed"})


@dataclass
class RunState:
    run_id: str  # the run folder's name; every record of the run carries it
    run_dir: Path  # the run folder
    writer: RecordWriter  # appends to run_dir/records.csv
    ledger: Ledger  # which items are pending, in flight, done
    exec: ExecContext  # how items run (run id, retries, timeouts); sent to workers
    manifest: RunManifest = field(default_factory=RunManifest)  # run.json
    stress: StressPolicy | None = None  # stress mode: the ladder
    vendor_totals: dict[VendorId, int] = field(default_factory=dict)  # items per vendor this run (verify mode)
    started_monotonic: float = field(default_factory=time.monotonic)  # for the progress line's rate and ETA
    stop_reason: str | None = None  # why it ended early: budget, run_time, interrupted, disk, store_failed
    finished: bool = False  # ended: later records are dropped, the writer is closed
    exit_code: int | None = None  # set when it ends
    items_failed: int = 0  # items recorded with status failed
    last_run_time_s: float = 0.0  # the shape's run time at its last tick
    announced_level: int | None = None  # the stress level last logged
    result: ScoreResult | None = None  # the ScoreResult it was scored to (None: not scored, or scoring failed)
    scoring_problem: str | None = None  # why its scores are missing or partial (scoring failed, rows left out)
    load_rows: list[JSONObject] = field(default_factory=list)  # worker, vendor, client lag and CPU per record
    items_done_before: int = 0  # resume: items earlier sessions recorded as done (not in this ledger)
    budget: Budget = field(default_factory=Budget)  # the token and cost caps: spent and reserved
    settle: SettlePolicy | None = None  # --avv-settle: which vendors' verdicts are settled
    settle_before: JSONObject = field(default_factory=dict)  # --avv-settle on resume: run.json's earlier settle
    breaker: CircuitBreaker = field(default_factory=lambda: CircuitBreaker(0))  # stops a vendor that cannot answer
    vendors_down: dict[VendorId, JSONObject] = field(default_factory=dict)  # vendors it stopped (run.json)
    vendor_done: Counter[VendorId] = field(default_factory=Counter)  # items recorded per vendor this session
    vendor_failed: Counter[VendorId] = field(default_factory=Counter)  # of them, items whose last row failed

    @property
    def items_done(self) -> int:
        return len(self.ledger.done)

    @property
    def completed(self) -> bool:
        """Every item recorded (stress mode: the ladder ran to its end), and nothing stopped it early."""
        if self.stop_reason is not None:
            return False
        return self.stress.done if self.stress is not None else self.ledger.finished

    def take(self, vendor: VendorId, taker: str, limit: int, worst: Callable[[ItemKey], Spend],
             concurrency: int) -> list[ItemKey]:
        """Up to ``limit`` items of ``vendor`` from the ledger. With a budget (:mod:`avv_harness.run.budget`) each
        only while spent + reserved is below the caps and the vendor is in step (:meth:`_in_step`), and each
        reserves ``worst(key)``."""
        if not self.budget.active:
            return self.ledger.take(vendor, taker, limit)
        keys: list[ItemKey] = []
        while len(keys) < limit and self.budget.admits() and self._in_step(vendor, concurrency):
            taken = self.ledger.take(vendor, taker, 1)
            if not taken:
                break
            self.budget.reserve(taken[0], worst(taken[0]))
            keys += taken
        return keys

    def _in_step(self, vendor: VendorId, concurrency: int) -> bool:
        """Under a budget (verify mode) vendors start items in step: none more than its concurrency ahead of the
        vendor with pending items that started the fewest. Else the fastest vendors' users would take the budget
        and the cap would leave a slow vendor with no items at all (the priced demo's flaky vendor, before)."""
        if self.ledger.endless:
            return True
        skipped = Counter(key.vendor_id for key in self.ledger.skipped)  # --avv-settle: not sent, not started
        started = {v: total - len(self.ledger.pending.get(v, ())) - skipped[v]
                   for v, total in self.vendor_totals.items() if self.ledger.pending.get(v)}
        return vendor not in started or started[vendor] - min(started.values()) < concurrency

    def write(self, records: list[Record]) -> None:
        """Append an item's rows; RecordWriteError when records.csv cannot be written."""
        self.writer.write_many(list(records))
        self.manifest.records_written += len(records)

    def account(self, key: ItemKey, records: list[Record], class_name_of: Callable[[Record], str]) -> bool:
        """Count an item's records (failures, client errors, tokens; the stress policy's observations) and settle
        its reservation (:meth:`Budget.settle`). True when this item used up a budget (``manifest.budget``)."""
        m = self.manifest
        self.vendor_done[key.vendor_id] += 1
        if records and records[-1].get("status") != STATUS_SUCCESS:
            self.vendor_failed[key.vendor_id] += 1
        for record in records:
            self.load_rows.append({k: record.get(k) for k in ("worker", "vendor", "client_lag_ms", "client_cpu_pct")})
            if record.get("status") != STATUS_SUCCESS:
                self.items_failed += 1
            if record.get("error_kind") == "client_error":
                m.items_failed_client += 1
            if self.stress is not None:
                self.stress.observe(class_name_of(record), record.get("level"), record.get("status") == "success",
                                    record.get("ttft_ms"))
            if record.get("total_tokens") is not None:
                m.tokens_used += int(record["total_tokens"])
        self.budget.settle(key, records)
        if self.budget.exhausted and not m.budget.get("exhausted"):
            m.budget["exhausted"] = True
            return True
        return False

    def stop(self, reason: str) -> int | None:
        """Stop starting items for ``reason``; the number of items dropped, or None when already stopped."""
        if self.stop_reason is not None:
            return None
        self.stop_reason = reason
        return self.ledger.drop_pending()

    def save_manifest(self, stress_summary: JSONObject | None = None) -> None:
        """Write run.json (OSError when it cannot be written)."""
        self.manifest.items_recorded = self.items_done_before + self.items_done
        if self.budget.active:
            self.manifest.budget.update(self.budget.summary())
        if self.settle is not None:
            self.manifest.extra["settle"] = self.settle.to_manifest()
        if self.vendors_down:
            self.manifest.extra["vendor_down"] = [{"model": v.model, "vendor": v.vendor, **down}
                                                  for v, down in self.vendors_down.items()]
        if stress_summary is not None:
            self.manifest.stress = stress_summary
        self.manifest.write(self.run_dir)

    def close(self, completed: bool) -> None:
        """Mark it ended: close the writer and fill the manifest's end fields (written by the caller)."""
        self.writer.close()
        m = self.manifest
        m.ended_at, m.completed, m.stop_reason = utc_now(), completed, self.stop_reason

    def exit_status(self) -> int:
        """3 records not written; 1 stopped early (resumable); 6 the circuit breaker stopped a vendor; 4 every item
        recorded but the scores are missing or partial (``avv-score RUN`` scores the records later); 0 complete and
        scored. Several: the most serious (:func:`avv_core.exit_status.most_serious`)."""
        return most_serious((self._status(), ExitStatus.VENDOR_BROKEN if self.vendors_down else ExitStatus.OK))

    def _status(self) -> int:
        if self.stop_reason in STORE_STOPS:
            return EXIT_WRITE
        if not self.completed:
            return EXIT_INCOMPLETE
        return EXIT_SCORING if self.scoring_problem else EXIT_OK


__all__ = ["EXIT_INCOMPLETE", "EXIT_INPUT", "EXIT_OK", "EXIT_SCORING", "EXIT_WRITE", "STORE_STOPS", "RecordWriteError",
           "RunState"]
