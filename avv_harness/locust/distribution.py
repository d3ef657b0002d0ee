"""The item protocol between the process that holds the work ledger and the processes that run items.

One small class per role (:class:`Role`; :func:`role_for` picks it from the Locust runner), each with the same
three methods the users call — ``next_item``, ``give_back`` and ``submit`` — shaped like locust-plugins'
``Distributor``, and the answers the controller and the run lifecycle ask of it (``name``, ``runs_users``,
``holds_ledger``, ``expected_workers()``, ``close()``) instead of testing which role it is:

- :class:`LocalRole` (a plain local run): takes items from the ledger in this process and stores
  records here.
- :class:`MasterRole`: hands items to workers as they ask (``avv_want`` → ``avv_items``, carrying the
  request body, so workers need neither the sample file nor a shared disk), stores the records they send
  (``avv_records``: the records of up to :data:`MAX_ITEMS_PER_MESSAGE` items; ``avv_record``: one item's),
  takes back items of stopped users (``avv_give_back``) and hands out again the items of workers Locust marks
  missing. Its own process runs no users.
- :class:`WorkerRole`: asks the master for items as its users need them (one per waiting user, several in one
  ask when several wait) and sends the records of the items that finished every :data:`SEND_INTERVAL_S` in one
  message (one message per item made ~2,000 messages/s at 2,000 records/s; a master that falls behind fills
  Locust's send queue — ZeroMQ's high-water mark — and a send then fails: the records stay in the outbox and go
  with the next send, never lost, so no item is left held with its records gone).

The cluster trusts only what it handed out. Locust's master port has no authentication, so:

- **Identity at connect.** A worker presents its :class:`~avv_harness.run.node_identity.NodeIdentity` (version,
  config, samples) in ``avv_hello`` as soon as it is attached. The master compares it with its own: a match
  gets ``avv_accepted``; a mismatch gets ``avv_refused`` with what differs (logged on both sides), no items,
  and the worker stops (exit status 2). A worker that asks for items without having presented an identity
  gets ``avv_identify`` (present it) and no items.
- **Records only for items handed out.** The master stores a record only from the worker it handed that
  item to, and only once (:meth:`~avv_harness.run.ledger.Ledger.verdict`); the rows must name the item's key and
  answer the body the master handed out (``request_hash``). Anything else is refused: counted in run.json
  (``records_refused``, ``records_refused_by_reason``), logged, never written, and when the sender held the
  item it is handed out again. A worker whose records are refused :data:`MAX_BAD_RECORDS` times is itself
  refused. A worker presumed lost whose late record arrives after its item was recorded elsewhere is a
  duplicate (``duplicates_dropped``), not a refusal. A handler never raises on a malformed message.

Only this module and the controller touch Locust runners and messages. A role reaches the controller only
through :class:`ItemHost`, what it asks of the process's ledger side.
"""

from __future__ import annotations

import logging
import time
from collections import Counter, deque
from collections.abc import Callable
from typing import Any, ClassVar, Protocol

import gevent
import gevent.event
from locust.rpc import Message
from locust.runners import STATE_INIT, STATE_MISSING, MasterRunner, WorkerRunner

from avv_core.items import ItemKey, VendorId, WorkItem
from avv_core.records import Record
from avv_harness.locust.record_messages import MALFORMED, MalformedRecord, parse_key, parse_record_message
from avv_harness.run.node_identity import NodeIdentity, differences, quote_peer
from avv_harness.run.state import EXIT_INPUT

log = logging.getLogger("avv")

WANT, ITEMS, RECORD, RECORDS, GIVE_BACK = "avv_want", "avv_items", "avv_record", "avv_records", "avv_give_back"
HELLO, ACCEPTED, REFUSED, IDENTIFY = "avv_hello", "avv_accepted", "avv_refused", "avv_identify"
ASK_TIMEOUT_S = 2.0
REQUEUE_INTERVAL_S = 1.0
#: Items one ``avv_want`` may take (a worker asks for as many as it has users waiting): a forged ask cannot drain
#: the queue.
MAX_ITEMS_PER_WANT = 8
#: Items whose records one ``avv_records`` message carries at most (a worker sends what finished since its last send).
MAX_ITEMS_PER_MESSAGE = 200
#: After an answer with no item (every item is handed out or done), a worker's users do not ask again for this
#: long: 20,000 idle users asking every 0.25 s near a run's end flooded the master (80,000 asks/s).
EMPTY_BACKOFF_S = 1.0
#: How often a worker sends the records that finished (a record waits at most this long before it leaves).
SEND_INTERVAL_S = 0.05
#: Refused or malformed records after which the master refuses the worker that sent them.
MAX_BAD_RECORDS = 3
REFUSED_WORKER = "refused_worker"


