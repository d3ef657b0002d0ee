"""docker-compose.yml: valid offline, and the commands it runs work when run here as processes; every container
runs as the image's unprivileged user on a read-only root filesystem (issue 33, F23)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys

import pytest
import yaml

from avv_core.record_file import read_records
from tests.e2e_ports import free_port
from tests.locust_runs import ROOT, clean_env

pytestmark = pytest.mark.e2e


def compose_config() -> dict:
    if shutil.which("docker-compose") is None:
        pytest.skip("docker-compose is not installed (.ci/run installs Debian's package)")
    # the 32 hand-written conversations, as the other process tests run (the 400-sample demo takes minutes)
    proc = subprocess.run(["docker-compose", "-f", "docker-compose.yml", "config"], cwd=ROOT, capture_output=True,
                          text=True, timeout=60, env=clean_env(AVV_SAMPLES="samples/demo-conversations.jsonl"))
    assert proc.returncode == 0, proc.stderr
    return yaml.safe_load(proc.stdout)


def test_compose_file_is_valid_and_wires_the_demo():
    services = compose_config()["services"]
    assert set(services) == {"sim", "master", "worker"}
    assert services["master"]["environment"]["AVV_SIM_URL"] == "http://sim:8080"
    assert "results:/results" in services["master"]["volumes"][0]
    assert services["master"]["command"][:3] == ["locust", "-f", "locustfiles/vendors.py"]
    assert services["worker"]["command"][:3] == ["locust", "-f", "locustfiles/vendors.py"]
    assert (ROOT / "Dockerfile").exists()


def test_compose_commands_run_as_processes(tmp_path):
    services = compose_config()["services"]
    sim_port, master_port = free_port(), free_port()

    def localise(command: list[str]) -> list[str]:
        out = []
        for arg in command:
            arg = {"/results": str(tmp_path / "results"), "master": "127.0.0.1", "0.0.0.0": "127.0.0.1",
                   "8080": str(sim_port)}.get(arg, arg)
            out.append(arg)
        if out[0] == "locust":
            out = [sys.executable, "-m", "locust", *out[1:]]
        elif out[0] == "python":
            out = [sys.executable, *out[1:]]
        return out

    env = clean_env(AVV_SIM_URL=f"http://127.0.0.1:{sim_port}")
    sim = subprocess.Popen(localise(services["sim"]["command"]), cwd=ROOT, stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert "listening on" in sim.stdout.readline()
        master_cmd = [*localise(services["master"]["command"]), "--master-bind-port", str(master_port),
                      "--avv-no-score"]
        worker_cmd = localise(services["worker"]["command"]) + ["--master-port", str(master_port)]
        master = subprocess.Popen(master_cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                  text=True)
        workers = [subprocess.Popen(worker_cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL) for _ in range(2)]
        _, err = master.communicate(timeout=180)
        assert master.returncode == 0, err[-3000:]
        assert [w.wait(timeout=30) for w in workers] == [0, 0]
    finally:
        sim.terminate()
        sim.wait(timeout=10)
    (run_dir,) = list((tmp_path / "results").iterdir())
    frame = read_records(run_dir / "records.csv")
    vendors = sum(len(model["vendors"]) for model in yaml.safe_load((ROOT / "configs/demo.yaml").read_text()).values())
    assert len(frame) == vendors * 32 and frame["worker"].nunique() == 2


def test_the_image_has_an_unprivileged_numeric_user_that_owns_results_only():
    dockerfile = (ROOT / "Dockerfile").read_text()
    (user,) = re.findall(r"^USER\s+(\S+)\s*$", dockerfile, re.MULTILINE)
    uid, gid = user.split(":")
    assert uid.isdigit() and gid.isdigit() and int(uid) >= 1000, user  # numeric: runAsNonRoot can check it
    lines = dockerfile.splitlines()
    assert lines.index(f"USER {user}") > max(i for i, line in enumerate(lines) if line.startswith(("RUN", "COPY")))
    assert f"--uid {uid}" in dockerfile and f"chown {uid}:{gid} /results" in dockerfile
    assert "PYTHONDONTWRITEBYTECODE=1" in dockerfile and "MPLCONFIGDIR=/tmp/" in dockerfile  # nothing else to write


def test_every_service_is_hardened_and_the_web_port_stays_on_this_machine():
    services = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]
    for name, service in services.items():
        assert service["read_only"] is True and service["tmpfs"] == ["/tmp"], name
        assert service["cap_drop"] == ["ALL"] and "no-new-privileges:true" in service["security_opt"], name
        assert "user" not in service or service["user"] != "root", name
    assert services["master"]["ports"] == ["127.0.0.1:8089:8089"]
    assert all("ports" not in s for n, s in services.items() if n != "master")
