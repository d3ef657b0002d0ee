"""The docs site (issue 40): it builds with warnings as errors, no page loads anything from the network when
opened, every page is in the navigation, and every command block of the tutorials runs as written against the
simulator (the vendors' URLs pointed at simulated vendors that require the tutorial's own keys)."""

from __future__ import annotations

import csv
import itertools
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.docs_pages import DOCS, TUTORIALS, blocks, run_tutorial
from tests.locust_runs import ROOT

# The tutorials' vendors, served by the simulator; each requires the key the tutorial's .env gives it.
SIM_PROFILES = {
    "official": {"ttft_ms": 150, "tokens_per_s": 120, "output_tokens": 24, "api_key": "sk-official-0123456789"},
    "my-vendor": {"ttft_ms": 400, "tokens_per_s": 40, "output_tokens": 24, "bad_args_rate": 0.3, "seed": 2,
                  "api_key": "sk-vendor-0123456789"},
    "moonshot": {"ttft_ms": 150, "tokens_per_s": 120, "output_tokens": 24, "self_flip_rate": 0.05,
                 "api_key": "sk-moonshot-0123456789"},
    "reseller-a": {"ttft_ms": 120, "tokens_per_s": 150, "output_tokens": 24, "seed": 1, "api_key": "sk-a-0123456789"},
    "reseller-b": {"ttft_ms": 300, "tokens_per_s": 60, "output_tokens": 24, "flip_rate": 0.4, "bad_args_rate": 0.2,
                   "seed": 3, "api_key": "sk-b-0123456789"},
}
URLS = {  # as the tutorials write them → the simulated vendor standing in
    "https://api.official.example/v1": "official",
    "https://api.my-vendor.example/v1": "my-vendor",
    "https://api.moonshot.ai/v1": "moonshot",
    "https://reseller-a.example/v1": "reseller-a",
    "https://reseller-b.example/v1": "reseller-b",
}
#: The tutorials whose blocks a test below runs; every other tutorial's blocks must each say why they are not run.
RUN_BY_A_TEST = {"first-vendor.md", "compare-vendors.md", "nightly-ci.md", "distributed.md"}
# A page must not load these when opened: a script, a stylesheet, an image, a font, a frame from elsewhere.
_REMOTE_ASSET = re.compile(r"<(?:script|img|iframe|source)\b[^>]*\bsrc=[\"']?(?:https?:)?//|"
                           r"<link\b(?=[^>]*\brel=[\"']?(?:stylesheet|preload|preconnect|modulepreload|icon|"
                           r"manifest|prefetch|dns-prefetch))[^>]*\bhref=[\"']?(?:https?:)?//", re.I)
_REMOTE_CSS = re.compile(r"(?:url\(\s*[\"']?|@import\s+[\"']?)(?:https?:)?//", re.I)


@pytest.fixture(scope="module")
def sim(tmp_path_factory):
    """The tutorials' vendors; the official ones follow the demo samples' gold labels, as a good API would."""
    from avv_sim import start_simulator

    truth = tmp_path_factory.mktemp("sim") / "truth.jsonl"
    with start_simulator(profiles=SIM_PROFILES, truth_log=truth, gold=ROOT / "samples" / "demo.jsonl") as proc:
        yield proc


def _served(sim) -> dict[str, str]:
    return {written: sim.base_url(profile) for written, profile in URLS.items()}


def _decision(output: str, title: str = "Decision (95 % confidence, thresholds avv):") -> str:
    """The decision block a run or a scoring prints: its title line, then one line per vendor."""
    assert title in output, output[-3000:]
    lines = output.split(title, 1)[1].splitlines()[1:]
    return "\n".join(itertools.takewhile(lambda line: line.startswith("  "), lines))


def _nav_pages(nav) -> list[str]:
    out: list[str] = []
    for entry in nav:
        for value in (entry.values() if isinstance(entry, dict) else [entry]):
            out += _nav_pages(value) if isinstance(value, list) else [value]
    return out


