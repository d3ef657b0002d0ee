"""deploy/kubernetes: the kustomize base and the Job variant render (``kubectl kustomize``), their commands are
docker-compose's (which tests/test_compose.py runs), ports and paths agree with each other and with Locust's, no key
is in a manifest, and the Job variant's commands, with the rendered ConfigMap as their inputs, run a distributed
run to completion as processes on loopback. Security (issue 33, F23, F24; docs/how-to/security.md): every pod runs
as the image's unprivileged user on a read-only root filesystem, the NetworkPolicy admits the master port from
the workers only and the web UI and metrics ports from labelled pods or namespaces only, the web UI has a login,
and the nightly command runs with the code and home read-only."""

from __future__ import annotations

import base64
import copy
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from avv_core.record_file import read_records
from tests.e2e_ports import free_port
from tests.locust_runs import ROOT, clean_env

pytestmark = pytest.mark.integration  # kubectl is a subprocess; the run below is e2e
DEPLOY = ROOT / "deploy" / "kubernetes"
FAKE_KEY = "sk-test-0123456789abcdef"
FAKE_PASSWORD = "web-login-password-0123456789"
#: The flags the web-UI master adds to compose's headless master: the login, the metrics port for Prometheus.
UI_MASTER_FLAGS = ["--web-login", "--avv-metrics-port", "9646", "--avv-metrics-host", "0.0.0.0"]
#: The label that admits a pod, or every pod of a namespace, to the web UI and metrics ports.
UI_ACCESS = {"key": "avv-locust/ui-access", "operator": "In", "values": ["true"]}


#: Each variant's render, made once per module: the manifests do not change while the tests run, and a render is a
#: kubectl process plus parsing its YAML (the tests get a copy each, so none sees another's changes).
_RENDERED: dict[str, dict[tuple[str, str], dict]] = {}


def render(tmp_path: Path, variant: str) -> dict[tuple[str, str], dict]:
    """The rendered objects by (kind, name without kustomize's hash suffix), with a keys.env holding FAKE_KEY."""
    if variant not in _RENDERED:
        _RENDERED[variant] = _kustomize(tmp_path, variant)
    return copy.deepcopy(_RENDERED[variant])


def _kustomize(tmp_path: Path, variant: str) -> dict[tuple[str, str], dict]:
    if shutil.which("kubectl") is None:
        pytest.skip("kubectl is not installed: the kustomize render cannot be checked (install kubectl ≥ 1.14)")
    tree = tmp_path / "kubernetes"
    if not tree.exists():
        shutil.copytree(DEPLOY, tree)
        example = (tree / "base" / "keys.env.example").read_text()
        (tree / "base" / "keys.env").write_text(example + f"reference={FAKE_KEY}\n")
        login = (tree / "base" / "web-login.env.example").read_text()
        (tree / "base" / "web-login.env").write_text(login.replace("PASSWORD=", f"PASSWORD={FAKE_PASSWORD}"))
    proc = subprocess.run(["kubectl", "kustomize", str(tree / variant)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    objects = {}
    for doc in yaml.load_all(proc.stdout, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)):
        name = doc["metadata"]["name"]
        if doc["kind"] in ("ConfigMap", "Secret"):
            name = name.rsplit("-", 1)[0]
        objects[(doc["kind"], name)] = doc
    return objects


def container(obj: dict) -> dict:
    (only,) = obj["spec"]["template"]["spec"]["containers"]
    return only


def compose() -> dict:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]


#: docker-compose's inputs (paths in the image) and where the manifests mount the same files (the ConfigMap).
COMPOSE_TO_K8S = {"${AVV_CONFIG:-configs/demo.yaml}": "/inputs/config.yaml",
                  "${AVV_SAMPLES:-samples/demo.jsonl}": "/inputs/samples.jsonl", "configs/sim.yaml": "/inputs/sim.yaml",
                  "${AVV_WORKERS:-2}": "2", "master": "avv-master"}


def as_k8s(command: list[str]) -> list[str]:
    return [COMPOSE_TO_K8S.get(arg, arg) for arg in command]


