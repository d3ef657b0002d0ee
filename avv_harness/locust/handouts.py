"""Which ask of which worker each item went out with (Locust layer, the master's side of item protocol 4).

ZeroMQ drops, without an error, an ``avv_items`` answer the master sends to a worker whose receive queue is full;
the items it carried would stay held by that live worker. So a worker reports an ask it got no answer to
(``avv_lost``), and the master hands out again the items of that ask that are still held by that worker *under
that ask*: not one recorded since, nor one given back and handed to it again under a later ask (the worker runs
that one). Pure bookkeeping: who holds an item now comes from the ledger, as a function.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from avv_core.items import ItemKey

Ask = tuple[str, int]  # (worker node id, the worker's ask id)
Holder = Callable[[ItemKey], "str | None"]  # the taker holding an item now (the ledger's in_flight)


class HandOuts:
    """The asks whose items may still be held, and each item's latest hand-out."""

    def __init__(self) -> None:
        self.by_ask: dict[Ask, list[ItemKey]] = {}
        self.ask_of: dict[ItemKey, Ask] = {}

    def __len__(self) -> int:
        return len(self.by_ask)

    def handed(self, node: str, ask: int, keys: Iterable[ItemKey]) -> None:
        """``keys`` went to ``node`` in the answer to its ask ``ask``."""
        keys = list(keys)
        if keys:
            self.by_ask[(node, ask)] = keys
            for key in keys:
                self.ask_of[key] = (node, ask)

    def lost(self, node: str, ask: int, holder: Holder) -> list[ItemKey]:
        """``node`` got no answer to ``ask``: the items of that answer it still holds under that ask (to hand out
        again). The ask is forgotten, so a second report of it returns nothing."""
        out = []
        for key in self.by_ask.pop((node, ask), []):
            if self.ask_of.get(key) == (node, ask):
                del self.ask_of[key]
                if holder(key) == node:
                    out.append(key)
        return out

    def prune(self, holder: Holder) -> int:
        """Forget the asks none of whose items is held any more by their worker under them (recorded, given back,
        requeued, or its run ended). Returns how many."""
        settled = [ask for ask, keys in self.by_ask.items()
                   if not any(self.ask_of.get(key) == ask and holder(key) == ask[0] for key in keys)]
        for ask in settled:
            for key in self.by_ask.pop(ask):
                if self.ask_of.get(key) == ask:
                    del self.ask_of[key]
        return len(settled)
