"""The README documents what the code defines: columns, error kinds, anomalies, options, simulator knobs."""

import argparse
import subprocess
import sys

import pytest

from avv_core.records import ANOMALIES, COLUMN_NAMES, ERROR_KINDS
from avv_harness.docs import BLOCKS, SIMULATOR_BLOCKS, block
from avv_harness.locust import plugin as locust_plugin
from avv_scoring.metrics.registry import render_metric_table
from avv_sim.profiles import KNOBS
from tests.locust_runs import ROOT

README = (ROOT / "README.md").read_text(encoding="utf-8")
SIMULATOR_DOC = (ROOT / "docs" / "simulator.md").read_text(encoding="utf-8")


def our_options() -> list[str]:
    parser = argparse.ArgumentParser()
    locust_plugin.add_arguments(parser)
    names = [a.option_strings[0] for a in parser._actions if a.option_strings]
    return [name for name in names if name.startswith("--avv")]


def test_readme_lists_every_record_column_error_kind_and_anomaly():
    for name in (*COLUMN_NAMES, *ERROR_KINDS, *ANOMALIES):
        assert f"`{name}`" in README, name


def test_readme_lists_every_option_and_simulator_knob():
    for option in our_options():
        assert f"`{option}`" in README, option
    for knob in KNOBS:
        assert f"`{knob}`" in README, knob


def test_quickstart_is_two_commands_and_ci_runs_them():
    ci = (ROOT / ".ci" / "run").read_text()
    assert "pip install -e . && locust -f locustfiles/vendors.py --headless" in README
    assert 'pip install -e ".[test]" && python -m pytest -q' in README
    assert "pip install -q -e . && locust -f locustfiles/vendors.py --headless" in ci
    assert 'pip install -q -e ".[test]" && python -m pytest -q' in ci


@pytest.mark.integration  # starts a process
def test_avv_locust_help_shows_our_options():
    proc = subprocess.run([sys.executable, "-c", "from avv_harness.cli import main; main()", "--help"],
                          capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert proc.returncode == 0
    for option in our_options():
        assert option in proc.stdout, option


@pytest.mark.parametrize("name", list(BLOCKS))
def test_readme_tables_are_rendered_from_the_code(name):
    assert block(README, name) == BLOCKS[name](), f"out of date: python -m avv_harness.docs README.md ({name})"


@pytest.mark.parametrize("name", list(SIMULATOR_BLOCKS))
def test_simulator_doc_tables_are_rendered_from_the_code(name):
    """docs/simulator.md's knob, quirk and truth-log tables come from their declarations (avv_sim)."""
    assert block(SIMULATOR_DOC, name) == SIMULATOR_BLOCKS[name](), \
        f"out of date: python -m avv_harness.docs docs/simulator.md ({name})"


def test_readme_metric_table_is_the_registrys():
    start, end = "<!-- metrics:start -->\n", "\n<!-- metrics:end -->"
    assert README.count(start) == 1 and README.count(end) == 1
    scoring = README[README.index("## Scoring"):]
    assert scoring.index(start) < scoring.index("\n## "), "the table belongs in the Scoring section"
    table = README[README.index(start) + len(start):README.index(end)]
    assert table == render_metric_table(), "regenerate with: avv-score metrics"