def test_base_renders_with_compose_commands_ports_and_paths(tmp_path):
    objs = render(tmp_path, "base")
    assert render(tmp_path, ".").keys() == objs.keys()  # deploy/kubernetes applies the base
    master, worker, sim = (container(objs[("Deployment", f"avv-{n}")]) for n in ("master", "worker", "sim"))
    services = compose()
    # the web-UI master runs compose's headless master command without --headless / --expect-workers
    headless = as_k8s(services["master"]["command"])
    i = headless.index("--expect-workers")
    assert master["command"] == [a for a in headless[:i] + headless[i + 2:] if a != "--headless"] + UI_MASTER_FLAGS
    assert worker["command"] == as_k8s(services["worker"]["command"])
    assert sim["command"] == as_k8s(services["sim"]["command"])
    # ports: Locust's defaults, the containers' and the Service's agree
    from locust.argument_parser import get_parser

    defaults = get_parser().parse_args([])
    service = objs[("Service", "avv-master")]
    assert {p["name"]: p["port"] for p in service["spec"]["ports"]} == {"web": defaults.web_port,
                                                                       "master": defaults.master_bind_port,
                                                                       "metrics": 9646}
    assert {p["name"]: p["containerPort"] for p in master["ports"]} == {"web": 8089, "master": 5557, "metrics": 9646}
    assert service["spec"]["selector"].items() <= objs[("Deployment", "avv-master")]["spec"]["template"]["metadata"][
        "labels"].items()
    # Prometheus scrapes the metrics port: the web UI's /avv/metrics is behind the login
    assert service["metadata"]["annotations"]["prometheus.io/path"] == "/metrics"
    assert service["metadata"]["annotations"]["prometheus.io/port"] == "9646"
    assert worker["command"][worker["command"].index("--master-host") + 1] == service["metadata"]["name"]
    # the simulator's address, as compose gives it
    sim_port = int(sim["command"][sim["command"].index("--port") + 1])
    assert objs[("Service", "avv-sim")]["spec"]["ports"][0]["port"] == sim_port == sim["ports"][0]["containerPort"]
    for c in (master, worker):
        assert {e["name"]: e["value"] for e in c["env"]} == {"AVV_SIM_URL": f"http://avv-sim:{sim_port}"}
        assert services["master"]["environment"]["AVV_SIM_URL"] == f"http://sim:{sim_port}"
    # paths: results on the volume --avv-out names; inputs from the ConfigMap, equal to the repo's demo files
    mounts = {m["name"]: m["mountPath"] for m in master["volumeMounts"]}
    assert mounts["results"] == master["command"][master["command"].index("--avv-out") + 1] == "/results"
    pod = objs[("Deployment", "avv-master")]["spec"]["template"]["spec"]
    claim = next(v for v in pod["volumes"] if v["name"] == "results")["persistentVolumeClaim"]["claimName"]
    assert ("PersistentVolumeClaim", claim) in objs
    data = objs[("ConfigMap", "avv-inputs")]["data"]
    assert data == {"config.yaml": (ROOT / "configs/demo.yaml").read_text(),
                    "samples.jsonl": (ROOT / "samples/demo.jsonl").read_text(),
                    "sim.yaml": (ROOT / "configs/sim.yaml").read_text()}
    for c in (master, worker, sim):
        inputs = [a for a in c["command"] if a.startswith("/inputs/")]
        assert inputs and all(a.removeprefix("/inputs/") in data for a in inputs)
        assert {m["name"]: m["mountPath"] for m in c["volumeMounts"]}["inputs"] == "/inputs"


def test_keys_only_in_the_secret(tmp_path):
    for variant in ("base", "job"):
        objs = render(tmp_path, variant)
        secret = objs[("Secret", "avv-keys")]
        assert base64.b64decode(secret["data"]["reference"]).decode() == FAKE_KEY
        others = yaml.safe_dump_all([o for k, o in objs.items() if k[0] != "Secret"])
        assert FAKE_KEY not in others and base64.b64encode(FAKE_KEY.encode()).decode() not in others
        for (kind, name), obj in objs.items():
            if kind in ("Deployment", "Job") and name != "avv-sim":
                assert container(obj)["envFrom"][0]["secretRef"]["name"] == secret["metadata"]["name"]
    for path in DEPLOY.rglob("*.yaml"):  # the checked-in manifests (not the run's inputs): no literal key
        if path.parent.name != "inputs":
            assert not re.search(r"sk-[A-Za-z0-9-]{8,}|api_key:\s*\S|AVV_WEB_PASSWORD\s*[:=]", path.read_text()), path
    ignored = (ROOT / ".gitignore").read_text().split()
    assert "keys.env" in ignored and "web-login.env" in ignored
    login = render(tmp_path, "base")[("Secret", "avv-web-login")]
    assert base64.b64decode(login["data"]["AVV_WEB_PASSWORD"]).decode() == FAKE_PASSWORD
    others = yaml.safe_dump_all([o for k, o in render(tmp_path, "base").items() if k[0] != "Secret"])
    assert FAKE_PASSWORD not in others


