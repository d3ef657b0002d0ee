"""The interfaces of the item protocol (run layer): :class:`ItemHost`, what a role asks of the controller that holds
it, and :class:`Role`, what the controller and the run lifecycle ask of a process's role. The run layer owns them;
the Locust layer implements the roles (:mod:`avv_harness.locust.distribution`: local, master, worker) and hands the
controller the factory that picks one (:data:`RoleFactory`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, ClassVar, Protocol

from avv_core.items import ItemKey, VendorId, WorkItem
from avv_core.json_types import JSONObject
from avv_core.records import Record
from avv_harness.run.node_identity import NodeIdentity

if TYPE_CHECKING:
    from locust.runners import Runner

    from avv_harness.run.intake import RecordIntake


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


#: Builds the role of the process whose Locust runner is given, for the controller given
#: (:func:`avv_harness.locust.distribution.role_for`).
RoleFactory = Callable[["Runner | None", ItemHost], Role]
