"""`shoal sql` and `shoal table`: SQL on the lake, and table history and maintenance."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from shoal.cli import output
from shoal.cli.context import JsonOpt, current, out, settings
from shoal.exceptions import ShoalError

table_app = typer.Typer(help="Inspect and maintain lake tables.", no_args_is_help=True)


class SqlFormat(StrEnum):
    table = "table"
    json = "json"
    csv = "csv"


class Dialect(StrEnum):
    spark = "spark"
    athena = "athena"
    trino = "trino"
    presto = "presto"
    hive = "hive"


# Rows a terminal shows when no --limit is given (files, pipes and --format json/csv get all).
TERMINAL_ROWS = 1000


def sql(
    query: Annotated[
        str | None,
        typer.Argument(help="SQL, or - to read it from stdin; time travel: TIMESTAMP/VERSION AS OF, FOR ... AS OF."),
    ] = None,
    file: Annotated[Path | None, typer.Option("--file", help="Read the SQL from this file.")] = None,
    fmt: Annotated[SqlFormat, typer.Option("--format", "-f", help="Output format.")] = SqlFormat.table,
    _json: JsonOpt = False,
    limit: Annotated[
        int | None,
        typer.Option("--limit", help=f"Return at most this many rows (a terminal shows {TERMINAL_ROWS} by default)."),
    ] = None,
    dialect: Annotated[
        Dialect, typer.Option("--dialect", help="Dialect the SQL is written in (translated to Spark SQL).")
    ] = Dialect.spark,
    database: Annotated[str | None, typer.Option("--database", help="Database for unqualified table names.")] = None,
    as_: Annotated[
        str | None, typer.Option("--as", help="Run governed: as this principal, with its grants (audited).")
    ] = None,
) -> None:
    """Run SQL on the lake catalog and the external tables (CREATE EXTERNAL TABLE, MSCK REPAIR TABLE, ...)."""
    import sys

    from shoal.governance.query import run_sql
    from shoal.spark import get_spark

    # `--json` is `--format json`: either one makes this run's Output the JSON one.
    fmt = SqlFormat.json if out().json else fmt
    current().choose(fmt == SqlFormat.json)
    if file is not None and query is not None:
        raise ShoalError("give the SQL as an argument or with --file, not both")
    if file is not None:
        if not file.is_file():
            raise ShoalError(f"SQL file {file} does not exist")
        query = file.read_text(encoding="utf-8")
    elif query == "-":
        query = sys.stdin.read()
    if not query or not query.strip():
        raise ShoalError(
            "no SQL given", hint="shoal sql 'SELECT ...', shoal sql --file query.sql, or shoal sql - < query.sql"
        )
    capped = limit is None and fmt == SqlFormat.table and sys.stdout.isatty()
    fetch = TERMINAL_ROWS + 1 if capped else limit
    if as_ is not None and dialect == Dialect.spark and database:
        raise ShoalError("--as with Spark SQL needs qualified table names (no --database)")
    s = settings()
    result = run_sql(get_spark(s), s, query, principal=as_, dialect=dialect.value, database=database, limit=fetch)
    cut = capped and len(result.rows) > TERMINAL_ROWS
    if cut:
        result.rows = result.rows[:TERMINAL_ROWS]
    output.print_query(result, fmt.value)
    if cut:
        output.print_warning(
            f"showing the first {TERMINAL_ROWS} rows; pass --limit N for more, or --format csv|json for all"
        )


@table_app.command("history")
def table_history(
    table: Annotated[str, typer.Argument(help="NS.TABLE")],
    _json: JsonOpt = False,
) -> None:
    """Snapshots of a table with time, operation and the change files each applied."""
    from shoal.lake import TableName, history
    from shoal.spark import get_spark

    rows = history(get_spark(settings()), TableName.parse(table))
    out().table(
        f"History of {table}",
        ["snapshot_id", "committed_at", "operation", "current", "+records", "-records", "files"],
        [
            [
                r["snapshot_id"],
                r["committed_at"],
                r["operation"],
                "yes" if r["is_current_ancestor"] else "no",
                r["added_records"],
                r["deleted_records"],
                ", ".join(r["files"]),
            ]
            for r in rows
        ],
        rows,
    )


@table_app.command("maintain")
def table_maintain(
    table: Annotated[str, typer.Argument(help="NS.TABLE")],
    retention_hours: Annotated[
        float | None, typer.Option("--retention-hours", help="Expire snapshots older than this (default from config).")
    ] = None,
    retain_last: Annotated[int | None, typer.Option("--retain-last", help="Always keep this many snapshots.")] = None,
    orphan_min_age_hours: Annotated[
        float | None, typer.Option("--orphan-min-age-hours", help="Only remove orphan files older than this.")
    ] = None,
    _json: JsonOpt = False,
) -> None:
    """Compact data and delete files, expire old snapshots, remove orphan files and
    CDC ledgers nothing refers to any more."""
    from shoal.cdc import ledger
    from shoal.lake import TableName, maintain
    from shoal.lake.locks import table_lock
    from shoal.spark import get_spark

    s = settings()
    m = s.maintenance
    name = TableName.parse(table)
    orphan_age = m.orphan_min_age_hours if orphan_min_age_hours is None else orphan_min_age_hours
    spark = get_spark(s)
    with out().progress(f"maintain {table}") as say, table_lock(s, str(name)):
        result = maintain(
            spark,
            name,
            catalog=s.catalog.name,
            retention_hours=m.snapshot_retention_hours if retention_hours is None else retention_hours,
            retain_last=m.retain_last if retain_last is None else retain_last,
            orphan_min_age_hours=orphan_age,
            target_file_size_mb=m.target_file_size_mb,
            say=say,
        )
        say("removing unreferenced CDC ledgers")
        result["cdc_ledgers_removed"] = ledger.prune(spark, s, name, min_age_hours=orphan_age)

    def as_text() -> None:
        output.print_kv(f"Maintained {table}", result)

    out().show(result, as_text)
