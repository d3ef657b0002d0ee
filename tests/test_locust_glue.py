"""The Locust glue in-process: Environment + runners in this process, an in-process vendor (no sockets
except Locust's own master/worker link on loopback). Hand-out, give-back, duplicates, requeue, budget,
run time, stress decisions, and a master with two workers."""

from __future__ import annotations

import gevent
import pytest

from avv_core.items import ItemKey, VendorId
from avv_core.record_file import read_records
from avv_harness.run.controller import EXIT_INCOMPLETE, EXIT_OK, controller_of
from tests.builders import write_inputs
from tests.fake_vendor import ScriptedAdapter, error_reply, item_of, stream_reply
from tests.glue import make_env, options, run_to_end


@pytest.mark.integration  # an in-process Locust run: a second or more (the shape ticks once a second)
def test_local_run_records_every_item_once_and_stops_by_itself(tmp_path):
    config, samples = write_inputs(tmp_path, ["a", "b"], n_samples=5)
    adapter = ScriptedAdapter(lambda r: stream_reply("hi there"))
    env, ctl = make_env(options(tmp_path, config, samples, "--avv-repeats", "2"), adapter=adapter)
    assert ctl.role.name == "local" and env.avv is ctl and controller_of(env) is ctl
    assert (ctl.role.runs_users, ctl.role.holds_ledger, ctl.role.expected_workers()) == (True, True, None)
    assert run_to_end(env) == EXIT_OK
    frame = read_records(ctl.run_dir / "records.csv")
    keys = [ItemKey.from_record(r) for r in frame.to_dict("records")]
    assert len(keys) == len(set(keys)) == 2 * 5 * 2
    assert {k.vendor for k in keys} == {"a", "b"} and (frame["content"] == "hi there").all()
    assert sorted({item_of(r) for r in adapter.requests}) == sorted(keys)  # each item sent once, tags parse
    assert ctl.next_load(99.0).as_tick() is None  # the shape says stop
    assert ctl.manifest.completed and ctl.manifest.records_written == 20


@pytest.mark.integration  # an in-process Locust run: a second or more (the shape ticks once a second)
def test_stopped_user_gives_its_item_back(tmp_path):
    config, samples = write_inputs(tmp_path, ["a"], n_samples=3)

    def slow(request):
        gevent.sleep(30)
        return stream_reply()

    env, ctl = make_env(options(tmp_path, config, samples), adapter=ScriptedAdapter(slow))
    env.runner.start_shape()
    gevent.sleep(1.5)
    assert len(ctl.ledger.in_flight) == 2  # concurrency 2: two items running
    env.runner.stop()
    gevent.sleep(0.2)
    assert ctl.ledger.in_flight == {} and ctl.ledger.remaining == 3 and not ctl.ledger.done
    env.runner.quit()
    assert ctl.finish() == EXIT_INCOMPLETE and ctl.manifest.stop_reason == "interrupted"


@pytest.mark.integration  # an in-process Locust run: a second or more (the shape ticks once a second)
def test_duplicate_record_is_dropped_and_counted(tmp_path):
    config, samples = write_inputs(tmp_path, ["a"], n_samples=1)
    env, ctl = make_env(options(tmp_path, config, samples))
    assert run_to_end(env) == EXIT_OK
    (row,) = read_records(ctl.run_dir / "records.csv").to_dict("records")
    key = ItemKey.from_record(row)
    ctl.finished = False  # pretend a late worker sends the same item again before the end
    assert ctl.intake.store(key, []) is False and ctl.manifest.duplicates_dropped == 1


def test_items_of_a_lost_worker_are_handed_out_again(tmp_path):
    config, samples = write_inputs(tmp_path, ["a"], n_samples=3)
    env, ctl = make_env(options(tmp_path, config, samples), runner="master")
    try:
        taken = ctl.take_items(VendorId("m", "a"), "gone-worker", 2)
        assert len(taken) == 2 and ctl.takers() == {"gone-worker"}
        assert ctl.role.requeue_lost_workers() == 2  # Locust does not know that worker: it is gone
        assert ctl.takers() == set() and ctl.ledger.remaining == 3 and ctl.manifest.items_requeued == 2
    finally:
        env.runner.quit()


