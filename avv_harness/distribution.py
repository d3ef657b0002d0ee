"""The item protocol between the process that holds the work ledger and the processes that run items.

One small class per role, each with the same three methods the users call — ``next_item``,
``give_back`` and ``submit`` — shaped like locust-plugins' ``Distributor``:

- :class:`LocalWork` (a plain local run): takes items from the ledger in this process and stores
  records here.
- :class:`MasterWork`: hands items to workers as they ask (``avv_want`` → ``avv_items``, carrying the
  request body, so workers need neither the sample file nor a shared disk), stores the records they send
  (``avv_record``), takes back items of stopped users (``avv_give_back``) and hands out again the items
  of workers Locust marks missing. Its own process runs no users.
- :class:`WorkerWork`: asks the master for one item at a time per vendor and sends each item's records
  to the master as soon as they exist.

Only this module and the controller touch Locust runners and messages.
"""

from __future__ import annotations

import logging
from collections import deque
from typing import TYPE_CHECKING, Any

import gevent
import gevent.event
from locust.runners import STATE_MISSING

from .items import ItemKey, VendorId, WorkItem
from .records import Record

if TYPE_CHECKING:
    from .controller import RunController

log = logging.getLogger("avv")

WANT, ITEMS, RECORD, GIVE_BACK = "avv_want", "avv_items", "avv_record", "avv_give_back"
ASK_TIMEOUT_S = 2.0
REQUEUE_INTERVAL_S = 1.0


class LocalWork:
    """The ledger is in this process: users take from it and records are stored here."""

    role = "local"

    def __init__(self, ctl: RunController):
        self.ctl = ctl

    def attach(self, runner: Any) -> None:
        """Nothing to register: no messages in a local run."""

    def next_item(self, class_name: str) -> WorkItem | None:
        return self.ctl.take_item(self.ctl.vendor_id(class_name), self.role)

    def give_back(self, item: WorkItem) -> None:
        self.ctl.release_item(item.key)

    def submit(self, item: WorkItem, records: list[Record]) -> None:
        self.ctl.store(item.key, records)


class MasterWork(LocalWork):
    """Serves items to workers and stores what they send back."""

    role = "master"

    def attach(self, runner: Any) -> None:
        self.runner = runner
        runner.register_message(WANT, self._on_want)
        runner.register_message(RECORD, self._on_record)
        runner.register_message(GIVE_BACK, self._on_give_back)
        self._requeuer = gevent.spawn(self._requeue_lost_workers)

    def next_item(self, class_name: str) -> WorkItem | None:
        return None  # a master runs no users

    def _on_want(self, environment: Any, msg: Any, **_: Any) -> None:
        vendor, taker = VendorId(*msg.data["vendor"]), msg.node_id
        items = [item.to_message() for item in self.ctl.take_items(vendor, taker, int(msg.data.get("n", 1)))]
        self.runner.send_message(ITEMS, {"vendor": list(vendor), "items": items, "context": self.ctl.worker_context()},
                                 client_id=taker)

    def _on_record(self, environment: Any, msg: Any, **_: Any) -> None:
        key = ItemKey(*msg.data["key"])
        self.ctl.store(key, [Record(row) for row in msg.data["records"]])

    def _on_give_back(self, environment: Any, msg: Any, **_: Any) -> None:
        for key in msg.data["keys"]:
            self.ctl.release_item(ItemKey(*key))

    def _requeue_lost_workers(self) -> None:
        while True:
            gevent.sleep(REQUEUE_INTERVAL_S)
            self.requeue_lost_workers()

    def requeue_lost_workers(self) -> int:
        """Hand out again the items held by workers that are gone or marked missing."""
        count = 0
        for taker in self.ctl.takers():
            client = self.runner.clients.get(taker)
            if client is None or client.state == STATE_MISSING:
                count += self.ctl.requeue_taker(taker)
        return count

    def close(self) -> None:
        requeuer = getattr(self, "_requeuer", None)
        if requeuer is not None:
            requeuer.kill(block=False)


class WorkerWork:
    """Asks the master for items and sends records back; holds nothing the master does not know."""

    role = "worker"

    def __init__(self, ctl: RunController):
        self.ctl = ctl
        self.inbox: dict[str, deque[WorkItem]] = {}
        self.ready: dict[str, gevent.event.Event] = {}
        self.runner: Any = None

    def attach(self, runner: Any) -> None:
        self.runner = runner
        runner.register_message(ITEMS, self._on_items)
        # items still queued when the test stops belong to that run (the web UI's next START is a new run)
        runner.environment.events.test_stop.add_listener(lambda **_: self.inbox.clear())

    def _on_items(self, environment: Any, msg: Any, **_: Any) -> None:
        data = msg.data
        self.ctl.apply_worker_context(data.get("context") or {})
        class_name = self.ctl.class_name(VendorId(*data["vendor"]))
        self.inbox.setdefault(class_name, deque()).extend(WorkItem.from_message(i) for i in data["items"])
        self.ready.setdefault(class_name, gevent.event.Event()).set()

    def next_item(self, class_name: str) -> WorkItem | None:
        inbox = self.inbox.setdefault(class_name, deque())
        ready = self.ready.setdefault(class_name, gevent.event.Event())
        if not inbox:
            ready.clear()
            self.runner.send_message(WANT, {"vendor": list(self.ctl.vendor_id(class_name)), "n": 1})
            ready.wait(timeout=ASK_TIMEOUT_S)
        return inbox.popleft() if inbox else None

    def give_back(self, item: WorkItem) -> None:
        self.runner.send_message(GIVE_BACK, {"keys": [list(item.key)]})

    def submit(self, item: WorkItem, records: list[Record]) -> None:
        self.runner.send_message(RECORD, {"key": list(item.key), "records": [dict(r) for r in records]})