def _guarded(handler: Callable[[Any, Any], None]) -> Callable[..., None]:
    """A message handler that logs what it cannot read instead of raising (Locust would log a traceback and
    the message's effect would be lost)."""

    def run(environment: Any, msg: Any, **_: Any) -> None:
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

    def vendor_closed(self, vendor: VendorId) -> bool: ...

    def store(self, key: ItemKey, records: list[Record]) -> bool: ...

    def store_from(self, taker: str, key: ItemKey, records: list[Record]) -> tuple[str, str]: ...

    def refuse_record(self, worker: str, key: ItemKey | None, reason: str, detail: str,
                      taker: str | None = None) -> None: ...

    def note_refused_worker(self, worker: str, reason: str) -> None: ...

    def takers(self) -> set[str]: ...

    def requeue_taker(self, taker: str, why: str = "is gone") -> int: ...

    def identity(self) -> NodeIdentity: ...

    def worker_context(self) -> dict[str, Any]: ...

    def apply_worker_context(self, context: dict[str, Any]) -> None: ...


class Role:
    """A process's part in the item protocol, and what the controller and the run lifecycle ask of it."""

    name: ClassVar[str]  # "local", "master" or "worker" (run.json's locust.role)
    runs_users: ClassVar[bool]  # its process runs Locust users (and watches its own event-loop lag)
    holds_ledger: ClassVar[bool]  # the ledger, the run folder and the records are in its process

    def __init__(self, host: ItemHost, runner: Any):
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
        self.host.store(item.key, records)

    def closed(self, class_name: str) -> bool:
        return self.host.vendor_closed(self.host.vendor_id(class_name))


