"""The Vendors tab and web UI mode, in-process: Locust's web UI on an Environment in this process, driven
through its HTTP API with Flask's test client (no socket for the UI; the users talk to the in-process
vendor). The JSON route's numbers must equal ``avv-score`` on the same records, mid-run and at the end, on
a local run and on a master with a worker; each START makes a new run folder, each STOP scores it."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import gevent
import pandas as pd
import pytest

from avv_harness.locust.live_board import jsonable
from avv_harness.locust.web_ui import VENDORS_KEY, install_web_ui, vendor_columns
from avv_harness.run.controller import EXIT_OK
from avv_scoring import score_paths
from avv_scoring.report.format import fmt
from tests.builders import numbered_samples, write_inputs
from tests.fake_vendor import ScriptedAdapter, error_reply, item_of, stream_reply
from tests.glue import make_env

TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]


def sample_lines(n: int) -> list[dict]:
    return numbered_samples(n, TOOLS, "weather {i}?")


def vendor_answer(request) -> tuple:
    """The baseline ``a`` always calls the tool; ``b`` answers in text every third sample and sends a bad
    argument every fourth; ``c`` fails every fifth sample. Answers take 5–40 ms, by sample."""
    vendor = request.url.split("/")[3]
    n = int(item_of(request).sample_id[1:])
    gevent.sleep(0.005 * (1 + n % 8))
    usage = {"prompt_tokens": 10, "completion_tokens": 5 + n % 7, "total_tokens": 15 + n % 7}
    if vendor == "c" and n % 5 == 0:
        return error_reply(500, "down")
    if vendor == "b" and n % 3 == 0:
        return stream_reply("it is sunny today", usage=usage)
    city = 7 if vendor == "b" and n % 4 == 0 else f"city{n}"
    return stream_reply(tool_calls=[("get_weather", {"city": city})], usage=usage)


def paced_answer(request) -> tuple:
    """vendor_answer, 150 ms slower: a run lasts several seconds, so the live view is seen mid-run even when a
    loaded machine delays the live scoring (with 60 ms the run could end before the first live scores)."""
    gevent.sleep(0.15)
    return vendor_answer(request)


def ui_args(work: Path, config: Path, samples: Path, *extra: str) -> list[str]:
    """Web UI mode: no --headless."""
    return ["--avv-config", str(config), "--avv-samples", str(samples), "--avv-out", str(work / "out"),
            "--avv-start-jitter-s", "0", "--avv-backoff-s", "0.01", "--avv-retries", "0", *extra]


def wait_until(predicate, timeout: float = 60.0, step: float = 0.05):
    waited = 0.0
    while waited < timeout:
        value = predicate()
        if value:
            return value
        gevent.sleep(step)
        waited += step
    raise AssertionError("timed out waiting")


def avv_score_rows(run_dir: Path, n_rows: int, scratch: Path) -> dict[tuple[str, str], dict]:
    """avv-score on the first ``n_rows`` records of ``run_dir`` (a copy holding just those rows)."""
    cut = scratch / f"cut-{n_rows}"
    cut.mkdir(parents=True)
    shutil.copy(run_dir / "run.json", cut / "run.json")
    lines = (run_dir / "records.csv").read_text(encoding="utf-8").splitlines(keepends=True)
    (cut / "records.csv").write_text("".join(lines[: n_rows + 1]), encoding="utf-8")
    result = score_paths([cut], write=False)
    rows = result.scores.astype("object").to_dict("records")
    return {(r["model"], r["vendor"]): {k: jsonable(v) for k, v in r.items()} for r in rows}


def assert_equals_avv_score(snapshot: dict, scratch: Path, run_ids: bool = True) -> None:
    run_dir = Path(snapshot["run_dir"])
    expected = avv_score_rows(run_dir, snapshot["scored_records"], scratch)
    assert {(v["model"], v["vendor"]) for v in snapshot["vendors"]} == set(expected)
    for vendor in snapshot["vendors"]:
        want = expected[(vendor["model"], vendor["vendor"])]
        got = vendor["scores"]
        assert got.keys() == want.keys()
        for column, value in want.items():
            assert got[column] == value, (vendor["vendor"], column, got[column], value)


@pytest.fixture(autouse=True)
def locust_argv(monkeypatch):
    """Locust's web UI parses sys.argv for its form's extra options: give it a plain command line."""
    monkeypatch.setattr(sys, "argv", ["locust"])


def rows_now(client) -> dict[str, dict[str, str]]:
    """The Vendors tab's rows by vendor label."""
    return {r["name"]: r for r in tab_rows(client)}


