"""The console's code stays in small functions: route handlers are module-level functions
taking the Console (see `Routes` in shoal/web/console/base.py), not closures in one long
`add()`. An AST walk, so a long function anywhere under shoal/web/console/ fails here."""

from __future__ import annotations

import ast
from pathlib import Path

CONSOLE = Path(__file__).resolve().parents[2] / "shoal" / "web" / "console"
MAX_LINES = 80  # a function's lines from `def` to its last line, decorators not counted


def _functions(path: Path) -> list[tuple[str, int, int]]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    return [
        (node.name, node.lineno, (node.end_lineno or node.lineno) - node.lineno + 1)
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
    ]


def test_the_console_is_read() -> None:
    found = {p.name for p in CONSOLE.rglob("*.py")}
    assert {"base.py", "routes.py", "catalog.py", "objects.py", "query.py"} <= found
    assert sum(len(_functions(p)) for p in CONSOLE.rglob("*.py")) > 100


def test_no_console_function_is_long() -> None:
    long = [
        f"{path.relative_to(CONSOLE.parents[2])}:{line} {name} is {size} lines"
        for path in sorted(CONSOLE.rglob("*.py"))
        for name, line, size in _functions(path)
        if size > MAX_LINES
    ]
    assert not long, (
        f"functions over {MAX_LINES} lines in the console (split them: handlers call named helpers "
        "that take the Console): " + "; ".join(long)
    )


def test_the_walk_sees_a_long_function(tmp_path: Path) -> None:
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_LINES))
    source = tmp_path / "long.py"
    source.write_text(f"def outer() -> None:\n    def inner() -> None:\n{body.replace('    ', '        ')}\n")
    assert [(name, size) for name, _line, size in _functions(source)] == [
        ("outer", MAX_LINES + 2),
        ("inner", MAX_LINES + 1),
    ]
