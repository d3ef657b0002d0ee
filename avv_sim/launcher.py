"""Start the simulator as a subprocess and wait until it accepts connections.

The harness runs under gevent monkey-patching, so the server never runs in-process: we start
``sys.executable -m avv_sim`` and read its stdout until the ready line. Only ``subprocess``, ``threading``
and ``queue`` are used here, which gevent patches cooperatively.
"""

from __future__ import annotations

import atexit
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import IO
from urllib.parse import urlsplit

import yaml

from avv_core.json_types import JSONMapping
from avv_sim.profiles import Profile, load_profiles

READY_RE = re.compile(r"avv-sim listening on (https?://(\S+?):(\d+)) \(profiles: (.*)\)")
_STDERR_KEEP = 64 * 1024


class SimulatorError(RuntimeError):
    """The simulator did not start (bad config, port in use, timeout)."""


class SimProcess:
    """A running simulator subprocess."""

    def __init__(
        self,
        proc: subprocess.Popen,
        url: str,
        profiles: list[str],
        truth_log: str | None,
        tmpdir: str | None,
        stderr_buf: list[str],
    ):
        self.process = proc
        self.url = url
        parsed = urlsplit(url)
        self.host = parsed.hostname or "127.0.0.1"
        self.port = parsed.port or 0
        self.profiles = profiles
        self.truth_log = truth_log
        self._tmpdir = tmpdir
        self._stderr = stderr_buf
        atexit.register(self.stop)

    @property
    def pid(self) -> int:
        return self.process.pid

    def base_url(self, profile: str) -> str:
        """OpenAI base URL of one profile, e.g. ``http://127.0.0.1:PORT/reference/v1``."""
        return f"{self.url}/{profile}/v1"

    def stderr_text(self) -> str:
        return "".join(self._stderr)

    def running(self) -> bool:
        return self.process.poll() is None

    def stop(self, timeout: float = 5.0) -> int | None:
        """SIGTERM, wait up to ``timeout`` s, then SIGKILL. Returns the exit status. Idempotent."""
        proc = self.process
        if proc.poll() is None:
            try:
                proc.send_signal(signal.SIGTERM)
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout)
            except ProcessLookupError:
                pass
        if self._tmpdir:
            shutil.rmtree(self._tmpdir, ignore_errors=True)
            self._tmpdir = None
        atexit.unregister(self.stop)
        return proc.returncode

    def __enter__(self) -> SimProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"SimProcess(url={self.url!r}, pid={self.pid}, profiles={self.profiles})"


def _drain_stdout(stream: IO[str], lines: queue.Queue) -> None:
    """Hand the first lines to the starter, then keep reading so the child never blocks on a full pipe."""
    for line in iter(stream.readline, ""):
        lines.put(line)
    lines.put(None)


def _drain_stderr(stream: IO[str], keep: list[str]) -> None:
    for line in iter(stream.readline, ""):
        keep.append(line)
        while sum(len(x) for x in keep) > _STDERR_KEEP and len(keep) > 1:
            keep.pop(0)


def _child_env() -> dict[str, str]:
    """The parent's environment, with this package importable even when it is not installed."""
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parent.parent)
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def _write_config(profiles: JSONMapping) -> tuple[str, str]:
    knobs = {name: (p.to_knobs() if isinstance(p, Profile) else dict(p or {})) for name, p in profiles.items()}
    load_profiles({"profiles": knobs})  # fail fast, in this process, on a bad knob
    tmpdir = tempfile.mkdtemp(prefix="avv-sim-")
    path = os.path.join(tmpdir, "sim.yaml")
    with open(path, "w", encoding="utf-8") as fh:
        yaml.safe_dump({"profiles": knobs}, fh, sort_keys=False)
    return tmpdir, path


def _die_with_parent() -> None:
    """Linux: SIGTERM the simulator when the process that started it dies (even by SIGKILL).
    ``AVV_SIM_CPUS`` (e.g. ``1``) pins the simulator to those CPUs, to keep it off the load generator's."""
    cpus = os.environ.get("AVV_SIM_CPUS", "")
    if cpus and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {int(c) for c in cpus.split(",") if c.strip()})
    try:
        import ctypes
        import signal

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except Exception:  # not Linux: the parent's stop() is the only cleanup
        pass


