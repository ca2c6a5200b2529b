"""`shoal doctor` and `shoal config init`: set up and check a machine for Shoal."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from shoal.cli import output
from shoal.cli.context import JsonOpt, out, settings
from shoal.exceptions import ConfigError

_MARK = {"ok": "[green]ok[/]", "warn": "[yellow]warn[/]", "fail": "[bold red]FAIL[/]"}


def doctor(
    tests: Annotated[bool, typer.Option("--tests", help="Also check what the test suite needs (Chromium).")] = False,
    _json: JsonOpt = False,
) -> None:
    """Check Java, the jars, the catalog database, a spark:// master, tesseract, ffmpeg, Graphviz, the models and
    object storage, and say what to install. Exit code 1 when a required part is missing."""
    from shoal.doctor import run_checks

    checks = run_checks(settings(), include_tests=tests)
    failed = [c for c in checks if c.status == "fail"]

    def as_text() -> None:
        from rich.table import Table

        table = Table(title="shoal doctor", title_justify="left")
        for column in ("check", "status", "needed for", "detail"):
            table.add_column(column, overflow="fold")
        for c in checks:
            detail = output.escape(c.detail) + (f"\n[dim]fix: {output.escape(c.hint)}[/]" if c.hint else "")
            table.add_row(c.name, _MARK[c.status], c.needed_for, detail)
        output.out.print(table)
        if failed:
            output.out.print(f"[bold red]{len(failed)} problem(s)[/]: " + ", ".join(c.name for c in failed))
        else:
            output.out.print(_summary(checks))

    out().show({"ok": not failed, "checks": [c.to_dict() for c in checks]}, as_text)
    if failed:
        raise typer.Exit(1)


def _summary(checks: list) -> str:
    """No failure: say which optional parts are missing, by name, instead of "everything is here"."""
    missing = [c for c in checks if c.status == "warn"]
    if not missing:
        return "[green]everything Shoal checks for is here[/]"
    listed = "; ".join(f"{c.name} ({output.escape(c.hint or c.detail)})" for c in missing)
    return f"[green]the core is ready[/]; [yellow]not installed or not found ({len(missing)})[/]: {listed}"


def config_init(
    path: Annotated[Path, typer.Argument(help="Where to write the file.")] = Path("shoal.toml"),
    force: Annotated[bool, typer.Option("--force", help="Overwrite an existing file.")] = False,
    stdout: Annotated[bool, typer.Option("--stdout", help="Print the file instead of writing it.")] = False,
    _json: JsonOpt = False,
) -> None:
    """Write a commented shoal.toml listing every setting with its default."""
    from shoal.config_template import render_template

    text = render_template()
    if stdout:
        sys.stdout.write(text)
        return
    if path.exists() and not force:
        raise ConfigError(f"{path} already exists", hint="pass --force to overwrite it, or another path")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")

    def as_text() -> None:
        output.out.print(f"wrote {output.escape(str(path))}: every key is commented out (all defaults)")

    out().show({"written": str(path.resolve()), "bytes": len(text.encode())}, as_text)


def register(app: typer.Typer, config_app: typer.Typer) -> None:
    app.command("doctor")(doctor)
    config_app.command("init")(config_init)
