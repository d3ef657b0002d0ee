"""Hostile inputs, round two (issue 22), the glue family: over-deep JSON input lines, vendor names that collide
with the locustfile's names, the closing line after a resume, SIGTERM in web-UI mode, the client-bound
advice, and many vendors. Each test says what happened before. Mostly in-process (tests/glue.py)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from avv_core.client_load import CPU_OWN_LOAD_PCT, client_bound_advice, client_bound_cause
from avv_core.errors import InputError
from avv_core.json_input import MAX_JSON_DEPTH, json_depth, parse_json
from avv_core.manifest import read_manifest
from avv_core.record_file import read_records
from avv_core.samples import load_samples
from avv_harness.dialects.overrides import parse_overrides
from avv_harness.inputs.bfcl import convert
from avv_harness.inputs.config import MAX_VENDORS_PER_RUN, parse_config
from avv_harness.locust.plugin import EXPORT_PREFIX, class_names
from avv_harness.run.controller import EXIT_INCOMPLETE, EXIT_INPUT, EXIT_OK
from avv_scoring import render_tables
from avv_scoring.baseline_results import read_results
from tests.builders import (
    baseline_first,
    sim_config,
    sim_vendors,
    vendor_entry,
    vendors_config,
    write_inputs,
    write_jsonl,
    write_yaml,
)
from tests.e2e_ports import free_port
from tests.fake_vendor import ScriptedAdapter, stream_reply
from tests.glue import make_env, options, run_to_end
from tests.locust_runs import LOCUSTFILE, ROOT, clean_env, locust_cmd, only_run_dir, run_locust

FAST = {"ttft_ms": 10, "tokens_per_s": 500, "output_tokens": 6}
GOOD = {"messages": [{"role": "user", "content": "hi"}]}


def nested(depth: int) -> str:
    """A sample line whose ``messages`` holds ``depth`` nested arrays."""
    return '{"messages": ' + "[" * depth + "]" * depth + "}"


# 1 ------------------------------------------------------------------ JSON input nested beyond the bound


def test_json_depth_counts_levels_without_recursing():
    assert json_depth(1) == 0 and json_depth([]) == 1 and json_depth({"a": [1, {"b": 2}]}) == 3
    deep: list = []
    for _ in range(50_000):  # beyond the recursion limit: measured iteratively, and it stops early
        deep = [deep]
    assert json_depth(deep) == MAX_JSON_DEPTH + 1
    assert json_depth(parse_json(nested(MAX_JSON_DEPTH - 1), "f:1")) == MAX_JSON_DEPTH  # at the bound: fine
    with pytest.raises(InputError, match=rf"^f:7: nested deeper than {MAX_JSON_DEPTH} levels"):
        parse_json(nested(MAX_JSON_DEPTH), "f:7")  # the object around messages is one level more


@pytest.mark.parametrize("depth", [100_000, 500])  # 100,000: json's RecursionError; 500: parses, over the bound
def test_over_deep_sample_line_is_an_input_error_or_a_skipped_line(tmp_path, depth):
    """Before: RecursionError traceback at start-up (exit 1), and --avv-skip-bad-lines did not skip it."""
    path = tmp_path / "samples.jsonl"
    path.write_text("\n".join([json.dumps(GOOD), nested(depth), json.dumps(GOOD)]) + "\n")
    with pytest.raises(InputError, match=r"samples\.jsonl:2: nested deeper than 100 levels") as caught:
        load_samples(path)
    assert caught.value.exit_status == EXIT_INPUT
    loaded = load_samples(path, skip_bad_lines=True)
    assert [s.line for s in loaded.samples] == [1, 3]
    assert [line for line, _ in loaded.skipped_lines] == [2] and "nested deeper" in loaded.skipped_lines[0][1]


def test_over_deep_agent_task_is_refused_with_its_line(tmp_path):
    """An agent task is part of its sample line: a deep ``tool_results`` content is refused the same way."""
    task = {**GOOD, "tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}],
            "agent": {"tool_results": [{"name": "f", "content": json.loads("[" * 200 + "]" * 200)}]}}
    path = tmp_path / "agent.jsonl"
    path.write_text(json.dumps(task) + "\n")
    with pytest.raises(InputError, match=r"agent\.jsonl:1: nested deeper"):
        load_samples(path)


@pytest.mark.integration  # an in-process Locust run: a second or more (the shape ticks once a second)
def test_skipped_deep_line_is_named_at_start_and_in_run_json(tmp_path, capsys):
    """In a run: --avv-skip-bad-lines skips the line, says so once at start, and run.json lists it."""
    config, samples = write_inputs(tmp_path, ["a"], n_samples=1)
    samples.write_text(json.dumps(GOOD) + "\n" + nested(100_000) + "\n")
    env, ctl = make_env(options(tmp_path, config, samples, "--avv-skip-bad-lines"))
    assert run_to_end(env) == EXIT_OK
    run = json.loads((ctl.run_dir / "run.json").read_text())
    assert [line for line, _ in run["samples"]["skipped_lines"]] == [2]
    out = capsys.readouterr().out
    assert out.count("1 malformed sample line(s) skipped (lines 2;") == 1 and "samples.jsonl:2: nested deeper" in out


def test_other_json_inputs_name_file_and_line_when_over_deep(tmp_path):
    """K2VV / MiniMax results, BFCL files, run.json and --avv-extra-body: before, a RecursionError traceback."""
    results = tmp_path / "results.jsonl"
    results.write_text(json.dumps({"data_index": 1, "status": "success"}) + "\n" + "[" * 100_000 + "]" * 100_000)
    with pytest.raises(InputError, match=r"results\.jsonl:2: nested deeper"):
        read_results(results)
    bfcl = tmp_path / "bfcl"
    bfcl.mkdir()
    (bfcl / "BFCL_v4_irrelevance.json").write_text('{"id": "x", "question": ' + "[" * 100_000 + "]" * 100_000 + "}")
    with pytest.raises(InputError, match=r"BFCL_v4_irrelevance\.json:1: nested deeper"):
        convert(str(bfcl), ["irrelevance"])
    (tmp_path / "run.json").write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(InputError, match=r"run\.json: nested deeper"):
        read_manifest(tmp_path)
    with pytest.raises(InputError, match=r"^--avv-extra-body: nested deeper"):  # from the command line or conf
        parse_overrides(None, None, '{"x": ' + "[" * 60_000 + "]" * 60_000 + "}", None)


@pytest.mark.integration
def test_over_deep_sample_line_exits_2_without_a_traceback(tmp_path):
    """Before: exit status 1 and a RecursionError traceback."""
    write_yaml(tmp_path / "vendors.yaml", vendors_config([{"name": "a", "url": "http://127.0.0.1:9/v1",
                                                           "is_baseline": True, "require_key": False}]))
    (tmp_path / "samples.jsonl").write_text(json.dumps(GOOD) + "\n" + nested(100_000) + "\n")
    proc = run_locust(["--headless", "--avv-config", "vendors.yaml", "--avv-samples", "samples.jsonl",
                       "--avv-out", "out"], cwd=tmp_path, timeout=60)
    assert proc.returncode == 2 and "samples.jsonl:2: nested deeper than 100 levels" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr and not (tmp_path / "out").exists()


# 2 ------------------------------------------------------------- vendor names against the locustfile's names

HOSTILE_NAMES = ["AvvShape", "locust_plugin", "VendorUser", "RunShape", "_hidden", "class", "not an identifier",
                 "__builtins__", "__name__", "os", "user_classes"]


def hostile_config(url: str) -> dict:
    common = {"url": url, "concurrency": 1, "require_key": False}
    vendors = [{"name": "base", "is_baseline": True, **common}] + [{"name": name, **common} for name in HOSTILE_NAMES]
    one = [{"name": "a", "is_baseline": True, **common}]
    # "a" in two models is "n.a" and "m.n.a"; model n's "a" finds "n.a" taken (the vendor of that name) → "n.a #2"
    return vendors_config([*vendors, {"name": "n.a", **common}], "m") | vendors_config(one, "n") \
        | vendors_config(one, "m.n")


def test_class_names_are_distinct_for_any_vendor_names(tmp_path):
    config = parse_config(hostile_config("http://127.0.0.1:9/v1"), "vendors.yaml", {}, check_keys=False)
    names = class_names(list(config.vendors))
    assert len(set(names)) == len(config.vendors)  # before: "n.a" twice → one vendor silently lost
    assert names[:len(HOSTILE_NAMES) + 1] == ["base", *HOSTILE_NAMES] and names[-3:] == ["n.a", "n.a #2", "m.n.a"]


@pytest.mark.parametrize("locustfile", [LOCUSTFILE, ROOT / "avv_harness" / "locustfile.py"])
def test_locust_collects_one_class_per_vendor_whatever_its_name(tmp_path, monkeypatch, locustfile):
    """Locust's own loader (vars of the module) on both locustfiles. Before: ``locust_plugin`` crashed the import,
    ``AvvShape`` was overwritten by the shape (vendor dropped), ``_hidden`` was dropped by ``import *``."""
    from locust.util.load_locustfile import load_locustfile

    config = write_yaml(tmp_path / "vendors.yaml", hostile_config("http://127.0.0.1:9/v1"))
    monkeypatch.setenv("LOCUST_AVV_CONFIG", str(config))
    monkeypatch.setattr(sys, "argv", ["locust"])
    for module in ("avv_harness.locustfile", "vendors", "locustfile"):
        monkeypatch.delitem(sys.modules, module, raising=False)
    try:
        users, shapes = load_locustfile(str(locustfile))
    finally:
        for module in ("vendors", "locustfile"):
            sys.modules.pop(module, None)
    vendor_ids = sorted(cls.avv_vendor_id for cls in users.values())
    assert vendor_ids == sorted([("m", "base"), *[("m", n) for n in HOSTILE_NAMES], ("m", "n.a"), ("n", "a"),
                                 ("m.n", "a")])
    assert all(key == EXPORT_PREFIX + cls.__name__ for key, cls in users.items())  # the UI shows __name__
    assert {cls.__name__ for cls in users.values()} >= set(HOSTILE_NAMES)
    assert [type(s).__name__ for s in shapes] == ["AvvShape"]


@pytest.mark.integration  # an in-process Locust run: a second or more (the shape ticks once a second)
def test_hostile_vendor_names_all_run_in_process(tmp_path):
    _, samples = write_inputs(tmp_path, ["x"], n_samples=1)
    config = write_yaml(tmp_path / "vendors.yaml", hostile_config("http://vendor.test/v1"))
    env, ctl = make_env(options(tmp_path, config, samples))
    assert run_to_end(env) == EXIT_OK
    frame = read_records(ctl.run_dir / "records.csv")
    assert len(frame) == len(HOSTILE_NAMES) + 4 and (frame["status"] == "success").all()
    assert set(zip(frame["model"], frame["vendor"], strict=True)) >= {("m", n) for n in HOSTILE_NAMES}


@pytest.mark.integration
def test_hostile_vendor_names_all_run_in_a_real_locust_process(tmp_path):
    """The command a user types, with the simulator: every vendor gets one User class, runs, and is in Locust's
    stats under its own name."""
    write_yaml(tmp_path / "sim.yaml", sim_config({"ref": FAST}))
    write_yaml(tmp_path / "vendors.yaml", hostile_config("{sim}/ref/v1"))
    (tmp_path / "samples.jsonl").write_text(json.dumps(GOOD) + "\n")
    proc = run_locust(["--headless", "--avv-config", "vendors.yaml", "--avv-sim-config", "sim.yaml",
                       "--avv-samples", "samples.jsonl", "--avv-out", "out", "--avv-no-score", "--only-summary"],
                      cwd=tmp_path, timeout=120)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    frame = read_records(only_run_dir(tmp_path / "out") / "records.csv")
    assert len(frame) == len(HOSTILE_NAMES) + 4 and (frame["status"] == "success").all()
    stats = [line.split()[1] for line in proc.stderr.splitlines() if line.startswith("attempt ")]
    assert {"AvvShape", "locust_plugin", "_hidden", "__builtins__"} <= set(stats)


# 3 ------------------------------------------------------------------------ the closing line after a resume


@pytest.mark.integration  # an in-process Locust run: a second or more (the shape ticks once a second)
def test_closing_line_and_run_json_count_what_records_csv_holds_after_a_resume(tmp_path, capsys):
    """Before: after a master SIGKILL and --avv-resume the closing line said "24 records" (this session's) while
    records.csv held 32, and run.json's records_written agreed with neither."""
    config, samples = write_inputs(tmp_path, {"a": {"concurrency": 1}}, n_samples=6)
    env, ctl = make_env(options(tmp_path, config, samples, "--avv-max-total-tokens", "20"))  # 8 tokens an answer
    assert run_to_end(env) == EXIT_INCOMPLETE
    run_dir, first = ctl.run_dir, ctl.manifest.records_written
    assert first == 3
    stale = json.loads((run_dir / "run.json").read_text())
    (run_dir / "run.json").write_text(json.dumps({**stale, "records_written": 1}))  # as a SIGKILL leaves it
    capsys.readouterr()
    env, ctl = make_env(options(tmp_path, config, samples, "--avv-resume", str(run_dir)))
    assert run_to_end(env) == EXIT_OK
    held = len(read_records(run_dir / "records.csv"))
    assert held == 6 and f"avv-locust: 6 records (3 this session) in {run_dir / 'records.csv'} (run complete)" \
        in capsys.readouterr().out
    run = json.loads((run_dir / "run.json").read_text())
    assert (run["records_written"], run["records_before_resume"]) == (held, first)
    assert run["items_recorded"] == run["items_total"] == 6  # the whole run's items, not this session's 3


def test_closing_line_of_a_fresh_run_says_only_the_count(tmp_path):
    from avv_core.manifest import RunManifest
    from avv_harness.run.folder import summary_line
    from avv_harness.run.state import RunState

    def run_of(manifest, stop_reason=None):  # the closing line reads the run's manifest, folder and stop reason
        return RunState("r", Path("r"), None, None, None, manifest=manifest,  # type: ignore[arg-type]
                        stop_reason=stop_reason)

    line = summary_line(run_of(RunManifest(records_written=32)), True)
    assert line.strip() == "avv-locust: 32 records in r/records.csv (run complete)"
    resumed = RunManifest(records_written=32, records_before_resume=24)
    assert "32 records (8 this session) in" in summary_line(run_of(resumed, "interrupted"), False)


# 4 ---------------------------------------------------------------------------- SIGTERM in web-UI mode


def _web_ui_process(work: Path) -> tuple[subprocess.Popen, str]:
    slow = {"ttft_ms": 300, "tokens_per_s": 100, "output_tokens": 4}
    write_yaml(work / "sim.yaml", sim_config({"a": slow, "b": slow}))
    write_yaml(work / "vendors.yaml", sim_vendors("m", ["a", "b"], "a"))
    write_jsonl(work / "samples.jsonl", [{"messages": [{"role": "user", "content": f"q{i}"}]} for i in range(40)])
    port = free_port()
    proc = subprocess.Popen(locust_cmd("--web-host", "127.0.0.1", "--web-port", str(port), "--avv-config",
                                       "vendors.yaml", "--avv-sim-config", "sim.yaml", "--avv-samples",
                                       "samples.jsonl", "--avv-out", "out", "--avv-start-jitter-s", "0"),
                            cwd=work, env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while proc.poll() is None and time.monotonic() < deadline:
        try:
            urllib.request.urlopen(base + "/", timeout=2).close()
            return proc, base
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise AssertionError("the web UI did not come up: " + proc.communicate()[1][-2000:])


@pytest.mark.integration
@pytest.mark.parametrize("press_start", [False, True], ids=["idle", "running"])
def test_sigterm_in_web_ui_mode_ends_without_a_traceback(tmp_path, press_start):
    """Before: the run ended, then "Exception ignored in atexit callback … SystemExit" (Locust's own SIGTERM
    handler runs a second shutdown beside ours; its sys.exit landed in the exiting interpreter), the exit status
    was 0 for an interrupted run, and sometimes the shape began a second, empty run while the first was scored.
    README: the exit status is the last run's (1: stopped early), 0 when no run was started."""
    proc, base = _web_ui_process(tmp_path)
    try:
        if press_start:
            request = urllib.request.Request(base + "/swarm", data=b"user_count=0&spawn_rate=0&host=")
            assert json.loads(urllib.request.urlopen(request, timeout=10).read())["success"]
            deadline = time.monotonic() + 60
            while not any(len(p.read_text().splitlines()) > 2 for p in (tmp_path / "out").glob("*/records.csv")):
                assert time.monotonic() < deadline, "no records appeared"
                time.sleep(0.1)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    assert "Traceback" not in err and "Exception ignored" not in err, err[-3000:]
    assert proc.returncode == (EXIT_INCOMPLETE if press_start else EXIT_OK), err[-3000:]
    runs = [p for p in (tmp_path / "out").iterdir() if p.is_dir()] if (tmp_path / "out").exists() else []
    closing_lines = [line for line in out.splitlines() if line.startswith("avv-locust: ") and " records in " in line]
    assert len(runs) == len(closing_lines) == (1 if press_start else 0)  # no second, empty run
    if press_start:
        run = json.loads((runs[0] / "run.json").read_text())
        assert run["stop_reason"] == "interrupted" and run["records_written"] == len(read_records(
            runs[0] / "records.csv"))


# 5 --------------------------------------------------------------------------------- client-bound advice


def load_entry(lag_p99: float, cpu_max: float | None) -> dict:
    return {"vendors": {}, "lag_p50_ms": 0.5, "lag_p99_ms": lag_p99, "cpu_mean_pct": cpu_max, "cpu_max_pct": cpu_max,
            "client_bound": True}


def test_client_bound_advice_says_which_condition_fired_and_what_it_means():
    """Before: one text for every case, "add processes", even when the process's own CPU was 5 % (the machine
    was busy with a vendor on the same host; more processes there make it worse)."""
    load = {"own": load_entry(40.0, 97.0), "busy": load_entry(40.0, 5.0), "cpu": load_entry(1.0, 92.0),
            "blind": load_entry(40.0, None), "fine": {**load_entry(1.0, 30.0), "client_bound": False}}
    assert {w: client_bound_cause(e) for w, e in load.items()} == {
        "own": "own_load", "busy": "machine_busy", "cpu": "cpu", "blind": "lag", "fine": None}
    own, busy, cpu, blind = client_bound_advice(load)
    assert own.startswith("own was client-bound: event-loop lag p99 40.0 ms > 5 ms with its own CPU up to 97.0 %")
    assert "the load generator is the bottleneck" in own and "--processes" in own
    assert busy.startswith("busy was delayed by its machine: event-loop lag p99 40.0 ms > 5 ms while its own CPU "
                           "stayed at most 5.0 %")
    assert "busy with something else" in busy and "vendor or the simulator on the same host" in busy
    assert "Move the load generator or the other load" in busy and "--processes N" not in busy
    assert cpu.startswith("cpu was client-bound: its CPU reached 92.0 % > 85 %") and "--processes" in cpu
    assert "not measured" in blind
    assert client_bound_cause(load_entry(6.0, CPU_OWN_LOAD_PCT)) == "own_load"  # the boundary belongs to "own"


@pytest.mark.integration  # an in-process Locust run: a second or more (the shape ticks once a second)
def test_the_end_of_a_run_prints_the_client_bound_advice_once(tmp_path, capsys):
    """Before: printed twice, by the scoring tables and again by the harness before the closing line."""
    from gevent import monkey

    blocking_sleep = monkey.get_original("time", "sleep")
    config, samples = write_inputs(tmp_path, {"a": {"concurrency": 1}}, n_samples=3)

    def stall(request):
        blocking_sleep(0.05)  # blocks the event loop: lag p99 ≫ 5 ms
        return stream_reply()

    args = [a for a in options(tmp_path, config, samples) if a != "--avv-no-score"] + ["--avv-no-html"]
    env, ctl = make_env(args, adapter=ScriptedAdapter(stall))
    assert run_to_end(env) == EXIT_OK and ctl.run.result is not None  # scored: the tables were printed
    out = capsys.readouterr().out
    advice = [line for line in out.splitlines() if "event-loop lag p99" in line]
    assert len(advice) == 1 and advice[0].startswith("avv-locust: warning: "), out
    assert out.index(advice[0]) < out.index("avv-locust: 3 records in")  # just before the closing line
    assert "event-loop lag p99" in render_tables(ctl.run.result)  # avv-score still prints it (once)


# 6 ------------------------------------------------------------------------------------------- many vendors


def many_vendors(per_model: dict[str, int]) -> dict:
    config: dict = {}
    for model, n in per_model.items():
        config |= vendors_config(baseline_first([vendor_entry(f"v{i}", "http://vendor.test/v1", require_key=False,
                                                              concurrency=1) for i in range(n)]), model)
    return config


def test_more_vendors_than_a_run_can_stop_are_refused_at_config_load_with_a_way_out():
    """Before: 5,000 vendors hung in Locust's stop_users (cubic in the User classes, one per vendor) and run.json
    was never completed. Now a run holds at most MAX_VENDORS_PER_RUN vendors; --avv-model splits a bigger config."""
    config = parse_config(many_vendors({"a": 300, "b": MAX_VENDORS_PER_RUN - 299}), "vendors.yaml", {},
                          check_keys=False)
    with pytest.raises(InputError) as caught:
        config.select([])
    assert str(caught.value).startswith(f"vendors.yaml: {MAX_VENDORS_PER_RUN + 1} vendors: at most "
                                        f"{MAX_VENDORS_PER_RUN} vendors per run, because Locust")
    assert "split the config with --avv-model (models: a 300, b 201)" in str(caught.value)
    assert len(config.select(["a"]).vendors) == 300 and len(config.select(["b"]).vendors) == 201
    exactly = parse_config(many_vendors({"a": MAX_VENDORS_PER_RUN}), "vendors.yaml", {}, check_keys=False)
    assert len(exactly.select(None).vendors) == MAX_VENDORS_PER_RUN


def test_too_many_vendors_exit_2_when_the_locustfile_loads(tmp_path, capsys):
    from avv_harness.locust.plugin import user_classes

    config = write_yaml(tmp_path / "vendors.yaml", many_vendors({"a": MAX_VENDORS_PER_RUN + 1}))
    with pytest.raises(SystemExit) as caught:
        user_classes(["--avv-config", str(config)])
    assert caught.value.code == EXIT_INPUT
    assert f"{MAX_VENDORS_PER_RUN + 1} vendors: at most {MAX_VENDORS_PER_RUN}" in capsys.readouterr().err


@pytest.mark.integration  # an in-process Locust run: a second or more (the shape ticks once a second)
def test_two_hundred_vendors_start_record_and_stop_by_themselves(tmp_path):
    """Well inside the bound: one item each, recorded once, the shape stops and run.json is complete."""
    _, samples = write_inputs(tmp_path, ["x"], n_samples=1)
    config = write_yaml(tmp_path / "vendors.yaml", many_vendors({"m": 200}))
    env, ctl = make_env(options(tmp_path, config, samples))
    started = time.monotonic()
    assert run_to_end(env, timeout=30) == EXIT_OK
    assert time.monotonic() - started < 20  # measured ~1.5 s (one shape tick is 1 s)
    run = json.loads((ctl.run_dir / "run.json").read_text())
    assert run["completed"] and run["records_written"] == 200 == len(read_records(ctl.run_dir / "records.csv"))
