"""The master's side of the item protocol (Locust layer): :class:`MasterRole` accepts workers that present a
matching identity, hands them items as they ask (remembering each answer's ask id in :class:`HandOuts`, so the
items of an answer a worker reports lost go out again), stores only the records it can trust, and hands out
again the items of workers that are gone. The protocol as a whole: :mod:`avv_harness.locust.distribution`.
"""

from __future__ import annotations

import logging
from collections import Counter

import gevent
from locust.env import Environment
from locust.rpc import Message
from locust.runners import STATE_INIT, STATE_MISSING, MasterRunner

from avv_core.items import ItemKey, VendorId, WorkItem
from avv_harness.locust.handouts import HandOuts
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
    RECORD,
    RECORDS,
    REFUSED,
    WANT,
    LocalRole,
    guarded,
)
from avv_harness.locust.record_messages import MALFORMED, MalformedRecord, parse_key, parse_record_message
from avv_harness.run.node_identity import NodeIdentity, differences, quote_peer
from avv_harness.run.role import ItemHost

log = logging.getLogger("avv")

#: How often the master hands out again the items of lost workers (and forgets settled asks).
REQUEUE_INTERVAL_S = 1.0
#: Refused or malformed records after which the master refuses the worker that sent them.
MAX_BAD_RECORDS = 3
REFUSED_WORKER = "refused_worker"


class MasterRole(LocalRole):
    """Serves items to the workers it accepted and stores only the records it can trust."""

    name = "master"
    runs_users = False

    runner: MasterRunner

    def __init__(self, host: ItemHost, runner: MasterRunner):
        super().__init__(host, runner)
        self.accepted: dict[str, NodeIdentity] = {}  # node id → what it presented
        self.refused: dict[str, str] = {}  # node id → why
        self.labels: dict[str, str] = {}  # node id → "host:pid (node id)" for log lines
        self.bad_records: Counter[str] = Counter()
        self.asked_to_identify: set[str] = set()
        self.handouts = HandOuts()  # each answer's items by ask id, until recorded or reported lost
        self._requeuer: gevent.Greenlet | None = None

    def attach(self) -> None:
        runner = self.runner
        runner.register_message(HELLO, guarded(self._on_hello))
        runner.register_message(WANT, guarded(self._on_want))
        runner.register_message(RECORD, guarded(self._on_record))
        runner.register_message(RECORDS, guarded(self._on_records))
        runner.register_message(GIVE_BACK, guarded(self._on_give_back))
        runner.register_message(LOST, guarded(self._on_lost))
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

    def _on_hello(self, environment: Environment, msg: Message) -> None:
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
        self.host.intake.note_refused_worker(self.label(node), reason)
        self.host.requeue_taker(node, why=f"({self.label(node)}) was refused")
        if self.runner.state == STATE_INIT and node in self.runner.clients:
            # Before the test starts, a headless Locust master quits its runner when its last worker quits, yet
            # keeps waiting for --expect-workers with no one listening: a process that never ends. Forget the
            # refused worker first (its quit is then ignored), so the master keeps waiting for a matching one.
            # During a run Locust's own path applies: users rebalanced, or the run stopped if none is left.
            del self.runner.clients[node]
        self.runner.send_message(REFUSED, {"reason": reason}, client_id=node)

    # ------------------------------------------------------------------------------ items out

    def _on_want(self, environment: Environment, msg: Message) -> None:
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
        ask = int(data["ask"])
        n = min(max(int(data.get("n", 1)), 1), MAX_ITEMS_PER_WANT)
        taken = self.host.take_items(vendor, node, n)
        self.handouts.handed(node, ask, (item.key for item in taken))
        items = [item.to_message() for item in taken]
        reply = {"vendor": list(vendor), "ask": ask, "n": n, "items": items, "context": self.host.worker_context()}
        if not items and self.host.vendor_closed(vendor):
            reply["closed"] = True  # --avv-settle: its users may stop
        self.runner.send_message(ITEMS, reply, client_id=node)

    def _on_give_back(self, environment: Environment, msg: Message) -> None:
        for raw in msg.data["keys"]:
            self.host.release_item(parse_key(raw), taker=msg.node_id)  # only what that worker holds

    def _on_lost(self, environment: Environment, msg: Message) -> None:
        """A worker got no answer to these asks (ZeroMQ drops an answer to a worker whose receive queue is full):
        their items that it still holds under them go out again; it ignores a late answer. A worker's messages
        arrive in the order it sent them, so its ask was handled before its report."""
        node = msg.node_id
        if node not in self.accepted:
            return  # nothing was handed to it
        requeued = 0
        for ask in msg.data["asks"][:MAX_ASKS_PER_LOST]:
            for key in self.handouts.lost(node, int(ask), self.host.holder):
                requeued += self.host.release_item(key, taker=node)
        log.warning("worker %s got no answer to %d asks (dropped on the way): %d of their items handed out again",
                    self.label(node), len(msg.data["asks"]), requeued)

    # ----------------------------------------------------------------------------- records in

    def _on_records(self, environment: Environment, msg: Message) -> None:
        node, data = msg.node_id, msg.data
        entries = data.get("items") if isinstance(data, dict) else None
        if not isinstance(entries, list) or not entries or len(entries) > MAX_ITEMS_PER_MESSAGE:
            if node in self.refused:
                self.host.intake.refuse_record(self.label(node), None, REFUSED_WORKER, "its worker was refused")
            else:
                self._bad_record(node, None, MALFORMED, f"avv_records needs 1 to {MAX_ITEMS_PER_MESSAGE} items")
            return
        for entry in entries:
            self._store_entry(node, entry)

    def _on_record(self, environment: Environment, msg: Message) -> None:
        self._store_entry(msg.node_id, msg.data)

    def _store_entry(self, node: str, data: object) -> None:
        """One item's records from ``node`` (an ``avv_record`` message, or one entry of ``avv_records``)."""
        if node in self.refused:  # its items are already back in the queue: nothing to release
            self.host.intake.refuse_record(self.label(node), None, REFUSED_WORKER, "its worker was refused")
            return
        try:
            key, records = parse_record_message(data)
        except MalformedRecord as exc:
            self._bad_record(node, exc.key, MALFORMED, str(exc))
            return
        reason, detail = self.host.intake.store_from(node, key, records)
        if reason:
            self._bad_record(node, key, reason, detail)

    def _bad_record(self, node: str, key: ItemKey | None, reason: str, detail: str) -> None:
        self.host.intake.refuse_record(self.label(node), key, reason, detail, taker=node)
        self.bad_records[node] += 1
        if self.bad_records[node] >= MAX_BAD_RECORDS and node not in self.refused:
            self.refuse(node, f"{self.bad_records[node]} of its records were refused (the last: {reason}: "
                              f"{detail})")

    # ---------------------------------------------------------------------------- lost workers

    def _requeue_lost_workers(self) -> None:
        while True:
            gevent.sleep(REQUEUE_INTERVAL_S)
            self.requeue_lost_workers()
            self.handouts.prune(self.host.holder)

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
