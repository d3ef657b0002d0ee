"""The avv-sim program: config loading and validation, the ready line, clean shutdown, the launcher."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests

from avv_sim import Profile, ProfileError, load_profiles, start_simulator
from avv_sim.launcher import SimulatorError
from avv_sim.plan import make_plan
from avv_sim.profiles import KNOBS
from tests.builders import chat_body
from tests.sim_records import truth_lines

ROOT = Path(__file__).resolve().parent.parent
CONFIG = ROOT / "configs" / "sim.yaml"
READY = re.compile(r"^avv-sim listening on (http://127\.0\.0\.1:(\d+)) \(profiles: (.*)\)$")


def run_cli(*args: str, timeout: float = 10) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "avv_sim", *args], capture_output=True, text=True, timeout=timeout, cwd=ROOT
    )


def spawn(*args: str) -> tuple[subprocess.Popen, re.Match]:
    cmd = [shutil.which("avv-sim") or sys.executable, *([] if shutil.which("avv-sim") else ["-m", "avv_sim"])]
    proc = subprocess.Popen([*cmd, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    line = proc.stdout.readline().rstrip("\n")
    m = READY.match(line)
    if m is None:
        proc.kill()
        pytest.fail(f"no ready line: {line!r} {proc.stderr.read()}")
    return proc, m


def test_shipped_config_loads_with_the_documented_profiles() -> None:
    profiles = load_profiles(CONFIG)
    assert {"reference", "faithful", "flaky", "reasoner", "limited", "queued", "secured"} <= set(profiles)
    assert profiles["secured"].api_key and profiles["limited"].over_limit == "429"
    assert profiles["queued"].over_limit == "queue" and profiles["flaky"].flip_rate > 0
    assert profiles["reasoner"].reasoning_tokens > 0
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
    for i in range(50):
        b = chat_body(f"q{i}", tools, model=None)
        ref, faithful = make_plan(profiles["reference"], b, 1), make_plan(profiles["faithful"], b, 1)
        assert ref.decision == faithful.decision
    for p in profiles.values():  # a demo of ~30 samples must stay quick
        assert p.ttft_ms <= 500 and p.output_tokens / p.tokens_per_s <= 2


@pytest.mark.integration  # starts the simulator as a process
def test_unknown_knob_exits_2_naming_profile_and_knob(tmp_path) -> None:
    cfg = tmp_path / "bad.yaml"
    cfg.write_text("profiles:\n  good: {ttft_ms: 10}\n  broken:\n    ttft_ms: 10\n    tokens_per_sec: 5\n")
    res = run_cli("--config", str(cfg), "--port", "0")
    assert res.returncode == 2
    assert "'broken'" in res.stderr and "'tokens_per_sec'" in res.stderr and res.stdout == ""
    with pytest.raises(ProfileError, match="tokens_per_sec"):
        load_profiles(cfg)


@pytest.mark.parametrize(
    "knobs, needle",
    [
        ({"flip_rate": 1.5}, "flip_rate"),
        ({"tokens_per_s": 0}, "tokens_per_s"),
        ({"over_limit": "drop"}, "over_limit"),
        ({"quirks": ["nonsense"]}, "nonsense"),
        ({"omit_usage": "yes"}, "omit_usage"),
        ({"error_rate": 0.6, "truncate_rate": 0.6}, "must not exceed 1"),
    ],
)
def test_bad_values_are_rejected(knobs: dict, needle: str) -> None:
    with pytest.raises(ProfileError, match=needle):
        load_profiles({"p": knobs})


def test_defaults_section_and_yaml_number_forms(tmp_path) -> None:
    cfg = tmp_path / "sim.yaml"
    cfg.write_text("defaults: {ttft_ms: 7, seed: 3}\nprofiles:\n  a: {}\n  b: {seed: 4, tokens_per_s: 1e6}\n  c:\n")
    profiles = load_profiles(cfg)
    assert [p.ttft_ms for p in profiles.values()] == [7, 7, 7]
    assert [p.seed for p in profiles.values()] == [3, 4, 3] and profiles["b"].tokens_per_s == 1e6
    for text, needle in (
        ("profiles: {}\n", "non-empty"),
        ("profile: {a: {}}\n", "'profile'"),
        ("profiles: {'bad name': {}}\n", "URL path segment"),
    ):
        cfg.write_text(text)
        with pytest.raises(ProfileError, match=needle):
            load_profiles(cfg)


def test_profile_defaults_match_the_issue() -> None:
    p = Profile()
    assert (p.ttft_ms, p.ttft_jitter_ms, p.tokens_per_s, p.tokens_per_chunk, p.output_tokens) == (200, 0, 50, 1, 64)
    assert (p.tool_call_rate, p.flip_rate, p.bad_args_rate, p.parallel_rate) == (0.6, 0, 0, 0.2)
    assert (p.error_rate, p.error_status, p.rate_limit_rate, p.retry_after_s) == (0, 500, 0, 1)
    assert p.max_concurrency is None and p.over_limit == "429" and p.seed == 0 and p.api_key is None
    assert p.quirks == () and "quirks" in KNOBS and "name" not in KNOBS


@pytest.mark.integration  # starts the simulator as a process
def test_cli_flags_define_a_profile_and_sigterm_flushes_truth(tmp_path) -> None:
    truth = tmp_path / "truth.jsonl"
    proc, m = spawn(
        "--profile",
        "solo",
        "--set",
        "ttft_ms=5",
        "--set",
        "tokens_per_s=1000",
        "--set",
        "api_key=sk-x",
        "--port",
        "0",
        "--truth-log",
        str(truth),
    )
    try:
        assert m.group(3) == "solo"
        url = f"{m.group(1)}/solo/v1/chat/completions"
        body = chat_body("hi", model="solo")
        assert requests.post(url, json=body, timeout=5).status_code == 401
        ok = requests.post(url, json=body, headers={"Authorization": "Bearer sk-x"}, timeout=5)
        assert ok.status_code == 200 and ok.json()["usage"]["completion_tokens"] == 64
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
    lines = truth_lines(truth)
    assert [r["http_status"] for r in lines] == [401, 200]


@pytest.mark.integration  # starts the simulator as a process
def test_config_serves_every_profile_and_sigint_exits_cleanly() -> None:
    t0 = time.monotonic()
    proc, m = spawn("--config", str(CONFIG), "--port", "0")
    startup = time.monotonic() - t0
    try:
        names = m.group(3).split(", ")
        assert names == list(load_profiles(CONFIG))
        for name in names:
            resp = requests.get(
                f"{m.group(1)}/{name}/v1/models", timeout=5, headers={"Authorization": "Bearer sk-sim-secret"}
            )
            assert resp.status_code == 200, name
    finally:
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=10) == 0
    assert startup < 3.0  # typically ~0.5 s; generous for a shared CI machine


@pytest.mark.integration  # starts the simulator as a process
def test_set_overrides_every_profile_of_a_config() -> None:
    proc, m = spawn("--config", str(CONFIG), "--port", "0", "--set", "model=override-model")
    try:
        resp = requests.get(f"{m.group(1)}/reference/v1/models", timeout=5)
        assert resp.json()["data"][0]["id"] == "override-model"
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    res = run_cli("--profile", "x", "--set", "bogus=1")
    assert res.returncode == 2 and "'bogus'" in res.stderr
    assert run_cli().returncode == 2


@pytest.mark.integration  # starts the simulator as a process
def test_launcher_reports_startup_failure_with_stderr() -> None:
    with pytest.raises(ProfileError, match="'nope'"):
        start_simulator(profiles={"p": {"nope": 1}})  # validated in-process, before any subprocess
    with pytest.raises(ValueError):
        start_simulator()
    with pytest.raises(SimulatorError, match="exited with status 2") as info:
        start_simulator(ROOT / "does-not-exist.yaml", timeout=10)
    assert "cannot read" in str(info.value)


@pytest.mark.integration  # starts the simulator as a process
def test_launcher_object(tmp_path) -> None:
    with start_simulator(profiles={"a": {"ttft_ms": 1}, "b": Profile(name="b", ttft_ms=1)}) as sim:
        assert sim.profiles == ["a", "b"] and sim.running()
        assert sim.base_url("b") == f"http://127.0.0.1:{sim.port}/b/v1"
        assert requests.get(f"{sim.url}/health", timeout=5).json()["profiles"] == ["a", "b"]
        pid = sim.pid
    assert not sim.running() and sim.process.returncode == 0
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
