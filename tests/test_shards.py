"""The suite's runner (tests/shards.py): JUnit names back to node ids, and a test that failed is run once more
alone — passing then, it is printed as load-sensitive; failing again, it fails the run."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid

import pytest

from tests.shards import ROOT, deal, node_id, plan


def test_junit_names_become_pytest_node_ids():
    assert node_id("tests.test_shards::test_x[lean]") == "tests/test_shards.py::test_x[lean]"
    assert node_id("tests.test_shards.TestThing::test_y") == "tests/test_shards.py::TestThing::test_y"
    assert node_id("nowhere.mod::test_z") == "nowhere.mod::test_z"  # not a file: left as JUnit wrote it


def test_files_are_dealt_longest_first_to_the_least_loaded_shard():
    shards = deal(["a", "b", "c", "d"], {"a": 10.0, "b": 6.0, "c": 5.0, "d": 1.0}, 2)
    assert shards == [["a", "d"], ["b", "c"]]  # a 10 | b 6, c 5 (11) | d to the 10


def test_the_timing_tests_run_beside_the_others_which_run_at_a_lower_priority():
    files = ["tests/test_sim_timing.py", "tests/test_shards.py", "tests/test_sim_server.py"]
    timing, *untimed = plan(files, {}, 2, [])
    assert (timing.files, timing.options, timing.lowered) == (["tests/test_sim_timing.py"], ["-m", "timing"], False)
    assert sorted(f for s in untimed for f in s.files) == sorted(files) and len(untimed) == 2
    assert all(s.options == ["-m", "not timing"] and s.lowered for s in untimed)
    # a selection of the caller's runs as asked, at the normal priority, with no timing process
    chosen = plan(files, {}, 2, ["-m", "e2e"])
    assert len(chosen) == 2 and all(s.options == [] and not s.lowered for s in chosen)
    # no timing test among the files: nothing to protect, nothing niced
    assert not any(s.lowered for s in plan(["tests/test_shards.py"], {}, 2, []))


PROBE = '''
import os

def test_fails_once_then_passes():
    mark = os.environ["AVV_SHARDS_PROBE_MARK"]
    if not os.path.exists(mark):
        open(mark, "w").close()
        raise AssertionError("first run fails")

def test_always_fails():
    raise AssertionError("fails every time")

def test_passes():
    pass
'''


@pytest.mark.integration  # tests.shards and its pytest processes
def test_a_failed_test_runs_again_alone_and_only_a_second_failure_fails_the_run(tmp_path):
    probe = ROOT / "tests" / f"probe_shards_{uuid.uuid4().hex[:8]}.py"  # not test_*.py: no other run collects it
    probe.write_text(PROBE, encoding="utf-8")
    try:
        env = {**os.environ, "AVV_SHARDS_PROBE_MARK": str(tmp_path / "mark")}
        proc = subprocess.run([sys.executable, "-m", "tests.shards", "-q",
                               str(probe.relative_to(ROOT))], cwd=ROOT, env=env, capture_output=True, text=True,
                              timeout=120)
    finally:
        probe.unlink()
    out = proc.stdout
    assert proc.returncode == 1, out[-3000:] + proc.stderr[-2000:]
    assert "running the 2 failed test(s) again, alone" in out, out[-3000:]
    name = probe.stem
    assert f"1 failed:\n  tests.{name}::test_always_fails" in out, out[-3000:]
    assert f"1 test(s) failed under load and passed alone (load-sensitive: widen what they assert):\n" \
           f"  tests.{name}::test_fails_once_then_passes" in out, out[-3000:]
