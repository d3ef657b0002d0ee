"""Public functions with more than six parameters, checked against the rule (issue 36).

    python bench/signatures.py     # the functions that break the rule (exit 1 when there are any), then the count

Rule (docs/development.md, "Parameters"; tests/test_signatures.py holds it): a public function or method of our
four packages takes at most :data:`MAX_PARAMETERS` parameters, or its docstring has a line starting with
:data:`REASON` that says why. Counted: every parameter but ``self`` / ``cls`` (positional, keyword-only, ``*args``,
``**kwargs``). Public: the name does not start with ``_`` (``__init__`` of a public class counts: it is the class's
signature), nor does its class's, and it is not nested in a function. Counted with the ``ast`` module. The functions
in :data:`LEFT` were over the limit when the check was written: reported, not failed.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("avv_core", "avv_harness", "avv_scoring", "avv_sim")
MAX_PARAMETERS = 6
REASON = "Why so many parameters:"
#: Over the limit when the check was written (issue 36), not given a parameter object or a reason yet: they are
#: reported, not failed. The list only shrinks: a function fixed is taken off it, and a new one is never added.
#: Empty since every one of the 23 got a parameter object or a reason (issue 36).
LEFT: frozenset[str] = frozenset()

Function = ast.FunctionDef | ast.AsyncFunctionDef


def parameter_count(node: Function) -> int:
    a = node.args
    names = [arg.arg for arg in [*a.posonlyargs, *a.args, *a.kwonlyargs]]
    if names and names[0] in ("self", "cls"):
        names = names[1:]
    return len(names) + (a.vararg is not None) + (a.kwarg is not None)


def public_functions(tree: ast.Module) -> Iterator[tuple[str, Function]]:
    """(qualified name, node) of the module's public functions and the public methods of its public classes."""
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and not node.name.startswith("_"):
            yield node.name, node
        elif isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and (
                        item.name == "__init__" or not item.name.startswith("_")):
                    yield f"{node.name}.{item.name}", item


def has_reason(node: Function) -> bool:
    doc = ast.get_docstring(node) or ""
    return any(line.strip().startswith(REASON) for line in doc.splitlines())


def long_signatures() -> list[tuple[str, str, int, bool]]:
    """(``path:line``, name, parameters, reason given) of every public function over the limit."""
    found = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for name, node in public_functions(tree):
                count = parameter_count(node)
                if count > MAX_PARAMETERS:
                    found.append((f"{path.relative_to(ROOT)}:{node.lineno}", name, count, has_reason(node)))
    return found


def main() -> int:
    found = long_signatures()
    unexplained = [(where, name, n) for where, name, n, reason in found if not reason and name not in LEFT]
    left = [(where, name, n) for where, name, n, reason in found if not reason and name in LEFT]
    for where, name, n in unexplained:
        print(f"{where} {name}: {n} parameters (> {MAX_PARAMETERS}) and no line starting {REASON!r} in its "
              "docstring")
    if not unexplained:
        print(f"no public function over {MAX_PARAMETERS} parameters without a reason in its docstring"
              + (", but those left" if left else ""))
    for where, name, n in left:
        print(f"left: {where} {name}: {n} parameters")
    fixed = sorted(LEFT - {name for _, name, _ in left})
    if fixed:
        print(f"no longer over the limit or explained (take them off LEFT): {', '.join(fixed)}")
    explained = len(found) - len(unexplained) - len(left)
    print(f"{len(found)} public functions over {MAX_PARAMETERS} parameters: {explained} with a reason, {len(left)} "
          f"left (LEFT), {len(unexplained)} new without a reason")
    return 1 if unexplained else 0


if __name__ == "__main__":
    sys.exit(main())
