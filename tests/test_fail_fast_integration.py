"""Fail fast, say it plainly, with real processes: the pre-flight against the simulator, a closed port, a 401 vendor, a
404 path and TLS against a plain-HTTP port (exit 2 before any load, one request each); the circuit breaker stopping
the broken vendors of a run while the working one runs to the end (exit 6), and a resume sending their items; the
master doing the pre-flight; the Vendors tab saying so; the demo's terminal output (under 40 lines, no Locust table,
the decision block last; Locust's tables only with --only-summary, and before it); --version on every command."""

from __future__ import annotations

import json
import re
import subprocess

import pytest

from avv_core.errors import InputError
from avv_core.exit_status import ExitStatus
from avv_core.record_file import read_records
from tests.builders import numbered_samples, vendors_config, write_inputs, write_jsonl, write_yaml
from tests.e2e_ports import free_port
from tests.fake_vendor import ScriptedAdapter, error_reply, stream_reply
from tests.glue import make_env, options, run_to_end
from tests.locust_runs import DEMO_SAMPLES, clean_env, only_run_dir, run_locust
from tests.sim_records import truth_lines

pytestmark = pytest.mark.integration

FAST = {"ttft_ms": 10, "tokens_per_s": 500, "output_tokens": 6}
SIM_PROFILES = {"ok": FAST, "locked": {**FAST, "api_key": "right-key-77"}}
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def _profiles(sim) -> dict[str, int]:
    counts: dict[str, int] = {}
    for line in truth_lines(sim.truth_log, preflight=True):
        counts[line["profile"]] = counts.get(line["profile"], 0) + 1
    return counts


def _broken_config(sim, closed: int, **ok: object) -> dict:
    return vendors_config([
        {"name": "ok", "url": f"{sim.url}/ok/v1", "is_baseline": True, "concurrency": 2, **ok},
        {"name": "locked", "url": f"{sim.url}/locked/v1", "api_key_env": "LOCKED_KEY", "concurrency": 1},
        {"name": "nopath", "url": f"{sim.url}/ok", "concurrency": 1},  # the base URL without /v1
        {"name": "closed", "url": f"http://127.0.0.1:{closed}/v1", "concurrency": 1},
        {"name": "tls", "url": f"https://127.0.0.1:{sim.port}/ok/v1", "concurrency": 1},  # https to plain HTTP
    ])


def test_the_preflight_refuses_broken_vendors_before_any_load_with_one_line_each(sim, tmp_path):
    before = _profiles(sim)
    write_yaml(tmp_path / "vendors.yaml", _broken_config(sim, free_port()))
    write_jsonl(tmp_path / "s.jsonl", numbered_samples(6))
    proc = run_locust(["--headless", "--avv-config", "vendors.yaml", "--avv-samples", "s.jsonl", "--avv-out", "out"],
                      cwd=tmp_path, env=clean_env(LOCKED_KEY="wrong-key-4242"), timeout=120)
    assert proc.returncode == ExitStatus.INPUT, proc.stdout[-2000:] + proc.stderr[-3000:]
    err = proc.stderr
    assert "pre-flight: 4 of 5 vendors cannot answer, so nothing else was sent" in err
    lines = {line.split(" ")[2]: line for line in err.splitlines() if line.startswith("  ") and " → " in line}
    assert set(lines) == {"locked", "nopath", "closed", "tls"}, err
    assert f"POST {sim.url}/locked/v1/chat/completions → HTTP 401: the key was refused" in lines["locked"]
    assert "check the key: api_key / api_key_env" in lines["locked"]
    assert f"POST {sim.url}/ok/chat/completions → HTTP 404: nothing is served at that path" in lines["nopath"]
    assert "usually ending in /v1" in lines["nopath"]
    assert "→ connection refused" in lines["closed"] and "check the URL's host and port" in lines["closed"]
    assert "→ the TLS handshake failed" in lines["tls"]
    assert "wrong-key-4242" not in proc.stdout + err  # the vendor's message is quoted, the key never
    after = _profiles(sim)
    assert after.get("ok", 0) - before.get("ok", 0) == 1  # the working vendor: its one pre-flight request
    assert after.get("locked", 0) - before.get("locked", 0) == 1  # the broken one: one request, no retry
    run_dir = only_run_dir(tmp_path / "out")
    run = json.loads((run_dir / "run.json").read_text())
    assert run["stop_reason"] == "preflight" and not run["completed"] and run["items_recorded"] == 0
    faults = {v["vendor"]: v["fault"] for v in run["extra"]["preflight"]["vendors"]}
    assert faults == {"ok": None, "locked": "http_401", "nopath": "http_404", "closed": "connect_refused",
                      "tls": "tls"}
    assert run["extra"]["preflight"]["spent"]["tokens"] > 0 and run["tokens_used"] == 0  # its cost, apart