def start_simulator(
    config_path: str | os.PathLike[str] | None = None,
    *,
    profiles: JSONMapping | None = None,
    truth_log: str | os.PathLike[str] | None = None,
    port: int = 0,
    timeout: float = 10.0,
    host: str = "127.0.0.1",
    gold: str | os.PathLike[str] | None = None,
    sets: Sequence[str] = (),
    tls: tuple[str, str] | None = None,
) -> SimProcess:
    """Start ``python -m avv_sim`` and return once it prints its ready line.

    Give either ``config_path`` (a YAML file) or ``profiles`` ({name: knobs dict or Profile}). ``gold`` = a
    sample file whose gold labels the reference follows (``--gold``). ``sets`` = ``[PROFILE:]KNOB=VALUE`` items
    applied on top of the profiles (``--set``: e.g. one vendor degraded for one run). ``tls`` = (certificate, key)
    PEM files: serve HTTPS (``--tls-cert``); without it, ``AVV_SIM_TLS_CERT`` and ``AVV_SIM_TLS_KEY`` from the
    environment do the same, so a benchmark can give a Locust run a TLS simulator (``bench/measure.py --tls``).
    Raises :class:`SimulatorError` (with the child's stderr) if it exits or is not ready in ``timeout`` s.

    Why so many parameters: after ``config_path`` every one is keyword-only with a default and is one
    option of ``python -m avv_sim`` (``--truth-log``, ``--port``, ``--host``, ``--gold``, ``--set``,
    ``--tls-cert`` / ``--tls-key``), the in-memory ``profiles`` or the wait for the ready line (``timeout``); callers
    name the few they set.
    """
    tmpdir = None
    if config_path is not None and profiles is None:
        config_file = os.fspath(config_path)
    elif profiles is not None and config_path is None:
        tmpdir, config_file = _write_config(profiles)
    else:
        raise ValueError("give exactly one of config_path or profiles")
    cmd = [
        sys.executable,
        "-m",
        "avv_sim",
        "--config",
        config_file,
        "--host",
        host,
        "--port",
        str(port),
    ]
    if truth_log is not None:
        cmd += ["--truth-log", os.fspath(truth_log)]
    if gold is not None:
        cmd += ["--gold", os.fspath(gold)]
    for item in sets:
        cmd += ["--set", item]
    if tls is None and os.environ.get("AVV_SIM_TLS_CERT") and os.environ.get("AVV_SIM_TLS_KEY"):
        tls = (os.environ["AVV_SIM_TLS_CERT"], os.environ["AVV_SIM_TLS_KEY"])
    if tls is not None:
        cmd += ["--tls-cert", os.fspath(tls[0]), "--tls-key", os.fspath(tls[1])]
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        encoding="utf-8",
        errors="replace",
        env=_child_env(),
        preexec_fn=_die_with_parent,
    )
    lines: queue.Queue = queue.Queue()
    stderr_buf: list[str] = []
    threading.Thread(target=_drain_stdout, args=(proc.stdout, lines), daemon=True, name="avv-sim-stdout").start()
    threading.Thread(target=_drain_stderr, args=(proc.stderr, stderr_buf), daemon=True, name="avv-sim-stderr").start()
    try:
        url, names = _wait_ready(proc, lines, timeout, stderr_buf)
    except SimulatorError:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        if tmpdir:
            shutil.rmtree(tmpdir, ignore_errors=True)
        raise
    return SimProcess(proc, url, names, os.fspath(truth_log) if truth_log is not None else None, tmpdir, stderr_buf)


def _wait_ready(
    proc: subprocess.Popen, lines: queue.Queue, timeout: float, stderr_buf: list[str]
) -> tuple[str, list[str]]:
    deadline = time.monotonic() + timeout
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise SimulatorError(f"avv-sim not ready after {timeout:.1f} s; stderr: {''.join(stderr_buf)[-2000:]}")
        try:
            line = lines.get(timeout=remaining)
        except queue.Empty:
            continue
        if line is None:
            proc.wait()
            time.sleep(0.05)  # let the stderr reader catch the error message
            raise SimulatorError(
                f"avv-sim exited with status {proc.returncode} before it was ready: "
                f"{''.join(stderr_buf)[-2000:].strip()}"
            )
        m = READY_RE.search(line)
        if m:
            return m.group(1), [n.strip() for n in m.group(4).split(",") if n.strip()]
