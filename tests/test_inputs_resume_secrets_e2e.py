"""Bad input, resume after SIGKILL, Ctrl-C, the token budget, and keys never leaking — real Locust runs."""

from __future__ import annotations

import json
import signal
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from avv_core.record_file import read_records
from tests.builders import sim_config, sim_vendors, write_yaml
from tests.e2e_ports import free_port
from tests.locust_runs import DEMO_SAMPLES, clean_env, locust_cmd, only_run_dir, run_locust
from tests.wire_server import ScriptServer, headers

pytestmark = pytest.mark.e2e

FAST = {"ttft_ms": 20, "tokens_per_s": 400, "output_tokens": 8}
GOOD_LINE = '{"messages": [{"role": "user", "content": "hi"}]}'


def prepare(work: Path, profiles: dict | None = None, vendors: dict | None = None) -> list[str]:
    profiles = profiles or {"a": FAST, "b": FAST}
    write_yaml(work / "sim.yaml", sim_config(profiles))
    write_yaml(work / "vendors.yaml", vendors or sim_vendors("m", list(profiles), next(iter(profiles))))
    return ["--headless", "--avv-config", "vendors.yaml", "--avv-sim-config", "sim.yaml", "--avv-samples",
            str(DEMO_SAMPLES), "--avv-out", "out"]


# ------------------------------------------------------------------------------------- bad input


def test_bad_input_exits_2_from_the_command_line(tmp_path):
    """One real process for the exit status; every bad-input case runs in-process in test_inputs.py."""
    args = prepare(tmp_path)
    (tmp_path / "samples.jsonl").write_text(GOOD_LINE + "\n" + '{"messages": [oops' + "\n")
    proc = run_locust([*args, "--avv-samples", "samples.jsonl"], cwd=tmp_path, timeout=60)
    assert proc.returncode == 2 and "samples.jsonl:2: not valid JSON" in proc.stderr, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "out").exists()  # nothing started, nothing sent


def test_skip_bad_lines_counts_them_in_run_json_and_report(tmp_path):
    args = prepare(tmp_path)
    (tmp_path / "samples.jsonl").write_text("\n".join([GOOD_LINE, "{broken", GOOD_LINE, "[]"]) + "\n")
    proc = run_locust([*args, "--avv-samples", "samples.jsonl", "--avv-skip-bad-lines"], cwd=tmp_path, timeout=90)
    assert proc.returncode == 0, proc.stderr[-2000:]
    run_dir = only_run_dir(tmp_path / "out")
    run = json.loads((run_dir / "run.json").read_text())
    assert [line for line, _ in run["samples"]["skipped_lines"]] == [2, 4]
    assert len(read_records(run_dir / "records.csv")) == 2 * 2
    assert "2 malformed sample line(s) skipped (lines 2, 4)" in (run_dir / "report.md").read_text()


# ---------------------------------------------------------------------------- resume, Ctrl-C, budget


def wait_for_rows(out: Path, n: int, timeout: float = 60) -> Path:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = list(out.glob("*/records.csv")) if out.exists() else []
        if found and len(found[0].read_text().splitlines()) > n:
            return found[0]
        time.sleep(0.1)
    raise AssertionError("no records appeared")