class _MkdocsLoader(yaml.SafeLoader):
    """mkdocs.yml's own tags (``!!python/object/apply``) read as plain data."""


_MkdocsLoader.add_multi_constructor("tag:yaml.org,2002:python/", lambda loader, suffix, node: None)


def test_every_page_is_in_the_navigation_and_every_nav_entry_exists():
    config = yaml.load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"), Loader=_MkdocsLoader)
    listed = _nav_pages(config["nav"])
    pages = sorted(p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md"))
    assert sorted(listed) == pages
    assert config["theme"]["font"] is False, "Material fetches Google Fonts unless theme.font is false"
    assert "offline" not in [p if isinstance(p, str) else next(iter(p)) for p in config["plugins"]], \
        "Material's offline plugin loads a shim from a CDN"


def test_every_tutorial_block_is_run_by_a_test_or_says_why_not():
    for page in sorted(TUTORIALS.glob("*.md")):
        commands = [b for b in blocks(page) if b.lang == "bash"]
        if page.name in RUN_BY_A_TEST:
            assert any(b.runs for b in commands), page.name
        else:
            assert all(b.not_run for b in commands), f"{page.name}: a command block no test runs"
    first = blocks(TUTORIALS / "first-vendor.md")
    assert [b.title for b in first if b.title] == ["my-vendors.yaml", ".env"]


def test_the_block_reader_sees_files_commands_and_reasons(tmp_path):
    page = tmp_path / "p.md"
    page.write_text('text\n\n```yaml title="a.yaml"\nk: 1\n```\n\n<!-- not run: needs a cluster -->\n```bash\n'
                    'kubectl apply\n```\n\n1. step\n\n    ```bash\n    echo hi\n    ```\n\n```text\nout\n```\n')
    found = blocks(page)
    assert [(b.lang, b.title, b.text, b.not_run, b.runs) for b in found] == [
        ("yaml", "a.yaml", "k: 1\n", None, True), ("bash", None, "kubectl apply\n", "needs a cluster", False),
        ("bash", None, "echo hi\n", None, True), ("text", None, "out\n", None, False)]


def test_every_troubleshooting_entry_quotes_a_message_the_code_prints():
    """Each `### `message`` heading of the troubleshooting page is a piece of a message that is in the code."""
    code = "\n".join(p.read_text(encoding="utf-8") for package in ("avv_core", "avv_harness", "avv_scoring", "avv_sim")
                     for p in (ROOT / package).rglob("*.py"))
    headings = re.findall(r"^### `(.+)`$", (DOCS / "troubleshooting.md").read_text(encoding="utf-8"), flags=re.M)
    assert len(headings) >= 30
    missing = [h for h in headings if h not in code]
    assert missing == [], f"no longer printed by the code: {missing}"


@pytest.mark.integration  # mkdocs as a process: ~10 s
def test_the_site_builds_with_warnings_as_errors_and_fetches_nothing(tmp_path):
    if shutil.which("mkdocs", path=str(Path(sys.executable).parent)) is None:
        pytest.skip('mkdocs is not installed: pip install -e ".[docs]"')
    site = tmp_path / "site"
    proc = subprocess.run([str(Path(sys.executable).parent / "mkdocs"), "build", "--strict", "-d", str(site)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300, env={"NO_MKDOCS_2_WARNING": "1",
                                                                                       "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    pages = list(site.rglob("*.html"))
    assert len(pages) >= len(list(DOCS.rglob("*.md")))
    for page in pages:
        text = page.read_text(encoding="utf-8")
        assert not _REMOTE_ASSET.search(text), f"{page}: {_REMOTE_ASSET.search(text).group(0)}"
        assert 'class="mermaid"' not in text  # Material would load mermaid from a CDN
    for sheet in site.rglob("*.css"):
        assert not _REMOTE_CSS.search(sheet.read_text(encoding="utf-8")), sheet
    assert (site / "assets" / "report.png").stat().st_size < 100_000
    presets = (site / "reference" / "presets" / "index.html").read_text(encoding="utf-8")
    assert "/kimi|moonshot/</code>" in presets  # a table's `\|` shows as | (mkdocs_hooks.py), as on GitHub
    options = (site / "reference" / "options" / "index.html").read_text(encoding="utf-8")
    assert "--avv-max-request-s" in options and "--avv-settle" in options


@pytest.mark.integration  # one Locust run of 8 samples against two simulated vendors
def test_first_vendor_tutorial_runs_as_written(sim, tmp_path):
    steps = run_tutorial(TUTORIALS / "first-vendor.md", tmp_path, _served(sim))
    assert [s.returncode for s in steps] == [0] * len(steps) and len(steps) == 3, steps[-1].output[-3000:]
    out = steps[1].output
    decision = _decision(out)
    # 8 clean samples cannot show a success rate ≥ 0.99 at 95 %: the page explains the INCONCLUSIVE and its hint
    assert re.search(r"^  official \(baseline\)  INCONCLUSIVE  success_rate 1 \[0\.\d+, 1\] vs ≥ 0\.99: "
                     r"about [\d,]+ more samples would decide it", decision, re.M), out[-3000:]
    assert re.search(r"^  my-vendor +FAIL +schema_accuracy 0\.6667 \[0\.\d+, 0\.\d+\] < 0\.98$", decision, re.M), \
        out[-3000:]
    assert "16 records in results/first/records.csv (run complete)" in out
    rows = list(csv.DictReader((tmp_path / "results" / "first" / "records.csv").open(encoding="utf-8")))
    assert {r["status"] for r in rows} == {"success"}  # both keys reached their vendors (the simulator checks them)
    written = (tmp_path / "results" / "first" / "run.json").read_text() + "".join(map(str, rows)) + out
    assert "sk-official-0123456789" not in written and "sk-vendor-0123456789" not in written
    assert steps[2].output.startswith("model,") or "sample_id" in steps[2].output.splitlines()[0]


@pytest.mark.integration  # one Locust run (16 samples × 2 repeats × 3 vendors) and three re-scorings
def test_compare_vendors_tutorial_runs_as_written(sim, tmp_path):
    steps = run_tutorial(TUTORIALS / "compare-vendors.md", tmp_path, _served(sim))
    assert [s.returncode for s in steps] == [0, 0], steps[-1].output[-3000:]
    run = steps[0].output
    assert "96 records in results/compare/records.csv (run complete)" in run, run[-3000:]
    decision = _decision(run)
    # 16 clean prompts decide no success rate ≥ 0.99 (repeats do not count); reseller-b's invalid JSON decides at once
    for clean in (r"moonshot \(baseline\)", "reseller-a"):
        assert re.search(rf"^  {clean} +INCONCLUSIVE +success_rate 1 \[0\.\d+, 1\] vs ≥ 0\.99: about [\d,]+ more "
                         r"samples would decide it", decision, re.M), decision
    assert re.search(r"^  reseller-b +FAIL +a tool call whose arguments are not JSON: \d+ in 32 responses .*"
                     r"schema_accuracy 0\.\d+ \[0\.\d+, 0\.\d+\] < 0\.98$", decision, re.M), decision
    assert "reseller-b            differs" in run  # the identity test, on the repeats at temperature 0.6
    k2vv, point, statistical = steps[1].output.split("wrote scores.csv")[:3]
    k2vv = _decision(k2vv, "Decision (95 % confidence, thresholds k2vv):")
    assert re.search(r"^  moonshot \(baseline\)  PASS +its bound holds; closest: f1 1 \[", k2vv, re.M), k2vv
    assert re.search(r"^  reseller-b +INCONCLUSIVE +f1 0\.8000 \[.*\] vs ≥ 0\.8: it sits on its bound: no sample size "
                     r"decides it$", k2vv, re.M), k2vv
    point = _decision(point, "Decision (point values against the bounds (--verdict point: the peers' rule), "
                             "thresholds k2vv):")
    assert re.search(r"^  reseller-b +PASS +its bound holds; closest: f1 0\.8000 ≥ 0\.8$", point, re.M), point
    statistical = _decision(statistical, "Decision (95 % confidence, agreement against the baseline's noise floor, "
                                         "thresholds avv, agreement bounds replaced by the statistical verdict "
                                         "(α = 0.05)):")
    assert re.search(r"^  reseller-b +FAIL .*argument mismatch 0\.\d+ > baseline's own 0 \(args_match_noise_p ",
                     statistical, re.M), statistical
    for rules in ("k2vv", "k2vv-point", "statistical"):
        assert (tmp_path / "rescored" / rules / "scores.csv").exists()
    assert "preset `k2vv`: f1 ≥ 0.8" in (tmp_path / "rescored" / "k2vv" / "report.md").read_text()


@pytest.mark.integration  # two Locust runs of the demo and the trend
def test_nightly_tutorial_flags_the_changed_vendor_and_the_gate_exits_5(tmp_path):
    steps = run_tutorial(TUTORIALS / "nightly-ci.md", tmp_path)
    assert [s.returncode for s in steps] == [0, 0], steps[-1].output[-3000:]
    gate = steps[1].output
    assert "gate: exit 5" in gate, gate[-3000:]
    assert re.search(r"^demo-model +faithful +2 night-2 +night-1 +same sample set +trigger_agreement +400 .* "
                     r"regression$", gate, re.M), gate[-3000:]
    assert re.search(r"^demo-model +faithful +2 night-2 +night-1 +PASS → FAIL +f1 0\.\d+ \[.*\] < 0\.8$", gate, re.M)
    assert "is now 'avv-score history trend'" not in gate  # the page uses the current spelling
    trend = (tmp_path / "trend" / "trend.md").read_text(encoding="utf-8")
    assert "faithful" in trend and "▼" in trend
    conf = next(b for b in blocks(TUTORIALS / "nightly-ci.md") if b.lang == "ini")
    assert "avv-history = history.sqlite" in conf.text and conf.not_run
    workflow = next(b for b in blocks(TUTORIALS / "nightly-ci.md") if b.title and b.title.startswith(".github"))
    steps_yaml = yaml.safe_load(workflow.text)["jobs"]["check"]["steps"]
    assert any("--fail-on-regression" in str(s.get("run", "")) for s in steps_yaml)


@pytest.mark.e2e  # a master with worker processes, then a master and a worker started apart
def test_distributed_tutorial_runs_as_written(tmp_path):
    steps = run_tutorial(TUTORIALS / "distributed.md", tmp_path)
    assert [s.returncode for s in steps] == [0, 0], steps[-1].output[-3000:]
    for step in steps:  # the demo's vendors on its 32 conversations: 128 items, a clean vendor not yet decided
        assert re.search(r"avv-locust: 128 records in results/[\w-]+/records\.csv \(run complete\)", step.output), \
            step.output[-3000:]
        decision = _decision(step.output)
        assert re.search(r"^  faithful +INCONCLUSIVE +success_rate 1 \[0\.\d+, 1\] vs ≥ 0\.99: about [\d,]+ more "
                         r"samples would decide it", decision, re.M), decision
        assert re.search(r"^  flaky +FAIL +schema_accuracy 0\.\d+ \[0\.\d+, 0\.\d+\] < 0\.98$", decision,
                         re.M), decision
    runs = [p for p in (tmp_path / "results").iterdir() if p.is_dir()]
    assert len(runs) == 2 and all(json.loads((p / "run.json").read_text())["completed"] for p in runs)
