"""`shoal cdc`: change-data-capture upserts into Iceberg tables."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

import typer

from shoal.cli import output
from shoal.cli.context import JsonOpt, out, settings, split_values
from shoal.exceptions import ShoalError
from shoal.spark import get_spark

app = typer.Typer(help="Change-data-capture upserts into Iceberg tables.", no_args_is_help=True)

# ApplyOptions' fields as this command's flags: the library's errors name them in these words.
FLAGS = {
    "keys": "--key",
    "sequence": "--sequence",
    "partition_by": "--partition-by",
    "op_column": "--op-column",
    "no_header": "--no-header",
    "columns": "--columns",
    "on_error": "--on-error",
    "write_mode": "--write-mode",
    "delimiter": "--delimiter",
    "reapply": "--reapply",
    "format": "--format",
    "schema": "--schema",
}


class OnError(StrEnum):
    fail = "fail"
    quarantine = "quarantine"


class SourceFormat(StrEnum):
    dms_csv = "dms-csv"
    dms_parquet = "dms-parquet"
    debezium_json = "debezium-json"
    debezium_avro = "debezium-avro"


class WriteMode(StrEnum):
    merge_on_read = "merge-on-read"
    copy_on_write = "copy-on-write"


@app.command("apply")
def cdc_apply(
    source: Annotated[
        str,
        typer.Argument(
            help="Folder of change files (LOAD*.csv/.parquet full loads, time-named changes, Debezium sink files)."
        ),
    ],
    table: Annotated[str, typer.Option("--table", help="Target table NS.TABLE (created on first apply).")],
    key: Annotated[list[str], typer.Option("--key", help="Key column(s): COL[,COL...].")],
    sequence: Annotated[
        str | None,
        typer.Option(
            "--sequence", help="Column ordering events (newest wins) [default for Debezium: source.lsn/ts_ms]."
        ),
    ] = None,
    partition_by: Annotated[
        str | None,
        typer.Option("--partition-by", help='Partition spec for a new table, e.g. "category, bucket(16, id)".'),
    ] = None,
    op_column: Annotated[
        str | None,
        typer.Option("--op-column", help="Name of the operation column (I/U/D) [default: [cdc] op_column, op]."),
    ] = None,
    no_header: Annotated[bool, typer.Option("--no-header", help="Files have no header row (use --columns).")] = False,
    columns: Annotated[
        str | None, typer.Option("--columns", help="Data column names in file order, for --no-header.")
    ] = None,
    on_error: Annotated[
        OnError | None,
        typer.Option(
            "--on-error",
            help="fail: apply nothing; quarantine: divert bad rows to NS.TABLE__rejects [default: [cdc] on_error, fail].",
        ),
    ] = None,
    write_mode: Annotated[
        WriteMode | None,
        typer.Option("--write-mode", help="Row-level write mode for this table (default from config)."),
    ] = None,
    delimiter: Annotated[str, typer.Option("--delimiter", help="Field delimiter.")] = ",",
    reapply: Annotated[
        bool,
        typer.Option(
            "--reapply", help="Apply files rewritten under a name already applied, as new changes (else skipped)."
        ),
    ] = False,
    source_format: Annotated[
        SourceFormat | None,
        typer.Option("--format", help="Change-file format [default: by file name: .csv, .parquet, .json, .avro]."),
    ] = None,
    schema: Annotated[
        str | None,
        typer.Option(
            "--schema",
            help='Declared column types overriding inference: a JSON file {"col": "decimal(10,2)"}, a DDL file, or NS.TABLE.',
        ),
    ] = None,
    _json: JsonOpt = False,
) -> None:
    """Apply the change files under SOURCE not yet applied to the table, as one commit."""
    from shoal.cdc import ApplyOptions, apply_changes

    opts = ApplyOptions(
        table=table,
        keys=split_values(key),
        sequence=sequence or "",
        partition_by=partition_by,
        op_column=op_column,
        header=not no_header,
        columns=split_values([columns]) if columns else None,
        on_error=on_error.value if on_error else None,
        write_mode=write_mode.value if write_mode else None,
        delimiter=delimiter,
        reapply=reapply,
        format=source_format.value if source_format else None,
        schema=schema,
    )
    s = settings()
    with out().progress(f"cdc apply {table}") as say:
        try:
            result = apply_changes(get_spark(s), s, source, opts, say=say)
        except ShoalError as exc:
            worded = exc.in_terms_of(FLAGS)
            if worded is exc:
                raise
            raise worded from exc
    for warning in result.warnings:
        output.print_warning(warning)

    def as_text() -> None:
        data = result.to_dict()
        data["files_applied"] = ", ".join(result.files_applied) or "(none: nothing new)"
        for listed in ("files_rewritten", "files_reapplied"):
            data[listed] = ", ".join(data[listed]) or "-"
        output.print_kv(f"Applied {len(result.files_applied)} file(s) to {table}", data)

    out().show(result.to_dict(), as_text)


@app.command("files")
def cdc_files(
    table: Annotated[str, typer.Argument(help="NS.TABLE")],
    source: Annotated[
        str | None, typer.Option("--source", help="Also list files under SOURCE not yet applied.")
    ] = None,
    _json: JsonOpt = False,
) -> None:
    """Change files applied to a table (and, with --source, those still pending)."""
    from shoal.cdc import file_status

    s = settings()
    status = file_status(get_spark(s), s, table, source)

    def as_text() -> None:
        output.print_rows(
            f"Applied to {table}",
            ["file", "size", "batch_id", "applied_at"],
            [[f["file"], f["size"], f["batch_id"], f["applied_at"]] for f in status["applied"]],
        )
        if "pending" in status:
            output.out.print(f"pending: {', '.join(status['pending']) or '(none)'}")
            if status["rewritten"]:
                output.out.print(f"rewritten since applied (apply with --reapply): {', '.join(status['rewritten'])}")

    out().show(status, as_text)
