"""The import graph under shoal/ stays a layered one: no circle between subpackages, and nothing
below the faces (cli/, web/, samples/) imports a face. Parsed with ast, so lazy imports count."""

from __future__ import annotations

import ast
from collections import defaultdict
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
