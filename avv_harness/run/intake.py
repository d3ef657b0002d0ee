"""Records in: what the ledger side does with an item's rows (run layer).

An item's rows arrive from this process's users (:meth:`RecordIntake.store`) or from a worker
(:meth:`RecordIntake.store_from`: only rows of an item this master handed to that worker, not recorded yet, naming
that item and answering the body handed out). Accepted rows are redacted and priced, then fired through
``events.avv_record`` (records.csv is its first listener: :mod:`avv_harness.run.record_event`), then their tokens
and cost go to the budget and the settle policy takes a look. Everything else is dropped as late or duplicate, or
refused, counted in run.json and logged a bounded number of times.

An item is recorded only when its rows are written: any exception while pricing, redacting or writing them stops
the run (``store_failed`` or ``disk``: exit status 3, never "completed" with rows missing) and the item is not
counted as done, so run.json's ``items_recorded`` and ``records_written`` agree with records.csv.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Protocol

from locust.env import Environment
from locust.event import EventHook

from avv_core.items import ItemKey, VendorId
from avv_core.records import Record
from avv_core.samples import Sample
from avv_harness.inputs.config import Vendor
from avv_harness.inputs.secrets import Redactor, redact_url
from avv_harness.run.breaker import VENDOR_DOWN, Trip
from avv_harness.run.ledger import ACCEPT, DUPLICATE
from avv_harness.run.state import RunState

log = logging.getLogger("avv")

#: Refused records logged per reason and run; after that they are only counted (run.json).
LOGGED_REFUSALS = 20


class RunStops(Protocol):
    """What the intake asks of the run lifecycle (:class:`~avv_harness.run.lifecycle.RunLifecycle`)."""

    def stop_run(self, reason: str, message: str) -> None: ...

    def save_manifest(self) -> None: ...


class IntakeHost(Protocol):
    """What the intake reads of the controller it serves (:class:`~avv_harness.run.controller.RunController`,
    which imports this module): the current run and its lifecycle, the vendors, the samples, the redactor and the
    record event (fired with this process's Locust environment)."""

    @property
    def env(self) -> Environment: ...

    @property
    def vendors(self) -> Mapping[str, Vendor]: ...

    @property
    def redact(self) -> Redactor: ...

    @property
    def record_hook(self) -> EventHook: ...

    @property
    def run_hook(self) -> EventHook: ...

    @property
    def lifecycle(self) -> RunStops: ...

    @property
    def run(self) -> RunState | None: ...

    def class_name(self, vendor_id: VendorId) -> str: ...

    def samples_by_id(self) -> dict[str, Sample]: ...

    def release_item(self, key: ItemKey, taker: str | None = None) -> bool: ...


class RecordIntake:
    """The controller's "records in" (``ctl.intake``): what a role stores an item's rows through
    (:class:`~avv_harness.locust.item_protocol.ItemHost`'s ``intake``). It reads the current run, samples, vendors,
    redactor and record event through the controller it serves (:class:`IntakeHost`) and keeps one thing of its
    own: workers refused while no run was open, put into the next run's run.json."""

    def __init__(self, controller: IntakeHost):
        self.ctl = controller
        self._refusals_before_run: dict[str, str] = {}
        controller.run_hook.add_listener(self.on_run_begin)

    def _open_run_for(self, key: ItemKey, records: list[Record]) -> RunState | None:
        """The run these records belong to, while it is open; None for a late record (logged): one of a run
        that has ended, or of an earlier run (another run id)."""
        run = self.ctl.run
        if run is None or run.finished or any(r.get("run_id") not in (None, run.run_id) for r in records):
            log.info("dropping a late record for %s (its run has ended)", key)
            return None
        return run

    @staticmethod
    def _duplicate(run: RunState, key: ItemKey) -> None:
        run.manifest.duplicates_dropped += 1
        log.info("dropping a duplicate record for %s", key)

    def store(self, key: ItemKey, records: list[Record]) -> bool:
        """Record a finished item of this process (once). False for a duplicate and for a late record: one of
        a run that has ended, or of an earlier run (another run id). Records from workers go through
        :meth:`store_from`."""
        run = self._open_run_for(key, records)
        if run is None:
            return False
        if not run.ledger.complete(key):
            self._duplicate(run, key)
            return False
        return self._write_item(run, key, records)

    def store_from(self, taker: str, key: ItemKey, records: list[Record]) -> tuple[str, str]:
        """Record an item a worker sent, if this master handed it to that worker and it is not recorded yet
        (:meth:`~avv_harness.run.ledger.Ledger.verdict`) and its rows answer that item: they name its key, and their
        ``request_hash`` is the hash of the body handed out. ``("", "")`` when stored, dropped as late or as
        a duplicate; else ``(reason, detail)`` of the refusal, for :meth:`refuse_record`."""
        run = self._open_run_for(key, records)
        if run is None:
            return "", ""
        verdict = run.ledger.verdict(key, taker)
        if verdict == DUPLICATE:
            self._duplicate(run, key)
            return "", ""
        if verdict != ACCEPT:
            return verdict, f"{key} was {verdict.replace('_', ' ')}"
        problem = self._rows_problem(key, records)
        if problem is not None:
            return problem
        run.ledger.complete_from(key, taker)
        self._write_item(run, key, records)
        return "", ""

    def _rows_problem(self, key: ItemKey, records: list[Record]) -> tuple[str, str] | None:
        sample = self.ctl.samples_by_id().get(key.sample_id)
        for number, record in enumerate(records, 1):
            named = ItemKey.from_record(record)
            if named != key:
                return "wrong_rows", f"row {number} names {named}, the message names {key}"
            if sample is not None and record["request_hash"] != sample.request_hash:
                return "request_hash", (f"row {number} of {key} answers another request body than the one "
                                        "handed out")
        if sample is not None and sample.agent is None and len(records) != 1:
            return "wrong_rows", f"{len(records)} rows for {key}, a single-request item"
        return None

    def refuse_record(self, worker: str, key: ItemKey | None, reason: str, detail: str,
                      taker: str | None = None) -> None:
        """Count and log a record that is not written; when ``taker`` holds the item, hand it out again so
        the run still ends."""
        run = self.ctl.run
        released = key is not None and taker is not None and self.ctl.release_item(key, taker)
        again = "; the item is handed out again" if released else ""
        if run is None or run.finished:
            log.warning("refused a record from worker %s (%s: %s)%s", worker, reason, detail, again)
            return
        m = run.manifest
        m.records_refused += 1
        count = m.records_refused_by_reason[reason] = m.records_refused_by_reason.get(reason, 0) + 1
        if count <= LOGGED_REFUSALS:
            more = (f" (further refusals for {reason} are counted in run.json, not logged)"
                    if count == LOGGED_REFUSALS else "")
            log.warning("refused a record from worker %s (%s: %s)%s%s", worker, reason, detail, again, more)

    def note_refused_worker(self, worker: str, reason: str) -> None:
        """Into the current run's run.json; a refusal while no run is open (a worker connecting while the
        master starts, or between web-UI runs) goes into the next run's."""
        if self.ctl.run is not None and not self.ctl.run.finished:
            self.ctl.run.manifest.workers_refused[worker] = reason
        else:
            self._refusals_before_run[worker] = reason

    def on_run_begin(self, run: RunState, phase: str, **_: object) -> None:
        if phase == "begin" and self._refusals_before_run:
            run.manifest.workers_refused.update(self._refusals_before_run)
            self._refusals_before_run.clear()

    def _write_item(self, run: RunState, key: ItemKey, records: list[Record]) -> bool:
        """An accepted item (the ledger has it done): its rows redacted and priced (``cost``, from this process's
        config), then ``events.avv_record`` — records.csv first (:class:`RecordsCsv`), then every other listener —
        then its tokens, cost and budget accounted. False when its rows could not be stored: the item is not done
        and the run stops (:meth:`_not_stored`)."""
        vendor = self.ctl.vendors[self.ctl.class_name(key.vendor_id)]
        try:
            records = [self.ctl.redact.record(r) for r in records]
            for record in records:
                record["cost"] = vendor.price.record_cost(record) if vendor.price is not None else None
        except Exception as exc:  # a bug, or a value no row can hold: fail loudly, never lose the row silently
            self._not_stored(run, key, f"{type(exc).__name__}: {str(exc)[:200]}")
            return False
        written = run.manifest.records_written
        self.ctl.record_hook.fire(records=records, vendor=vendor, environment=self.ctl.env)
        if run.manifest.records_written != written + len(records):  # records.csv's listener did not write them
            self._not_stored(run, key, "records.csv did not take them")
            return False
        if run.account(key, records, lambda r: self.ctl.class_name(VendorId(r["model"], r["vendor"]))):
            caps = run.budget.caps_text()
            self.ctl.lifecycle.stop_run("budget", f"budget reached ({caps}): no new items are started")
        trip = run.breaker.observe(key.vendor_id, records)
        if trip is not None:
            self._stop_vendor(run, trip)
        if run.settle is not None and run.settle.observe(records):  # --avv-settle: a look
            lines = run.settle.step(run.ledger)
            for line in lines:
                log.info(line)
            if lines:
                self.ctl.lifecycle.save_manifest()
        return True

    def _not_stored(self, run: RunState, key: ItemKey, why: str) -> None:
        """``key``'s rows could not be stored: it is not recorded (a resume sends it again) and the run stops
        (``store_failed``, exit status 3), unless it has stopped already (records.csv's own failure: ``disk``)."""
        run.ledger.forget(key)
        run.budget.release(key)
        log.error("the records of %s could not be stored (%s): the item is not recorded", key, why)
        self.ctl.lifecycle.stop_run("store_failed", f"cannot store the records of {key} ({why}); no new items are "
                                    "started")

    def _stop_vendor(self, run: RunState, trip: Trip) -> None:
        """The circuit breaker tripped (:mod:`avv_harness.run.breaker`): the vendor's pending items are skipped
        (``vendor_down``; those in flight finish and are recorded), run.json says why, and its users stop once
        nothing of it is in flight (:meth:`~avv_harness.run.controller.RunController.vendor_closed`)."""
        vendor = self.ctl.vendors[self.ctl.class_name(trip.vendor)]
        skipped = run.ledger.skip_pending(trip.vendor, VENDOR_DOWN)
        run.vendors_down[trip.vendor] = trip.to_manifest(skipped, redact_url(vendor.url))
        log.warning("%s stopped by the circuit breaker: its last %d items ended with %s (%s); %d items skipped "
                    "(vendor_down: --avv-resume %s sends them once it is fixed); check %s", trip.vendor.vendor,
                    trip.items, trip.what, trip.example[:200], skipped, run.run_dir, trip.check)
        self.ctl.lifecycle.save_manifest()
