"""The decision through real runs (issue 34's "Done when"): --avv-settle is the sequential form of the verdict (a good
vendor settles PASS under --avv-thresholds k2vv on ≤ 25 % of 600 samples, a clearly bad one FAILs on ≤ 25 % under
the default preset), and the exit statuses end to end — the harness (6 broken vendor, 7 FAIL and 8 INCONCLUSIVE
with --avv-strict, --avv-allow-inconclusive) in-process, and one `locust` and `avv-score` as processes."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import gevent
import pandas as pd
import pytest

from avv_core.exit_status import ExitStatus
from tests.builders import numbered_samples, sim_config, sim_vendors, write_inputs, write_jsonl, write_yaml
from tests.fake_vendor import ScriptedAdapter, error_reply, item_of, stream_reply
from tests.glue import make_env, options, run_to_end
from tests.locust_runs import clean_env, only_run_dir, run_locust

pytestmark = pytest.mark.integration  # Locust runs (in-process, and two processes): seconds each

TOOL = {"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
N = 600


def calls_on(number: int) -> bool:
    """The reference calls on 3 samples in 5."""
    return number % 5 < 3


def reply(request):
    """base and good follow the reference; bad does the opposite on 2 samples in 3 (F1 ≈ 0.4); dead answers 401."""
    gevent.sleep(0.002)
    key = item_of(request)
    if key.vendor == "dead":
        return error_reply(401, "invalid api key")
    number = int(key.sample_id[1:])
    calls = calls_on(number) != (key.vendor == "bad" and number % 3 != 0)
    return stream_reply(tool_calls=[("get_weather", {"city": "Paris"})]) if calls else stream_reply("no tool")


def scored(tmp_path, config, samples, *extra: str) -> list[str]:
    """tests/glue.py's options, the run scored at its end (the decision is the scoring's)."""
    return [a for a in options(tmp_path, config, samples, "--avv-no-html", *extra) if a != "--avv-no-score"]


def settle_run(tmp_path, vendors: list[str], *extra: str):
    config, samples = write_inputs(tmp_path, vendors, sample_lines=numbered_samples(N, tools=[TOOL]))
    env, ctl = make_env(scored(tmp_path, config, samples, "--avv-settle", "--avv-settle-seed", "3",
                                "--avv-settle-every", "10", "--avv-concurrency", "4", *extra),
                        adapter=ScriptedAdapter(reply))
    status = run_to_end(env, timeout=240)
    run = json.loads((ctl.run_dir / "run.json").read_text())
    scores = pd.read_csv(ctl.run_dir / "scores.csv").set_index("vendor")
    return status, run["extra"]["settle"]["vendors"], scores


def test_a_good_vendor_settles_pass_under_k2vv_on_a_quarter_of_600_samples(tmp_path):
    status, settled, scores = settle_run(tmp_path, ["base", "good"], "--avv-thresholds", "k2vv", "--avv-strict")
    good = settled["good"]
    assert good["verdict"] == "pass" and good["settled_after"] <= N / 4, good
    assert scores.loc["good", "verdict"] == "PASS" and "settled PASS early" in scores.loc["good", "verdict_reasons"]
    assert scores.loc["good", "items"] <= N / 4 + 8  # what was in flight when it settled, no more
    assert status == ExitStatus.OK  # --avv-strict, and every vendor PASSes


def test_a_clearly_bad_vendor_settles_fail_under_the_default_preset_on_a_quarter(tmp_path):
    status, settled, scores = settle_run(tmp_path, ["base", "bad"], "--avv-strict")
    bad = settled["bad"]
    assert bad["verdict"] == "fail" and bad["settled_after"] <= N / 4, bad
    assert scores.loc["bad", "verdict"] == "FAIL" and scores.loc["bad", "items"] <= N / 4 + 8
    assert status == ExitStatus.VERDICT_FAIL  # --avv-strict


def small_run(tmp_path, vendors: list[str], *extra: str) -> tuple[int, str]:
    tmp_path.mkdir(parents=True, exist_ok=True)
    config, samples = write_inputs(tmp_path, vendors, sample_lines=numbered_samples(40, tools=[TOOL]))
    env, ctl = make_env(scored(tmp_path, config, samples, "--avv-retries", "0", *extra),
                        adapter=ScriptedAdapter(reply))
    return run_to_end(env, timeout=60), str(ctl.run_dir)


def test_harness_exit_statuses_broken_inconclusive_and_allowed(tmp_path, capsys):
    status, _ = small_run(tmp_path / "a", ["base", "dead"])
    assert status == ExitStatus.VENDOR_BROKEN  # without --avv-strict too
    out = capsys.readouterr().out
    # the circuit breaker stops it after 5 refused keys in a row: 6 items sent (one in flight), 34 not sent
    assert "vendor dead (m) is a broken setup, not a verdict: every one of its 6 items failed" in out
    lines = out.rstrip().splitlines()
    closing = next(i for i, line in enumerate(lines) if line.startswith("avv-locust: 46 records"))
    decision = lines.index("Decision (95 % confidence, thresholds avv):")
    assert closing < decision and lines[-1].startswith("report.md: ")  # the answer is printed last
    status, _ = small_run(tmp_path / "b", ["base", "good"], "--avv-strict")
    assert status == ExitStatus.VERDICT_INCONCLUSIVE  # 40 clean items: success ≥ 0.99 is not shown yet
    status, _ = small_run(tmp_path / "c", ["base", "good"], "--avv-strict", "--avv-allow-inconclusive")
    assert status == ExitStatus.OK
    status, _ = small_run(tmp_path / "d", ["base", "good"], "--avv-strict", "--avv-verdict", "point")
    assert status == ExitStatus.OK  # the peers' rule: point values


def test_locust_and_avv_score_as_processes(tmp_path):
    """The shipped commands: `locust … --avv-strict` exits 7 when a vendor FAILs, with the decision block printed;
    `avv-score RUN` exits 0, `--strict` 7, a bad option 2."""
    write_yaml(tmp_path / "vendors.yaml", sim_vendors("m", ["ref", "flips"], "ref"))
    write_yaml(tmp_path / "sim.yaml", sim_config({
        "ref": {"ttft_ms": 5, "tokens_per_s": 2000, "output_tokens": 8, "tool_call_rate": 0.6, "follow_gold": False},
        "flips": {"ttft_ms": 5, "tokens_per_s": 2000, "output_tokens": 8, "tool_call_rate": 0.6, "follow_gold": False,
                  "flip_rate": 0.6, "seed": 4}}))
    write_jsonl(tmp_path / "samples.jsonl", numbered_samples(60, tools=[TOOL]))
    proc = run_locust(["--headless", "--avv-config", "vendors.yaml", "--avv-sim-config", "sim.yaml", "--avv-samples",
                       "samples.jsonl", "--avv-out", "out", "--avv-strict"], cwd=tmp_path)
    assert proc.returncode == ExitStatus.VERDICT_FAIL, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "Decision (95 % confidence, thresholds avv):" in proc.stdout
    assert re.search(r"^  flips +FAIL +", proc.stdout, flags=re.M)
    run_dir = only_run_dir(tmp_path / "out")

    def avv_score(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "avv_scoring.cli", str(run_dir), "--no-html", "-q", *args],
                              cwd=tmp_path, env=clean_env(), capture_output=True, text=True, timeout=120)

    assert avv_score().returncode == ExitStatus.OK
    assert avv_score("--strict").returncode == ExitStatus.VERDICT_FAIL
    assert avv_score("--confidence", "120").returncode == ExitStatus.INPUT