def job_commands(objs: dict) -> tuple[list[str], list[str], list[str], int]:
    master, worker = (objs[("Job", f"avv-{n}")] for n in ("master", "worker"))
    sim = container(objs[("Deployment", "avv-sim")])["command"]
    return container(master)["command"], container(worker)["command"], sim, worker["spec"]["parallelism"]


def test_job_variant_is_the_headless_compose_run(tmp_path):
    objs = render(tmp_path, "job")
    assert ("Deployment", "avv-master") not in objs and ("Deployment", "avv-worker") not in objs
    master, worker, _, parallelism = job_commands(objs)
    assert master[:-4] == as_k8s(compose()["master"]["command"])
    assert master[-4:] == ["--avv-metrics-port", "9646", "--avv-metrics-host", "0.0.0.0"]
    assert worker == as_k8s(compose()["worker"]["command"])
    assert int(master[master.index("--expect-workers") + 1]) == parallelism == objs[("Job", "avv-worker")]["spec"][
        "completions"]
    job = objs[("Job", "avv-master")]["spec"]
    assert job["backoffLimit"] == 0 and job["template"]["spec"]["restartPolicy"] == "Never"
    service = objs[("Service", "avv-master")]
    assert job["template"]["metadata"]["labels"].items() >= service["spec"]["selector"].items()
    assert {"metrics": 9646, "master": 5557}.items() <= {p["name"]: p["port"] for p in service["spec"]["ports"]}.items()
    assert service["metadata"]["annotations"]["prometheus.io/path"] == "/metrics"


