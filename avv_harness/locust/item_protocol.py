"""The item protocol's shared parts (Locust layer): its message names and limits, :class:`ItemHost` (what a role
asks of the controller), :class:`Role` (what every role answers) and :class:`LocalRole` (a plain local run).
The master's and the worker's sides are in :mod:`avv_harness.locust.master_role` and
:mod:`avv_harness.locust.worker_role`; the protocol as a whole is described in
:mod:`avv_harness.locust.distribution`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import ClassVar, Protocol

from locust.env import Environment
from locust.rpc.protocol import Message
from locust.runners import Runner

from avv_core.items import ItemKey, VendorId, WorkItem
from avv_core.json_types import JSONObject
from avv_core.records import Record
from avv_harness.run.intake import RecordIntake
from avv_harness.run.node_identity import NodeIdentity

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


class ItemHost(Protocol):
    """What a role asks of the controller that holds it (:class:`avv_harness.run.controller.RunController`):
    the current run's items and records, this process's identity, and how workers run items."""

    def vendor_id(self, class_name: str) -> VendorId: ...

    def class_name(self, vendor_id: VendorId) -> str: ...

    def take_items(self, vendor: VendorId, taker: str, limit: int = 1) -> list[WorkItem]: ...

    def release_item(self, key: ItemKey, taker: str | None = None) -> bool: ...

    def holder(self, key: ItemKey) -> str | None: ...

    def vendor_closed(self, vendor: VendorId) -> bool: ...

    @property
    def intake(self) -> RecordIntake:
        """Records in: the rows of an item of this process (``store``) or of a worker (``store_from``), refused
        records and workers (``refuse_record``, ``note_refused_worker``)."""
        ...

    def takers(self) -> set[str]: ...

    def requeue_taker(self, taker: str, why: str = "is gone") -> int: ...

    def identity(self) -> NodeIdentity: ...

    def worker_context(self) -> JSONObject: ...

    def apply_worker_context(self, context: JSONObject) -> None: ...


class Role:
    """A process's part in the item protocol, and what the controller and the run lifecycle ask of it."""

    name: ClassVar[str]  # "local", "master" or "worker" (run.json's locust.role)
    runs_users: ClassVar[bool]  # its process runs Locust users (and watches its own event-loop lag)
    holds_ledger: ClassVar[bool]  # the ledger, the run folder and the records are in its process

    def __init__(self, host: ItemHost, runner: Runner | None):
        self.host = host
        self.runner = runner

    def attach(self) -> None:
        """Register this role's messages and listeners on the runner."""

    def next_item(self, class_name: str) -> WorkItem | None:
        raise NotImplementedError

    def give_back(self, item: WorkItem) -> None:
        raise NotImplementedError

    def submit(self, item: WorkItem, records: list[Record]) -> None:
        raise NotImplementedError

    def closed(self, class_name: str) -> bool:
        """``--avv-settle``: this vendor gets no more items in this run, so its users may stop."""
        return False

    def expected_workers(self) -> int | None:
        """How many workers the run waits for (``--expect-workers``), for run.json; None when it has none."""
        return None

    def close(self) -> None:
        """At the process's finish: stop what this role runs in the background."""


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