def tab_rows(client) -> list[dict]:
    stats = client.get("/stats/requests").get_json()
    return next(t["data"] for t in stats["extended_stats"] if t["key"] == VENDORS_KEY)


def start_ui(env, ctl, interval_s: float = 0.2):
    env.create_web_ui("127.0.0.1", 0, delayed_start=True)  # no server: Flask's test client talks to the app
    install_web_ui(env, ctl, interval_s=interval_s)
    return env.web_ui.app.test_client()


def test_start_form_says_what_sets_the_users_and_has_no_host_warning(tmp_path):
    config, samples = write_inputs(tmp_path, {"a": {"concurrency": 3}, "b": {}}, n_samples=2)
    env, ctl = make_env(ui_args(tmp_path, config, samples))
    client = start_ui(env, ctl)
    try:
        assert ctl.ui_mode and ctl.run is None  # no run folder until START
        assert not (tmp_path / "out").exists() or not any(p.is_dir() for p in (tmp_path / "out").iterdir())
        page = client.get("/").get_data(as_text=True)
        assert 'id="avv-note"' in page and "the run&#x27;s shape sets the users" in page
        assert "a 3 · b 2" in page and "Number of users, Ramp up and Host are not used" in page
        args = json.loads(page.split("window.templateArgs = ", 1)[1].split("\n", 1)[0])
        assert args["hide_common_options"] is True  # Locust disables users / ramp-up / run time
        assert args["missing_host_warning"] is False and args["override_host_warning"] is False
        assert [t["title"] for t in args["extended_tabs"]] == ["Vendors"]
        structure = args["extended_tables"][0]["structure"]
        assert [c["title"] for c in structure] == [t for _, t, _ in vendor_columns(False, False)]
        assert {c["href"] for c in args["extended_csv_files"]} == {
            "./avv/download/records.csv", "./avv/download/scores.csv", "./avv/download/report.html"}
        assert {c.host for c in env.user_classes} == {"http://vendor.test/a/v1", "http://vendor.test/b/v1"}
        assert client.get("/avv/download/records.csv").status_code == 404  # no run yet
    finally:
        env.runner.quit()