@pytest.mark.e2e
def test_job_variant_commands_run_as_processes(tmp_path):
    """The Job's master and workers and the simulator, with the rendered ConfigMap as /inputs, on loopback: the
    master exits 0 with every item recorded by the two workers."""
    objs = render(tmp_path, "job")
    inputs = tmp_path / "inputs"
    inputs.mkdir()
    for name, text in objs[("ConfigMap", "avv-inputs")]["data"].items():
        (inputs / name).write_text(text)
    # the 32 hand-written conversations, as the other process tests run (the 400-sample demo takes minutes)
    (inputs / "samples.jsonl").write_text((ROOT / "samples/demo-conversations.jsonl").read_text())
    vendors = sum(len(model["vendors"]) for model in yaml.safe_load((inputs / "config.yaml").read_text()).values())
    master_cmd, worker_cmd, sim_cmd, parallelism = job_commands(objs)
    sim_port, master_port, metrics_port = free_port(), free_port(), free_port()

    def localise(command: list[str]) -> list[str]:
        mapping = {"/results": str(tmp_path / "results"), "avv-master": "127.0.0.1", "0.0.0.0": "127.0.0.1",
                   "8080": str(sim_port), "9646": str(metrics_port)}
        out = [mapping.get(a, str(inputs / a.removeprefix("/inputs/")) if a.startswith("/inputs/") else a)
               for a in command]
        return [sys.executable, "-m", *out] if out[0] == "locust" else [sys.executable, *out[1:]]

    env = clean_env(AVV_SIM_URL=f"http://127.0.0.1:{sim_port}")
    sim = subprocess.Popen(localise(sim_cmd), cwd=ROOT, stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert "listening on" in sim.stdout.readline()
        master = subprocess.Popen([*localise(master_cmd), "--master-bind-port", str(master_port), "--avv-no-score"],
                                  cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        workers = [subprocess.Popen([*localise(worker_cmd), "--master-port", str(master_port)], cwd=ROOT, env=env,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for _ in range(parallelism)]
        _, err = master.communicate(timeout=180)
        assert master.returncode == 0, err[-3000:]
        assert [w.wait(timeout=30) for w in workers] == [0] * parallelism
    finally:
        sim.terminate()
        sim.wait(timeout=10)
    (run_dir,) = list((tmp_path / "results").iterdir())
    frame = read_records(run_dir / "records.csv")
    assert len(frame) == vendors * 32 and frame["worker"].nunique() == parallelism


def test_nightly_cronjob_appends_to_the_history_on_the_results_volume(tmp_path):
    objs = render(tmp_path, "nightly")
    assert ("Deployment", "avv-master") not in objs and ("Deployment", "avv-worker") not in objs
    cron = objs[("CronJob", "avv-nightly")]["spec"]
    assert cron["concurrencyPolicy"] == "Forbid" and cron["jobTemplate"]["spec"]["backoffLimit"] == 0
    pod = cron["jobTemplate"]["spec"]["template"]["spec"]
    (run,) = pod["containers"]
    command = run["command"]
    master, _, _, _ = job_commands(render(tmp_path, "job"))
    # the Job master's inputs and results, one process with forked workers, and the history on the results volume
    for flag in ("--avv-config", "--avv-samples", "--avv-out"):
        assert command[command.index(flag) + 1] == master[master.index(flag) + 1]
    history = command[command.index("--avv-history") + 1]
    mounts = {m["name"]: m["mountPath"] for m in run["volumeMounts"]}
    assert history.startswith(mounts["results"] + "/") and "--headless" in command and "--processes" in command
    import argparse

    from avv_harness.run.options import add_arguments

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    parsed, unknown = parser.parse_known_args(command[3:])
    assert parsed.avv_history == history and parsed.avv_out == "/results"
    assert run["envFrom"][0]["secretRef"]["name"] == objs[("Secret", "avv-keys")]["metadata"]["name"]


# ------------------------------------------------------------------ security (issue 33: F23, F24)


def pods(objs: dict) -> dict[str, dict]:
    """Every pod template of a rendered variant, by its object's name."""
    out = {}
    for (kind, name), obj in objs.items():
        if kind in ("Deployment", "Job"):
            out[name] = obj["spec"]["template"]["spec"]
        elif kind == "CronJob":
            out[name] = obj["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    return out


def image_uid() -> int:
    """The Dockerfile's ``USER uid:gid`` (numeric: runAsNonRoot can check only a number)."""
    (user,) = re.findall(r"^USER\s+(\S+)\s*$", (ROOT / "Dockerfile").read_text(), re.MULTILINE)
    uid, gid = user.split(":")
    assert uid.isdigit() and gid.isdigit() and int(uid) > 0, user
    return int(uid)


@pytest.mark.parametrize("variant", ["base", "job", "nightly"])
def test_every_pod_runs_non_root_on_a_read_only_root_filesystem(tmp_path, variant):
    found = pods(render(tmp_path, variant))
    assert found
    for name, pod in found.items():
        security = pod["securityContext"]
        assert security["runAsNonRoot"] is True and security["runAsUser"] == image_uid(), name
        assert security["seccompProfile"] == {"type": "RuntimeDefault"} and pod["automountServiceAccountToken"] is False
        volumes = {v["name"]: v for v in pod["volumes"]}
        assert "emptyDir" in volumes["tmp"], name
        if "results" in volumes:  # the results volume is writable by the pod's group
            assert security["fsGroup"] == security["runAsGroup"], name
        for c in pod["containers"]:
            assert c["securityContext"] == {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                                            "capabilities": {"drop": ["ALL"]}}, (name, c["name"])
            mounts = {m["name"]: m["mountPath"] for m in c["volumeMounts"]}
            assert mounts["tmp"] == "/tmp", name  # the only writable paths: /tmp, and /results where mounted
            assert set(mounts) <= {"tmp", "inputs", "results"}, name


def test_the_network_policy_admits_each_master_port_only_from_whom_it_names(tmp_path):
    for variant in ("base", "job"):
        objs = render(tmp_path, variant)
        policy = objs[("NetworkPolicy", "avv-master-port")]["spec"]
        assert policy["policyTypes"] == ["Ingress"]
        selected = policy["podSelector"]["matchLabels"].items()
        masters = [p for (kind, name), p in objs.items() if kind in ("Deployment", "Job") and name == "avv-master"]
        assert masters and all(selected <= m["spec"]["template"]["metadata"]["labels"].items() for m in masters)
        rules = {tuple(sorted(p["port"] for p in rule["ports"])): rule["from"] for rule in policy["ingress"]}
        assert set(rules) == {(5557,), (8089, 9646)}  # every rule names its sources: no port is open to all
        (workers,) = rules[(5557,)]
        assert workers["podSelector"]["matchLabels"]["app.kubernetes.io/component"] == "worker"
        # the UI and metrics: a labelled pod (this namespace) or any pod of a labelled namespace, and no other
        # label: kustomize's common labels would admit only avv-locust's own pods
        assert rules[(8089, 9646)] == [{"podSelector": {"matchExpressions": [UI_ACCESS]}},
                                       {"namespaceSelector": {"matchExpressions": [UI_ACCESS]}}]
        for master in masters:
            (c,) = master["spec"]["template"]["spec"]["containers"]
            assert {p["containerPort"] for p in c["ports"]} <= {5557, 8089, 9646}
            command = c["command"]
            if "--avv-metrics-port" in command:  # reachable by Prometheus in the pod network: host 0.0.0.0
                assert command[command.index("--avv-metrics-host") + 1] == "0.0.0.0"
                assert command[command.index("--avv-metrics-port") + 1] == "9646"


def test_the_web_ui_master_logs_in_with_the_password_from_its_own_secret(tmp_path):
    objs = render(tmp_path, "base")
    (master,) = objs[("Deployment", "avv-master")]["spec"]["template"]["spec"]["containers"]
    assert "--web-login" in master["command"] and "--headless" not in master["command"]
    secrets = [e["secretRef"]["name"] for e in master["envFrom"]]
    assert objs[("Secret", "avv-web-login")]["metadata"]["name"] in secrets
    (worker,) = objs[("Deployment", "avv-worker")]["spec"]["template"]["spec"]["containers"]
    assert objs[("Secret", "avv-web-login")]["metadata"]["name"] not in [e["secretRef"]["name"]
                                                                         for e in worker["envFrom"]]
    from avv_harness.locust.web_login import MIN_PASSWORD, PASSWORD_ENV

    example = (DEPLOY / "base" / "web-login.env.example").read_text()
    assert f"{PASSWORD_ENV}=\n" in example  # empty: the password is yours, never in the repository
    assert len(FAKE_PASSWORD) >= MIN_PASSWORD


def test_the_nightly_run_keeps_its_forked_workers_port_on_loopback(tmp_path):
    (run,) = pods(render(tmp_path, "nightly"))["avv-nightly"]["containers"]
    command = run["command"]
    assert command[command.index("--master-bind-host") + 1] == "127.0.0.1"


@pytest.mark.e2e
def test_the_nightly_command_runs_with_the_code_and_home_read_only(tmp_path):
    """readOnlyRootFilesystem, as far as this machine can show it: the CronJob's command (a whole run with forked
    workers, scoring, report.html and --avv-history) in a mount namespace where the code, the environment and
    the home folder are read-only bind mounts; it writes only its results folder and its temporary folder."""
    objs = render(tmp_path, "nightly")
    (run,) = pods(objs)["avv-nightly"]["containers"]
    inputs, results, scratch = tmp_path / "inputs", tmp_path / "results", tmp_path / "tmp"
    for folder in (inputs, results, scratch):
        folder.mkdir()
    for name, text in objs[("ConfigMap", "avv-inputs")]["data"].items():
        (inputs / name).write_text(text)
    # the 32 hand-written conversations, as the other process tests run (the 400-sample demo takes minutes)
    (inputs / "samples.jsonl").write_text((ROOT / "samples/demo-conversations.jsonl").read_text())
    mapping = {"/results": str(results), "/results/history.sqlite": str(results / "history.sqlite")}
    command = [mapping.get(a, str(inputs / a.removeprefix("/inputs/")) if a.startswith("/inputs/") else a)
               for a in run["command"]]
    read_only = [str(ROOT), str(Path(sys.prefix).resolve()), str(Path(sys.base_prefix).resolve()), str(Path.home())]
    mounts = " && ".join(f"mount -o bind,ro '{p}' '{p}'" for p in dict.fromkeys(read_only))
    script = f"{mounts} && cd '{ROOT}' && exec \"$@\""
    probe = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", f"{mounts} && true"],
                           capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.skip(f"cannot make read-only bind mounts here ({probe.stderr.strip() or 'not root'})")
    env = clean_env(html=True, HOME=str(Path.home()), MPLCONFIGDIR=str(scratch / "matplotlib"), TMPDIR=str(scratch),
                    PYTHONDONTWRITEBYTECODE="1")
    proc = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", script, "sh", sys.executable,
                           "-m", *command[:1], *command[1:], "--avv-start-jitter-s", "0"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Read-only file system" not in proc.stderr
    (run_dir,) = [p for p in results.iterdir() if p.is_dir()]
    assert {"records.csv", "scores.csv", "report.html"} <= {p.name for p in run_dir.iterdir()}
    assert (results / "history.sqlite").is_file() and f"history: run {run_dir.name} added to" in proc.stdout
