"""The item protocol's shared parts (Locust layer): its message names and limits and :class:`LocalRole` (a plain
local run). The interfaces, :class:`~avv_harness.run.role.ItemHost` (what a role asks of the controller) and
:class:`~avv_harness.run.role.Role` (what every role answers), belong to the run layer that calls them.
The master's and the worker's sides are in :mod:`avv_harness.locust.master_role` and
:mod:`avv_harness.locust.worker_role`; the protocol as a whole is described in
:mod:`avv_harness.locust.distribution`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from locust.env import Environment
from locust.rpc.protocol import Message

from avv_core.items import WorkItem
from avv_core.records import Record
from avv_harness.run.role import Role

log = logging.getLogger("avv")

WANT, ITEMS, LOST = "avv_want", "avv_items", "avv_lost"
RECORD, RECORDS, GIVE_BACK = "avv_record", "avv_records", "avv_give_back"
HELLO, ACCEPTED, REFUSED, IDENTIFY = "avv_hello", "avv_accepted", "avv_refused", "avv_identify"
#: Items one ``avv_want`` may take (a worker asks for as many as it has users waiting): a forged ask cannot drain
#: the queue.
MAX_ITEMS_PER_WANT = 8
#: Items whose records one ``avv_records`` message carries at most (a worker sends what finished since its last send).
MAX_ITEMS_PER_MESSAGE = 200
#: Ask ids one ``avv_lost`` message carries at most.
MAX_ASKS_PER_LOST = 1000


def guarded(handler: Callable[[Environment, Message], None]) -> Callable[..., None]:
    """A message handler that logs what it cannot read instead of raising (Locust would log a traceback and
    the message's effect would be lost)."""

    def run(environment: Environment, msg: Message, **_: object) -> None:
        try:
            handler(environment, msg)
        except Exception as exc:
            log.error("ignored a malformed %s message from %s: %s: %.200s", msg.type,
                      getattr(msg, "node_id", "?"), type(exc).__name__, exc)

    return run


class LocalRole(Role):
    """The ledger is in this process: users take from it and records are stored here."""

    name = "local"
    runs_users = True
    holds_ledger = True

    def next_item(self, class_name: str) -> WorkItem | None:
        items = self.host.take_items(self.host.vendor_id(class_name), self.name, 1)
        return items[0] if items else None

    def give_back(self, item: WorkItem) -> None:
        self.host.release_item(item.key)

    def submit(self, item: WorkItem, records: list[Record]) -> None:
        self.host.intake.store(item.key, records)

    def closed(self, class_name: str) -> bool:
        return self.host.vendor_closed(self.host.vendor_id(class_name))