@pytest.mark.integration  # an in-process Locust run with the web UI: seconds
def test_local_ui_mode_live_scores_equal_avv_score_and_each_start_is_a_new_run(tmp_path):
    config, samples = write_inputs(tmp_path, ["a", "b", "c"], sample_lines=sample_lines(40))
    env, ctl = make_env(ui_args(tmp_path, config, samples, "--avv-repeats", "2"),
                        adapter=ScriptedAdapter(paced_answer))
    client = start_ui(env, ctl)
    try:
        assert client.post("/swarm", data={"user_count": 0, "spawn_rate": 0}).get_json()["success"]
        # mid-run: a snapshot of part of the records, equal to avv-score on those rows
        mid = wait_until(lambda: (s := client.get("/avv/live.json").get_json())["state"] == "running"
                         and 0 < s["scored_records"] < 240 and all(v["scores"] for v in s["vendors"]) and s)
        assert_equals_avv_score(mid, tmp_path / "mid")
        rows = tab_rows(client)
        assert [r["name"] for r in rows] == ["a (baseline)", "b", "c"]
        # the end: the test stops by itself, the run is scored, the process goes on
        wait_until(lambda: env.runner.state == "stopped" and ctl.run.finished, timeout=90)
        first = ctl.run.run_dir
        for name in ("scores.csv", "report.html", "report.md"):
            assert (first / name).is_file()
        end = client.get("/avv/live.json").get_json()
        assert end["state"] == "finished" and end["scored_records"] == 240 == end["records"]
        assert_equals_avv_score(end, tmp_path / "end")
        by_vendor = {v["vendor"]: v for v in end["vendors"]}
        assert (by_vendor["c"]["items_done"], by_vendor["c"]["items_total"], by_vendor["c"]["failed"]) == (80, 80, 16)
        assert by_vendor["b"]["scores"]["verdict"] == "FAIL"  # the decision so far, by the run's rule
        assert by_vendor["a"]["scores"]["verdict"] == "INCONCLUSIVE"  # 80 clean items do not show ≥ 0.99 at 95 %
        assert rows_now(client)["b"]["verdict"] == f"FAIL: {by_vendor['b']['scores']['verdict_reasons']}"
        # the tab shows the same numbers, formatted like the report
        rows = rows_now(client)
        for key, _, kind in vendor_columns(False, False)[3:-3]:
            assert rows["b"][key] == fmt(by_vendor["b"]["scores"].get(key), kind)
        assert rows["c"]["items"] == "80 / 80" and rows["c"]["failed"] == "16"
        # downloads: the files of the run
        for name in ("records.csv", "scores.csv", "report.html"):
            got = client.get(f"/avv/download/{name}")
            assert got.status_code == 200 and got.data == (first / name).read_bytes()
        # a second START: a new run folder, scored when it stops; the first stays as it was
        scores_before = (first / "scores.csv").read_bytes()
        assert client.post("/swarm", data={"user_count": 0, "spawn_rate": 0}).get_json()["success"]
        wait_until(lambda: ctl.run.run_dir != first and ctl.run.finished and env.runner.state == "stopped",
                   timeout=90)
        second = ctl.run.run_dir
        assert second.parent == first.parent and (second / "report.html").is_file()
        assert (first / "scores.csv").read_bytes() == scores_before and len(ctl.runs) == 2
        assert client.get(f"/avv/download/records.csv?run={first.name}").data == (first / "records.csv").read_bytes()
        assert len(pd.read_csv(second / "records.csv")) == 240
    finally:
        env.runner.quit()
    assert ctl.finish() == EXIT_OK


@pytest.mark.integration  # an in-process Locust run with the web UI: seconds
def test_stop_mid_run_scores_what_was_recorded(tmp_path):
    config, samples = write_inputs(tmp_path, ["a", "b", "c"], sample_lines=sample_lines(60))

    def slow(request):
        gevent.sleep(0.05)
        return vendor_answer(request)

    env, ctl = make_env(ui_args(tmp_path, config, samples), adapter=ScriptedAdapter(slow))
    client = start_ui(env, ctl)
    try:
        client.post("/swarm", data={"user_count": 0, "spawn_rate": 0})
        wait_until(lambda: ctl.run is not None and len(ctl.run.ledger.done) >= 30)
        assert client.post("/stop").get_json()["success"]
        wait_until(lambda: ctl.run.finished)
        run = ctl.run
        assert run.manifest.stop_reason == "interrupted" and not run.manifest.completed
        assert (run.run_dir / "scores.csv").is_file() and (run.run_dir / "report.html").is_file()
        end = client.get("/avv/live.json").get_json()
        assert end["state"] == "finished" and end["scored_records"] == run.manifest.records_written
        assert_equals_avv_score(end, tmp_path / "stopped")
        assert client.get("/").status_code == 200  # the process and its UI go on
    finally:
        env.runner.quit()
    assert ctl.finish() == 1  # the last run was stopped before its end