def test_resume_after_sigkill_runs_each_item_exactly_once(tmp_path):
    slow = {"ttft_ms": 100, "tokens_per_s": 100, "output_tokens": 10}
    args = prepare(tmp_path, {"a": slow, "b": slow})
    victim = subprocess.Popen(locust_cmd(*args), cwd=tmp_path, env=clean_env(), stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    records = wait_for_rows(tmp_path / "out", 15)
    victim.send_signal(signal.SIGKILL)
    victim.wait(timeout=10)
    first = read_records(records)
    assert 15 <= len(first) < 64
    run_dir = records.parent
    # unscored (--avv-no-score): this test reads the records and run.json only
    proc = run_locust([*args, "--avv-resume", str(run_dir), "--avv-no-score"], cwd=tmp_path, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    frame = read_records(records)
    keys = list(zip(frame["vendor"], frame["sample_id"], frame["repeat"], strict=True))
    assert len(keys) == len(set(keys)) == 64  # every item exactly once
    assert list(frame["sample_id"][: len(first)]) == list(first["sample_id"])  # first rows kept as they were
    assert json.loads((run_dir / "run.json").read_text())["completed"] is True


@pytest.mark.parametrize("signals", [[signal.SIGINT], [signal.SIGTERM], [signal.SIGINT, signal.SIGINT]],
                         ids=["sigint", "sigterm", "sigint-twice"])
def test_signals_stop_cleanly_and_keep_records(tmp_path, signals):
    # The race is controlled: 64 items at ≥ 0.6 s each on one user per vendor take ≥ 19 s, and the signal
    # goes out after the 4th row (~1.5 s), so the run cannot finish first on any machine.
    slow = {"ttft_ms": 600, "tokens_per_s": 100, "output_tokens": 4}
    args = prepare(tmp_path, {"a": slow, "b": slow})
    proc = subprocess.Popen(locust_cmd(*args), cwd=tmp_path, env=clean_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    records = wait_for_rows(tmp_path / "out", 4)
    for sig in signals:
        proc.send_signal(sig)
        time.sleep(0.3)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 1, err[-2000:]  # stopped before every item was done
    run = json.loads((records.parent / "run.json").read_text())
    assert run["completed"] is False and run["ended_at"] and run["stop_reason"] == "interrupted"
    frame = read_records(records)
    assert len(frame) == run["records_written"] >= 4
    assert "run INCOMPLETE" in out and "--avv-resume" in out
    assert (records.parent / "report.md").exists()  # the recorded part is scored
    assert "Traceback" not in err


def test_token_budget_stops_starting_items(tmp_path):
    args = prepare(tmp_path, {"a": FAST, "b": FAST})
    # unscored (--avv-no-score): the budget's figures are in run.json and records.csv, its line in the closing
    # summary, which an unscored run prints as well
    proc = run_locust([*args, "--avv-max-total-tokens", "3000", "--avv-no-score"], cwd=tmp_path, timeout=90)
    run_dir = only_run_dir(tmp_path / "out")
    run = json.loads((run_dir / "run.json").read_text())
    frame = read_records(run_dir / "records.csv")
    budget = run["budget"]
    assert budget["max_total_tokens"] == 3000 and budget["exhausted"] is True and run["completed"] is False
    assert len(frame) < 64 and frame["total_tokens"].sum() == run["tokens_used"]
    # items reserve their worst case before they start (issue 25): what was charged stays within one reservation
    assert 0 < budget["charged"]["tokens"] <= 3000 + budget["largest_reservation"]["tokens"]
    assert budget["over_reservation"]["tokens"] == 0
    assert "budget reached (" in proc.stderr and proc.returncode == 1
    assert "stopped by the budget (" in proc.stdout


# ----------------------------------------------------------------------------------------- secrets


@pytest.fixture
def echo_server():
    server = ScriptServer()
    yield server
    server.stop()


def test_keys_never_leak(tmp_path, echo_server):
    yaml_key, env_key, url_key = "sk-LEAK-yaml-7f3a9c", "sk-LEAK-dotenv-b21e44", "LEAK-query-9d8c7b"
    nl_key, echoed_key, url_password = "sk-LEAK-newline-5e6f", "sk-LEAK-echoed-1a2b", "pw-LEAK-3c4d"
    # ${VAR} values (any name: substituted values are secrets) and a global override header named like a key
    var_header, var_body, override_header = "route-LEAK-var-5e1f", "user-LEAK-var-77aa", "tok-LEAK-hdr-31c9"
    profiles = {"a": {**FAST, "api_key": yaml_key}, "b": {**FAST, "api_key": env_key},
                "c": {**FAST, "api_key": nl_key}}
    vendors = sim_vendors("m", ["a", "b", "c"], "a")
    vendors["m"]["vendors"][0]["api_key"] = yaml_key
    vendors["m"]["vendors"][1]["headers"] = {"X-Api-Key": env_key}
    vendors["m"]["vendors"][1]["require_key"] = True
    vendors["m"]["vendors"][2]["api_key_env"] = "NL_KEY"  # set in .env with a trailing newline and spaces
    vendors["m"]["vendors"][2]["headers"] = {"X-Route": "${ROUTE_VAR}"}
    vendors["m"]["vendors"][2]["extra_body"] = {"metadata": {"user": "${USER_VAR}"}}
    closed = free_port()
    # a vendor that answers 401 and quotes the key it got (as some do), and one with a password in its URL
    echo_server.scripts["/echo/v1"] = [headers(401, "application/json"),
                                       json.dumps({"error": {"message": f"Incorrect API key provided: "
                                                                        f"{echoed_key}"}}).encode()]
    vendors["m"]["vendors"] += [
        {"name": "d", "url": f"http://127.0.0.1:{closed}/v1?key={url_key}", "api_key": yaml_key, "timeout_s": 2},
        {"name": "e", "url": f"http://127.0.0.1:{echo_server.port}/echo/v1", "api_key": echoed_key},
        {"name": "f", "url": f"http://user:{url_password}@127.0.0.1:{closed}/v1", "timeout_s": 2},
    ]
    args = prepare(tmp_path, profiles, vendors)
    (tmp_path / ".env").write_text(f"b={env_key}\nNL_KEY=\"  {nl_key}\\n\"\nROUTE_VAR={var_header}\n"
                                   f"USER_VAR={var_body}\n")
    web_port = free_port()
    proc = subprocess.Popen(
        locust_cmd(*[a for a in args if a != "--headless"], "--autostart", "--autoquit", "4", "--web-port",
                   str(web_port), "--web-host", "127.0.0.1", "--csv", "stats", "--html", "report.html",
                   "--logfile", "locust.log", "--avv-retries", "1", "--avv-backoff-s", "0.05",
                   "--avv-samples", str(DEMO_SAMPLES), "--avv-header", f"X-Api-Token:{override_header}",
                   # d, e and f stay broken for every item (their messages are what is checked): the pre-flight
                   # only warns (its lines are checked for secrets too), and no breaker stops them
                   "--avv-preflight", "warn", "--avv-breaker", "0"),
        cwd=tmp_path, env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    pages = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and len(pages) < 4:
        try:
            for path in ("/", "/stats/requests", "/stats/report", "/stats/requests/csv"):
                with urllib.request.urlopen(f"http://127.0.0.1:{web_port}{path}", timeout=5) as resp:
                    pages.append(resp.read().decode("utf-8", "replace"))
        except OSError:
            pages.clear()
            time.sleep(0.3)
    out, err = proc.communicate(timeout=120)
    assert len(pages) == 4, err[-2000:]
    run_dir = only_run_dir(tmp_path / "out")
    frame = read_records(run_dir / "records.csv")
    assert (frame[frame.vendor.isin(["a", "b", "c"])]["status"] == "success").all()  # the keys did work
    assert (frame[frame.vendor.isin(["d", "f"])]["error_kind"] == "connect").all()
    assert (frame[frame.vendor == "e"]["error_kind"] == "http_4xx").all()
    assert frame[frame.vendor == "e"]["error_detail"].str.contains("provided: \\*\\*\\*").all()
    texts = {"stdout": out, "stderr": err, **{f"page{i}": p for i, p in enumerate(pages)}}
    for path in tmp_path.rglob("*"):
        if path.is_file() and path.name not in ("vendors.yaml", "sim.yaml", ".env"):  # inputs
            texts[str(path)] = path.read_text("utf-8", "replace")
    assert any("key=***" in text for text in texts.values())  # the URL was logged, redacted
    for name, text in texts.items():
        for secret in (yaml_key, env_key, url_key, nl_key, echoed_key, url_password, var_header, var_body,
                       override_header):
            assert secret not in text, f"{secret} leaked into {name}"
