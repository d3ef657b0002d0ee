"""The documentation shows what the code declares: every generated block of every page is what
``python -m avv_harness.docs`` renders now, every option, column, error kind, anomaly, knob and exit status is on its
reference page, no hand-written table repeats a generated one, and the README stays short with the quickstart CI
runs."""

import argparse
import re
import subprocess
import sys

import pytest

from avv_core.exit_status import EXIT_STATUSES
from avv_core.records import ANOMALIES, COLUMN_NAMES, ERROR_KINDS
from avv_harness import docs as docs_module
from avv_harness.docs import PAGES, block, blocks_for
from avv_harness.inputs.config_fields import VENDOR_FIELDS
from avv_harness.locust import plugin as locust_plugin
from avv_harness.run import options as run_options
from avv_scoring.metrics.registry import METRICS, render_metric_table
from avv_sim.profiles import KNOBS
from tests.locust_runs import ROOT

README = (ROOT / "README.md").read_text(encoding="utf-8")
DOCS = ROOT / "docs"


def page(path: str) -> str:
    return (ROOT / path).read_text(encoding="utf-8")


def our_options(register=locust_plugin.add_arguments) -> list[str]:
    parser = argparse.ArgumentParser()
    register(parser)
    names = [a.option_strings[0] for a in parser._actions if a.option_strings]
    return [name for name in names if name.startswith("--avv")]


@pytest.mark.integration  # over a second in one process: the unit tier is sub-second per test
@pytest.mark.parametrize(("path", "name"), [(p, name) for p, blocks in PAGES.items() for name in blocks])
def test_every_generated_block_is_what_the_code_renders(path, name):
    assert block(page(path), name) == PAGES[path][name](), f"out of date: python -m avv_harness.docs ({path}: {name})"


def test_the_options_table_is_the_parser_locust_calls():
    """The table renders options.add_arguments: the very function plugin.py registers on Locust's parser hook."""
    assert our_options() == our_options(run_options.add_arguments)
    text = page("docs/reference/options.md")
    for option in our_options():
        assert f"| `{option}` |" in text, option


def test_each_column_error_kind_anomaly_key_knob_and_exit_status_is_on_its_reference_page():
    records = page("docs/reference/records.md")
    for name in (*COLUMN_NAMES, *ERROR_KINDS, *ANOMALIES):
        assert f"| `{name}` |" in records, name
    config = page("docs/reference/config.md")
    for field in VENDOR_FIELDS:
        assert f"| `{field.key}` |" in config, field.key
    metrics = page("docs/reference/metrics.md")
    for metric in METRICS:
        assert f"| `{metric.column}` |" in metrics, metric.column
    simulator = page("docs/simulator.md")
    for knob in KNOBS:
        assert f"| `{knob}` |" in simulator, knob
    exits = page("docs/reference/exit-status.md")
    for status in EXIT_STATUSES:
        assert f"| {status.status.value} |" in exits, status


def test_the_metric_page_is_the_registrys_table():
    assert block(page("docs/reference/metrics.md"), "metrics") == render_metric_table()


def _table_keys(markdown: str) -> list[str]:
    """The first cells of a page's table rows that are one code span (`` `name` ``)."""
    return re.findall(r"^\| `([^`|]+)` \|", markdown, flags=re.M)


def _without_blocks(markdown: str) -> str:
    return re.sub(r"<!-- ([a-z-]+):start -->.*?<!-- \1:end -->", "", markdown, flags=re.S)


def test_no_hand_written_table_repeats_a_generated_one():
    """A hand-written table listing half (and at least three) of one generated table's keys is a second list to keep
    in step (a definitions table of two or three metrics, with more to say than the registry's line, is not)."""
    generated = {(path, name): set(_table_keys(render())) for path, blocks in PAGES.items()
                 for name, render in blocks.items() if name != "module-map"}
    pages = [ROOT / "README.md", *DOCS.rglob("*.md")]
    for md in pages:
        hand = set(_table_keys(_without_blocks(md.read_text(encoding="utf-8"))))
        for (path, name), keys in generated.items():
            shared = sorted(hand & keys)
            assert len(shared) < max(3, len(keys) // 2), f"{md.relative_to(ROOT)} repeats {path}'s {name}: {shared}"


def test_the_generator_rewrites_a_stale_block_and_check_says_so(tmp_path, capsys):
    target = tmp_path / "docs" / "reference" / "exit-status.md"
    target.parent.mkdir(parents=True)
    target.write_text("# x\n\n<!-- exit-statuses:start -->\nstale\n<!-- exit-statuses:end -->\n", encoding="utf-8")
    assert docs_module.main(["--check", str(target)]) == 1
    assert "exit-status.md" in capsys.readouterr().err
    assert docs_module.main([str(target)]) == 0
    assert docs_module.main(["--check", str(target)]) == 0
    assert "| 7 |" in target.read_text(encoding="utf-8")
    with pytest.raises(SystemExit, match="not a page with generated blocks"):
        blocks_for(str(tmp_path / "README.md"))


def test_readme_is_short_links_into_the_site_and_holds_no_generated_table():
    assert len(README.splitlines()) <= 250
    assert "<!--" not in README  # every generated table lives on a site page
    for link in re.findall(r"\]\((docs/[^)#]+)", README):
        assert (ROOT / link).exists(), link
    for page_name in ("tutorials/first-vendor.md", "tutorials/nightly-ci.md", "tutorials/distributed.md",
                      "reference/records.md", "reference/exit-status.md", "explanation/decision.md"):
        assert f"docs/{page_name}" in README, page_name
    assert "docs/assets/report.png" in README and (ROOT / "docs" / "assets" / "report.png").exists()


def test_quickstart_is_two_commands_and_ci_runs_them():
    ci = (ROOT / ".ci" / "run").read_text()
    assert "pip install -e . && locust -f locustfiles/vendors.py --headless" in README
    assert 'pip install -e ".[test]" && python -m tests.shards -q' in README
    assert "pip install -q -e . && locust -f locustfiles/vendors.py --headless" in ci
    assert 'pip install -q -e ".[test]" && python -m tests.shards -q' in ci
    assert '".[docs,test]"' in ci and "ruff check ." in ci and "mypy" in ci
    # the docs site is built with warnings as errors by the suite CI runs (tests/test_docs_site.py)
    assert '"build", "--strict"' in (ROOT / "tests" / "test_docs_site.py").read_text()


@pytest.mark.integration  # starts a process
def test_avv_locust_help_shows_our_options():
    proc = subprocess.run([sys.executable, "-c", "from avv_harness.cli import main; main()", "--help"],
                          capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert proc.returncode == 0
    for option in our_options():
        assert option in proc.stdout, option
