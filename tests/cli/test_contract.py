"""The CLI's contract with scripts: every command takes --json, errors have one JSON shape, help
texts render as written, and the root options (--version, --quiet, --log-level) work. Usage
errors (a bad option, a missing argument, a bad value) take the JSON error shape with --json."""

from __future__ import annotations

import io
import json
import re
import uuid
from pathlib import Path

import pytest
import typer

from shoal import __version__
from shoal.cli.app import app
from tests.support.helpers import run_cli

# Commands without --json, and why.
NO_JSON = {
    "version": "prints the version string (see also --version)",
    "demo": "a guided tour for people: its output is the point",
    "serve": "runs a server until stopped",
}


def _leaves(command, path=()):
    if hasattr(command, "commands"):
        for name, sub in command.commands.items():
            if not getattr(sub, "hidden", False):
                yield from _leaves(sub, (*path, name))
    else:
        yield " ".join(path), command


LEAVES = dict(_leaves(typer.main.get_command(app)))


def test_every_command_takes_json_except_the_listed_ones() -> None:
    assert len(LEAVES) > 90
    missing = sorted(
        name
        for name, command in LEAVES.items()
        if "--json" not in {o for p in command.params for o in getattr(p, "opts", [])}
    )
    assert missing == sorted(NO_JSON), f"commands without --json: {missing}"


@pytest.mark.parametrize("name", sorted(LEAVES))
def test_help_renders_as_written(name: str, capsys, monkeypatch) -> None:
    code, out, err = run_cli([*name.split(), "--help"], capsys, monkeypatch)
    assert code == 0, err
    assert "<bool>" not in out and "<str>" not in out  # typer 0.27+ renderings
    assert "\\[" not in out  # help is not markup: an escaped bracket would print its backslash
    if name == "serve":
        assert "[server] host" in out  # a config section in a help text is not markup


def test_version_quiet_and_log_level(tmp_path: Path, capsys, monkeypatch, cli_env) -> None:
    code, out, _ = run_cli(["--version"], capsys, monkeypatch)
    assert code == 0 and out.strip() == f"shoal {__version__}"
    definition = tmp_path / f"hello{uuid.uuid4().hex[:6]}.asl.json"
    definition.write_text(json.dumps({"StartAt": "P", "States": {"P": {"Type": "Pass", "End": True}}}))
    code, out, err = run_cli(["workflow", "run", str(definition)], capsys, monkeypatch)
    assert code == 0 and err.strip(), "progress lines were expected on stderr"
    code, out, err = run_cli(["--quiet", "workflow", "run", str(definition)], capsys, monkeypatch)
    assert code == 0 and err.strip() == "" and "SUCCEEDED" in out
    monkeypatch.delenv("SHOAL_SPARK__LOG_LEVEL", raising=False)
    code, out, err = run_cli(["--log-level", "warning", "config", "show", "--json"], capsys, monkeypatch)
    assert code == 0 and json.loads(out)["spark"]["log_level"] == "WARN"


def test_errors_have_one_json_shape(tmp_path: Path, capsys, monkeypatch, cli_env) -> None:
    bad = tmp_path / "bad.asl.json"
    bad.write_text(json.dumps({"StartAt": "Nowhere", "States": {"A": {"Type": "Pass"}}}))
    code, out, err = run_cli(["workflow", "validate", str(bad), "--json"], capsys, monkeypatch)
    assert code == 1
    shaped = json.loads(out)
    assert set(shaped) == {"error", "hint", "problems"}
    assert len(shaped["problems"]) >= 2 and any("Nowhere" in p for p in shaped["problems"])
    code, out, err = run_cli(["schedule", "pause", f"nope-{uuid.uuid4().hex[:6]}", "--json"], capsys, monkeypatch)
    assert code == 1
    shaped = json.loads(out)
    assert set(shaped) == {"error", "hint", "problems"} and shaped["problems"] == [shaped["error"]]
    # A change that succeeds answers {"ok": true, "message", ...}.
    code, out, err = run_cli(["group", "create", f"g{uuid.uuid4().hex[:6]}", "--json"], capsys, monkeypatch)
    assert code == 0 and json.loads(out)["ok"] is True


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["sql", "SELECT 1", "--bogus"], "No such option: --bogus"),
        (["cdc", "apply", "--table", "t.x", "--key", "id"], "Missing argument 'SOURCE'."),
        (
            ["search", "espresso", "--limit", "many"],
            "Invalid value for '--limit' / '--k': 'many' is not a valid integer.",
        ),
        (["sql", "SELECT 1", "-f", "xml"], "Invalid value for '--format' / '-f': 'xml' is not one of"),
        (["workflow", "launch"], "No such command 'launch'."),
    ],
)
def test_usage_errors_have_the_json_shape_with_json(args: list[str], message: str, capsys, monkeypatch) -> None:
    """Typer's usage errors (exit code 2): with --json also the one error shape on stdout."""
    code, out, err = run_cli([*args, "--json"], capsys, monkeypatch)
    assert code == 2
    shaped = json.loads(out)
    assert set(shaped) == {"error", "hint", "problems"}
    assert shaped["error"].startswith(message) and shaped["problems"] == [shaped["error"]]
    command = re.search(r"Try '(.+) --help' for help\.", err)
    assert command is not None and shaped["hint"] == f"see `{command[1]} --help`"
    assert err.startswith("Usage: ") and f"Error: {message}" in err  # stderr as without --json
    # Without --json: Click's text only, stdout stays empty.
    code, plain_out, plain_err = run_cli(args, capsys, monkeypatch)
    assert (code, plain_out, plain_err) == (2, "", err)