@pytest.mark.integration  # an in-process Locust run: a second or more (the shape ticks once a second)
def test_token_budget_stops_starting_items(tmp_path):
    config, samples = write_inputs(tmp_path, {"a": {"concurrency": 1}}, n_samples=6)
    args = options(tmp_path, config, samples, "--avv-max-total-tokens", "20")
    env, ctl = make_env(args)  # every answer reports 8 tokens
    assert run_to_end(env) == EXIT_INCOMPLETE
    assert {k: ctl.manifest.budget[k] for k in ("max_total_tokens", "exhausted")} == {"max_total_tokens": 20,
                                                                                     "exhausted": True}
    assert ctl.manifest.budget["charged"] == {"tokens": 24, "cost": 0.0}
    assert ctl.manifest.tokens_used == 24 and ctl.manifest.records_written == 3
    assert ctl.manifest.stop_reason == "budget"


@pytest.mark.integration  # an in-process Locust run: a second or more (the shape ticks once a second)
def test_run_time_limit_stops_the_run_and_keeps_records(tmp_path):
    config, samples = write_inputs(tmp_path, {"a": {"concurrency": 1}}, n_samples=50)

    def slowish(request):
        gevent.sleep(0.3)
        return stream_reply()

    env, ctl = make_env(options(tmp_path, config, samples, "-t", "2s"), adapter=ScriptedAdapter(slowish))
    assert run_to_end(env) == EXIT_INCOMPLETE
    assert ctl.manifest.stop_reason == "run_time" and 2 <= ctl.manifest.records_written < 50
    assert len(read_records(ctl.run_dir / "records.csv")) == ctl.manifest.records_written


@pytest.mark.integration  # an in-process Locust run: a second or more (the shape ticks once a second)
def test_an_exception_inside_an_item_is_recorded_not_left_in_flight(tmp_path):
    config, samples = write_inputs(tmp_path, ["a"], n_samples=2)

    def broken(request):
        raise RuntimeError("boom in the client")

    env, ctl = make_env(options(tmp_path, config, samples), adapter=ScriptedAdapter(broken))
    assert run_to_end(env) == EXIT_OK  # every item recorded (as failed)
    frame = read_records(ctl.run_dir / "records.csv")
    assert list(frame["error_kind"]) == ["client_error", "client_error"]
    assert frame["error_detail"].str.contains("RuntimeError: boom").all()


@pytest.mark.integration  # an in-process Locust run: a second or more (the shape ticks once a second)
def test_retries_then_records_the_final_attempt(tmp_path):
    config, samples = write_inputs(tmp_path, ["a"], n_samples=1)
    calls = []

    def flaky(request):
        calls.append(request.headers["X-AVV-Attempt"])
        return error_reply(503, "busy") if len(calls) < 3 else stream_reply("done")

    env, ctl = make_env(options(tmp_path, config, samples), adapter=ScriptedAdapter(flaky))
    assert run_to_end(env) == EXIT_OK
    (row,) = read_records(ctl.run_dir / "records.csv").to_dict("records")
    assert calls == ["1", "2", "3"] and row["attempts"] == 3 and row["status"] == "success"


@pytest.mark.parametrize("mode", ["verify", "stress"])
def test_user_classes_per_mode(tmp_path, mode):
    config, samples = write_inputs(tmp_path, {"a": {"concurrency": 3}, "b": {}})
    env, ctl = make_env(options(tmp_path, config, samples, "--avv-mode", mode, "--avv-stress-levels", "1,2"))
    classes = {cls.__name__: cls for cls in env.user_classes}
    assert classes["a"].host == "http://vendor.test/a/v1"
    assert classes["a"].fixed_count == (3 if mode == "verify" else 0) and classes["a"].weight == 1
    if mode == "stress":
        tick = ctl.next_load(0.0).as_tick()
        assert tick[:2] == (2, 2.0) and [c.__name__ for c in tick[2]] == ["a", "b"]
    env.runner.quit()


