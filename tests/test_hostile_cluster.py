"""Hostile inputs, round two (issue 22), the cluster family: the master trusts only what it handed out.

A master and its workers run in this process with real Locust runners (tests/glue.py): the Locust link is a
real socket on loopback, and an intruder is a raw Locust RPC client on the master's port — what anyone who
can reach that port can send. Each test says what happened before the fix.
"""

from __future__ import annotations

import dataclasses
import logging

import gevent
import pytest
from locust.rpc import Message, rpc

from avv_core.items import ItemKey, VendorId
from avv_core.record_file import read_records
from avv_core.records import Record
from avv_harness.locust.distribution import MAX_BAD_RECORDS, RECORD
from avv_harness.run import node_identity
from avv_harness.run.controller import EXIT_INCOMPLETE, EXIT_INPUT, EXIT_OK, RunController
from avv_harness.run.ledger import ACCEPT, ALREADY_RECORDED, DUPLICATE, HELD_BY_ANOTHER, NOT_HANDED_OUT, Ledger
from tests.builders import write_inputs
from tests.fake_vendor import ScriptedAdapter, item_of, stream_reply
from tests.glue import make_env, options, run_to_end

SECRET_HOST = "hidden-host-7f3a.example"


def start_master(tmp_path, vendors=("a", "b"), n_samples=4, *extra):
    config, samples = write_inputs(tmp_path, list(vendors), n_samples=n_samples)
    args = options(tmp_path, config, samples, "--avv-retries", "0", *extra)
    env, ctl = make_env(args, runner="master")
    return env, ctl, args


def start_worker(args, master_env, adapter=None):
    return make_env(args, runner="worker", adapter=adapter, master_port=master_env.runner.server.port)


def wait_until(condition, timeout=5.0):
    deadline = gevent.get_hub().loop.now() + timeout
    while not condition():
        if gevent.get_hub().loop.now() > deadline:
            raise AssertionError("timed out waiting")
        gevent.sleep(0.05)


def quit_all(*envs):
    for env in envs:
        if env.runner.greenlet:
            env.runner.quit()


def other_config(tmp_path, url: str):
    """A worker's own config: the master's vendor names, vendor b at ``url``."""
    work = tmp_path / "worker"
    work.mkdir()
    config, samples = write_inputs(work, {"a": {}, "b": {"url": url}}, n_samples=4)
    return options(work, config, samples, "--avv-retries", "0")


# ------------------------------------------------------------------------- 1. identity at connect


@pytest.mark.integration  # a master and workers in this process: seconds
def test_a_worker_with_another_config_is_refused_and_stops(tmp_path, monkeypatch, caplog):
    """Before: a worker started with another config (vendor b at another URL) was handed items and sent its
    own URL's answers under the master's vendor name b. After: at connect it presents its identity, the master
    names what differs (without the `${VAR}` value), hands it nothing, and the worker logs why and stops with
    exit status 2; a matching worker does all the work."""
    caplog.set_level(logging.INFO, logger="avv")
    monkeypatch.setenv("AVV_TEST_HIDDEN_HOST", SECRET_HOST)
    master_env, master, args = start_master(tmp_path)
    other_args = other_config(tmp_path, "http://${AVV_TEST_HIDDEN_HOST}/b/v1")
    adapter = ScriptedAdapter(lambda r: stream_reply("from the right worker"))
    wrong_adapter = ScriptedAdapter(lambda r: stream_reply("from the wrong vendor"))
    good_env, good = start_worker(args, master_env, adapter)
    bad_env, bad = start_worker(other_args, master_env, wrong_adapter)
    try:
        wait_until(lambda: bad.role.refused is not None)
        assert good.role.accepted and not bad.role.accepted
        assert run_to_end(master_env, timeout=60) == EXIT_OK
        frame = read_records(master.run_dir / "records.csv")
        assert len(frame) == 8 and (frame["content"] == "from the right worker").all()
        assert wrong_adapter.requests == []  # the refused worker sent nothing to any vendor
        (refusal,) = master.manifest.workers_refused.values()
        assert "its config differs" in refusal and 'vendor m/b url: worker "http://***/b/v1"' in refusal
        assert 'master "http://vendor.test/b/v1"' in refusal  # the worker's URL shown redacted, the master's not
        assert bad.role.refused == refusal and bad_env.process_exit_code == EXIT_INPUT
        wait_until(lambda: not bad_env.runner.greenlet)  # the worker stopped by itself
        assert "the master refused this worker" in caplog.text and "refused: its config differs" in caplog.text
        assert SECRET_HOST not in caplog.text and SECRET_HOST not in str(master.manifest.to_dict())
    finally:
        quit_all(good_env, bad_env, master_env)


