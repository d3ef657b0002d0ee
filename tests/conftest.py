# Locust monkey-patches the standard library with gevent when it is imported; that must happen before
# requests / urllib3 / ssl are imported by any test module, or ssl recurses. Import it first.
import locust  # noqa: F401, I001

import os
import subprocess
import sys
from pathlib import Path

import gevent.monkey
import gevent.subprocess
import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
sys.path.insert(0, str(ROOT))
# pytest rewrites each test module's asserts on import and caches the result in tests/__pycache__, unless
# PYTHONDONTWRITEBYTECODE is set (as on these machines): then every pytest process rewrote all ~180 modules again,
# about 10 CPU-seconds. This process may keep its rewritten test modules; what it starts inherits the variable.
sys.dont_write_bytecode = False


TIERS = ("integration", "e2e")  # the unit tier is every test without one of these marks (README: Development)


def pytest_collection_modifyitems(config, items):
    """A test that needs the running simulator is not a unit test (the ``sim`` fixture starts it as a process
    before any test-level check could refuse it)."""
    unmarked = [item.nodeid for item in items if "sim" in getattr(item, "fixturenames", ())
                and not any(item.get_closest_marker(tier) for tier in TIERS)]
    if unmarked:
        raise pytest.UsageError("these use the simulator (`sim`) but are not marked integration or e2e: "
                                + ", ".join(unmarked))


@pytest.fixture(autouse=True)
def unit_tests_start_no_process(request, monkeypatch):
    """The unit tier starts no process (no simulator, no Locust, no ``sh``, no ``mount``): a test that does is
    ``integration`` or ``e2e``. Checked, not just agreed: starting one here fails the test."""
    if any(request.node.get_closest_marker(tier) for tier in TIERS):
        return

    def refuse(self, args, *rest, **kwargs):
        raise AssertionError(f"a unit test started a process ({args!r}): mark the test integration or e2e")

    for popen in {gevent.subprocess.Popen, gevent.monkey.get_original("subprocess", "Popen"), subprocess.Popen}:
        monkeypatch.setattr(popen, "_execute_child", refuse)


@pytest.fixture(autouse=True)
def collector_as_found():
    """A run whose users started but were never stopped (a test that quits the runner at once) leaves the collector
    as the harness quiets it for load (``quiet_gc_for_load``): give the next test the collector as this one found it."""
    import gc

    threshold = gc.get_threshold()
    yield
    if gc.get_threshold() != threshold:
        gc.unfreeze()
        gc.set_threshold(*threshold)


@pytest.fixture(scope="module")
def sim(request, tmp_path_factory):
    """The simulator as a process (``avv_sim.start_simulator``) serving the test module's ``SIM_PROFILES``, with
    its truth log in a temporary folder (read it with tests/sim_records.py). One per module; a test that uses it
    is ``integration``."""
    from avv_sim import start_simulator

    truth = tmp_path_factory.mktemp("sim") / "truth.jsonl"
    with start_simulator(profiles=request.module.SIM_PROFILES, truth_log=truth) as proc:
        yield proc


@pytest.fixture
def tmp_cwd(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path


def shared_path(*parts: str) -> Path:
    path = SHARED.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"{path} not present (the shared datasets are only on the team's machines)")
    return path


os.environ.setdefault("PYTHONUNBUFFERED", "1")


@pytest.fixture(params=["lean", "requests"])
def wire_client(request):
    """Runs the test once per wire client (tests/wire_clients.py)."""
    from tests import wire_clients

    before = wire_clients.current["client"]
    wire_clients.current["client"] = request.param
    yield request.param
    wire_clients.current["client"] = before
