"""The work ledger: which items are pending, in flight, or done.

Held by the local runner or the master. Each item is handed to one taker at a time; items in flight on
a taker that is lost are handed out again; a record for an item already done is dropped, so every item
is recorded exactly once per run. Items not sent because a vendor's verdict is settled (``--avv-settle``) are
kept in ``skipped`` with the reason (``settled``), not lost. The ledger also says whose record it may accept
(:meth:`Ledger.verdict`): only the taker holding an item, or a taker it was taken from when that taker was
presumed lost. Pure bookkeeping: no Locust, no I/O.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field

from avv_core.items import ItemKey, VendorId

#: :meth:`Ledger.verdict`: store the record.
ACCEPT = "accept"
#: A late record of an item that was handed out again after its taker was presumed lost, and has since been
#: recorded: dropped and counted as a duplicate (``duplicates_dropped``), as before.
DUPLICATE = "duplicate"
#: Refusals (``records_refused``): the sender was never handed the item in this run (or gave it back), another
#: taker holds it, or the sender already recorded it.
NOT_HANDED_OUT = "not_handed_out"
HELD_BY_ANOTHER = "held_by_another"
ALREADY_RECORDED = "already_recorded"


@dataclass
class Ledger:
    pending: dict[VendorId, deque[ItemKey]] = field(default_factory=dict)
    in_flight: dict[ItemKey, str] = field(default_factory=dict)  # item → taker (worker id or "local")
    done: set[ItemKey] = field(default_factory=set)
    total: int = 0
    endless: bool = False  # stress mode: items are generated round-robin, never exhausted
    # takers an item was taken from because they were presumed lost: their late records are not refusals
    former: dict[ItemKey, set[str]] = field(default_factory=dict)
    skipped: dict[ItemKey, str] = field(default_factory=dict)  # items not sent, and why ("settled")
    closed: dict[VendorId, str] = field(default_factory=dict)  # vendors that get no more items, and why
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
        if queue is None or vendor in self.closed:
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
        self.skipped.pop(key, None)  # a late record of an item given back after its vendor settled
        if key in self.done:
            return False
        self.done.add(key)
        return True

    def forget(self, key: ItemKey) -> None:
        """Undo :meth:`complete` / :meth:`complete_from`: the item's rows could not be stored, so it is not done (the
        run stops; a resume sends it again)."""
        self.done.discard(key)

    def verdict(self, key: ItemKey, taker: str) -> str:
        """May ``taker`` record ``key``? :data:`ACCEPT`, :data:`DUPLICATE`, or the reason it is refused."""
        holder = self.in_flight.get(key)
        if holder == taker:
            return ACCEPT
        if taker in self.former.get(key, ()):
            return DUPLICATE if key in self.done else ACCEPT  # presumed lost, came back: first record wins
        if key in self.done:
            return ALREADY_RECORDED
        return HELD_BY_ANOTHER if holder is not None else NOT_HANDED_OUT

    def complete_from(self, key: ItemKey, taker: str) -> None:
        """Mark done a record :meth:`verdict` accepted from ``taker``. When a taker presumed lost records first,
        the item's current holder (if any) becomes a former holder, so its record is a duplicate; an item
        waiting to be handed out again leaves the queue."""
        holder = self.in_flight.pop(key, None)
        if holder is not None and holder != taker:
            self.former.setdefault(key, set()).add(holder)
        elif holder is None and key.vendor_id in self.pending:
            queue = self.pending[key.vendor_id]
            if key in queue:  # rare (a late record of a requeued item): a linear scan is fine
                queue.remove(key)
        self.done.add(key)

    def release(self, key: ItemKey, taker: str | None = None) -> bool:
        """Give an item back unfinished (a user stopped before recording it). With ``taker``, only when that
        taker holds it. True when the item went back to the queue."""
        holder = self.in_flight.get(key)
        if holder is None or (taker is not None and holder != taker):
            return False
        del self.in_flight[key]
        if key not in self.done and key.vendor_id in self.closed:
            self.skipped[key] = self.closed[key.vendor_id]
            return False
        if key not in self.done and key.vendor_id in self.pending:
            self.pending[key.vendor_id].appendleft(key)
            return True
        return False

    def requeue_taker(self, taker: str) -> list[ItemKey]:
        """Hand out again every item in flight on a lost taker (remembered as a former holder of each)."""
        lost = [key for key, holder in self.in_flight.items() if holder == taker]
        for key in lost:
            self.release(key)
            self.former.setdefault(key, set()).add(taker)
        return lost

    def drop_pending(self) -> int:
        """Stop starting new items (budget cap, run time, Ctrl-C); returns how many were dropped."""
        dropped = sum(len(q) for q in self.pending.values())
        for queue in self.pending.values():
            queue.clear()
        self.endless = False
        return dropped

    def skip_pending(self, vendor: VendorId, reason: str, keep: set[tuple[str, int]] | None = None,
                     close: bool = True) -> int:
        """Skip ``vendor``'s pending items for ``reason`` (kept in :attr:`skipped`), except those whose
        (sample_id, repeat) is in ``keep``; with ``close`` it gets no more items (one given back is skipped too).
        Returns how many were skipped."""
        queue = self.pending.get(vendor, deque())
        kept = deque(k for k in queue if keep is not None and (k.sample_id, k.repeat) in keep)
        dropped = [k for k in queue if keep is None or (k.sample_id, k.repeat) not in keep]
        for key in dropped:
            self.skipped[key] = reason
        if vendor in self.pending:
            self.pending[vendor] = kept
        if close:
            self.closed[vendor] = reason
        return len(dropped)

    def busy(self, vendor: VendorId) -> bool:
        """``vendor`` has items pending or in flight."""
        return bool(self.pending.get(vendor)) or any(k.vendor_id == vendor for k in self.in_flight)

    def takers(self) -> set[str]:
        return set(self.in_flight.values())

    @property
    def remaining(self) -> int:
        return sum(len(q) for q in self.pending.values()) + len(self.in_flight)

    @property
    def finished(self) -> bool:
        return not self.endless and self.remaining == 0