@pytest.mark.integration  # a master and workers in this process: seconds
def test_a_worker_refused_before_the_start_leaves_the_master_waiting_for_a_matching_one(tmp_path):
    """Before: no check at all. A refusal must not break the master either: Locust's headless master quits its
    runner when its last worker quits, even before the test started, and then waits forever for
    --expect-workers with no one listening. After: the refused worker is forgotten first, the master stays up,
    and a matching worker that connects later runs the whole run."""
    master_env, master, args = start_master(tmp_path)
    bad_env, bad = start_worker(other_config(tmp_path, "http://elsewhere.test/b/v1"), master_env)
    good_env = None
    try:
        wait_until(lambda: bad.role.refused is not None and not bad_env.runner.greenlet)
        gevent.sleep(0.5)  # the refused worker's quit reaches the master
        assert len(master_env.runner.greenlet) > 0  # the runner was not quit: it still listens for workers
        assert len(master_env.runner.clients.all) == 0 and len(master.manifest.workers_refused) == 1
        good_env, good = start_worker(args, master_env)
        assert run_to_end(master_env, timeout=60) == EXIT_OK and master.manifest.records_written == 8
    finally:
        quit_all(*(e for e in (good_env, bad_env, master_env) if e is not None))


@pytest.mark.integration  # over a second in one process: the unit tier is sub-second per test
def test_a_master_whose_only_worker_is_refused_mid_run_ends_the_run(tmp_path):
    """Before: a worker whose every record failed on the master (another version) left the master waiting until
    killed. After: its records are refused, it is refused after MAX_BAD_RECORDS of them and stops, and the
    master, left without workers, ends the run incomplete (exit 1) by itself."""
    master_env, master, args = start_master(tmp_path, ("a",), 8)
    old_env, old = start_worker(args, master_env)
    old.role.submit = lambda item, records: old.role.runner.send_message(
        RECORD, {"key": list(item.key), "records": [{**dict(r), "a_column_of_another_version": 1} for r in records]})
    try:
        assert run_to_end(master_env, timeout=60) == EXIT_INCOMPLETE
        assert old.role.refused and master.manifest.records_written == 0
        refused = master.manifest.records_refused_by_reason  # + records in flight when the refusal went out
        assert refused["malformed"] == MAX_BAD_RECORDS and set(refused) <= {"malformed", "refused_worker"}
    finally:
        quit_all(old_env, master_env)


