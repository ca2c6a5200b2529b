"""One Output per run: commands hand their results to it and never branch on --json themselves.

The text and JSON Outputs are checked directly (what each prints for each kind of result), the
choice is checked through the CLI (`--json` makes the run's Output the JSON one, once), and the
command modules are read with ast so that a command that reads its --json flag cannot come back."""

from __future__ import annotations

import ast
import json
import uuid
from pathlib import Path

import pytest

from shoal.cli import context, output
from shoal.cli.output import JsonOutput, Output, TextOutput
from shoal.exceptions import ShoalError
from tests.support.helpers import run_cli

CLI = Path(output.__file__).parent


def _command_modules() -> list[Path]:
    return sorted(p for p in CLI.rglob("*.py") if p.name not in ("output.py", "context.py"))


def test_no_command_reads_its_json_flag() -> None:
    """A parameter annotated `JsonOpt` declares --json for the CLI; the command reads `out()`."""
    readers: list[str] = []
    for path in _command_modules():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for fn in ast.walk(tree):
            if not isinstance(fn, ast.FunctionDef):
                continue
            flags = {
                a.arg
                for a in [*fn.args.args, *fn.args.kwonlyargs]
                if a.annotation is not None and ast.unparse(a.annotation) == "JsonOpt"
            }
            used = {n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and n.id in flags}
            readers += [f"{path.relative_to(CLI)}:{fn.lineno} {fn.name} reads {name}" for name in sorted(used)]
    assert readers == []


def test_no_json_branching_in_command_modules() -> None:
    """No `json_out` flags passed around, no `if ...json:` in commands, one --json declaration."""
    found: list[str] = []
    for path in _command_modules():
        text = path.read_text(encoding="utf-8")
        for number, line in enumerate(text.splitlines(), 1):
            if "json_out" in line or ".json:" in line or "output.print_json(" in line and path.name != "app.py":
                found.append(f"{path.relative_to(CLI)}:{number}: {line.strip()}")
            if 'typer.Option("--json"' in line:
                found.append(f"{path.relative_to(CLI)}:{number}: a second --json declaration (use JsonOpt)")
    assert found == []


@pytest.mark.parametrize("kind", [TextOutput, JsonOutput])
def test_each_kind_of_result(kind: type[Output], capsys) -> None:
    o = kind()
    o.done("user [bold]x[/] added", user="x")
    o.record("Thing", {"seconds": 9.62823146700066, "name": "a[b]"})
    o.table("Rows", ["k", "v"], [["a", 1]], [{"k": "a", "v": 1}])
    o.line("topic [t] created", {"topic": "t"})
    o.show({"shown": True}, lambda: output.out.print("custom text"))
    o.note("a remark", label="scheduler")
    printed, remarks = capsys.readouterr()
    if kind is JsonOutput:
        decoder, docs, at = json.JSONDecoder(), [], 0
        while at < len(printed.strip()):
            doc, at = decoder.raw_decode(printed, at)
            docs.append(doc)
            at += len(printed[at:]) - len(printed[at:].lstrip())
        assert docs == [
            {"ok": True, "message": "user [bold]x[/] added", "user": "x"},
            {"seconds": 9.62823146700066, "name": "a[b]"},
            [{"k": "a", "v": 1}],
            {"topic": "t"},
            {"shown": True},
        ]
        assert remarks == ""  # stdout is the JSON, stderr stays quiet
    else:
        # Values and messages are text, never markup; a summary's floats are rounded.
        assert "user [bold]x[/] added" in printed
        assert "9.628" in printed and "9.6282" not in printed and "a[b]" in printed
        assert "Rows" in printed and "custom text" in printed and "topic [t] created" in printed
        assert "scheduler: a remark" in remarks


def test_json_failure_is_the_one_error_shape(capsys) -> None:
    JsonOutput().failure(ShoalError("no such table x", hint="shoal table list"))
    printed, remarks = capsys.readouterr()
    assert json.loads(printed) == {
        "error": "no such table x",
        "hint": "shoal table list",
        "problems": ["no such table x"],
    }
    assert "no such table x" in remarks


def test_json_flag_chooses_the_json_output_once(capsys, monkeypatch, cli_env) -> None:
    name = f"g{uuid.uuid4().hex[:6]}"
    code, printed, _ = run_cli(["group", "create", name, "--json"], capsys, monkeypatch)
    assert code == 0 and json.loads(printed) == {"ok": True, "message": f"group {name} created"}
    assert isinstance(context.current().out, JsonOutput)
    code, printed, _ = run_cli(["--quiet", "group", "create", f"{name}x"], capsys, monkeypatch)
    assert code == 0 and printed.strip() == f"group {name}x created"
    run = context.current()
    assert isinstance(run.out, TextOutput) and run.out.quiet
    run.choose(True)  # what --json does: a JSON Output that keeps --quiet
    assert isinstance(run.out, JsonOutput) and run.out.quiet and output.active() is run.out


def test_a_scripts_prints_leave_stdout_to_the_json(capsys) -> None:
    """`glue run --json`: what the user's script prints is its log (stderr); stdout is the JSON."""
    with JsonOutput().script_stdout():
        print("script log line")
    printed, remarks = capsys.readouterr()
    assert printed == "" and remarks == "script log line\n"
    with TextOutput().script_stdout():
        print("script log line")
    assert capsys.readouterr() == ("script log line\n", "")


def test_nothing_is_printed_after_a_result() -> None:
    """After a command hands its result to the Output, it may exit but not print more: a text
    line after the result would follow the JSON document on stdout in JSON mode."""
    STDERR = {"output.print_error", "output.print_warning"}
    results = {"out().done", "out().record", "out().table", "out().line", "out().show"}
    late: list[str] = []
    for path in _command_modules():
        for fn in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(fn, ast.FunctionDef):
                continue
            seen = False
            for statement in fn.body:
                calls = [ast.unparse(n.func) for n in ast.walk(statement) if isinstance(n, ast.Call)]
                # stderr (errors, warnings) may follow the result; stdout may not
                printing = [c for c in calls if c.startswith("output.") and c not in STDERR]
                if seen and printing and not isinstance(statement, ast.FunctionDef):
                    late.append(f"{path.relative_to(CLI)}:{statement.lineno} {fn.name}")
                is_result = isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call)
                seen = seen or (is_result and ast.unparse(statement.value.func) in results)  # type: ignore[attr-defined]
    assert late == []