def test_the_breaker_stops_broken_vendors_the_working_one_runs_whole_and_a_resume_sends_their_items(sim, tmp_path):
    before = _profiles(sim)
    config = _broken_config(sim, free_port())
    config["m"]["vendors"] = [v for v in config["m"]["vendors"] if v["name"] in ("ok", "locked", "closed")]
    write_yaml(tmp_path / "vendors.yaml", config)
    write_jsonl(tmp_path / "s.jsonl", numbered_samples(10))
    args = ["--headless", "--avv-config", "vendors.yaml", "--avv-samples", "s.jsonl", "--avv-out", "out",
            "--avv-preflight", "warn", "--avv-breaker", "3", "--avv-backoff-s", "0.02",
            "--avv-max-total-tokens", "10000000"]
    proc = run_locust(args, cwd=tmp_path, env=clean_env(LOCKED_KEY="wrong-key-4242"), timeout=180)
    assert proc.returncode == ExitStatus.VENDOR_BROKEN, proc.stdout[-3000:] + proc.stderr[-3000:]
    out = proc.stdout
    assert "avv-locust: warning: pre-flight (a hard fault; --avv-preflight warn runs anyway): locked (m)" in out
    run_dir = only_run_dir(tmp_path / "out")
    frame = read_records(run_dir / "records.csv")
    by_vendor = {name: part for name, part in frame.groupby("vendor")}
    assert len(by_vendor["ok"]) == 10 and (by_vendor["ok"]["status"] == "success").all()  # never the working one's run
    assert len(by_vendor["locked"]) == 3 and set(by_vendor["locked"]["http_status"]) == {401}
    assert set(by_vendor["locked"]["attempts"]) == {1}  # no retry spent on a 401
    assert len(by_vendor["closed"]) == 3 and set(by_vendor["closed"]["error_kind"]) == {"connect"}
    assert _profiles(sim).get("locked", 0) - before.get("locked", 0) == 1 + 3  # the pre-flight and 3 items
    run = json.loads((run_dir / "run.json").read_text())
    down = {d["vendor"]: d for d in run["extra"]["vendor_down"]}
    assert set(down) == {"locked", "closed"} and run["completed"]
    assert (down["locked"]["fault"], down["locked"]["after_items"], down["locked"]["skipped"]) == ("http_401", 3, 7)
    assert (down["closed"]["fault"], down["closed"]["skipped"]) == ("connect_refused", 7)
    assert "wrong-key-4242" not in json.dumps(run) + out + proc.stderr
    spent = run["extra"]["preflight"]["spent"]["tokens"]
    assert spent > 0 and run["budget"]["charged"]["tokens"] == run["tokens_used"] + spent  # the budget counts it
    assert "stopped by the circuit breaker: locked, closed" in out
    assert re.search(r"warning: locked \(m\) was stopped by the circuit breaker: its last 3 items ended with HTTP 401",
                     out)
    report = (run_dir / "report.md").read_text(encoding="utf-8")
    assert "Vendors stopped (circuit breaker)" in report and "connect_refused" in report
    # the key fixed, a resume sends locked's items (closed is still down: stopped again, its items kept again);
    # unscored (--avv-no-score): what follows reads records.csv and run.json, and the exit status 6 is the run's own
    resumed = run_locust([*args, "--avv-resume", str(run_dir), "--avv-no-score"], cwd=tmp_path,
                         env=clean_env(LOCKED_KEY="right-key-77"), timeout=180)
    assert resumed.returncode == ExitStatus.VENDOR_BROKEN, resumed.stdout[-3000:] + resumed.stderr[-3000:]
    frame = read_records(run_dir / "records.csv")
    latest = frame.drop_duplicates(["vendor", "sample_id", "repeat"], keep="last")
    locked = latest[latest["vendor"] == "locked"]
    assert len(locked) == 10 and (locked["status"] == "success").all()
    assert len(frame[frame["vendor"] == "ok"]) == 10  # done before: not sent again
    run = json.loads((run_dir / "run.json").read_text())
    assert [d["vendor"] for d in run["extra"]["vendor_down"]] == ["closed"]


def test_the_master_does_the_preflight(sim, tmp_path):
    config, samples = write_inputs(tmp_path, {"locked": {"url": f"{sim.url}/locked/v1", "api_key": "nope-1"}},
                                   n_samples=2)
    before = _profiles(sim)
    with pytest.raises(InputError, match=r"locked \(m\): POST .* → HTTP 401"):
        make_env(options(tmp_path, config, samples, "--avv-preflight", "strict"), runner="master", real_http=True)
    assert _profiles(sim).get("locked", 0) - before.get("locked", 0) == 1


