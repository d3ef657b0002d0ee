"""Web UI mode as a user runs it: ``locust -f locustfiles/vendors.py`` (no --headless) with the simulator,
driven through Locust's HTTP API (POST /swarm, POST /stop) — each START a run folder, scored when the test
stops while the process keeps running — and, where Chromium is installed, the start form, the Vendors tab
and report.html rendered in headless Chromium without console errors (screenshots in the test's tmp folder)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from avv_core.record_file import read_records
from tests.builders import sim_config, sim_vendors, write_yaml
from tests.e2e_ports import free_port
from tests.headless_chromium import find_chromium
from tests.locust_runs import DEMO_SAMPLES, clean_env, locust_cmd
from tests.sim_records import truth_lines

pytestmark = pytest.mark.e2e

FAST = {"ttft_ms": 20, "tokens_per_s": 400, "output_tokens": 8, "tool_call_rate": 0.6}
VENDORS = ["ref", "alt", "bad"]


def http(url: str, data: dict | None = None, timeout: float = 60.0) -> tuple[int, bytes]:
    """One request; the 60 s allow for a UI process that starts a run (its pre-flight) or scores one (in a
    thread that holds the GIL) on a machine the parallel test phase keeps busy."""
    body = urllib.parse.urlencode(data).encode() if data is not None else None
    try:
        with urllib.request.urlopen(urllib.request.Request(url, data=body), timeout=timeout) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def live(base: str) -> dict:
    return json.loads(http(f"{base}/avv/live.json")[1])


def wait_for(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


class UiProcess:
    """A Locust process with the web UI on a free loopback port, the simulator started by it."""

    def __init__(self, work: Path, *extra: str):
        profiles = {"ref": FAST, "alt": dict(FAST, seed=3), "bad": dict(FAST, flip_rate=0.5, bad_args_rate=0.3)}
        write_yaml(work / "sim.yaml", sim_config(profiles))
        write_yaml(work / "vendors.yaml", sim_vendors("m", VENDORS, "ref"))
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.log = (work / "locust.log").open("w")
        self.proc = subprocess.Popen(
            locust_cmd("--web-host", "127.0.0.1", "--web-port", str(self.port), "--avv-config", "vendors.yaml",
                       "--avv-sim-config", "sim.yaml", "--avv-samples", str(DEMO_SAMPLES), "--avv-out", "out",
                       "--avv-start-jitter-s", "0", *extra),
            cwd=work, env=clean_env(html=True), stdout=self.log, stderr=subprocess.STDOUT, text=True)
        wait_for(lambda: self.proc.poll() is not None or self._up(), 60, "the web UI")
        assert self.proc.poll() is None, (work / "locust.log").read_text()[-3000:]

    def _up(self) -> bool:
        try:
            return http(f"{self.base}/avv/live.json", timeout=2)[0] == 200
        except OSError:
            return False

    def start_and_wait(self, previous_run: str | None = None, timeout: float = 120) -> dict:
        status, body = http(f"{self.base}/swarm", {"user_count": 0, "spawn_rate": 0, "host": ""})
        assert status == 200 and json.loads(body)["success"], body
        return wait_for(lambda: (s := live(self.base))["state"] == "finished" and s["run_id"] != previous_run and s,
                        timeout, "the run to end")

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        try:
            return self.proc.wait(60)
        finally:
            self.log.close()


@pytest.fixture()
def ui(tmp_path):
    process = UiProcess(tmp_path)
    yield process
    if process.proc.poll() is None:
        process.proc.kill()
        process.proc.wait(10)


def test_each_start_is_a_run_scored_when_the_test_stops_while_the_process_runs(tmp_path, ui):
    first = ui.start_and_wait()
    run_dir = Path(first["run_dir"])
    assert ui.proc.poll() is None  # the process still runs
    for name in ("scores.csv", "report.html", "report.md", "run.json"):
        assert (run_dir / name).is_file(), name
    assert first["scored_records"] == len(read_records(run_dir / "records.csv")) == 3 * 32
    assert {v["vendor"] for v in first["vendors"]} == set(VENDORS)
    assert http(f"{ui.base}/avv/download/report.html")[1] == (run_dir / "report.html").read_bytes()
    assert http(f"{ui.base}/avv/download/scores.csv")[1] == (run_dir / "scores.csv").read_bytes()
    run = json.loads((run_dir / "run.json").read_text())
    assert run["completed"] and run["simulator"]["truth_log"].endswith(".jsonl")
    second = ui.start_and_wait(previous_run=first["run_id"])
    assert Path(second["run_dir"]).parent == run_dir.parent and (Path(second["run_dir"]) / "report.html").is_file()
    truth = truth_lines(run["simulator"]["truth_log"])
    assert len(truth) >= 2 * 3 * 32  # one simulator served both runs
    assert ui.stop() == 0
    assert "Traceback" not in (tmp_path / "locust.log").read_text()


def test_bad_input_is_refused_when_the_ui_process_starts(tmp_path):
    write_yaml(tmp_path / "vendors.yaml", sim_vendors("m", ["ref"], "ref"))
    proc = subprocess.run(locust_cmd("--web-port", str(free_port()), "--avv-config", "vendors.yaml",
                                     "--avv-samples", "missing.jsonl"),
                          cwd=tmp_path, env=clean_env(), capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "missing.jsonl" in proc.stderr, proc.stderr[-2000:]


def render(url: str, png: Path, *extra: str) -> dict:
    """tests/headless_chromium.py in its own process (asyncio, away from this gevent-patched one)."""
    proc = subprocess.run([sys.executable, "-m", "tests.headless_chromium", url, str(png), *extra],
                          cwd=Path(__file__).resolve().parents[1], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_ui_and_report_render_in_headless_chromium(tmp_path, ui):
    if find_chromium() is None:
        pytest.skip("no Chromium binary on PATH (apt-get install chromium, or set $CHROMIUM) — not rendered")
    shots = tmp_path / "screenshots"
    shots.mkdir()
    form = render(f"{ui.base}/", shots / "start-form.png")
    assert form["errors"] == [], form["errors"]
    assert "the run's shape sets the users" in form["text"] and "has no host attribute set" not in form["text"]
    finished = ui.start_and_wait()
    tab = render(f"{ui.base}/", shots / "vendors-tab.png", "--click", "Vendors")
    assert tab["errors"] == [], tab["errors"]
    assert all(v in tab["text"] for v in VENDORS) and "Verdict so far" in tab["text"]
    report = render((Path(finished["run_dir"]) / "report.html").as_uri(), shots / "report.png", "--full-page")
    assert report["errors"] == [], report["errors"]
    assert all(v in report["text"] for v in VENDORS) and "Scores and verdicts" in report["text"]
    for name in ("start-form.png", "vendors-tab.png", "report.png"):
        assert (shots / name).stat().st_size > 10_000
