"""Helpers for tests that run real Locust processes (``locust -f locustfiles/vendors.py``), usually against the
simulator the run starts; their inputs come from tests/builders.py, the truth log is read with
tests/sim_records.py. A test that uses these is ``integration`` (one Locust process) or ``e2e`` (several)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from avv_core.items import truth_tag  # noqa: F401  (re-exported for the tests)

ROOT = Path(__file__).resolve().parents[1]
LOCUSTFILE = ROOT / "locustfiles" / "vendors.py"
DEMO_SAMPLES = ROOT / "samples" / "demo-conversations.jsonl"  # the 32 hand-written conversations (the demo: 400)


def locust_cmd(*args: str) -> list[str]:
    """The same command a user types (`locust -f locustfiles/vendors.py …`), via this interpreter."""
    return [sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), *args]


def clean_env(html: bool = False, **extra: str) -> dict[str, str]:
    """The environment without our variables. Runs skip report.html (``LOCUST_AVV_NO_HTML``: ~2 s of figures
    per run) unless ``html=True``; report.html has its own tests."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LOCUST_", "AVV_"))}
    env["LOCUST_AVV_CLIENT"] = os.environ.get("AVV_TEST_CLIENT", "lean")  # tests/wire_clients.py
    if not html:
        env["LOCUST_AVV_NO_HTML"] = "true"
    env.update(extra)
    return env


def run_locust(args: list[str], cwd: Path, timeout: float = 240, env: dict[str, str] | None = None):
    return subprocess.run(locust_cmd(*args), cwd=cwd, env=env or clean_env(), capture_output=True, text=True,
                          timeout=timeout)


def only_run_dir(out: Path) -> Path:
    runs = [p for p in out.iterdir() if p.is_dir()]
    assert len(runs) == 1, runs
    return runs[0]
