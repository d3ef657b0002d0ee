"""The circuit breaker (run-controller layer, pure: no I/O, no Locust): a vendor whose last K items, in the order
their records arrived, all ended with the same hard fault (:mod:`avv_harness.run.hard_faults`: connection refused, DNS,
TLS, 401 / 403, 404, unknown model) is stopped, so a dead vendor costs K items instead of its share of the run.

The ledger side (the local process or the master, which stores every record) shows each stored item to
:meth:`CircuitBreaker.observe`; when it trips, the intake skips the vendor's remaining items with the reason
:data:`VENDOR_DOWN` (kept in the ledger's ``skipped``, never lost: they are not in records.csv, so
``--avv-resume RUN`` sends them), run.json's ``vendor_down`` says which vendor and why, the Vendors tab and the report
show it, and the run's exit status is 6 (``ExitStatus.VENDOR_BROKEN``).

Any other ending of an item — a success, a soft failure (429, 5xx, a timeout…), another hard fault — restarts the
count (another hard fault starts a new streak of its own). An item is judged by its last row (an agent task: its
last step).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from avv_core.items import VendorId
from avv_core.json_types import JSONMapping, JSONObject
from avv_harness.run.hard_faults import hard_fault

#: The ledger's reason for the items a tripped breaker skips (``skipped: vendor_down``).
VENDOR_DOWN = "vendor_down"


@dataclass(frozen=True)
class Trip:
    """Why a vendor was stopped."""

    vendor: VendorId
    fault: str  # the hard fault's key (faults.FAULTS)
    what: str  # what happened, as a person reads it
    check: str  # what to check
    items: int  # items in a row that ended with it
    example: str  # the last item's error_detail (redacted by the intake before it gets here)

    def to_manifest(self, skipped: int, url: str) -> JSONObject:
        """run.json's ``vendor_down[<vendor>]``."""
        return {"fault": self.fault, "what": self.what, "check": self.check, "after_items": self.items,
                "example": self.example, "skipped": skipped, "url": url}


@dataclass
class CircuitBreaker:
    """The streak of each vendor and the vendors it stopped (``items`` = K; 0 never trips)."""

    items: int
    streaks: dict[VendorId, tuple[str, int]] = field(default_factory=dict)  # vendor → (fault key, items in a row)
    tripped: dict[VendorId, Trip] = field(default_factory=dict)

    def observe(self, vendor: VendorId, records: Sequence[JSONMapping]) -> Trip | None:
        """One stored item of ``vendor`` (its rows): the trip when this item is the K-th in a row with one hard fault
        (once per vendor), else None."""
        if self.items <= 0 or not records or vendor in self.tripped:
            return None
        last = records[-1]
        found = hard_fault(last)
        if found is None:
            self.streaks.pop(vendor, None)
            return None
        key, count = self.streaks.get(vendor, (found.key, 0))
        count = count + 1 if key == found.key else 1
        self.streaks[vendor] = (found.key, count)
        if count < self.items:
            return None
        trip = Trip(vendor, found.key, found.what, found.check, count, str(last.get("error_detail") or ""))
        self.tripped[vendor] = trip
        return trip


__all__ = ["VENDOR_DOWN", "CircuitBreaker", "Trip"]
