"""The layering the README's "How it fits together" promises (issue 23): dependencies point one way
(harness → scoring → core, harness → core, simulator → core), no private name is imported across modules,
no import cycle, and importing the scoring package loads neither an HTTP client nor Locust (nor matplotlib,
which only report.html needs)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.builders import bench_script
from tests.locust_runs import ROOT


def _import_graph():
    return bench_script("import_graph")


@pytest.mark.integration  # over a second in one process: the unit tier is sub-second per test
def test_no_layering_violation_no_private_import_across_modules_no_cycle(capsys):
    assert _import_graph().main() == 0, capsys.readouterr().out
    out = capsys.readouterr().out
    assert "no layering violation, no upward import between folders, no private import across modules, no cycle" in out
    assert "avv_harness folders, lowest first: dialects → inputs → wire → run → locust" in out
    assert ("avv_scoring folders, lowest first: stats → probes → load → baseline_choice → baseline_results → metrics"
            in out)


def test_the_checker_sees_what_it_is_meant_to_refuse():
    graph = _import_graph()
    assert graph.find_cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert graph.find_cycles({"a": {"b"}, "b": set()}) == []
    assert graph.ALLOWED["avv_core"] == {"avv_core"}
    assert "avv_harness" not in graph.ALLOWED["avv_scoring"] | graph.ALLOWED["avv_sim"]


def test_the_folder_order_refuses_an_upward_import_naming_file_and_line(tmp_path, monkeypatch, capsys):
    graph = _import_graph()
    harness = graph.layers("avv_harness")
    assert harness.index("wire") < harness.index("run") < harness.index("locust")
    assert graph.upward("avv_harness.locust.plugin", "avv_harness.run.options", harness) is None  # downward
    assert graph.upward("avv_harness.run.options", "avv_harness.run.state", harness) is None  # same folder
    assert "upward import: wire is below run" in graph.upward("avv_harness.wire.sse", "avv_harness.run.options",
                                                               harness)
    assert "not placed" in graph.upward("avv_harness.newfolder.x", "avv_harness.wire.sse", harness)
    # a synthetic tree: a wire module that imports the run layer is reported with its file and line
    for package in graph.PACKAGES:
        (tmp_path / package).mkdir()
        (tmp_path / package / "__init__.py").write_text("")
    (tmp_path / "avv_harness" / "__init__.py").write_text('LAYERS = ("wire", "run")\n')
    for folder in ("wire", "run"):
        (tmp_path / "avv_harness" / folder).mkdir()
        (tmp_path / "avv_harness" / folder / "__init__.py").write_text("")
    (tmp_path / "avv_harness" / "run" / "options.py").write_text("LIMIT = 1\n")
    (tmp_path / "avv_harness" / "wire" / "sse.py").write_text('"""x"""\n\nfrom avv_harness.run.options import LIMIT\n')
    monkeypatch.setattr(graph, "ROOT", tmp_path)
    assert graph.main() == 1
    assert ("avv_harness/wire/sse.py:3: avv_harness.wire.sse imports avv_harness.run.options "
            "(upward import: wire is below run in avv_harness.LAYERS)") in capsys.readouterr().out


@pytest.mark.integration
def test_importing_scoring_or_core_loads_no_http_client_no_locust_and_no_matplotlib():
    # matplotlib: ~0.4 s to import, paid by every run that scores without drawing (report.html imports it)
    probe = ("import sys, avv_scoring, avv_scoring.entrypoints, avv_core.records, avv_core.record_file; "
             "print(sorted(m for m in ('requests', 'urllib3', 'locust', 'gevent', 'avv_harness', 'avv_sim', "
             "'matplotlib') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, cwd=ROOT,
                         check=True).stdout
    assert out.strip() == "[]"
