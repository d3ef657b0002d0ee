"""A lost or late ``avv_items`` answer (item protocol 4): the hand-out is acknowledged by its ask id.

ZeroMQ drops, without an error, a message the master's ROUTER socket sends to a worker whose receive queue is at
its high-water mark (a burst of thousands of asks). Before protocol 4 the items such an answer carried stayed held
by that live worker, never ran, and the run stalled. Now each ``avv_want`` carries an ask id that ``avv_items``
echoes; a worker whose ask has no answer after :data:`ASK_LOST_S` reports it lost (``avv_lost``), the master hands
that ask's items out again (those still held by that worker and not recorded), and the worker ignores a late
answer to it. The master and a worker run in this process (tests/glue.py); the master's sends are intercepted.
"""

from __future__ import annotations

import gevent
import pytest

from avv_core.items import ItemKey, VendorId
from avv_core.record_file import read_records
from avv_harness.locust import worker_role
from avv_harness.locust.handouts import HandOuts
from avv_harness.run.controller import EXIT_OK
from tests.builders import write_inputs
from tests.fake_vendor import ScriptedAdapter, item_of, stream_reply
from tests.glue import make_env, options, run_to_end

ITEMS = "avv_items"


def cluster(tmp_path, n_samples=4):
    config, samples = write_inputs(tmp_path, ["a"], n_samples=n_samples)
    args = options(tmp_path, config, samples, "--avv-retries", "0")
    master_env, master = make_env(args, runner="master")
    adapter = ScriptedAdapter(lambda r: stream_reply("ok"))
    worker_env, worker = make_env(args, runner="worker", adapter=adapter,
                                  master_port=master_env.runner.server.port)
    return master_env, master, worker_env, worker, adapter


def intercept_first_items_answer(master_env, then):
    """The master's first ``avv_items`` answer that carries items goes to ``then(send)`` instead of the worker."""
    send = master_env.runner.send_message
    caught = []

    def send_message(msg_type, data=None, client_id=None):
        if msg_type == ITEMS and data and data.get("items") and not caught:
            caught.append(data)
            then(lambda: send(msg_type, data, client_id=client_id))
            return
        send(msg_type, data, client_id=client_id)

    master_env.runner.send_message = send_message
    return caught


def assert_each_item_recorded_once(master, adapter, n):
    frame = read_records(master.run_dir / "records.csv")
    keys = [ItemKey.from_record(r) for r in frame.to_dict("records")]
    assert len(keys) == len(set(keys)) == n
    assert sorted(item_of(r) for r in adapter.requests) == sorted(keys)  # each item ran once
    assert master.manifest.records_refused == 0 and master.manifest.duplicates_dropped == 0


@pytest.mark.integration  # a master and a worker in this process: seconds
def test_a_dropped_items_answer_is_reported_lost_and_its_items_handed_out_again(tmp_path, monkeypatch):
    """Before: the dropped answer's item stayed held by the live worker and the run never ended (the shape
    waited for it). After: the worker reports the ask lost, the master hands the item out again, and every
    item is recorded exactly once."""
    monkeypatch.setattr(worker_role, "ASK_LOST_S", 0.5)
    master_env, master, worker_env, worker, adapter = cluster(tmp_path)
    caught = intercept_first_items_answer(master_env, then=lambda deliver: None)  # dropped, as ZeroMQ does
    try:
        assert run_to_end(master_env, timeout=20) == EXIT_OK
        assert caught and worker.role.asks_lost >= 1
        assert_each_item_recorded_once(master, adapter, 4)
    finally:
        worker_env.runner.quit()
        master_env.runner.quit()


@pytest.mark.integration  # a master and a worker in this process: seconds
def test_a_late_answer_to_a_lost_ask_is_ignored_so_nothing_runs_twice(tmp_path, monkeypatch):
    """The answer was only late: it arrives after the worker reported its ask lost and the master handed its
    items out again (here to the same worker). The worker ignores it, so no item runs twice and none is held
    twice."""
    monkeypatch.setattr(worker_role, "ASK_LOST_S", 0.5)
    master_env, master, worker_env, worker, adapter = cluster(tmp_path)
    def deliver_once_reported_lost(deliver):
        while not worker.role.asks_lost or worker.role.lost_asks:  # found lost, and the report sent
            gevent.sleep(0.02)
        deliver()

    caught = intercept_first_items_answer(master_env, then=lambda deliver: gevent.spawn(deliver_once_reported_lost,
                                                                                        deliver))
    try:
        assert run_to_end(master_env, timeout=20) == EXIT_OK
        assert caught and worker.role.late_answers == 1
        assert_each_item_recorded_once(master, adapter, 4)
    finally:
        worker_env.runner.quit()
        master_env.runner.quit()


def test_hand_outs_give_back_only_the_lost_asks_latest_hand_out():
    """The bookkeeping alone: a lost ask returns the keys it handed out that are still held by that worker under
    that ask — not one since recorded, nor one handed out again under a later ask; held-by checks come from the
    ledger (here a dict)."""
    vendor = VendorId("m", "a")
    k1, k2, k3 = (ItemKey.of(vendor, str(i), 1) for i in range(3))
    held = {k1: "w", k2: "w", k3: "w"}
    outs = HandOuts()
    outs.handed("w", 1, [k1, k2])
    outs.handed("w", 2, [k3])
    outs.handed("w", 3, [k2])  # k2 was given back and handed out again, to the same worker
    del held[k1]  # recorded
    assert outs.lost("w", 1, held.get) == []  # k1 recorded, k2 now belongs to ask 3
    assert outs.lost("w", 1, held.get) == [] and outs.lost("other", 2, held.get) == []
    assert outs.lost("w", 2, held.get) == [k3]
    assert len(outs) == 1  # asks 1 and 2 are settled; ask 3 stays until pruned
    assert outs.prune(held.get) == 0 and len(outs) == 1
    del held[k2]
    assert outs.prune(held.get) == 1 and len(outs) == 0 and not outs.ask_of