@pytest.mark.parametrize("part, change, expected", [
    ("version", {"version": {"avv-locust": "0.0.9", "protocol": 1, "records": "0123456789abcdef"}},
     ["its version differs", "avv-locust: worker 0.0.9", "protocol: worker 1, master 4"]),
    ("samples", {"samples": "f" * 64}, ["its samples differ (sha256: worker ffffffffffff…"]),
])
@pytest.mark.integration  # over a second in one process: the unit tier is sub-second per test
def test_a_worker_of_another_version_or_samples_is_refused_naming_the_part(tmp_path, monkeypatch, part, change,
                                                                           expected):
    """Before: a worker of another version was handed items, every record it sent failed on the master
    (RecordError in the handler) and the master waited until killed. After: the version (package, item
    protocol, record schema) and the samples hash (when the worker has read samples) are compared at connect;
    a mismatch is refused naming the part, before any item is handed out."""
    real = RunController.identity

    def presented(self):
        mine = real(self)
        return dataclasses.replace(mine, **change) if self.role.name == "worker" else mine

    monkeypatch.setattr(RunController, "identity", presented)
    master_env, master, args = start_master(tmp_path)
    worker_env, worker = start_worker(args, master_env)
    try:
        wait_until(lambda: worker.role.refused is not None)
        for text in expected:
            assert text in worker.role.refused
        assert "config differs" not in worker.role.refused
        assert master.ledger.in_flight == {} and master.takers() == set()
    finally:
        quit_all(worker_env, master_env)


def test_identity_differences_are_named_and_quoted():
    """The comparison itself (pure): each differing part named, a peer's control characters escaped, values
    that only differ in secrets not shown."""
    base = node_identity.NodeIdentity("h:1", node_identity.version_part(), "c1",
                                      {"m/a": {"url": ["d1", '"http://x"'], "headers": ["h1", '{"X": "***"}']}})
    same = dataclasses.replace(base, worker="h:2")
    assert node_identity.differences(base, same) == []
    other = dataclasses.replace(base, config="c2", vendors={
        "m/a": {"url": ["d2", '"http://y\x1b[31m"'], "headers": ["h2", '{"X": "***"}']},
        "m/z": {"url": ["d3", '"http://z"']}})
    (text,) = node_identity.differences(base, other)
    assert 'vendor m/a url: worker "http://y\\x1b[31m", master "http://x"' in text
    assert "vendor m/a headers: values not shown" in text and "vendor m/z only on the worker" in text
    assert "\x1b" not in text
    with pytest.raises(ValueError, match="no version"):
        node_identity.NodeIdentity.from_message({"config": "c"})


# ----------------------------------------------------------------------- 2. malformed records


@pytest.mark.integration  # a master and workers in this process: seconds
def test_malformed_records_are_counted_and_their_items_handed_out_again(tmp_path, caplog):
    """Before: a record the master could not read (RecordError, missing fields, wrong types) raised in the
    message handler; the item stayed in flight on that worker and the master waited until killed. After:
    it is counted (records_refused_by_reason.malformed) and logged, the item is handed out again, a worker
    that keeps sending such records is refused, and the run ends with every item recorded once."""
    caplog.set_level(logging.WARNING, logger="avv")
    master_env, master, args = start_master(tmp_path, ("a",), 6)
    good_env, good = start_worker(args, master_env, ScriptedAdapter(lambda r: stream_reply("fine")))
    old_env, old = start_worker(args, master_env, ScriptedAdapter(lambda r: stream_reply("old")))
    shapes = iter([
        lambda key, rows: {"key": key, "records": [{**rows[0], "a_column_of_another_version": 1}]},
        lambda key, rows: {"key": key, "records": [{**rows[0], "repeat": "one"}]},
        lambda key, rows: {"key": key, "records": [{k: v for k, v in rows[0].items() if k != "request_hash"}]},
    ])

    def old_submit(item, records):  # an older worker: rows the master's schema does not accept
        data = next(shapes, lambda key, rows: {"key": key})(list(item.key), [dict(r) for r in records])
        old.role.runner.send_message(RECORD, data)

    old.role.submit = old_submit
    try:
        assert run_to_end(master_env, timeout=60) == EXIT_OK
        frame = read_records(master.run_dir / "records.csv")
        keys = [ItemKey.from_record(r) for r in frame.to_dict("records")]
        assert len(keys) == len(set(keys)) == 6 and (frame["content"] == "fine").all()
        m = master.manifest
        assert m.records_refused_by_reason == {"malformed": MAX_BAD_RECORDS} == {"malformed": m.records_refused}
        assert old.role.refused and "records were refused" in old.role.refused
        assert "unknown record column 'a_column_of_another_version'" in caplog.text
        assert "the item is handed out again" in caplog.text and "Uncaught exception" not in caplog.text
    finally:
        quit_all(good_env, old_env, master_env)