@pytest.mark.integration  # a master and workers in this process: seconds
def test_master_and_two_workers_in_one_process(tmp_path):
    config, samples = write_inputs(tmp_path, ["a", "b"], n_samples=6)
    args = options(tmp_path, config, samples, "--avv-retries", "0")
    adapter = ScriptedAdapter(lambda r: stream_reply("from a worker"))
    master_env, master = make_env(args, runner="master")
    port = master_env.runner.server.port
    workers = [make_env(args, runner="worker", adapter=adapter, master_port=port) for _ in range(2)]
    gevent.sleep(0.5)  # workers connect
    assert master.role.name == "master" and {w.role.name for _, w in workers} == {"worker"}
    # what the lifecycle asks of each role, instead of testing which one it is
    assert (master.role.runs_users, master.role.holds_ledger, master.lag) == (False, True, None)
    assert all(w.role.runs_users and not w.role.holds_ledger and w.lag is not None for _, w in workers)
    assert master.manifest.locust["role"] == "master" and master.manifest.locust["workers"] is not None
    assert run_to_end(master_env, timeout=60) == EXIT_OK
    frame = read_records(master.run_dir / "records.csv")
    keys = [ItemKey.from_record(r) for r in frame.to_dict("records")]
    assert len(keys) == len(set(keys)) == 12 and (frame["content"] == "from a worker").all()
    assert len(adapter.requests) == 12  # each item ran once, on some worker
    for env, _ in workers:
        env.runner.quit()


@pytest.mark.integration  # an in-process Locust run: a second or more (the shape ticks once a second)
def test_a_blocking_stall_in_the_client_shows_in_client_lag(tmp_path):
    from gevent import monkey

    blocking_sleep = monkey.get_original("time", "sleep")
    config, samples = write_inputs(tmp_path, {"a": {"concurrency": 1}, "b": {"concurrency": 1}}, n_samples=2)

    def handler(request):
        if item_of(request).vendor == "b":
            blocking_sleep(0.25)  # blocks the whole event loop, as a CPU-bound client would
        else:
            gevent.sleep(0.05)  # an honest wait: other greenlets run
        return stream_reply()

    env, ctl = make_env(options(tmp_path, config, samples), adapter=ScriptedAdapter(handler))
    assert run_to_end(env) == EXIT_OK
    frame = read_records(ctl.run_dir / "records.csv")
    lag = frame.groupby("vendor")["client_lag_ms"].min()
    assert lag["b"] >= 240  # every b item waited through its own 250 ms stall
    assert (frame["client_cpu_pct"].notna() | True).all()
    load = ctl.manifest.extra["client_load"]
    (worker,) = load
    assert load[worker]["vendors"]["b"]["lag_p50_ms"] >= 240 and load[worker]["client_bound"] is True


def test_idle_users_ask_for_items_at_a_bounded_rate_and_few_of_them_as_before():
    """A user with no item waits before asking again (the run's tail, a vendor held in step under a budget): a few
    idle users wait 0.25 s each as before; a thousand ask ~400 times a second together, not 4,000."""
    from avv_harness.locust.plugin import IDLE_ASKS_PER_S, IDLE_WAIT_MAX_S, idle_wait_s

    assert [idle_wait_s(n) for n in (1, 2, 50, 100)] == [0.25] * 4
    for idle in (200, 500, 800):
        assert idle / idle_wait_s(idle) == pytest.approx(IDLE_ASKS_PER_S)
    assert idle_wait_s(5000) == IDLE_WAIT_MAX_S