@pytest.mark.parametrize("name", sorted(LEAVES))
def test_every_command_answers_a_bad_option_in_json(name: str, capsys, monkeypatch) -> None:
    code, out, _ = run_cli([*name.split(), "--no-such-option", "--json"], capsys, monkeypatch)
    assert code == 2
    shaped = json.loads(out)
    assert set(shaped) == {"error", "hint", "problems"} and shaped["problems"] == [shaped["error"]]
    assert shaped["hint"].endswith(f" {name} --help`")
    if name == "glue run":  # passes unknown options on to the job script: the first is taken as SCRIPT
        assert shaped["error"] == (
            "Invalid value for 'SCRIPT': '--no-such-option' is an option, not a script or a job name"
        )
    else:
        assert shaped["error"].startswith("No such option: --no-such-option")


def test_sql_from_a_file_or_stdin(spark, tmp_path: Path, capsys, monkeypatch, cli_env) -> None:
    query = tmp_path / "q.sql"
    query.write_text("SELECT 41 + 1 AS answer")
    code, out, err = run_cli(["sql", "--file", str(query), "--json"], capsys, monkeypatch)
    assert code == 0, err
    assert json.loads(out) == [{"answer": 42}]
    monkeypatch.setattr("sys.stdin", io.StringIO("SELECT 'from stdin' AS source"))
    code, out, err = run_cli(["sql", "-", "--format", "csv"], capsys, monkeypatch)
    assert code == 0, err
    assert out.splitlines() == ["source", "from stdin"]
    code, out, err = run_cli(["sql", "--json"], capsys, monkeypatch)
    assert code == 1 and json.loads(out)["error"] == "no SQL given"


@pytest.mark.parametrize(
    ("group", "new", "old"),
    [
        ("principal", "create", "add"),
        ("principal", "delete", "remove"),
        ("schedule", "create", "add"),
        ("schedule", "delete", "remove"),
        ("function", "delete", "remove"),
        ("access", "list", "requests"),
    ],
)
def test_uniform_verbs_keep_the_old_spelling_as_a_hidden_alias(group, new, old, capsys, monkeypatch) -> None:
    code, listing, _ = run_cli([group, "--help"], capsys, monkeypatch)
    assert code == 0
    listed = {line.split()[0] for line in listing.split("Commands:")[1].splitlines() if line.strip()}
    assert new in listed and old not in listed
    code, new_help, _ = run_cli([group, new, "--help"], capsys, monkeypatch)
    code_old, old_help, _ = run_cli([group, old, "--help"], capsys, monkeypatch)
    assert code == code_old == 0
    assert new_help.split("\n", 1)[1] == old_help.split("\n", 1)[1]  # the same command behind both names


def test_row_counts_are_asked_with_limit() -> None:
    """One spelling for "how many rows/results": --limit (earlier spellings stay as aliases)."""
    for name, command in LEAVES.items():
        for param in command.params:
            opts = set(getattr(param, "opts", []))
            if opts & {"--k", "--max-rows", "--rows", "-n"}:
                assert "--limit" in opts, f"shoal {name}: {sorted(opts)} without --limit"
