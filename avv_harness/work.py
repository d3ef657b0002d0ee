"""The work ledger: which items are pending, in flight, or done.

Held by the local runner or the master. Each item is handed to one taker at a time; items in flight on
a taker that is lost are handed out again; a record for an item already done is dropped, so every item
is recorded exactly once per run. Pure bookkeeping: no Locust, no I/O.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field

from .items import ItemKey, VendorId


@dataclass
class Ledger:
    pending: dict[VendorId, deque[ItemKey]] = field(default_factory=dict)
    in_flight: dict[ItemKey, str] = field(default_factory=dict)  # item → taker (worker id or "local")
    done: set[ItemKey] = field(default_factory=set)
    total: int = 0
    endless: bool = False  # stress mode: items are generated round-robin, never exhausted
    _cycle: dict[VendorId, int] = field(default_factory=dict)
    _sample_ids: list[str] = field(default_factory=list)

    @classmethod
    def for_items(cls, vendors: Iterable[VendorId], sample_ids: list[str], repeats: int,
                  skip: set[ItemKey] | None = None) -> Ledger:
        """Items ordered repeat-major, so a stopped run has whole repeats of the early samples."""
        ledger = cls()
        skip = skip or set()
        for vendor in vendors:
            queue = deque(
                key for rep in range(1, repeats + 1) for sid in sample_ids
                if (key := ItemKey.of(vendor, sid, rep)) not in skip
            )
            ledger.pending[vendor] = queue
            ledger.total += len(queue)
        return ledger

    @classmethod
    def round_robin(cls, vendors: Iterable[VendorId], sample_ids: list[str]) -> Ledger:
        ledger = cls(endless=True, _sample_ids=list(sample_ids))
        for vendor in vendors:
            ledger.pending[vendor] = deque()
            ledger._cycle[vendor] = 0
        return ledger

    def take(self, vendor: VendorId, taker: str, limit: int = 1) -> list[ItemKey]:
        queue = self.pending.get(vendor)
        if queue is None:
            return []
        out: list[ItemKey] = []
        while len(out) < limit:
            if not queue and self.endless and self._sample_ids:
                self._cycle[vendor] += 1
                queue.extend(ItemKey.of(vendor, sid, self._cycle[vendor]) for sid in self._sample_ids)
            if not queue:
                break
            key = queue.popleft()
            self.in_flight[key] = taker
            out.append(key)
        return out

    def complete(self, key: ItemKey) -> bool:
        """Mark done; False when it was already done (a duplicate record to drop)."""
        self.in_flight.pop(key, None)
        if key in self.done:
            return False
        self.done.add(key)
        return True

    def release(self, key: ItemKey) -> None:
        """Give an item back unfinished (a user stopped before recording it)."""
        if self.in_flight.pop(key, None) is not None and key not in self.done and key.vendor_id in self.pending:
            self.pending[key.vendor_id].appendleft(key)

    def requeue_taker(self, taker: str) -> list[ItemKey]:
        """Hand out again every item in flight on a lost taker."""
        lost = [key for key, holder in self.in_flight.items() if holder == taker]
        for key in lost:
            self.release(key)
        return lost

    def drop_pending(self) -> int:
        """Stop starting new items (budget cap, run time, Ctrl-C); returns how many were dropped."""
        dropped = sum(len(q) for q in self.pending.values())
        for queue in self.pending.values():
            queue.clear()
        self.endless = False
        return dropped

    def takers(self) -> set[str]:
        return set(self.in_flight.values())

    @property
    def remaining(self) -> int:
        return sum(len(q) for q in self.pending.values()) + len(self.in_flight)

    @property
    def finished(self) -> bool:
        return not self.endless and self.remaining == 0
