"""The worker's side of the item protocol (Locust layer): :class:`WorkerRole` presents its identity, asks the
master for items as its users need them (each ask with an id the answer echoes; an ask with no answer after
:data:`ASK_LOST_S` is reported lost and a late answer to it ignored), and sends the records of finished items
back in batches. The protocol as a whole: :mod:`avv_harness.locust.distribution`.
"""

from __future__ import annotations

import itertools
import logging
import time
from collections import Counter, deque

import gevent
import gevent.event
from locust.env import Environment
from locust.rpc import Message
from locust.runners import WorkerRunner

from avv_core.items import WorkItem
from avv_core.json_types import JSONObject
from avv_core.records import Record
from avv_harness.locust.item_protocol import (
    ACCEPTED,
    GIVE_BACK,
    HELLO,
    IDENTIFY,
    ITEMS,
    LOST,
    MAX_ASKS_PER_LOST,
    MAX_ITEMS_PER_MESSAGE,
    MAX_ITEMS_PER_WANT,
    RECORDS,
    REFUSED,
    WANT,
    guarded,
)
from avv_harness.run.role import ItemHost, Role
from avv_harness.run.state import EXIT_INPUT

log = logging.getLogger("avv")

#: How long a user waits for an item before it returns empty-handed (and asks again).
ASK_TIMEOUT_S = 2.0
#: An ask with no answer after this long is reported lost (``avv_lost``): ZeroMQ drops the master's answer
#: without an error when this worker's receive queue is full. Its items go out again and a late answer is
#: ignored. Well above the hand-out p99 measured at 20,000 streams (0.76 s), so a slow answer is rarely wasted.
ASK_LOST_S = 5.0
#: After an answer with no item (every item is handed out or done), a worker's users do not ask again for this
#: long: 20,000 idle users asking every 0.25 s near a run's end flooded the master (80,000 asks/s).
EMPTY_BACKOFF_S = 1.0
#: How often a worker sends the records that finished (a record waits at most this long before it leaves).
SEND_INTERVAL_S = 0.05


