"""The import graph of avv-locust's packages, checked against the layering (issue 23).

    python bench/import_graph.py            # the violations (exit 1 when there are any), then the counts

Rules: avv_core imports nothing else of ours; avv_scoring imports only avv_core (and itself); avv_sim imports
only avv_core; no module imports a private name (``_x``) from another module; no import cycle between modules;
and inside a package, no upward import between its folders (issue 36). Imports inside functions count too (they
are how cycles hide).

**Folder order.** A package with folders declares its order once, as ``LAYERS`` at the top of its
``__init__.py`` (read here without importing it): its folders and top-level modules, lowest first. A module may
import from its own folder and from the entries before it, never from one after it; an entry missing from
``LAYERS`` is a violation too (a new folder is placed when it is made). The package's ``__init__`` is above all
of them (it re-exports) and nothing inside the package imports it.
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


def layers(package: str) -> tuple[str, ...] | None:
    """``LAYERS`` of ``package``'s ``__init__.py`` (lowest first), or None when it declares none."""
    tree = ast.parse((ROOT / package / "__init__.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == "LAYERS" for t in targets) and node.value is not None:
                return tuple(ast.literal_eval(node.value))
    return None


def unit(module: str) -> str:
    """The folder or top-level module ``module`` belongs to inside its package (``__init__`` for the package)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def upward(importer: str, target: str, order: tuple[str, ...]) -> str | None:
    """Why ``importer`` may not import ``target`` (same package) under ``order``, or None when it may."""
    here, there = unit(importer), unit(target)
    if here == there or here == "__init__":
        return None
    if there == "__init__":
        return f"imports its own package: {importer.split('.')[0]}/__init__.py is above every folder"
    for name in (here, there):
        if name not in order:
            return f"{name} is not placed in {importer.split('.')[0]}.LAYERS"
    if order.index(there) > order.index(here):
        return f"upward import: {here} is below {there} in {importer.split('.')[0]}.LAYERS"
    return None


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
    orders = {package: layers(package) for package in PACKAGES}
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
            order = orders[top]
            if order is not None and target.split(".")[0] == top:
                if (why := upward(name, owner(target, known), order)) is not None:
                    problems.append(f"{where}: {name} imports {target} ({why})")
            private = [n for n in names if n.startswith("_")]
            if private and target != name:
                problems.append(f"{where}: private name(s) {', '.join(private)} imported from {target}")
            if target.split(".")[0] != top:
                cross += 1
    cycles = find_cycles(graph)
    for cycle in cycles:
        problems.append("import cycle: " + " → ".join(cycle))
    print("\n".join(problems) if problems else "no layering violation, no upward import between folders, "
                                                "no private import across modules, no cycle")
    for package, order in orders.items():
        if order is not None:
            print(f"{package} folders, lowest first: {' → '.join(order)}")
    edges = sum(len(v) for v in graph.values())
    print(f"{len(known)} modules, {edges} imports of our modules, {cross} across packages")
    return 1 if problems else 0


def owner(target: str, known: dict[str, Path]) -> str:
    """The module an imported name lives in (``pkg.mod.Name`` → ``pkg.mod``)."""
    while target not in known and "." in target:
        target = target.rpartition(".")[0]
    return target


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
