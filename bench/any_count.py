"""How many ``Any`` stand in type positions, per package (issue 36: halve them; the rest at JSON edges).

    python bench/any_count.py            # per package, then the total
    python bench/any_count.py --files    # also per file, most first

A type position is an annotation (a parameter's, a return's, a variable's, a class attribute's) or the value of a
type alias (``X: TypeAlias = ...``, or a module-level ``X = dict[str, Any]``: a subscript or ``|`` union holding
``Any``). Each ``Any`` (the name or ``typing.Any``) inside one counts once; string annotations are parsed. Counted
with the ``ast`` module, so the figure is exact and reproducible; ``cast(Any, ...)`` and ``Any`` in docstrings or
comments do not count.
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("avv_core", "avv_harness", "avv_scoring", "avv_sim")


def _anys(node: ast.AST | None) -> int:
    """``Any`` names in one annotation (string annotations parsed)."""
    if node is None:
        return 0
    count = 0
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name) and sub.id == "Any":
            count += 1
        elif isinstance(sub, ast.Attribute) and sub.attr == "Any":
            count += 1
        elif isinstance(sub, ast.Constant) and isinstance(sub.value, str):  # a quoted annotation
            try:
                count += _anys(ast.parse(sub.value, mode="eval").body)
            except SyntaxError:
                pass
    return count


def _is_alias_value(value: ast.AST) -> bool:
    """A module-level assignment that builds a type: ``dict[str, Any]``, ``A | B``."""
    return isinstance(value, (ast.Subscript, ast.BinOp))


def count_file(path: Path) -> int:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    count = 0
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            a = node.args
            for arg in [*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg]:
                if arg is not None:
                    count += _anys(arg.annotation)
            count += _anys(node.returns)
        elif isinstance(node, ast.AnnAssign):
            count += _anys(node.annotation)
            if isinstance(node.annotation, ast.Name) and node.annotation.id == "TypeAlias":
                count += _anys(node.value)
    for node in tree.body:  # module-level aliases without TypeAlias
        if isinstance(node, ast.Assign) and _is_alias_value(node.value):
            count += _anys(node.value)
    return count


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--files", action="store_true", help="also print the count per file, most first")
    args = parser.parse_args(argv)
    per_file: Counter[str] = Counter()
    per_package: Counter[str] = Counter()
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            n = count_file(path)
            per_file[str(path.relative_to(ROOT))] = n
            per_package[package] += n
    print(f"python {' '.join(sys.argv)}")
    print("Any in type positions")
    for package in PACKAGES:
        print(f"{package:<12} {per_package[package]:>5}")
    print(f"{'total':<12} {sum(per_package.values()):>5}")
    if args.files:
        print()
        for name, n in per_file.most_common():
            if n:
                print(f"{n:>5}  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
