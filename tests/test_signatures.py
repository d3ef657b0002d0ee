"""The parameter rule (bench/signatures.py, issue 36): no public function over six parameters without a line
"Why so many parameters:" in its docstring (those listed as left when the check was written excepted)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.builders import bench_script

ROOT = Path(__file__).resolve().parent.parent


def _signatures():
    return bench_script("signatures")


@pytest.mark.integration  # over a second in one process: the unit tier is sub-second per test
def test_no_new_public_function_over_six_parameters_without_a_reason(capsys):
    assert _signatures().main() == 0, capsys.readouterr().out


def test_the_count_and_the_reason_line_are_read_as_documented():
    signatures = _signatures()
    tree = ast.parse(
        "def seven(a, b, c, d, e, f, g): pass\n"
        "def explained(a, b, c, d, e, f, *g, **h):\n"
        "    '''Runs.\n\n    Why so many parameters: each is a knob of its own.'''\n"
        "def _private(a, b, c, d, e, f, g): pass\n"
        "class Public:\n"
        "    def __init__(self, a, b, c, d, e, f): pass\n"
        "    def method(self, a, b, c, d, e, f, g): pass\n"
        "class _Hidden:\n"
        "    def method(self, a, b, c, d, e, f, g): pass\n")
    found = {name: (signatures.parameter_count(node), signatures.has_reason(node))
             for name, node in signatures.public_functions(tree)}
    assert found == {"seven": (7, False), "explained": (8, True), "Public.__init__": (6, False),
                     "Public.method": (7, False)}
