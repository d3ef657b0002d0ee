"""The record event as the public extension point (issue 25, point 5): ``events.avv_record`` fires once per stored
item with its records, vendor and environment; records.csv is its first listener (a later listener sees rows already
written); a user listener gets every record exactly once on a local run and on the master of a distributed one (never
on a worker); the README's example locustfile runs as written."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections import Counter

import gevent
import pytest

from avv_core.items import ItemKey
from avv_core.record_file import read_records
from avv_harness.run.controller import EXIT_OK
from avv_harness.run.record_event import RecordsCsv
from tests.builders import write_inputs
from tests.fake_vendor import ScriptedAdapter, stream_reply
from tests.glue import make_env, options, run_to_end
from tests.locust_runs import ROOT, clean_env


class Listener:
    """A user listener: what it got, and whether records.csv already held each item when it did."""

    def __init__(self, ctl):
        self.ctl, self.calls = ctl, []

    def __call__(self, records, vendor, environment, **_):
        on_disk = (self.ctl.run_dir / "records.csv").read_text(encoding="utf-8")
        self.calls.append((records, vendor, environment, all(r["request_hash"] in on_disk for r in records)))

    def keys(self) -> list[ItemKey]:
        return [ItemKey.from_record(r) for records, *_ in self.calls for r in records]


def _check(listener: Listener, env, ctl, items: int) -> None:
    written = [ItemKey.from_record(r) for r in read_records(ctl.run_dir / "records.csv").to_dict("records")]
    assert len(written) == items and Counter(listener.keys()) == Counter(written)  # every record, exactly once
    assert len(listener.calls) == items  # one event per item
    for records, vendor, environment, on_disk in listener.calls:
        assert environment is env and on_disk  # records.csv (the first listener) already holds the rows
        assert {(r["model"], r["vendor"]) for r in records} == {(vendor.model, vendor.name)}
        assert all(r["content"] == "stored" for r in records)


def test_records_csv_is_the_first_listener_of_the_event(tmp_path):
    config, samples = write_inputs(tmp_path, ["a"], n_samples=1)
    env, ctl = make_env(options(tmp_path, config, samples))
    try:
        assert env.events.avv_record is ctl.record_hook
        first = env.events.avv_record._handlers[0]
        assert isinstance(first, RecordsCsv) and first is ctl.write_records_csv
    finally:
        env.runner.quit()


@pytest.mark.integration  # an in-process Locust run: a second or more
def test_a_user_listener_gets_every_record_once_on_a_local_run(tmp_path):
    config, samples = write_inputs(tmp_path, ["a", "b"], n_samples=5)
    env, ctl = make_env(options(tmp_path, config, samples, "--avv-repeats", "2"),
                        adapter=ScriptedAdapter(lambda r: stream_reply("stored")))
    listener = Listener(ctl)
    env.events.avv_record.add_listener(listener)
    assert run_to_end(env) == EXIT_OK
    _check(listener, env, ctl, 2 * 5 * 2)


@pytest.mark.integration  # a master and two workers in this process: seconds
def test_a_user_listener_gets_every_record_once_on_the_master_and_nothing_on_workers(tmp_path):
    config, samples = write_inputs(tmp_path, ["a", "b"], n_samples=6)
    args = options(tmp_path, config, samples, "--avv-retries", "0")
    master_env, master = make_env(args, runner="master")
    port = master_env.runner.server.port
    workers = [make_env(args, runner="worker", adapter=ScriptedAdapter(lambda r: stream_reply("stored")),
                        master_port=port) for _ in range(2)]
    listener = Listener(master)
    master_env.events.avv_record.add_listener(listener)
    on_workers: list = []
    for env, _ in workers:
        env.events.avv_record.add_listener(lambda **kw: on_workers.append(kw))
    gevent.sleep(0.5)  # workers connect
    try:
        assert run_to_end(master_env, timeout=60) == EXIT_OK
    finally:
        for env, _ in workers:
            env.runner.quit()
    _check(listener, master_env, master, 12)
    assert on_workers == []


@pytest.mark.integration  # a real Locust run of the demo with the README's locustfile: ~8 s
def test_the_readme_listener_example_runs_as_written(tmp_path):
    readme = (ROOT / "docs" / "how-to" / "record-listener.md").read_text(encoding="utf-8")
    block = re.search(r"<!-- record-listener:start -->\n```python\n(.*?)```\n<!-- record-listener:end -->", readme,
                      re.S)
    assert block is not None
    (tmp_path / "my_locustfile.py").write_text(block.group(1), encoding="utf-8")
    demo = (ROOT / "avv_harness" / "data" / "demo.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)
    (tmp_path / "some.jsonl").write_text("".join(demo[:12]), encoding="utf-8")  # a third of the demo's time
    proc = subprocess.run([sys.executable, "-m", "locust", "-f", "my_locustfile.py", "--headless", "--avv-out", "out",
                           "--avv-samples", "some.jsonl", "--avv-no-score"], cwd=tmp_path, env=clean_env(),
                          capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-2000:]
    (run_dir,) = [p for p in (tmp_path / "out").iterdir() if p.is_dir()]
    written = read_records(run_dir / "records.csv").to_dict("records")
    stored = [json.loads(line) for line in (tmp_path / "my_store.jsonl").read_text(encoding="utf-8").splitlines()]
    assert Counter(ItemKey.from_record(r) for r in stored) == Counter(ItemKey.from_record(r) for r in written)
    assert len(stored) == len(written) == 4 * 12  # the demo's four vendors
