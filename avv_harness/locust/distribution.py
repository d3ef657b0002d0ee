"""The item protocol between the process that holds the work ledger and the processes that run items.

One small class per role (:class:`Role`; :func:`role_for` picks it from the Locust runner), each with the same
three methods the users call — ``next_item``, ``give_back`` and ``submit`` — shaped like locust-plugins'
``Distributor``, and the answers the controller and the run lifecycle ask of it (``name``, ``runs_users``,
``holds_ledger``, ``expected_workers()``, ``close()``) instead of testing which role it is:

- :class:`LocalRole` (a plain local run): takes items from the ledger in this process and stores
  records here.
- :class:`MasterRole` (:mod:`~avv_harness.locust.master_role`): hands items to workers as they ask (``avv_want``
  → ``avv_items``, carrying the request body, so workers need neither the sample file nor a shared disk), stores
  the records they send (``avv_records``: the records of up to :data:`MAX_ITEMS_PER_MESSAGE` items;
  ``avv_record``: one item's), takes back items of stopped users (``avv_give_back``) and of asks a worker reports
  lost (``avv_lost``, below), and hands out again the items of workers Locust marks missing. Its own process runs
  no users.
- :class:`WorkerRole` (:mod:`~avv_harness.locust.worker_role`): asks the master for items as its users need
  them (one per waiting user, several in one ask when several wait) and sends the records of the items that
  finished every :data:`SEND_INTERVAL_S` in one message (one message per item made ~2,000 messages/s at 2,000
  records/s; a master that falls behind fills Locust's send queue — ZeroMQ's high-water mark — and a send then
  fails: the records stay in the outbox and go with the next send, never lost, so no item is left held with its
  records gone).

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

The hand-out is acknowledged (item protocol 4). ZeroMQ drops, without an error, a message the master's ROUTER
socket sends to a worker whose receive queue is at its high-water mark (a burst of thousands of asks); the items
an ``avv_items`` answer carried would stay held by that live worker and the run would stall. So each ``avv_want``
carries an ask id (``ask``, counting up per worker) that ``avv_items`` echoes. A worker with no answer to an ask
after :data:`~avv_harness.locust.worker_role.ASK_LOST_S` reports it lost (``avv_lost``, ask ids; a failed send
keeps them for the next) and ignores a late answer to it; the master hands out again the items of that answer
that the worker still holds under that ask (:class:`~avv_harness.locust.handouts.HandOuts`: not one recorded
since, nor one handed to it again under a later ask). A worker's messages reach the master in the order sent, so
the ask is always handled before its report. Exactly once holds: a late answer's items never run there.

These modules (this one, :mod:`~avv_harness.locust.item_protocol` with the message names, :class:`ItemHost` and
the local role, and the master's and worker's modules) and the controller are all that touch Locust runners and
messages. A role reaches the controller only through :class:`ItemHost`, what it asks of the process's ledger side.
"""

from __future__ import annotations

from locust.runners import MasterRunner, Runner, WorkerRunner

from avv_harness.locust.item_protocol import (
    ACCEPTED,
    GIVE_BACK,
    HELLO,
    IDENTIFY,
    ITEMS,
    LOST,
    MAX_ITEMS_PER_MESSAGE,
    MAX_ITEMS_PER_WANT,
    RECORD,
    RECORDS,
    REFUSED,
    WANT,
    LocalRole,
)
from avv_harness.locust.master_role import MAX_BAD_RECORDS, REFUSED_WORKER, MasterRole
from avv_harness.locust.worker_role import ASK_LOST_S, SEND_INTERVAL_S, WorkerRole
from avv_harness.run.role import ItemHost, Role

__all__ = [
    "ACCEPTED", "ASK_LOST_S", "GIVE_BACK", "HELLO", "IDENTIFY", "ITEMS", "LOST", "MAX_BAD_RECORDS",
    "MAX_ITEMS_PER_MESSAGE", "MAX_ITEMS_PER_WANT", "RECORD", "RECORDS", "REFUSED", "REFUSED_WORKER",
    "SEND_INTERVAL_S", "WANT", "ItemHost", "LocalRole", "MasterRole", "Role", "WorkerRole", "role_for",
]


def role_for(runner: Runner | None, host: ItemHost) -> Role:
    """The role of the process that has ``runner``: a worker, a master, or else a local run."""
    if isinstance(runner, WorkerRunner):
        return WorkerRole(host, runner)
    if isinstance(runner, MasterRunner):
        return MasterRole(host, runner)
    return LocalRole(host, runner)