@pytest.mark.integration  # an in-process Locust run with the web UI: seconds
def test_master_and_worker_live_scores_equal_avv_score(tmp_path):
    config, samples = write_inputs(tmp_path, ["a", "b", "c"], sample_lines=sample_lines(40))
    args = ui_args(tmp_path, config, samples)
    master_env, master = make_env(args, runner="master")
    port = master_env.runner.server.port
    worker_env, _ = make_env(args, runner="worker", adapter=ScriptedAdapter(paced_answer), master_port=port)
    client = start_ui(master_env, master)
    try:
        wait_until(lambda: master_env.runner.worker_count == 1)
        assert client.post("/swarm", data={"user_count": 0, "spawn_rate": 0}).get_json()["success"]
        mid = wait_until(lambda: (s := client.get("/avv/live.json").get_json())["state"] == "running"
                         and 0 < s["scored_records"] < 120 and all(v["scores"] for v in s["vendors"]) and s)
        assert_equals_avv_score(mid, tmp_path / "mid")
        wait_until(lambda: master.run.finished, timeout=90)
        end = client.get("/avv/live.json").get_json()
        assert end["scored_records"] == 120 and (Path(end["run_dir"]) / "report.html").is_file()
        assert_equals_avv_score(end, tmp_path / "end")
    finally:
        worker_env.runner.quit()
        master_env.runner.quit()


@pytest.mark.integration  # an in-process Locust run with the web UI: seconds
@pytest.mark.parametrize("stress", [True])
def test_stress_mode_has_a_levels_tab(tmp_path, stress):
    config, samples = write_inputs(tmp_path, ["a", "b"], sample_lines=sample_lines(10))
    args = ui_args(tmp_path, config, samples, "--avv-mode", "stress", "--avv-stress-levels", "1,2",
                   "--avv-stress-step-s", "1")
    env, ctl = make_env(args, adapter=ScriptedAdapter(vendor_answer))
    client = start_ui(env, ctl)
    try:
        page = client.get("/").get_data(as_text=True)
        tabs = json.loads(page.split("window.templateArgs = ", 1)[1].split("\n", 1)[0])["extended_tabs"]
        assert [t["title"] for t in tabs] == ["Vendors", "Stress levels"] and "ladder 1, 2 users" in page
        client.post("/swarm", data={"user_count": 0, "spawn_rate": 0})
        wait_until(lambda: ctl.run is not None and ctl.run.finished, timeout=60)
        end = client.get("/avv/live.json").get_json()
        levels = {(row["vendor"], row["level"]) for row in end["levels"]}
        assert levels == {("a", 1), ("a", 2), ("b", 1), ("b", 2)}
        stats = client.get("/stats/requests").get_json()
        shown = next(t["data"] for t in stats["extended_stats"] if t["key"] == "avv-levels")
        assert {(r["vendor"], r["level"]) for r in shown} == {("a", "1"), ("a", "2"), ("b", "1"), ("b", "2")}
        assert (ctl.run.run_dir / "report.html").is_file()
        assert 'id="stress"' in (ctl.run.run_dir / "report.html").read_text(encoding="utf-8")
    finally:
        env.runner.quit()


def test_ui_runs_after_the_first_are_new_folders(tmp_path):
    from avv_harness.run.folder import ui_run_options
    from avv_harness.run.options import RunOptions, preparse_options

    config, samples = write_inputs(tmp_path, ["a"], n_samples=1)
    options = RunOptions.from_parsed(preparse_options(ui_args(tmp_path, config, samples, "--avv-run-id", "demo",
                                                              "--avv-resume", str(tmp_path / "old"))))
    assert ui_run_options(options, 0) is options  # the first START resumes / uses the given name
    second, third = ui_run_options(options, 1), ui_run_options(options, 2)
    assert (second.resume, second.run_id, third.run_id) == ("", "demo-2", "demo-3")


def test_ui_mode_refuses_bad_input_when_the_process_starts(tmp_path):
    from avv_core.errors import InputError

    config, samples = write_inputs(tmp_path, ["a"], n_samples=1)
    with pytest.raises(InputError, match="--avv-resume needs a run folder"):
        make_env(ui_args(tmp_path, config, samples, "--avv-resume", str(tmp_path / "nothing-here")))
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    with pytest.raises(InputError, match="cannot write the run folder"):
        make_env(ui_args(tmp_path, config, samples, "--avv-out", str(blocker / "out")))
