"""The record event, ``environment.events.avv_record`` (run-controller layer): the public extension point through
which every stored item reaches records.csv and any other store.

The process that holds the ledger (a local run, or the master of a distributed one; never a worker) fires it once per
item it accepts — exactly once per item and run — with::

    records      list[Record]   the item's rows (one; an agent task: one per step, in order), redacted and priced
    vendor       Vendor         the vendor's config entry (name, model, url, price …; print vendor.redacted(), which
                                hides the key)
    environment  Environment    Locust's; ``avv_harness.run.controller.controller_of(environment)`` reaches the run

Listeners run in the order they were added. :class:`RecordsCsv`, the packaged writer, is added first (when the
controller is installed, in Locust's ``init``), so a listener added later sees rows already in records.csv. An
exception in a listener is logged by Locust and does not stop the run or the other listeners — except in
records.csv's own: rows it could not write stop the run (exit status 3), and their item is not recorded.
"""

from __future__ import annotations

from avv_core.record_file import RecordWriteError
from avv_core.records import Record
from avv_harness.run.lifecycle import RunLifecycle

EVENT_NAME = "avv_record"


class RecordsCsv:
    """The packaged listener: append an item's rows to the current run's records.csv in one write. The first failed
    write stops the run (``disk``: exit status 3, no new item is started) and nothing more is written to it; any
    other exception while writing (rows the writer refuses) stops it too (``store_failed``, exit status 3). The
    intake sees the rows were not written and does not count the item as recorded."""

    def __init__(self, lifecycle: RunLifecycle):
        self.lifecycle = lifecycle

    def __call__(self, records: list[Record], **_: object) -> None:
        run = self.lifecycle.run
        if run is None or run.finished or run.stop_reason == "disk":
            return
        try:
            run.write(records)
        except RecordWriteError as exc:
            self.lifecycle.stop_run("disk", f"cannot write records: {exc.strerror}; no new items are started")
        except Exception as exc:  # a row the writer refuses: never a run "completed" with rows missing
            self.lifecycle.stop_run("store_failed", f"cannot write the records of an item ({type(exc).__name__}: "
                                    f"{str(exc)[:200]}); no new items are started")


__all__ = ["EVENT_NAME", "RecordsCsv"]
