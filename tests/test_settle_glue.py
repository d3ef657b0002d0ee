"""--avv-settle in-process (Locust glue, fake vendor): a clearly bad vendor stops early and its skipped items are
in the ledger and run.json, not lost; a borderline vendor runs to the end; the baseline covers every item another
vendor used; resume keeps settled items skipped unless --avv-settle is off; a master with workers settles the same
way; settle off keeps the file's order."""

from __future__ import annotations

import json

import gevent
import pytest

from avv_core.items import ItemKey, VendorId
from avv_core.record_file import read_records
from avv_harness.run.controller import EXIT_OK
from avv_harness.run.settle_policy import SETTLED, hand_out_order
from avv_scoring import score_paths
from tests.builders import numbered_samples, write_inputs
from tests.fake_vendor import ScriptedAdapter, item_of, stream_reply
from tests.glue import make_env, options, run_to_end

TOOL = {"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
N = 60
SEED = "7"


def vendor_of(request) -> str:
    return item_of(request).vendor


def reply(request):
    """base always calls the tool; bad never does (F1 0); border calls on 2 of 3 samples (F1 exactly 0.8). A short
    wait, so the run outlasts a few shape ticks."""
    gevent.sleep(0.03)
    key = item_of(request)
    number = int(key.sample_id[1:])
    calls = key.vendor == "base" or (key.vendor == "border" and number % 3 != 0)
    return stream_reply(tool_calls=[("get_weather", {"city": "Paris"})]) if calls else stream_reply("no tool")


def inputs(tmp_path):
    return write_inputs(tmp_path, ["base", "bad", "border"], sample_lines=numbered_samples(N, tools=[TOOL]))


def by_vendor(run_dir) -> dict[str, list[ItemKey]]:
    frame = read_records(run_dir / "records.csv")
    out: dict[str, list[ItemKey]] = {}
    for row in frame.to_dict("records"):
        key = ItemKey.from_record(row)
        out.setdefault(key.vendor, []).append(key)
    return out


@pytest.mark.integration  # an in-process Locust run: a few seconds (the shape ticks once a second)
def test_bad_vendor_settles_early_borderline_runs_to_the_end(tmp_path):
    config, samples = inputs(tmp_path)
    adapter = ScriptedAdapter(reply)
    env, ctl = make_env(options(tmp_path, config, samples, "--avv-settle", "--avv-settle-seed", SEED),
                        adapter=adapter)
    users_late: list[dict] = []  # users per class while the last items run
    ctl.record_hook.add_listener(lambda records, **_: users_late.append(dict(env.runner.user_classes_count))
                                 if ctl.ledger.remaining <= 4 else None)
    assert run_to_end(env, timeout=60) == EXIT_OK
    assert users_late and users_late[-1].get("bad", 0) == 0 and users_late[-1]["base"] == 2  # bad's users stopped
    recorded = by_vendor(ctl.run_dir)
    bad = VendorId("m", "bad")
    skipped = [k for k, why in ctl.ledger.skipped.items() if k.vendor_id == bad]
    assert all(why == SETTLED for why in ctl.ledger.skipped.values())
    assert 0 < len(recorded["bad"]) < N / 2 and len(recorded["bad"]) + len(skipped) == N  # none lost
    assert sum(vendor_of(r) == "bad" for r in adapter.requests) == len(recorded["bad"])  # skipped: never sent
    assert len(recorded["border"]) == len(recorded["base"]) == N  # borderline: to the end; baseline covers it
    order = hand_out_order([f"s{i}" for i in range(1, N + 1)], int(SEED))
    n_bad = len(recorded["bad"])
    assert {k.sample_id for k in recorded["bad"]} <= set(order[:n_bad + 4])  # the seeded order's first items
    run = json.loads((ctl.run_dir / "run.json").read_text())
    settle = run["extra"]["settle"]
    assert settle["seed"] == int(SEED) and settle["looks"] >= 1 and run["completed"] is True
    entry = settle["vendors"]["bad"]
    assert entry["verdict"] == "fail" and entry["skipped"] == len(skipped) and entry["of"] == N
    assert entry["settled_after"] <= n_bad and entry["alpha_spent"] <= settle["alpha"]
    assert entry["floor_per_tool"] == 5 and entry["thin_tools"] == {}  # get_weather: on every item
    f1 = next(b for b in entry["bounds"] if b["metric"] == "f1")
    assert f1["state"] == "broken" and f1["value"] == 0.0 and f1["interval"][1] < 0.8
    assert settle["vendors"]["border"]["verdict"] is None and settle["vendors"]["border"]["tested"] > 0
    report = score_paths([ctl.run_dir], out_dir=tmp_path / "scores", html=False).outputs["report.md"]
    text = open(report, encoding="utf-8").read()
    assert f"bad: settled FAIL after {entry['settled_after']} of {N} samples" in text
    assert "Settled early (--avv-settle)" in text and "not settled" in text

    # resume with --avv-settle: the settled vendor's items stay skipped (nothing is sent)
    resumed = ScriptedAdapter(reply)
    env2, ctl2 = make_env(options(tmp_path, config, samples, "--avv-settle", "--avv-resume", str(ctl.run_dir)),
                          adapter=resumed)
    assert run_to_end(env2, timeout=60) == EXIT_OK
    assert resumed.requests == [] and len(ctl2.ledger.skipped) == len(skipped)
    assert json.loads((ctl.run_dir / "run.json").read_text())["extra"]["settle"]["vendors"]["bad"]["resumed"]

    # resume without it: they are sent now
    plain = ScriptedAdapter(reply)
    env3, ctl3 = make_env(options(tmp_path, config, samples, "--avv-resume", str(ctl.run_dir)), adapter=plain)
    assert run_to_end(env3, timeout=60) == EXIT_OK
    assert sorted(item_of(r) for r in plain.requests) == sorted(skipped)
    assert len(by_vendor(ctl.run_dir)["bad"]) == N


@pytest.mark.integration  # a master and two workers in this process: seconds
def test_distributed_run_settles_the_same_way(tmp_path):
    config, samples = inputs(tmp_path)
    args = options(tmp_path, config, samples, "--avv-settle", "--avv-settle-seed", SEED, "--avv-retries", "0")
    adapter = ScriptedAdapter(reply)
    master_env, master = make_env(args, runner="master")
    workers = [make_env(args, runner="worker", adapter=adapter, master_port=master_env.runner.server.port)
               for _ in range(2)]
    gevent.sleep(0.5)  # workers connect
    assert run_to_end(master_env, timeout=60) == EXIT_OK
    recorded = by_vendor(master.run_dir)
    skipped = [k for k in master.ledger.skipped if k.vendor == "bad"]
    assert 0 < len(recorded["bad"]) < N / 2 and len(recorded["bad"]) + len(skipped) == N
    assert len(recorded["border"]) == len(recorded["base"]) == N
    assert sum(vendor_of(r) == "bad" for r in adapter.requests) == len(recorded["bad"])
    entry = json.loads((master.run_dir / "run.json").read_text())["extra"]["settle"]["vendors"]["bad"]
    assert entry["verdict"] == "fail" and entry["skipped"] == len(skipped)
    for env, _ in workers:
        env.runner.quit()


def test_without_settle_items_go_out_in_the_files_order(tmp_path):
    config, samples = write_inputs(tmp_path, ["a"], n_samples=5)
    env, ctl = make_env(options(tmp_path, config, samples, "--avv-repeats", "2"))
    taken = ctl.take_items(VendorId("m", "a"), "local", 10)
    assert [(i.key.sample_id, i.key.repeat) for i in taken] == [(f"s{i}", r) for r in (1, 2) for i in range(1, 6)]
    assert ctl.run.settle is None and "settle" not in ctl.manifest.extra
    env.runner.quit()
    ctl.finish()
