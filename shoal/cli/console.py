"""The `shoal` command: thin wrappers over the capability packages (rendering in output.py)."""

from __future__ import annotations

import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from shoal import __version__
from shoal.cli import output
from shoal.config import Settings, load_settings
from shoal.exceptions import ShoalError

app = typer.Typer(
    name="shoal",
    help="Shoal: a self-hosted lakehouse for governed unstructured data and change data.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
cdc_app = typer.Typer(help="Change-data-capture upserts into Iceberg tables.", no_args_is_help=True)
table_app = typer.Typer(help="Inspect and maintain lake tables.", no_args_is_help=True)
config_app = typer.Typer(help="Show the effective configuration.", no_args_is_help=True)
app.add_typer(cdc_app, name="cdc")
app.add_typer(table_app, name="table")
app.add_typer(config_app, name="config")

_state: dict[str, object] = {"config": None, "json": False}


def settings() -> Settings:
    return load_settings(_state["config"])  # type: ignore[arg-type]


@app.callback()
def _root(
    config: Annotated[
        Path | None, typer.Option("--config", "-c", help="Path of shoal.toml (default: $SHOAL_CONFIG or ./shoal.toml).")
    ] = None,
) -> None:
    _state["config"] = config


@app.command()
def version() -> None:
    """Print Shoal's version."""
    output.out.print(__version__)


def _split(values: list[str]) -> list[str]:
    return [p.strip() for v in values for p in v.split(",") if p.strip()]


class OnError(StrEnum):
    fail = "fail"
    quarantine = "quarantine"


class WriteMode(StrEnum):
    merge_on_read = "merge-on-read"
    copy_on_write = "copy-on-write"


@cdc_app.command("apply")
def cdc_apply(
    source: Annotated[str, typer.Argument(help="Folder of change files (LOAD*.csv full loads, time-named changes).")],
    table: Annotated[str, typer.Option("--table", help="Target table NS.TABLE (created on first apply).")],
    key: Annotated[list[str], typer.Option("--key", help="Key column(s): COL[,COL...].")],
    sequence: Annotated[str, typer.Option("--sequence", help="Column ordering events (newest wins).")],
    partition_by: Annotated[
        str | None,
        typer.Option("--partition-by", help='Partition spec for a new table, e.g. "category, bucket(16, id)".'),
    ] = None,
    op_column: Annotated[str, typer.Option("--op-column", help="Name of the operation column (I/U/D).")] = "op",
    no_header: Annotated[bool, typer.Option("--no-header", help="Files have no header row (use --columns).")] = False,
    columns: Annotated[
        str | None, typer.Option("--columns", help="Data column names in file order, for --no-header.")
    ] = None,
    on_error: Annotated[
        OnError,
        typer.Option("--on-error", help="fail: apply nothing; quarantine: divert bad rows to NS.TABLE__rejects."),
    ] = OnError.fail,
    write_mode: Annotated[
        WriteMode | None,
        typer.Option("--write-mode", help="Row-level write mode for this table (default from config)."),
    ] = None,
    delimiter: Annotated[str, typer.Option("--delimiter", help="Field delimiter.")] = ",",
    json_out: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Apply the change files under SOURCE not yet applied to the table, as one commit."""
    from shoal.cdc import ApplyOptions, apply_changes

    _state["json"] = json_out
    opts = ApplyOptions(
        table=table,
        keys=_split(key),
        sequence=sequence,
        partition_by=partition_by,
        op_column=op_column,
        header=not no_header,
        columns=_split([columns]) if columns else None,
        on_error=on_error.value,
        write_mode=write_mode.value if write_mode else None,
        delimiter=delimiter,
    )
    with output.progress(not json_out, f"cdc apply {table}") as say:
        result = apply_changes(settings(), source, opts, progress=say)
    for warning in result.warnings:
        output.print_warning(warning)
    if json_out:
        output.print_json(result.to_dict())
        return
    data = result.to_dict()
    data["files_applied"] = ", ".join(result.files_applied) or "(none: nothing new)"
    output.print_kv(f"Applied {len(result.files_applied)} file(s) to {table}", data)


@cdc_app.command("files")
def cdc_files(
    table: Annotated[str, typer.Argument(help="NS.TABLE")],
    source: Annotated[
        str | None, typer.Option("--source", help="Also list files under SOURCE not yet applied.")
    ] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Change files applied to a table (and, with --source, those still pending)."""
    from shoal.cdc import file_status

    _state["json"] = json_out
    status = file_status(settings(), table, source)
    if json_out:
        output.print_json(status)
        return
    output.print_rows(
        f"Applied to {table}",
        ["file", "size", "batch_id", "applied_at"],
        [[f["file"], f["size"], f["batch_id"], f["applied_at"]] for f in status["applied"]],
    )
    if "pending" in status:
        output.out.print(f"pending: {', '.join(status['pending']) or '(none)'}")


class SqlFormat(StrEnum):
    table = "table"
    json = "json"
    csv = "csv"


@app.command()
def sql(
    query: Annotated[str, typer.Argument(help="Spark SQL; time travel: TIMESTAMP/VERSION AS OF, FOR ... AS OF.")],
    fmt: Annotated[SqlFormat, typer.Option("--format", "-f", help="Output format.")] = SqlFormat.table,
    limit: Annotated[int | None, typer.Option("--limit", help="Return at most this many rows.")] = None,
) -> None:
    """Run SQL on the lake catalog."""
    from shoal import sql as lake_sql
    from shoal.spark import get_spark

    _state["json"] = fmt == SqlFormat.json
    result = lake_sql.run(get_spark(settings()), query, limit=limit)
    output.print_query(result, fmt.value)


@table_app.command("history")
def table_history(
    table: Annotated[str, typer.Argument(help="NS.TABLE")],
    json_out: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Snapshots of a table with time, operation and the change files each applied."""
    from shoal.lake import TableName, history
    from shoal.spark import get_spark

    _state["json"] = json_out
    rows = history(get_spark(settings()), TableName.parse(table))
    if json_out:
        output.print_json(rows)
        return
    output.print_rows(
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
    json_out: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Compact data and delete files, expire old snapshots, remove orphan files and
    CDC ledgers nothing refers to any more."""
    from shoal.cdc import ledger
    from shoal.lake import TableName, maintain
    from shoal.lake.locks import table_lock
    from shoal.spark import get_spark

    _state["json"] = json_out
    s = settings()
    m = s.maintenance
    name = TableName.parse(table)
    orphan_age = m.orphan_min_age_hours if orphan_min_age_hours is None else orphan_min_age_hours
    spark = get_spark(s)
    with output.progress(not json_out, f"maintain {table}") as say, table_lock(s.workspace_dir, str(name)):
        result = maintain(
            spark,
            name,
            catalog=s.catalog.name,
            retention_hours=m.snapshot_retention_hours if retention_hours is None else retention_hours,
            retain_last=m.retain_last if retain_last is None else retain_last,
            orphan_min_age_hours=orphan_age,
            target_file_size_mb=m.target_file_size_mb,
            progress=say,
        )
        say("removing unreferenced CDC ledgers")
        result["cdc_ledgers_removed"] = ledger.prune(spark, s, name, min_age_hours=orphan_age)
    if json_out:
        output.print_json(result)
    else:
        output.print_kv(f"Maintained {table}", result)


@config_app.command("show")
def config_show(json_out: Annotated[bool, typer.Option("--json")] = False) -> None:
    """Print the effective settings (secrets masked)."""
    s = settings()
    data = s.model_dump(mode="json")
    data["derived"] = {"warehouse": s.warehouse_uri, "catalog_uri": s.catalog_jdbc_uri}
    if json_out:
        output.print_json(data)
    else:
        output.out.print_json(data=data)


@app.command()
def demo(
    workspace: Annotated[Path, typer.Option("--workspace", help="Workspace folder for the demo lake.")] = Path(
        "demo-workspace"
    ),
) -> None:
    """Run the product-inventory CDC demo end to end."""
    from shoal.demo import run_demo

    run_demo(workspace)


def main() -> None:
    try:
        app()
    except ShoalError as exc:
        if _state["json"]:
            output.print_json({"error": str(exc).splitlines()[0], "hint": exc.hint})
        output.print_error(str(exc))
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        output.print_error("interrupted")
        sys.exit(130)


if __name__ == "__main__":
    main()