def test_the_vendors_tab_says_which_vendor_the_breaker_stopped(tmp_path):
    from avv_harness.locust.live_board import LiveBoard
    from avv_harness.locust.web_ui import vendor_columns, vendor_rows

    config, samples = write_inputs(tmp_path, {"a": {}, "b": {"concurrency": 1}}, n_samples=6)

    def answer(request):
        return error_reply(403, "not for you") if "/b/" in request.url else stream_reply("fine")

    env, ctl = make_env(options(tmp_path, config, samples, "--avv-breaker", "2"), adapter=ScriptedAdapter(answer))
    board = LiveBoard(ctl, threaded=False)
    assert run_to_end(env) == ExitStatus.VENDOR_BROKEN
    rows = {r["name"]: r for r in vendor_rows(board.snapshot(), vendor_columns(False, False))}
    assert rows["b"]["items"] == "2 / 6 · stopped: vendor_down (HTTP 403: the key may not use this; 4 items skipped)"
    assert rows["a (baseline)"]["items"] == "6 / 6"
    assert [k for k, why in ctl.ledger.skipped.items() if why == "vendor_down"] and ctl.role.closed("b")
    board.close()


# ------------------------------------------------------------------------------------------- the terminal

def _demo(tmp_path, *extra: str, html: bool = True) -> tuple[subprocess.CompletedProcess, list[str]]:
    proc = subprocess.run(["avv-locust", "--headless", "--avv-out", "out", *extra],
                          cwd=tmp_path, env=clean_env(html=html), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, timeout=240)
    return proc, proc.stdout.splitlines()


def test_the_demo_ends_with_the_answer_in_under_40_plain_lines(tmp_path):
    proc, lines = _demo(tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert len(lines) < 40, proc.stdout
    assert not CONTROL.search(proc.stdout.replace("\n", "")), repr(proc.stdout)  # not a terminal: plain lines
    for locust_output in ("Aggregated", "# reqs", "Response time percentiles", "Error report", "/INFO/"):
        assert locust_output not in proc.stdout, locust_output  # no Locust table, none of its INFO lines
    assert lines[0].startswith("avv-locust: 4 vendors of demo-model (reference = baseline, faithful, borderline, "
                               "flaky) · 400 samples × 1 repeat = 1600 items → out/")
    assert lines[1].startswith("pre-flight: 4 of 4 vendors answered in ")
    assert any(re.match(r"avv: \d+/1600 items \(.*\) · reference \d+/400 · faithful \d+/400 · borderline \d+/400 · "
                        r"flaky \d+/400 · \d+ items? failed · \d+ failed attempts? · ETA ", line) for line in lines)
    run_dir = only_run_dir(tmp_path / "out")
    assert lines[-2:] == [f"report.html: {run_dir.relative_to(tmp_path)}/report.html",
                          f"report.md:   {run_dir.relative_to(tmp_path)}/report.md"]
    block = lines[lines.index("Decision (95 % confidence, thresholds avv):"):-2]
    # vendors in IRF order, which follows the measured TTFT / TPS (a loaded machine can swap them)
    verdicts = {line.split()[0]: line.replace("(baseline)", "").split()[1] for line in block[1:]}
    assert verdicts == {"faithful": "PASS", "reference": "PASS", "borderline": "INCONCLUSIVE", "flaky": "FAIL"}
    assert "more samples would decide it" in next(line for line in block[1:] if line.split()[0] == "borderline")
    assert "(baseline)" in next(line for line in block[1:] if line.split()[0] == "reference")
    assert lines[-9].startswith("avv-locust: 1600 records in ")  # the closing line, just before the decision


def test_locust_tables_only_with_only_summary_and_before_the_decision(tmp_path):
    samples = tmp_path / "twelve.jsonl"
    samples.write_text("".join(DEMO_SAMPLES.read_text(encoding="utf-8").splitlines(keepends=True)[:12]))
    proc, lines = _demo(tmp_path, "--avv-samples", str(samples), "--only-summary", html=False)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert "Response time percentiles" in proc.stdout and "Error report" in proc.stdout
    table = next(i for i, line in enumerate(lines) if line.startswith("Type ") and "# reqs" in line)
    assert re.search(r"^attempt\s+flaky\s", proc.stdout, re.M)  # Locust counts attempts (retries included)
    decision = lines.index("Decision (95 % confidence, thresholds avv):")
    assert table < decision and lines[-1].startswith("report.md:")
    assert proc.stdout.count("Response time percentiles") == 1  # Locust's own copy after quitting is left out


def test_version_on_every_command_and_a_misspelt_option_is_refused():
    for command, first in (("avv-locust", "avv-locust "), ("avv-score", "avv-score (avv-locust "),
                           ("avv-sim", "avv-sim (avv-locust ")):
        done = subprocess.run([command, "--version"], capture_output=True, text=True, timeout=60, env=clean_env())
        assert done.returncode == 0 and done.stdout.startswith(first), done.stdout + done.stderr
        assert done.stdout.splitlines()[1].startswith("Locust 2.")
    done = subprocess.run(["avv-locust", "--headless", "--avv-sample", "x.jsonl"], capture_output=True, text=True,
                          timeout=60, env=clean_env())
    assert done.returncode == 2 and "Did you mean '--avv-samples'?" in done.stderr, done.stderr[-2000:]
