"""The import graph of avv-locust's packages, checked against the layering (issue 23).

    python bench/import_graph.py            # the violations (exit 1 when there are any), then the counts

Rules: avv_core imports nothing else of ours; avv_scoring imports only avv_core (and itself); avv_sim imports
only avv_core; no module imports a private name (``_x``) from another module; no import cycle between modules.
Imports inside functions count too (they are how cycles hide).
"""

from __future__ import annotations

import ast
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("avv_core", "avv_harness", "avv_scoring", "avv_sim")
ALLOWED = {
    "avv_core": {"avv_core"},
    "avv_scoring": {"avv_core", "avv_scoring"},
    "avv_sim": {"avv_core", "avv_sim"},
    "avv_harness": {"avv_core", "avv_scoring", "avv_harness", "avv_sim"},
}


def modules() -> dict[str, Path]:
    out = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            out[name] = path
    return out


def imports(path: Path, known: dict[str, Path]) -> list[tuple[str, list[str], int]]:
    """(imported module, names imported from it, line) for every import of our packages in ``path``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module.split(".")[0] in PACKAGES:
                names = []
                for alias in node.names:
                    sub = f"{node.module}.{alias.name}"
                    if sub in known:  # `from package import module`
                        found.append((sub, [], node.lineno))
                    else:
                        names.append(alias.name)
                if names or node.module in known:
                    found.append((node.module, names, node.lineno))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] in PACKAGES:
                    found.append((alias.name, [], node.lineno))
    return found


def main() -> int:
    known = modules()
    graph: dict[str, set[str]] = defaultdict(set)
    problems = []
    cross = 0
    for name, path in known.items():
        top = name.split(".")[0]
        for target, names, line in imports(path, known):
            graph[name].add(target)
            where = f"{path.relative_to(ROOT)}:{line}"
            if target.split(".")[0] not in ALLOWED[top]:
                problems.append(f"{where}: {name} imports {target} (a {top} module may import only "
                                f"{', '.join(sorted(ALLOWED[top]))})")
            private = [n for n in names if n.startswith("_")]
            if private and target != name:
                problems.append(f"{where}: private name(s) {', '.join(private)} imported from {target}")
            if target.split(".")[0] != top:
                cross += 1
    cycles = find_cycles(graph)
    for cycle in cycles:
        problems.append("import cycle: " + " → ".join(cycle))
    print("\n".join(problems) if problems else "no layering violation, no private import across modules, no cycle")
    edges = sum(len(v) for v in graph.values())
    print(f"{len(known)} modules, {edges} imports of our modules, {cross} across packages")
    return 1 if problems else 0


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle per strongly connected component with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components = []
    counter = [0]

    def visit(node: str) -> None:
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                components.append(sorted(component))
    for node in sorted(graph):
        if node not in index:
            visit(node)
    return components


if __name__ == "__main__":
    sys.exit(main())
