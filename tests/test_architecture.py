"""The import graph under shoal/ stays a layered one: no circle between subpackages, no circle
between the modules of one package (nor any circle between modules at all), and nothing below the
faces (cli/, web/, samples/) imports a face.

Parsed with ast over the whole tree of each file, so imports inside functions and under
`if TYPE_CHECKING:` count like top-level ones: a circle hidden in a function is still a circle.
Only Shoal's own modules count (lazy imports of optional or heavy libraries stay lazy). Importing
`shoal.a.b` is an arrow to `shoal.a.b` only, not to the package `shoal.a` that Python runs first."""

from __future__ import annotations

import ast
from collections import defaultdict
from functools import cache
from pathlib import Path

import shoal

ROOT = Path(shoal.__file__).resolve().parent
# What people and programs talk to; the library underneath must not know them.
FACES = {"cli", "web", "samples", "__main__"}


def _unit(module: str) -> str | None:
    """`shoal.cdc.apply` -> `cdc`; `shoal.storage` -> `storage`; `shoal` itself -> None."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == "shoal" else None


def _is_unit(name: str) -> bool:
    return (ROOT / name).is_dir() or (ROOT / f"{name}.py").exists()


def _module_name(path: Path) -> str:
    parts = ["shoal", *path.relative_to(ROOT).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports() -> dict[str, set[tuple[str, str]]]:
    """Unit -> {(imported unit, where)} for every shoal import in every module of that unit."""
    edges: dict[str, set[tuple[str, str]]] = defaultdict(set)
    for path in sorted(ROOT.rglob("*.py")):
        name = _module_name(path)
        package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - node.level + 1]
                    module = ".".join([*base, node.module] if node.module else base)
                else:
                    module = node.module or ""
                # `from shoal import storage` imports the module shoal.storage.
                targets = [f"{module}.{a.name}" if module == "shoal" else module for a in node.names]
            for target in targets:
                source, unit = _unit(name), _unit(target)
                if source and unit and unit != source and _is_unit(unit):
                    edges[source].add((unit, f"{path.relative_to(ROOT.parent)}:{node.lineno}"))
    return edges


def _resolve(target: str, modules: set[str]) -> str | None:
    """The module an import names: itself, or its nearest enclosing module (`shoal.x.Name`)."""
    while target and target not in modules:
        target = target.rpartition(".")[0]
    return target or None


@cache
def module_imports() -> dict[str, dict[str, str]]:
    """Module -> {imported shoal module: where} for every module under shoal/ (the first place each)."""
    paths = {_module_name(p): p for p in sorted(ROOT.rglob("*.py"))}
    modules = set(paths)
    edges: dict[str, dict[str, str]] = {name: {} for name in modules}
    for name, path in paths.items():
        package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - node.level + 1]
                    module = ".".join([*base, node.module] if node.module else base)
                else:
                    module = node.module or ""
                # `from shoal.a import b` imports the module shoal.a.b when there is one, else names in shoal.a.
                targets = [f"{module}.{a.name}" if f"{module}.{a.name}" in modules else module for a in node.names]
            for target in targets:
                found = _resolve(target, modules) if target.startswith("shoal.") or target == "shoal" else None
                if found and found != name:
                    edges[name].setdefault(found, f"{path.relative_to(ROOT.parent)}:{node.lineno}")
    return edges


def circles(graph: dict[str, dict[str, str]]) -> list[list[str]]:
    """The strongly connected parts of more than one node (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, {})))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                part: list[str] = []
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    part.append(top)
                    if top == node:
                        break
                if len(part) > 1:
                    found.append(sorted(part))
    return sorted(found)


def test_the_module_graph_is_read() -> None:
    """Function-level and relative imports are seen, and the circle finder finds circles."""
    edges = module_imports()
    assert "shoal.cli.context" in edges["shoal.cli.serve"]  # imported inside `serve()`
    assert "shoal.lake.exclusive" in edges["shoal.lake.database"]
    assert "shoal.cdc.source" in edges["shoal.cdc.formats"]
    toy = {"a": {"b": ""}, "b": {"c": ""}, "c": {"a": ""}, "d": {"a": ""}, "e": {"e": ""}}
    assert circles(toy) == [["a", "b", "c"]]


def test_no_circle_between_modules() -> None:
    """Within a package (and across packages), modules import one another in one direction only:
    what two modules share lives in a lower module both import."""
    edges = module_imports()
    report = []
    for part in circles(edges):
        arrows = [f"    {a} -> {b}  ({edges[a][b]})" for a in part for b in sorted(edges[a]) if b in part]
        report.append(" <-> ".join(part) + "\n" + "\n".join(arrows))
    assert not report, "circular imports between modules:\n" + "\n".join(report)


def test_the_graph_is_read() -> None:
    """The parser sees the imports it is meant to police (else the tests below prove nothing)."""
    edges = imports()
    assert ("governance", "shoal/cli/governance.py") in {(u, w.split(":")[0]) for u, w in edges["cli"]}
    assert any(u == "lake" for u, _ in edges["cdc"])


def test_no_lower_layer_imports_a_face() -> None:
    bad = sorted(
        f"{where}: shoal.{source} imports shoal.{unit}"
        for source, targets in imports().items()
        if source not in FACES
        for unit, where in targets
        if unit in FACES
    )
    assert not bad, "the library must not import cli/, web/ or samples/:\n" + "\n".join(bad)


def test_no_circle_between_subpackages() -> None:
    edges = imports()
    graph = {source: {unit for unit, _ in targets} for source, targets in edges.items()}
    circles: list[str] = []

    def visit(node: str, path: list[str], on_path: set[str], done: set[str]) -> None:
        for nxt in sorted(graph.get(node, ())):
            if nxt in on_path:
                cycle = [*path[path.index(nxt) :], nxt]
                where = [next(w for u, w in sorted(edges[a]) if u == b) for a, b in zip(cycle, cycle[1:], strict=False)]
                circles.append(" -> ".join(cycle) + "  (" + "; ".join(where) + ")")
            elif nxt not in done:
                visit(nxt, [*path, nxt], on_path | {nxt}, done)
        done.add(node)

    done: set[str] = set()
    for start in sorted(graph):
        if start not in done:
            visit(start, [start], {start}, done)
    assert not circles, "circular imports between subpackages:\n" + "\n".join(sorted(set(circles)))