# --------------------------------------------------------------- 3. only records for items handed out


@pytest.mark.integration  # a master and workers in this process: seconds
def test_forged_records_over_the_master_port_are_refused_and_never_written(tmp_path):
    """Before: anyone who could reach the master port could add records for items never handed out, or
    replace a pending item's record (the genuine one was then dropped as a duplicate). After: a record is
    stored only from the worker the item was handed to; the intruder's are counted and never written, and
    the genuine records all arrive."""
    master_env, master, args = start_master(tmp_path, ("a",), 3, "--avv-repeats", "2")

    def slow(request):
        gevent.sleep(0.4)
        return stream_reply("genuine")

    worker_env, worker = start_worker(args, master_env, ScriptedAdapter(slow))
    intruder = rpc.Client("127.0.0.1", master_env.runner.server.port, "intruder")

    def forge(key):
        row = {"run_id": master.run.run_id, "model": key.model, "vendor": key.vendor, "sample_id": key.sample_id,
               "repeat": key.repeat, "status": "success", "content": "forged", "is_baseline": True,
               "request_hash": master.samples_by_id()[key.sample_id].request_hash}
        intruder.send(Message(RECORD, {"key": list(key), "records": [row]}, "intruder"))

    try:
        forge(ItemKey("m", "a", "s3", 2))  # pending: never handed out to anyone
        master_env.runner.start_shape()
        wait_until(lambda: master.ledger is not None and len(master.ledger.in_flight) == 2)
        held = next(iter(master.ledger.in_flight))
        forge(held)  # held by the genuine worker
        wait_until(lambda: master.manifest.records_refused == 2)
        master_env.runner.shape_greenlet.join(timeout=60)
        assert master.finish() == EXIT_OK
        frame = read_records(master.run_dir / "records.csv")
        assert len(frame) == 6 and (frame["content"] == "genuine").all()
        m = master.manifest
        assert m.records_refused_by_reason == {"not_handed_out": 1, "held_by_another": 1}
        assert m.duplicates_dropped == 0 and m.records_written == 6
    finally:
        intruder.close()
        quit_all(worker_env, master_env)


def test_store_from_accepts_only_the_holder_and_rows_that_answer_the_item(tmp_path):
    """The master's checks, one by one (controller level, a master with no worker): an item recorded from a
    worker it was not handed to, twice, with rows naming another item, or answering another body is refused
    and not written; the holder's record is stored; the counters say why."""
    master_env, master, _ = start_master(tmp_path, ("a", "b"), 3)
    vendor = VendorId("m", "a")
    try:
        first, second = master.take_items(vendor, "w1", 2)
        [third] = master.take_items(vendor, "w2")

        def rows(item, **change):
            return [Record({"run_id": master.run.run_id, **dict(zip(("model", "vendor", "sample_id", "repeat"),
                                                                    item.key, strict=True)),
                            "status": "success", "request_hash": item.sample.request_hash, **change})]

        assert master.intake.store_from("w2", first.key, rows(first))[0] == HELD_BY_ANOTHER
        assert master.intake.store_from("w1", ItemKey("m", "b", "s1", 1), rows(first))[0] == NOT_HANDED_OUT
        assert master.intake.store_from("w1", first.key, rows(first, vendor="b"))[0] == "wrong_rows"
        assert master.intake.store_from("w1", second.key, rows(second, request_hash="0" * 64))[0] == "request_hash"
        assert master.intake.store_from("w1", first.key, rows(first) * 2)[0] == "wrong_rows"
        # a refused record from its holder hands the item out again (refuse_record does this for the master)
        master.intake.refuse_record("w1", second.key, "request_hash", "test", taker="w1")
        assert second.key not in master.ledger.in_flight and second.key in master.ledger.pending[vendor]
        assert master.intake.store_from("w2", third.key, rows(third)) == ("", "")  # the holder: stored
        assert master.intake.store_from("w2", third.key, rows(third))[0] == ALREADY_RECORDED
        assert master.manifest.records_written == 1
    finally:
        quit_all(master_env)


