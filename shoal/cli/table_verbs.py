"""`shoal table list|describe|schema|properties|drop`: the catalog's tables, as PyIceberg's CLI
shows them. Without --as: the operator's view (as `shoal sql`); with --as: governed and audited."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from shoal.cli import output
from shoal.cli.context import JsonOpt, out, settings
from shoal.cli.tables import table_app

AsOpt = Annotated[str | None, typer.Option("--as", help="Only what this principal may see or do (governed, audited).")]
TableArg = Annotated[str, typer.Argument(help="NS.TABLE")]


def _spark() -> Any:
    from shoal.spark import get_spark

    return get_spark(settings())


@table_app.command("list")
def table_list(
    namespace: Annotated[str | None, typer.Argument(help="Only this namespace (database).")] = None,
    as_: AsOpt = None,
    _json: JsonOpt = False,
) -> None:
    """Tables in the catalog (in NAMESPACE when given)."""
    from shoal.governance.catalog import list_tables

    tables = list_tables(_spark(), settings(), namespace, principal=as_)
    out().table(
        f"{len(tables)} table(s)", ["namespace", "table"], [[t["namespace"], t["table"]] for t in tables], tables
    )


@table_app.command("describe")
def table_describe(table: TableArg, as_: AsOpt = None, _json: JsonOpt = False) -> None:
    """A table's location, format, partitioning, current snapshot, owner, schema and properties."""
    from shoal.governance.catalog import describe_table

    info = describe_table(_spark(), settings(), table, principal=as_)

    def as_text() -> None:
        head = {k: v for k, v in info.items() if k not in ("schema", "properties")}
        head["partitioning"] = ", ".join(info["partitioning"]) or "(none)"
        output.print_kv(f"Table {info['table']}", head)
        _print_schema(info["table"], info["schema"])
        output.print_kv("Properties", info["properties"])

    out().show(info, as_text)


def _print_schema(table: str, columns: list[dict[str, Any]]) -> None:
    output.print_rows(
        f"Schema of {table}",
        ["column", "type", "nullable", "comment"],
        [[c["name"], c["type"], "yes" if c["nullable"] else "no", c["comment"] or ""] for c in columns],
    )


@table_app.command("schema")
def table_schema(table: TableArg, as_: AsOpt = None, _json: JsonOpt = False) -> None:
    """A table's columns with their types."""
    from shoal.governance.catalog import table_schema as schema_of

    columns = schema_of(_spark(), settings(), table, principal=as_)

    def as_text() -> None:
        _print_schema(table, columns)

    out().show(columns, as_text)


@table_app.command("properties")
def table_properties(table: TableArg, as_: AsOpt = None, _json: JsonOpt = False) -> None:
    """A table's properties (Iceberg's and those set with ALTER TABLE ... SET TBLPROPERTIES)."""
    from shoal.governance.catalog import table_properties as properties_of

    props = properties_of(_spark(), settings(), table, principal=as_)

    def as_text() -> None:
        output.print_kv(f"Properties of {table}", props)

    out().show(props, as_text)


@table_app.command("drop")
def table_drop(
    table: TableArg,
    purge: Annotated[
        bool, typer.Option("--purge", help="Delete the table's data and metadata files too (else they stay).")
    ] = False,
    as_: AsOpt = None,
    _json: JsonOpt = False,
) -> None:
    """Drop a table from the catalog (its files stay unless --purge). With --as: needs DROP, audited."""
    from shoal.governance.catalog import drop_table

    drop_table(_spark(), settings(), table, principal=as_, purge=purge)
    out().done(f"dropped {table}" + (" and its files" if purge else " (its files are kept)"))
