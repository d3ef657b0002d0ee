"""The layering the README's "How it fits together" promises (issue 23): dependencies point one way
(harness → scoring → core, harness → core, simulator → core), no private name is imported across modules,
no import cycle, and importing the scoring package loads neither an HTTP client nor Locust."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest

from tests.locust_runs import ROOT


def _import_graph():
    spec = importlib.util.spec_from_file_location("import_graph", ROOT / "bench" / "import_graph.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_no_layering_violation_no_private_import_across_modules_no_cycle(capsys):
    assert _import_graph().main() == 0, capsys.readouterr().out
    assert "no layering violation, no private import across modules, no cycle" in capsys.readouterr().out


def test_the_checker_sees_what_it_is_meant_to_refuse():
    graph = _import_graph()
    assert graph.find_cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert graph.find_cycles({"a": {"b"}, "b": set()}) == []
    assert graph.ALLOWED["avv_core"] == {"avv_core"}
    assert "avv_harness" not in graph.ALLOWED["avv_scoring"] | graph.ALLOWED["avv_sim"]


@pytest.mark.integration
def test_importing_scoring_or_core_loads_no_http_client_and_no_locust():
    probe = ("import sys, avv_scoring, avv_core.records, avv_core.record_file; "
             "print(sorted(m for m in ('requests', 'urllib3', 'locust', 'gevent', 'avv_harness', 'avv_sim') "
             "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, cwd=ROOT,
                         check=True).stdout
    assert out.strip() == "[]"