class WorkerRole(Role):
    """Presents its identity, asks the master for items and sends records back; holds nothing the master does
    not know. Stops when the master refuses it."""

    name = "worker"
    runs_users = True
    holds_ledger = False

    runner: WorkerRunner

    def __init__(self, host: ItemHost, runner: WorkerRunner):
        super().__init__(host, runner)
        self.inbox: dict[str, deque[WorkItem]] = {}
        self.ready: dict[str, gevent.event.Event] = {}
        self.waiting: Counter[str] = Counter()  # users of a class waiting for an item
        self.asked: Counter[str] = Counter()  # items asked for a class and not answered yet
        self.open_asks: dict[int, tuple[str, int, float]] = {}  # ask id → (class, n, sent at), oldest first
        self.lost_asks: list[int] = []  # asks found lost, not yet reported (a failed send keeps them)
        self.asks_lost = 0
        self.late_answers = 0  # answers to asks reported lost: ignored
        self._ask_ids = itertools.count(1)
        self.outbox: deque[JSONObject] = deque()  # finished items' records not sent yet
        self.empty_until: dict[str, float] = {}  # class → no ask before this (monotonic): the master had none
        self._sender: gevent.Greenlet | None = None
        self._send_failures = 0
        self.closed_classes: set[str] = set()  # vendors the master closed (--avv-settle) in this run
        self.accepted = False
        self.refused: str | None = None  # why the master refused this worker

    def attach(self) -> None:
        runner = self.runner
        runner.register_message(ITEMS, guarded(self._on_items))
        runner.register_message(ACCEPTED, guarded(self._on_accepted))
        runner.register_message(REFUSED, guarded(self._on_refused))
        runner.register_message(IDENTIFY, guarded(self._on_identify))
        # items still queued when the test stops belong to that run (the web UI's next START is a new run)
        runner.environment.events.test_stop.add_listener(lambda **_: self._forget_items())
        self._sender = gevent.spawn(self._send_loop)
        self.present()

    def _forget_items(self) -> None:
        self.send_records()  # what finished before the stop still counts
        self.inbox.clear()
        self.asked.clear()
        self.open_asks.clear()  # a late answer to one of them is ignored, like an answer to a lost ask
        self.empty_until.clear()
        self.closed_classes.clear()

    def present(self) -> None:
        """Send this process's identity to the master (at connect, and again when the master asks)."""
        self.runner.send_message(HELLO, self.host.identity().to_message())

    def _on_identify(self, environment: Environment, msg: Message) -> None:
        self.present()
        self.expire_asks(everything=True)  # the master answered them with this: ask again once accepted

    def _on_accepted(self, environment: Environment, msg: Message) -> None:
        if not self.accepted:
            self.accepted = True
            log.info("the master accepted this worker (same version, config and samples)")

    def _on_refused(self, environment: Environment, msg: Message) -> None:
        if self.refused is not None:
            return
        self.refused = str((msg.data or {}).get("reason") or "no reason given")[:4000]
        log.error("the master refused this worker: %s. This worker stops; start it with the master's config "
                  "and avv-locust version.", self.refused)
        environment.process_exit_code = EXIT_INPUT
        for ready in self.ready.values():
            ready.set()  # users waiting for items stop waiting
        gevent.spawn(self._quit)  # not from this greenlet: quit kills the runner's greenlets

    def _quit(self) -> None:
        # Tell the master now (Locust's own "quit" goes out only when the process shuts down): it drops this
        # worker at once, and stops a headless run when no worker is left instead of waiting for one.
        self.runner.client.send(Message("quit", None, self.runner.client_id))
        self.runner.quit()

    def _on_items(self, environment: Environment, msg: Message) -> None:
        data = msg.data
        self.host.apply_worker_context(data.get("context") or {})
        opened = self.open_asks.pop(int(data["ask"]), None)
        if opened is None:  # reported lost (or asked before the test stopped): its items went out again
            self.late_answers += 1
            log.info("ignored a late answer to ask %s (%d items): it was reported lost", data["ask"],
                     len(data["items"]))
            return
        class_name, n, _ = opened
        # the ask this answers is settled, however many items it carries (fewer when the queue ran short)
        self.asked[class_name] = max(0, self.asked[class_name] - n)
        if data.get("closed") is True:
            self.closed_classes.add(class_name)
        self.inbox.setdefault(class_name, deque()).extend(WorkItem.from_message(i) for i in data["items"])
        if not data["items"]:
            self.empty_until[class_name] = time.monotonic() + EMPTY_BACKOFF_S
        self.ready.setdefault(class_name, gevent.event.Event()).set()

    def next_item(self, class_name: str) -> WorkItem | None:
        """An item for one user of ``class_name``: from the inbox, else asked for and waited for (at most
        :data:`ASK_TIMEOUT_S`). A user waits for the items asked on its behalf, not for one answer: all users of
        a class share the inbox, and a user woken by an answer that others emptied keeps waiting (before, it
        came back empty and slept 0.25 s: at 2,000 users of 1 s answers, ~2 wasted waits per item)."""
        if self.refused is not None:
            return None
        inbox = self.inbox.setdefault(class_name, deque())
        if inbox:
            return inbox.popleft()
        ready = self.ready.setdefault(class_name, gevent.event.Event())
        backoff = self.empty_until.get(class_name, 0.0) - time.monotonic()
        if backoff > 0:  # wait it out here: thousands of idle users waking every 0.25 s cost the worker its CPU
            ready.clear()
            ready.wait(timeout=backoff)
            return inbox.popleft() if inbox else None
        deadline = time.monotonic() + ASK_TIMEOUT_S
        self.waiting[class_name] += 1
        try:
            while not inbox and self.refused is None:
                if self.empty_until.get(class_name, 0.0) > time.monotonic():
                    break  # the master had none: back off (woken users asked again at once, until their deadline)
                ready.clear()
                # ask only for the waiting users no ask covers yet, several in one message
                short = min(self.waiting[class_name] - self.asked[class_name], MAX_ITEMS_PER_WANT)
                if short > 0:
                    ask = next(self._ask_ids)
                    try:
                        self.runner.send_message(WANT, {"vendor": list(self.host.vendor_id(class_name)), "n": short,
                                                        "ask": ask})
                    except Exception:  # the master's queue is full (see send_records): the user asks again later
                        break
                    self.asked[class_name] += short
                    self.open_asks[ask] = (class_name, short, time.monotonic())
                remaining = deadline - time.monotonic()
                if inbox or remaining <= 0 or not ready.wait(timeout=remaining):
                    break  # an ask with no answer is reported lost after ASK_LOST_S (expire_asks), then asked afresh
        finally:
            self.waiting[class_name] -= 1
        return inbox.popleft() if inbox else None

    def closed(self, class_name: str) -> bool:
        return class_name in self.closed_classes and not self.inbox.get(class_name)

    def give_back(self, item: WorkItem) -> None:
        if self.refused is None:  # a refused worker's items are already back on the master
            self.runner.send_message(GIVE_BACK, {"keys": [list(item.key)]})

    def submit(self, item: WorkItem, records: list[Record]) -> None:
        if self.refused is not None:
            return  # the master would refuse it
        self.outbox.append({"key": list(item.key), "records": [dict(r) for r in records]})

    def expire_asks(self, everything: bool = False) -> None:
        """Find lost the asks with no answer after :data:`ASK_LOST_S` (or all open ones): reported with the next
        send, their users ask afresh, and a late answer to them is ignored."""
        cutoff = float("inf") if everything else time.monotonic() - ASK_LOST_S
        while self.open_asks:
            ask, (class_name, n, sent) = next(iter(self.open_asks.items()))
            if sent > cutoff:
                break  # the rest were sent later
            del self.open_asks[ask]
            self.asked[class_name] = max(0, self.asked[class_name] - n)
            self.lost_asks.append(ask)
            self.asks_lost += 1
            if self.asks_lost in (1, 10, 100) or self.asks_lost % 1000 == 0:
                log.warning("no answer from the master to an ask for items after %g s (%d asks so far): reported "
                            "lost, its items go out again", ASK_LOST_S, self.asks_lost)
            self.ready.setdefault(class_name, gevent.event.Event()).set()  # its users ask afresh

    def _send_loop(self) -> None:
        while True:
            gevent.sleep(SEND_INTERVAL_S)
            self.expire_asks()
            self.send_lost()
            self.send_records()

    def send_lost(self) -> None:
        """Report the lost asks (``avv_lost``); a failed send keeps them for the next call."""
        while self.lost_asks and self.refused is None:
            batch = self.lost_asks[:MAX_ASKS_PER_LOST]
            try:
                self.runner.send_message(LOST, {"asks": batch})
            except Exception:  # the master's queue is full: reported with the next send
                return
            del self.lost_asks[:len(batch)]

    def send_records(self) -> None:
        """Send the outbox, :data:`MAX_ITEMS_PER_MESSAGE` items a message. A failed send (the master's queue is
        full, or the master is gone) puts the batch back in front, for the next call."""
        while self.outbox and self.refused is None:
            batch = [self.outbox.popleft() for _ in range(min(len(self.outbox), MAX_ITEMS_PER_MESSAGE))]
            try:
                self.runner.send_message(RECORDS, {"items": batch})
            except Exception as exc:  # Locust's RPCSendError after its own retries (ZeroMQ: "Resource temporarily
                self.outbox.extendleft(reversed(batch))  # unavailable"): keep the records
                self._send_failures += 1
                if self._send_failures in (1, 10, 100) or self._send_failures % 1000 == 0:
                    log.warning("could not send %d finished items' records to the master (%s; %d times so far): "
                                "they are kept and sent again", len(self.outbox), exc, self._send_failures)
                return

    def close(self) -> None:
        self.send_records()  # a worker that stops by itself (Ctrl-C) while the run goes on
        if self._sender is not None:
            self._sender.kill(block=False)
