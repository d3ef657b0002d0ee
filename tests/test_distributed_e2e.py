"""End to end: Locust master + workers as real processes; exactly-once items; a worker killed mid-run."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from avv_core.record_file import read_records
from avv_sim.tls import can_make_certificate, make_certificate
from tests.builders import sim_config, sim_vendors, write_yaml
from tests.e2e_ports import free_port
from tests.locust_runs import DEMO_SAMPLES, clean_env, locust_cmd, only_run_dir, run_locust
from tests.test_lean_tls import each_vendor_is_checked_as_its_config_says, run_with_tls_vendors

pytestmark = pytest.mark.e2e

PROFILES = {
    "ref": {"ttft_ms": 60, "tokens_per_s": 200, "output_tokens": 16, "tool_call_rate": 0.6},
    "alt": {"ttft_ms": 40, "tokens_per_s": 300, "output_tokens": 16, "flip_rate": 0.2, "bad_args_rate": 0.2,
            "error_rate": 0.1, "seed": 4},
}
COMPARED = ["vendor", "sample_id", "repeat", "status", "error_kind", "finish_reason", "tool_calls",
            "completion_tokens", "attempts"]


def setup(work: Path, concurrency: int = 2, **profile_overrides) -> list[str]:
    profiles = {name: {**p, **profile_overrides} for name, p in PROFILES.items()}
    write_yaml(work / "sim.yaml", sim_config(profiles))
    per_vendor = {name: {"concurrency": concurrency} for name in PROFILES}
    write_yaml(work / "vendors.yaml", sim_vendors("m", list(PROFILES), "ref", **per_vendor))
    return ["--avv-config", "vendors.yaml", "--avv-sim-config", "sim.yaml", "--avv-samples", str(DEMO_SAMPLES),
            "--avv-out", "out", "--avv-no-score", "--avv-backoff-s", "0.05"]


def item_table(run_dir: Path):
    frame = read_records(run_dir / "records.csv")
    keys = list(zip(frame["vendor"], frame["sample_id"], frame["repeat"], strict=True))
    assert len(keys) == len(set(keys)), "an item was recorded twice"
    return frame, {tuple(str(x) for x in row) for row in frame[COMPARED].astype(str).itertuples(index=False)}


@pytest.fixture(scope="module")
def local_run(tmp_path_factory):
    work = tmp_path_factory.mktemp("local")
    proc = run_locust(["--headless", *setup(work)], cwd=work)
    assert proc.returncode == 0, proc.stderr[-3000:]
    frame, items = item_table(only_run_dir(work / "out"))
    assert len(frame) == 64
    return items


def start(args: list[str], cwd: Path, log: str) -> subprocess.Popen:
    return subprocess.Popen(locust_cmd(*args), cwd=cwd, env=clean_env(), stdout=open(cwd / log, "w"),
                            stderr=subprocess.STDOUT)


def test_master_and_two_workers_equal_a_local_run(tmp_path, local_run):
    args = setup(tmp_path)
    port = free_port()
    master = start(["--headless", "--master", "--expect-workers", "2", "--master-bind-port", str(port), *args],
                   tmp_path, "master.log")
    workers = [start(["--worker", "--master-port", str(port), *args], tmp_path, f"w{i}.log") for i in (1, 2)]
    assert master.wait(timeout=180) == 0, (tmp_path / "master.log").read_text()[-3000:]
    assert [w.wait(timeout=30) for w in workers] == [0, 0]
    frame, items = item_table(only_run_dir(tmp_path / "out"))
    assert items == local_run
    assert frame["worker"].nunique() == 2  # both workers did work
    run = json.loads((only_run_dir(tmp_path / "out") / "run.json").read_text())
    assert run["completed"] is True and run["locust"]["role"] == "master"


def test_processes_two_equals_a_local_run(tmp_path, local_run):
    proc = run_locust(["--headless", "--processes", "2", *setup(tmp_path)], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    frame, items = item_table(only_run_dir(tmp_path / "out"))
    assert items == local_run and frame["worker"].nunique() == 2


@pytest.mark.skipif(not can_make_certificate(), reason="no openssl to make a certificate")
def test_workers_check_each_vendors_certificate_as_its_tls_verify_says(tmp_path):
    """A vendor's tls_verify reaches the workers as every vendor key does (each process reads the config; a relative
    CA path from the config file's folder): the users, all on workers, trust the vendor's CA or check nothing."""
    proc, run_dir = run_with_tls_vendors(make_certificate(tmp_path / "tls"), tmp_path, "--processes", "2")
    each_vendor_is_checked_as_its_config_says(proc, run_dir, tmp_path)
    assert json.loads((run_dir / "run.json").read_text())["locust"]["role"] == "master"


def test_worker_killed_mid_run_every_item_exactly_once(tmp_path):
    args = setup(tmp_path, concurrency=2, ttft_ms=150, output_tokens=12, error_rate=0.0)
    port = free_port()
    master = start(["--headless", "--master", "--expect-workers", "2", "--master-bind-port", str(port),
                    "--avv-repeats", "2", *args], tmp_path, "master.log")
    victim = start(["--worker", "--master-port", str(port), *args], tmp_path, "victim.log")
    survivor = start(["--worker", "--master-port", str(port), *args], tmp_path, "survivor.log")
    records = None
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # kill once the victim has finished some items and holds others
        runs = list((tmp_path / "out").glob("*/records.csv")) if (tmp_path / "out").exists() else []
        if runs and len(runs[0].read_text().splitlines()) > 30:
            records = runs[0]
            break
        time.sleep(0.2)
    assert records is not None, (tmp_path / "master.log").read_text()[-2000:]
    victim.send_signal(signal.SIGKILL)
    assert master.wait(timeout=180) == 0, (tmp_path / "master.log").read_text()[-3000:]
    survivor.wait(timeout=30)
    frame, items = item_table(records.parent)
    assert len(frame) == 2 * 2 * 32  # 2 vendors × 32 samples × 2 repeats, each exactly once
    assert (frame["status"] == "success").all()
    master_log = (tmp_path / "master.log").read_text()
    assert "handed out again" in master_log
    run = json.loads((records.parent / "run.json").read_text())
    assert run["completed"] is True and run["items_requeued"] >= 1


NETNS_OK = os.geteuid() == 0 and shutil.which("ip") is not None


def _sh(*cmd: str) -> None:
    subprocess.run(cmd, check=True, capture_output=True)


@pytest.fixture
def netns_hosts():
    """Four hosts (sim, master, w1, w2) on a private bridge, each in its own network namespace."""
    if not NETNS_OK:
        pytest.skip("needs root and iproute2 to create network namespaces")
    tag = f"avv{os.getpid() % 10000}"
    hosts = {"sim": "10.231.0.2", "master": "10.231.0.3", "w1": "10.231.0.4", "w2": "10.231.0.5"}
    hub = f"{tag}hub"
    try:
        _sh("ip", "netns", "add", hub)
    except subprocess.CalledProcessError as exc:
        pytest.skip(f"cannot create network namespaces here: {exc.stderr.decode().strip()}")
    try:
        _sh("ip", "netns", "exec", hub, "ip", "link", "add", "br0", "type", "bridge")
        _sh("ip", "netns", "exec", hub, "ip", "link", "set", "br0", "up")
        for i, (name, addr) in enumerate(hosts.items()):
            ns = f"{tag}{name}"
            _sh("ip", "netns", "add", ns)
            _sh("ip", "link", "add", f"{tag}v{i}", "type", "veth", "peer", "name", f"{tag}p{i}")
            _sh("ip", "link", "set", f"{tag}v{i}", "netns", ns)
            _sh("ip", "link", "set", f"{tag}p{i}", "netns", hub)
            _sh("ip", "netns", "exec", hub, "ip", "link", "set", f"{tag}p{i}", "master", "br0", "up")
            _sh("ip", "netns", "exec", ns, "ip", "addr", "add", f"{addr}/24", "dev", f"{tag}v{i}")
            _sh("ip", "netns", "exec", ns, "ip", "link", "set", f"{tag}v{i}", "up")
            _sh("ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up")
        yield {name: (f"{tag}{name}", addr) for name, addr in hosts.items()}
    finally:
        for name in [*hosts, "hub"]:
            subprocess.run(["ip", "netns", "del", f"{tag}{name}"], capture_output=True)


def test_master_workers_and_simulator_on_separate_hosts(tmp_path, netns_hosts, local_run):
    import sys

    args = setup(tmp_path)
    sim_ns, sim_addr = netns_hosts["sim"]
    master_ns, master_addr = netns_hosts["master"]
    # a simulator started on its own reads the samples' gold itself (the embedded one gets it from the harness)
    sim = subprocess.Popen(["ip", "netns", "exec", sim_ns, sys.executable, "-m", "avv_sim", "--config", "sim.yaml",
                            "--host", sim_addr, "--port", "8080", "--gold", str(DEMO_SAMPLES)], cwd=tmp_path,
                           stdout=subprocess.PIPE, text=True)
    try:
        assert "listening on" in sim.stdout.readline()
        env = clean_env(AVV_SIM_URL=f"http://{sim_addr}:8080")

        def host(name: str, extra: list[str], log: str) -> subprocess.Popen:
            return subprocess.Popen(["ip", "netns", "exec", netns_hosts[name][0], *locust_cmd(*extra, *args)],
                                    cwd=tmp_path, env=env, stdout=open(tmp_path / log, "w"), stderr=subprocess.STDOUT)

        master = host("master", ["--headless", "--master", "--expect-workers", "2"], "master.log")
        workers = [host(w, ["--worker", "--master-host", master_addr], f"{w}.log") for w in ("w1", "w2")]
        assert master.wait(timeout=180) == 0, (tmp_path / "master.log").read_text()[-3000:]
        assert [w.wait(timeout=30) for w in workers] == [0, 0]
    finally:
        sim.terminate()
        sim.wait(timeout=10)
    frame, items = item_table(only_run_dir(tmp_path / "out"))
    assert items == local_run and frame["worker"].nunique() == 2