class MasterRole(LocalRole):
    """Serves items to the workers it accepted and stores only the records it can trust."""

    name = "master"
    runs_users = False

    def __init__(self, host: ItemHost, runner: Any):
        super().__init__(host, runner)
        self.accepted: dict[str, NodeIdentity] = {}  # node id → what it presented
        self.refused: dict[str, str] = {}  # node id → why
        self.labels: dict[str, str] = {}  # node id → "host:pid (node id)" for log lines
        self.bad_records: Counter[str] = Counter()
        self.asked_to_identify: set[str] = set()
        self._requeuer: gevent.Greenlet | None = None

    def attach(self) -> None:
        runner = self.runner
        runner.register_message(HELLO, _guarded(self._on_hello))
        runner.register_message(WANT, _guarded(self._on_want))
        runner.register_message(RECORD, _guarded(self._on_record))
        runner.register_message(RECORDS, _guarded(self._on_records))
        runner.register_message(GIVE_BACK, _guarded(self._on_give_back))
        self._requeuer = gevent.spawn(self._requeue_lost_workers)
        parsed_options = runner.environment.parsed_options
        if parsed_options is not None:
            # Without rebalancing, Locust moves a lost worker's users to the others only once it drops
            # the worker for good (60 s of missed heartbeats); with it, as soon as it is marked missing.
            parsed_options.enable_rebalancing = True

    def expected_workers(self) -> int | None:
        return getattr(self.runner.environment.parsed_options, "expect_workers", None)

    def next_item(self, class_name: str) -> WorkItem | None:
        return None  # a master runs no users

    def label(self, node: str) -> str:
        """How log lines name a node: what it presented (host:pid) and Locust's node id, control characters
        escaped (both come from the peer)."""
        return self.labels.get(node) or quote_peer(node)

    # ----------------------------------------------------------------------------- who may work

    def _on_hello(self, environment: Any, msg: Any) -> None:
        node = msg.node_id
        if node in self.refused:  # the same process again: its config cannot have changed
            self.runner.send_message(REFUSED, {"reason": self.refused[node]}, client_id=node)
            return
        try:
            theirs = NodeIdentity.from_message(msg.data)
        except ValueError as exc:
            self.refuse(node, f"its identity cannot be read ({exc})")
            return
        self.labels[node] = f"{quote_peer(theirs.worker)} ({quote_peer(node)})"
        found = differences(self.host.identity(), theirs)
        if found:
            self.refuse(node, "; ".join(found))
            return
        self.accepted[node] = theirs
        self.asked_to_identify.discard(node)
        log.info("worker %s accepted: same version, config and samples", self.label(node))
        self.runner.send_message(ACCEPTED, {}, client_id=node)

    def refuse(self, node: str, reason: str) -> None:
        """Refuse a worker for good: no items, its items handed out again, and it is told why."""
        self.refused[node] = reason
        self.accepted.pop(node, None)
        log.error("worker %s refused: %s. It gets no items and is told to stop.", self.label(node), reason)
        self.host.note_refused_worker(self.label(node), reason)
        self.host.requeue_taker(node, why=f"({self.label(node)}) was refused")
        if self.runner.state == STATE_INIT and node in self.runner.clients:
            # Before the test starts, a headless Locust master quits its runner when its last worker quits, yet
            # keeps waiting for --expect-workers with no one listening: a process that never ends. Forget the
            # refused worker first (its quit is then ignored), so the master keeps waiting for a matching one.
            # During a run Locust's own path applies: users rebalanced, or the run stopped if none is left.
            del self.runner.clients[node]
        self.runner.send_message(REFUSED, {"reason": reason}, client_id=node)

    # ------------------------------------------------------------------------------ items out

    def _on_want(self, environment: Any, msg: Any) -> None:
        node = msg.node_id
        if node in self.refused:
            self.runner.send_message(REFUSED, {"reason": self.refused[node]}, client_id=node)
            return
        if node not in self.accepted:
            if node not in self.asked_to_identify:
                self.asked_to_identify.add(node)
                log.warning("worker %s asks for items without having presented its identity: asked to present "
                            "it (a worker of an avv-locust version without this check never does, and gets no "
                            "items)", self.label(node))
            self.runner.send_message(IDENTIFY, {}, client_id=node)
            return
        data = msg.data
        vendor = VendorId(*(str(part) for part in data["vendor"]))
        n = min(max(int(data.get("n", 1)), 1), MAX_ITEMS_PER_WANT)
        items = [item.to_message() for item in self.host.take_items(vendor, node, n)]
        reply = {"vendor": list(vendor), "n": n, "items": items, "context": self.host.worker_context()}
        if not items and self.host.vendor_closed(vendor):
            reply["closed"] = True  # --avv-settle: its users may stop
        self.runner.send_message(ITEMS, reply, client_id=node)

    def _on_give_back(self, environment: Any, msg: Any) -> None:
        for raw in msg.data["keys"]:
            self.host.release_item(parse_key(raw), taker=msg.node_id)  # only what that worker holds

    # ----------------------------------------------------------------------------- records in

    def _on_records(self, environment: Any, msg: Any) -> None:
        node, data = msg.node_id, msg.data
        entries = data.get("items") if isinstance(data, dict) else None
        if not isinstance(entries, list) or not entries or len(entries) > MAX_ITEMS_PER_MESSAGE:
            if node in self.refused:
                self.host.refuse_record(self.label(node), None, REFUSED_WORKER, "its worker was refused")
            else:
                self._bad_record(node, None, MALFORMED, f"avv_records needs 1 to {MAX_ITEMS_PER_MESSAGE} items")
            return
        for entry in entries:
            self._store_entry(node, entry)

    def _on_record(self, environment: Any, msg: Any) -> None:
        self._store_entry(msg.node_id, msg.data)

    def _store_entry(self, node: str, data: Any) -> None:
        """One item's records from ``node`` (an ``avv_record`` message, or one entry of ``avv_records``)."""
        if node in self.refused:  # its items are already back in the queue: nothing to release
            self.host.refuse_record(self.label(node), None, REFUSED_WORKER, "its worker was refused")
            return
        try:
            key, records = parse_record_message(data)
        except MalformedRecord as exc:
            self._bad_record(node, exc.key, MALFORMED, str(exc))
            return
        reason, detail = self.host.store_from(node, key, records)
        if reason:
            self._bad_record(node, key, reason, detail)

    def _bad_record(self, node: str, key: ItemKey | None, reason: str, detail: str) -> None:
        self.host.refuse_record(self.label(node), key, reason, detail, taker=node)
        self.bad_records[node] += 1
        if self.bad_records[node] >= MAX_BAD_RECORDS and node not in self.refused:
            self.refuse(node, f"{self.bad_records[node]} of its records were refused (the last: {reason}: "
                              f"{detail})")

    # ---------------------------------------------------------------------------- lost workers

    def _requeue_lost_workers(self) -> None:
        while True:
            gevent.sleep(REQUEUE_INTERVAL_S)
            self.requeue_lost_workers()

    def requeue_lost_workers(self) -> int:
        """Hand out again the items held by workers that are gone or marked missing."""
        count = 0
        for taker in self.host.takers():
            client = self.runner.clients.get(taker)
            if client is None or client.state == STATE_MISSING:
                count += self.host.requeue_taker(taker)
        return count

    def close(self) -> None:
        if self._requeuer is not None:
            self._requeuer.kill(block=False)


