"""The installed package is self-sufficient: a wheel installed into a fresh virtual environment runs the
demo from an unrelated directory (no checkout paths, the demo data ships inside the package)."""

from __future__ import annotations

import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest

from tests.locust_runs import ROOT, clean_env

pytestmark = pytest.mark.e2e


def test_wheel_in_a_fresh_venv_runs_the_demo_from_anywhere(tmp_path):
    dist = tmp_path / "dist"
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                            "-w", str(dist), str(ROOT)], capture_output=True, text=True, timeout=300)
    assert build.returncode == 0, build.stderr[-3000:]
    (wheel,) = dist.glob("avv_locust-*.whl")
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=False)  # this test's pip installs into it (--python): no ensurepip run
    python = env_dir / "bin" / "python"
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    # The dependencies come from this test environment (no download); our own package only from the wheel.
    (Path(site) / "deps-from-test-env.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    install = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "-q",
                              str(wheel)], capture_output=True, text=True, timeout=300)
    assert install.returncode == 0, install.stderr[-3000:]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    where = subprocess.run([str(python), "-c", "import avv_harness; print(avv_harness.__file__)"], cwd=elsewhere,
                           capture_output=True, text=True, env=clean_env())
    assert where.stdout.startswith(str(env_dir)), where.stdout + where.stderr  # not the checkout
    # raw mode's template and the demo's default inputs (config, samples, simulator profiles) ship in the package
    shipped = subprocess.run([str(python), "-c", "from avv_harness.dialects.dialect import TEMPLATES_DIR as d; "
                              "from avv_harness.run import options as o; "
                              "files = [d / 'hermes.jinja', o.DEFAULT_CONFIG, o.DEFAULT_SIM_CONFIG, "
                              "o.DEFAULT_SAMPLES]; "
                              "print(*[f.is_file() and str(f).startswith(" + repr(str(env_dir)) + ") for f in files]); "
                              "print(o.DEFAULT_SAMPLES)"],
                             cwd=elsewhere, capture_output=True, text=True, env=clean_env())
    printed = shipped.stdout.splitlines()
    assert printed[:1] == ["True True True True"], shipped.stdout + shipped.stderr
    # The demo as shipped (its default config and simulator) on the first 8 of the shipped samples: the package's
    # files and paths are what this test checks; the demo's 1,600 items are the terminal test's
    # (tests/test_fail_fast_integration.py), here they would only cost CPU.
    (elsewhere / "demo8.jsonl").write_text("".join(Path(printed[1]).read_text().splitlines(keepends=True)[:8]))
    demo = subprocess.run([str(env_dir / "bin" / "avv-locust"), "--headless", "--avv-out", "out",
                           "--avv-samples", "demo8.jsonl"], cwd=elsewhere,
                          capture_output=True, text=True, timeout=240, env=clean_env())
    assert demo.returncode == 0, demo.stdout[-2000:] + demo.stderr[-3000:]
    (run_dir,) = (elsewhere / "out").iterdir()
    assert (run_dir / "records.csv").stat().st_size > 1000 and (run_dir / "report.md").exists()
    assert "run complete" in demo.stdout
    # the threshold presets ship inside the package too, and the run exports from anywhere
    preset = subprocess.run([str(env_dir / "bin" / "avv-score"), "thresholds", "minimax"], cwd=elsewhere,
                            capture_output=True, text=True, timeout=60, env=clean_env())
    assert preset.returncode == 0 and "finish_tool_calls_rate" in preset.stdout, preset.stderr[-2000:]
    export = subprocess.run([str(env_dir / "bin" / "avv-score"), "export", "--format", "k2vv", str(run_dir), "-q"],
                            cwd=elsewhere, capture_output=True, text=True, timeout=120, env=clean_env())
    assert export.returncode == 0 and (run_dir / "k2vv" / "reference_summary.json").exists(), export.stderr[-2000:]
