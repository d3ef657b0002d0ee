"""Run the whole suite as several pytest processes at once: ``python -m tests.shards [--jobs N] [PYTEST ARGS]``.

Why not pytest-xdist: Locust monkey-patches the standard library with gevent when it is imported, and an xdist
worker's execnet threads then block forever (``LoopExit``; locustio/locust#3202, pytest-dev/pytest-xdist#1069).
Most of the suite waits on sockets, simulated vendors and Locust's one-second ticks, so plain processes overlap
well on 2 cores.

Every test not marked ``timing`` runs in ``--jobs`` processes at once, at a lower CPU priority (the idle
scheduling class: :func:`lower_priority`); beside them, from the start, one more process runs the ``timing`` tests
(they assert measured time to the millisecond) at the normal priority, so the scheduler hands them a core whenever
they wake and the others' load does not blur what they measure. This used to be a second phase after the first,
with the machine to itself: a minute of one busy core and one idle one. Given ``-m``, the runner runs that
selection only, all at the normal priority.

The test files are dealt out by their last measured duration (``tests/durations.json``, longest first, each to
the shard with the least work so far); a file not measured yet counts as the median. Each shard is one ordinary
``python -m pytest`` process with its own ``--basetemp`` and JUnit XML; its output is printed whole when it ends,
then the failures of every shard and the wall time. The exit status is the first non-zero status of a shard
(pytest's: 1 tests failed, 2 interrupted, …), else 0. ``--update-durations`` writes the measured file durations
back (after a full, passing run). Arguments not known here go to every pytest process (``-m "not e2e"``, ``-x``).

A test that fails is run once more at the end, alone in one process (at most
:data:`RERUN_LIMIT` of them: more failures than that is a breakage, not load). One that passes then is printed as
load-sensitive and does not fail the run (its tolerance wants widening: the output names it); one that fails again
fails the run as before. Collection errors and interrupted shards are never rerun.

Before the shards start the project's modules are compiled once (:func:`compile_project`): with
``PYTHONDONTWRITEBYTECODE`` set, as on this project's machines, every Locust, simulator and ``avv-score`` process
the suite starts (several hundred) would otherwise compile our ~220 modules from source again.
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / "tests"
DURATIONS = TESTS / "durations.json"


def default_jobs() -> int:
    """Two more processes than CPUs: most of the suite waits (sockets, simulated vendors, Locust's one-second ticks),
    and the extra processes fill those gaps (with three on 2 cores, about 15 % of the CPU stayed idle). The timing
    tests keep their own process at the normal priority, so the untimed shards' load does not reach them."""
    return (os.cpu_count() or 1) + 2


def compile_project() -> None:
    """Write the .pyc of every module of ours. ``compileall`` writes them whatever ``PYTHONDONTWRITEBYTECODE``
    says, and imports read them (the variable only stops imports from writing): ~0.6 CPU-s less per Locust
    process. A read-only checkout keeps today's behaviour (nothing written, nothing fails)."""
    for folder in ("avv_core", "avv_harness", "avv_scoring", "avv_sim", "bench", "locustfiles", "tests"):
        compileall.compile_dir(ROOT / folder, quiet=2, workers=0)


def test_files(selected: list[str]) -> list[str]:
    """The test files to deal out, relative to the repository (the positional paths given, else every file)."""
    if selected:
        return selected
    return sorted(str(p.relative_to(ROOT)) for p in TESTS.glob("test_*.py"))


def deal(files: list[str], durations: dict[str, float], jobs: int) -> list[list[str]]:
    """Longest-processing-time first: each file to the shard with the least expected seconds so far."""
    typical = statistics.median(durations.values()) if durations else 1.0
    shards: list[list[str]] = [[] for _ in range(max(1, min(jobs, len(files))))]
    load = [0.0] * len(shards)
    for path in sorted(files, key=lambda f: (-durations.get(f, typical), f)):
        i = load.index(min(load))
        shards[i].append(path)
        load[i] += durations.get(path, typical)
    return [sorted(s) for s in shards if s]


def file_seconds(junit: Path) -> dict[str, float]:
    """Seconds per test file from one shard's JUnit XML (setup, call and teardown of its tests)."""
    out: dict[str, float] = {}
    if not junit.exists():
        return out
    for case in ET.parse(junit).getroot().iter("testcase"):
        module = case.get("classname", "").split(".")
        if len(module) >= 2 and module[0] == "tests":
            path = f"tests/{module[1]}.py"
            out[path] = out.get(path, 0.0) + float(case.get("time") or 0)
    return out


def failures(junit: Path) -> list[str]:
    """The node ids of the failed or erroring tests in one shard's JUnit XML."""
    if not junit.exists():
        return []
    return [f"{case.get('classname')}::{case.get('name')}" for case in ET.parse(junit).getroot().iter("testcase")
            if case.find("failure") is not None or case.find("error") is not None]


#: At most this many failed tests are run again alone; more than this many failures is a breakage, not load.
RERUN_LIMIT = 3


def node_id(junit_name: str) -> str:
    """A JUnit name (``tests.test_x.TestC::test_y[p]``) as pytest's node id (``tests/test_x.py::TestC::test_y[p]``):
    the longest dotted prefix that is a file is the module, the rest are classes."""
    classname, _, test = junit_name.partition("::")
    parts = classname.split(".")
    for cut in range(len(parts), 0, -1):
        module = "/".join(parts[:cut]) + ".py"
        if (ROOT / module).is_file():
            return "::".join([module, *parts[cut:], test])
    return junit_name


#: The ``nice`` of the untimed shards where the idle scheduling class is not available (see :func:`lower_priority`).
UNTIMED_NICENESS = 15


def lower_priority() -> None:
    """In a shard's process before it starts: the idle scheduling class (Linux's ``SCHED_IDLE``, inherited by every
    process the shard starts), so that a timing test's process — and its Locust and simulator children — takes a
    core at once whenever it wakes, whatever the others are doing; elsewhere ``nice`` :data:`UNTIMED_NICENESS`."""
    try:
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    except (AttributeError, OSError):
        os.nice(UNTIMED_NICENESS)


@dataclass
class Shard:
    """One pytest process: its files, the options it adds (a ``-m`` selection), whether it runs at a lower priority
    (:func:`lower_priority`), and whether its files were dealt by duration (their seconds then go to
    ``--update-durations``; the timing tests' do not)."""
    name: str
    files: list[str]
    options: list[str] = field(default_factory=list)
    lowered: bool = False
    dealt: bool = True


def run_shards(work: Path, shards: list[Shard], options: list[str],
               started: float) -> tuple[int, list[str], dict[str, float]]:
    """Run the shards at once; print each shard's output whole as it ends, in the order given. Returns (the first
    non-zero exit status other than 5 — any other than 1 before a 1 —, else 0; the failed node ids; seconds per
    file)."""
    running = []
    for shard in shards:
        junit, log = work / f"{shard.name}.xml", work / f"{shard.name}.log"
        cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--basetemp", str(work / f"tmp-{shard.name}"),
               "--junitxml", str(junit), *options, *shard.options, *shard.files]
        with log.open("wb") as out:
            running.append((shard, junit, log, subprocess.Popen(
                cmd, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT,
                preexec_fn=lower_priority if shard.lowered else None)))
    status, failed, measured = 0, [], {}  # type: tuple[int, list[str], dict[str, float]]
    for shard, junit, log, proc in running:
        code = proc.wait()
        sys.stdout.write(f"\n---- {shard.name} ({len(shard.files)} files"
                         f"{', ' + ' '.join(shard.options) if shard.options else ''}) exit {code} after "
                         f"{time.monotonic() - started:.0f} s\n")
        sys.stdout.write(log.read_text(encoding="utf-8", errors="replace"))
        sys.stdout.flush()
        failed += failures(junit)
        for path, secs in (file_seconds(junit) if shard.dealt else {}).items():
            measured[path] = measured.get(path, 0.0) + secs
        if code not in (0, 5) and status in (0, 1):  # 5: no test collected (a -m that selects none in a shard);
            status = code  # an interruption or a collection error outranks failures
    return status, failed, measured