class WorkerRole(Role):
    """Presents its identity, asks the master for items and sends records back; holds nothing the master does
    not know. Stops when the master refuses it."""

    name = "worker"
    runs_users = True
    holds_ledger = False

    def __init__(self, host: ItemHost, runner: Any):
        super().__init__(host, runner)
        self.inbox: dict[str, deque[WorkItem]] = {}
        self.ready: dict[str, gevent.event.Event] = {}
        self.waiting: Counter[str] = Counter()  # users of a class waiting for an item
        self.asked: Counter[str] = Counter()  # items asked for a class and not answered yet
        self.outbox: deque[dict[str, Any]] = deque()  # finished items' records not sent yet
        self.empty_until: dict[str, float] = {}  # class → no ask before this (monotonic): the master had none
        self._sender: gevent.Greenlet | None = None
        self._send_failures = 0
        self.closed_classes: set[str] = set()  # vendors the master closed (--avv-settle) in this run
        self.accepted = False
        self.refused: str | None = None  # why the master refused this worker

    def attach(self) -> None:
        runner = self.runner
        runner.register_message(ITEMS, _guarded(self._on_items))
        runner.register_message(ACCEPTED, _guarded(self._on_accepted))
        runner.register_message(REFUSED, _guarded(self._on_refused))
        runner.register_message(IDENTIFY, _guarded(lambda env, msg: self.present()))
        # items still queued when the test stops belong to that run (the web UI's next START is a new run)
        runner.environment.events.test_stop.add_listener(lambda **_: self._forget_items())
        self._sender = gevent.spawn(self._send_loop)
        self.present()

    def _forget_items(self) -> None:
        self.send_records()  # what finished before the stop still counts
        self.inbox.clear()
        self.asked.clear()
        self.empty_until.clear()
        self.closed_classes.clear()

    def present(self) -> None:
        """Send this process's identity to the master (at connect, and again when the master asks)."""
        self.runner.send_message(HELLO, self.host.identity().to_message())

    def _on_accepted(self, environment: Any, msg: Any) -> None:
        if not self.accepted:
            self.accepted = True
            log.info("the master accepted this worker (same version, config and samples)")

    def _on_refused(self, environment: Any, msg: Any) -> None:
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

    def _on_items(self, environment: Any, msg: Any) -> None:
        data = msg.data
        self.host.apply_worker_context(data.get("context") or {})
        class_name = self.host.class_name(VendorId(*data["vendor"]))
        # the ask this answers is settled, however many items it carries (fewer when the queue ran short)
        self.asked[class_name] = max(0, self.asked[class_name] - int(data.get("n", len(data["items"]))))
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
                ready.clear()
                # ask only for the waiting users no ask covers yet, several in one message
                short = min(self.waiting[class_name] - self.asked[class_name], MAX_ITEMS_PER_WANT)
                if short > 0:
                    self.asked[class_name] += short
                    try:
                        self.runner.send_message(WANT, {"vendor": list(self.host.vendor_id(class_name)), "n": short})
                    except Exception:  # the master's queue is full (see send_records): the user asks again later
                        self.asked[class_name] -= short
                        break
                remaining = deadline - time.monotonic()
                if inbox or remaining <= 0:
                    break
                if not ready.wait(timeout=remaining):
                    self.asked[class_name] = 0  # an answer never came (e.g. asked to identify): ask afresh
                    break
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

    def _send_loop(self) -> None:
        while True:
            gevent.sleep(SEND_INTERVAL_S)
            self.send_records()

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


def role_for(runner: Any, host: ItemHost) -> Role:
    """The role of the process that has ``runner``: a worker, a master, or else a local run."""
    if isinstance(runner, WorkerRunner):
        return WorkerRole(host, runner)
    if isinstance(runner, MasterRunner):
        return MasterRole(host, runner)
    return LocalRole(host, runner)
