"""Rendering for the CLI: tables, JSON, CSV, progress and errors (commands live in console.py)."""

from __future__ import annotations

import csv
import io
import json
import os
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from rich.console import Console
from rich.table import Table

from shoal.sql import QueryResult, to_json_value

# Not a terminal (a log, a pipe, CI): rich would wrap tables at 80 columns and split words
# ("quantity_avail able"). $COLUMNS wins when set; otherwise a wide page.
WIDE_DEFAULT = 200


def _width(stream, environ: Mapping[str, str]) -> int | None:
    if environ.get("COLUMNS", "").isdigit():
        return int(environ["COLUMNS"])
    try:
        if stream.isatty():
            return None  # rich asks the terminal
    except (AttributeError, ValueError):
        pass
    return WIDE_DEFAULT


def make_console(stream, *, stderr: bool = False, file=None, environ: Mapping[str, str] | None = None) -> Console:
    """The console for `stream` (the warm engine builds one per command for its caller's streams)."""
    env = os.environ if environ is None else environ
    return Console(file=file, stderr=stderr, highlight=False, soft_wrap=True, width=_width(stream, env), _environ=env)


out = make_console(sys.stdout)
err = make_console(sys.stderr, stderr=True)


def print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(to_json_value(data), indent=2, default=str) + "\n")


def print_warning(message: str) -> None:
    err.print(f"[bold yellow]warning:[/] {message}", markup=True, highlight=False)


def print_error(message: str) -> None:
    err.print(f"[bold red]error:[/] {message}", markup=True, highlight=False)


@contextmanager
def progress(enabled: bool, title: str) -> Iterator[Any]:
    """A spinner on stderr with the current step; yields a `say(msg)` callback."""
    if not enabled or not err.is_terminal:

        def say(msg: str) -> None:
            if enabled:
                err.print(f"[dim]{title}:[/] {msg}", markup=True)

        yield say
        return
    with err.status(title) as status:
        yield lambda msg: status.update(f"{title}: {msg}")


def print_query(result: QueryResult, fmt: str) -> None:
    if fmt == "json":
        print_json(result.records())
    elif fmt == "csv":
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(result.columns)
        for rec in result.records():
            w.writerow(["" if v is None else json.dumps(v) if isinstance(v, dict | list) else v for v in rec.values()])
        sys.stdout.write(buf.getvalue())
    else:
        table = Table(show_lines=False)
        for c, t in zip(result.columns, result.types, strict=True):
            table.add_column(f"{c}\n[dim]{t}[/]", overflow="fold")
        for rec in result.records():
            table.add_row(*["[dim]NULL[/]" if v is None else _escape(v) for v in rec.values()])
        out.print(table)
        out.print(f"[dim]{len(result.rows)} row(s)[/]")


def escape(text: str) -> str:
    """Extracted content is untrusted: never let it act as rich markup."""
    from rich.markup import escape as rich_escape

    return rich_escape(text)


def _escape(value: Any) -> str:
    return escape(json.dumps(value) if isinstance(value, dict | list) else str(value))


def print_kv(title: str, items: dict[str, Any]) -> None:
    table = Table(title=title, show_header=False, title_justify="left")
    table.add_column(style="bold")
    table.add_column()
    for k, v in items.items():
        table.add_row(k.replace("_", " "), _escape(v))
    out.print(table)


def print_rows(title: str, columns: list[str], rows: list[list[Any]]) -> None:
    table = Table(title=title, title_justify="left")
    for c in columns:
        table.add_column(c, overflow="fold")
    for r in rows:
        table.add_row(*[_escape(v) for v in r])
    out.print(table)