def plan(files: list[str], durations: dict[str, float], jobs: int, passthrough: list[str]) -> list[Shard]:
    """The shards of a run: the files dealt to ``jobs`` shards; without a ``-m`` of the caller's, those run the
    tests not marked ``timing`` at a lower priority, beside one shard of the ``timing`` tests (listed first)."""
    dealt = deal(files, durations, jobs)
    if "-m" in passthrough:
        return [Shard(f"shard{i + 1}", part) for i, part in enumerate(dealt)]
    timed = [f for f in files if "pytest.mark.timing" in (ROOT / f).read_text(encoding="utf-8")]
    untimed = [Shard(f"shard{i + 1}", part, ["-m", "not timing"], lowered=bool(timed))
               for i, part in enumerate(dealt)]
    return ([Shard("timing", timed, ["-m", "timing"], dealt=False)] if timed else []) + untimed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.shards", description=__doc__.split("\n\n")[0],
                                     allow_abbrev=False)
    parser.add_argument("--jobs", type=int, default=default_jobs(), help="pytest processes at once besides the "
                        "timing tests' (default: CPUs + 1)")
    parser.add_argument("--update-durations", action="store_true", help="write tests/durations.json from this run")
    args, rest = parser.parse_known_args(argv)
    paths = [a for a in rest if a.startswith("tests/") and a.endswith(".py")]
    passthrough = [a for a in rest if a not in paths]
    durations = json.loads(DURATIONS.read_text()) if DURATIONS.exists() else {}
    files = test_files(paths)
    missing = [f for f in files if not (ROOT / f).is_file()]
    if missing:
        parser.error(f"no such test file: {', '.join(missing)}")
    work = Path(tempfile.mkdtemp(prefix="avv-shards-"))
    started = time.monotonic()
    compile_project()
    shards = plan(files, durations, args.jobs, passthrough)
    print(f"tests.shards: {len(files)} files in {len(shards)} pytest processes "
          f"({', '.join(f'{s.name}: {len(s.files)}' for s in shards)}); logs in {work}", flush=True)
    status, failed, measured = run_shards(work, shards, passthrough, started)
    load_sensitive: list[str] = []
    if failed and status == 1 and len(failed) <= RERUN_LIMIT:  # 1: tests failed (no interruption, no collection
        # error, in any shard)
        print(f"tests.shards: running the {len(failed)} failed test(s) again, alone", flush=True)
        code, again, _ = run_shards(work, [Shard("rerun", [node_id(name) for name in failed])], passthrough,
                                    started)
        load_sensitive = [name for name in failed if name not in again]
        failed, status = again, (code if code not in (0, 5) else 0)
    wall = time.monotonic() - started
    print(f"\ntests.shards: {len(shards)} pytest processes, {wall:.0f} s wall; "
          + (f"{len(failed)} failed:\n  " + "\n  ".join(failed) if failed else "no test failed"))
    if load_sensitive:
        print(f"tests.shards: {len(load_sensitive)} test(s) failed under load and passed alone (load-sensitive: "
              "widen what they assert):\n  " + "\n  ".join(load_sensitive))
    if args.update_durations:
        DURATIONS.write_text(json.dumps({k: round(v, 1) for k, v in sorted(measured.items())}, indent=0) + "\n")
        print(f"tests.shards: wrote {DURATIONS.relative_to(ROOT)} ({len(measured)} files)")
    return status


if __name__ == "__main__":
    sys.exit(main())