def test_a_late_record_of_a_requeued_item_is_a_duplicate_not_a_refusal():
    """Exactly once with requeue (ledger level): a worker presumed lost whose item went to another worker is a
    former holder. Its late record is a duplicate once the item is recorded, and is accepted (first record
    wins) while it is not — the new holder's record is then the duplicate. Anyone else is refused."""
    vendor = VendorId("m", "a")
    ledger = Ledger.for_items([vendor], ["1", "2"], 1)
    k1, k2 = ledger.take(vendor, "lost", 2)
    assert ledger.requeue_taker("lost") == [k1, k2]
    assert ledger.take(vendor, "new", 1) == [k2]  # the released items go back to the front: k2 first
    assert ledger.verdict(k2, "new") == ACCEPT
    ledger.complete_from(k2, "new")
    assert ledger.verdict(k2, "lost") == DUPLICATE  # came back after its item was recorded elsewhere
    assert ledger.verdict(k2, "new") == ALREADY_RECORDED  # the same worker twice: refused
    assert ledger.verdict(k1, "lost") == ACCEPT  # still pending: the late record is taken...
    ledger.complete_from(k1, "lost")
    assert k1 not in ledger.pending[vendor] and ledger.finished  # ...and the item is not handed out again
    assert ledger.verdict(k1, "intruder") == ALREADY_RECORDED
    assert ledger.release(k1, "intruder") is False


def test_a_secret_that_looks_like_hex_never_masks_the_request_hash():
    """Before: a `${VAR}` value of 4+ hex digits (a port such as 8080) was masked inside request_hash by the
    worker's redactor, so the master would refuse the record as answering another body (and resume would
    rerun the item). After: request_hash is an identity column, never redacted."""
    from avv_harness.inputs.secrets import Redactor

    digest = "ab8080" + "0" * 58
    assert Redactor(["8080"]).record(Record({"request_hash": digest, "content": "port 8080"})) == {
        "request_hash": digest, "content": "port ***"}


def test_give_back_releases_only_what_the_sender_holds(tmp_path):
    """Before: any node could send avv_give_back for any key and have another worker's item handed out twice.
    After: only the holder's give-back releases it."""
    master_env, master, _ = start_master(tmp_path, ("a",), 2)
    try:
        (item,) = master.take_items(VendorId("m", "a"), "w1", 1)
        assert master.release_item(item.key, taker="w2") is False and master.ledger.in_flight == {item.key: "w1"}
        assert master.release_item(item.key, taker="w1") is True and master.ledger.in_flight == {}
    finally:
        quit_all(master_env)


@pytest.mark.integration  # over a second in one process: the unit tier is sub-second per test
def test_a_worker_that_never_presents_an_identity_gets_no_items(tmp_path, caplog):
    """Before: any client on the master port that sent avv_want got items (with their request bodies).
    After: a node that has not presented a matching identity is asked to present it and gets none."""
    caplog.set_level(logging.WARNING, logger="avv")
    master_env, master, _ = start_master(tmp_path, ("a",), 2)
    node = "intruder\x1b[2J"  # a node id is whatever the peer says: escaped in log lines
    intruder = rpc.Client("127.0.0.1", master_env.runner.server.port, node)
    try:
        for _ in range(2):
            intruder.send(Message("avv_want", {"vendor": ["m", "a"], "n": 1000}, node))
        gevent.sleep(0.3)
        assert master.ledger.in_flight == {} and master.ledger.remaining == 2
        assert caplog.text.count("worker intruder\\x1b[2J asks for items without having presented") == 1
        assert "\x1b" not in caplog.text
    finally:
        intruder.close()
        quit_all(master_env)


@pytest.mark.integration  # a master and workers in this process: seconds
def test_a_matching_worker_is_accepted_and_runs_each_item_once(tmp_path):
    """The happy path stays: a matching worker is accepted, nothing is refused, each item runs once."""
    master_env, master, args = start_master(tmp_path, ("a",), 3)
    adapter = ScriptedAdapter(lambda r: stream_reply("ok"))
    worker_env, worker = start_worker(args, master_env, adapter)
    try:
        assert run_to_end(master_env, timeout=60) == EXIT_OK
        assert worker.role.accepted and master.manifest.records_refused == 0
        assert sorted(item_of(r) for r in adapter.requests) == sorted(master.ledger.done)
    finally:
        quit_all(worker_env, master_env)


# ----------------------------------------------------------------------- real processes (one e2e)


@pytest.mark.e2e
def test_processes_a_refused_worker_exits_2_and_a_matching_one_runs_the_run(tmp_path):
    """Before: a worker with another config ran the master's items with its own settings. After, as real
    processes: the worker (another `extra_body` for vendor alt) is refused at connect, logs why and exits 2;
    the master, which Locust would otherwise have left deaf (its runner quit on the last worker's quit before
    the start), keeps listening, and a matching worker started afterwards runs every item (master exit 0)."""
    import json
    import subprocess

    from tests.builders import sim_config, sim_vendors, write_yaml
    from tests.e2e_ports import free_port
    from tests.locust_runs import DEMO_SAMPLES, clean_env, locust_cmd, only_run_dir

    fast = {"ttft_ms": 5, "tokens_per_s": 2000, "output_tokens": 4}
    write_yaml(tmp_path / "sim.yaml", sim_config({"ref": fast, "alt": fast}))
    write_yaml(tmp_path / "vendors.yaml", sim_vendors("m", ["ref", "alt"], "ref"))
    write_yaml(tmp_path / "other.yaml", sim_vendors("m", ["ref", "alt"], "ref",
                                                    alt={"extra_body": {"temperature": 0}}))
    common = ["--avv-sim-config", "sim.yaml", "--avv-samples", str(DEMO_SAMPLES), "--avv-out", "out", "--avv-no-score"]
    port = free_port()

    def start(args, log):
        return subprocess.Popen(locust_cmd(*args), cwd=tmp_path, env=clean_env(), stdout=open(tmp_path / log, "w"),
                                stderr=subprocess.STDOUT)

    procs = [start(["--headless", "--master", "--expect-workers", "1", "--master-bind-host", "127.0.0.1",
                    "--master-bind-port", str(port), "--avv-config", "vendors.yaml", *common], "master.log")]
    try:
        procs.append(start(["--worker", "--master-port", str(port), "--avv-config", "other.yaml", *common],
                           "refused.log"))
        assert procs[1].wait(timeout=60) == 2, (tmp_path / "refused.log").read_text()[-3000:]
        procs.append(start(["--worker", "--master-port", str(port), "--avv-config", "vendors.yaml", *common],
                           "matching.log"))
        assert procs[0].wait(timeout=120) == 0, (tmp_path / "master.log").read_text()[-3000:]
        assert procs[2].wait(timeout=30) == 0
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
    expected = 'its config differs (vendor m/alt extra_body: worker {"temperature": 0}, master {})'
    assert expected in (tmp_path / "refused.log").read_text()
    assert expected in (tmp_path / "master.log").read_text()
    run = json.loads((only_run_dir(tmp_path / "out") / "run.json").read_text())
    assert run["completed"] is True and run["records_written"] == 64 and run["records_refused"] == 0
    assert [expected in why for why in run["workers_refused"].values()] == [True]
