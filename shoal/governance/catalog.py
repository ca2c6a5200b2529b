"""The catalog's tables as the operator or a principal sees them: `shoal table list|describe|
schema|properties|drop` (the verbs PyIceberg's CLI has) and the Python API.

Without a principal these are the operator's views, as `shoal sql` without `--as`. With one, every
answer goes through governed SQL (SHOW TABLES, DESCRIBE, DROP TABLE): only discoverable tables are
listed or described, DROP needs the privilege, and each call is audited.
"""

from __future__ import annotations

import re
from typing import Any

from shoal.config import Settings
from shoal.exceptions import SqlError, TableNotFoundError
from shoal.governance.principals import Principal, Principals
from shoal.governance.sql import GovernedSql
from shoal.lake.tables import TableName
from shoal.sql import run

# Properties that name storage paths: raw file locations are reached through access points, not
# through table metadata, so a non-admin principal does not see them.
_PATH_KEY = re.compile(r"(^|\.)(location|path)$|\.path\.", re.I)
# ... nor a value that is one, whatever its key (e.g. the CDC ledger a maintenance run records).
_PATH_VALUE = re.compile(r"://|^/|^[A-Za-z]:\\")


def _shown(key: str, value: str) -> bool:
    return not _PATH_KEY.search(key) and not _PATH_VALUE.search(value)


def _who(settings: Settings, principal: str | Principal | None) -> Principal | None:
    if principal is None or isinstance(principal, Principal):
        return principal
    return Principals(settings).principal(principal)


def _existing(spark: Any, settings: Settings, name: TableName) -> str:
    """The catalog-qualified name of a table that exists, else TableNotFoundError."""
    qualified = name.qualified(settings.catalog.name)
    if not spark.catalog.tableExists(qualified):
        raise TableNotFoundError(
            f"table {name} does not exist", hint=f"list the tables: shoal table list {name.namespace}"
        )
    return qualified


def list_tables(
    spark: Any, settings: Settings, namespace: str | None = None, *, principal: str | Principal | None = None
) -> list[dict[str, str]]:
    """[{namespace, table, name}] for every table (in `namespace` when given), sorted by name."""
    who = _who(settings, principal)
    catalog = settings.catalog.name
    if namespace is not None:
        namespaces = [namespace.lower()]
    elif who is None:
        namespaces = [r[0] for r in run(spark, f"SHOW NAMESPACES IN {catalog}").rows]
    else:
        namespaces = [r[0] for r in GovernedSql(spark, settings, who).execute("SHOW NAMESPACES").rows]
    out = []
    for ns in namespaces:
        if who is None:
            try:
                rows = run(spark, f"SHOW TABLES IN {catalog}.`{ns}`").rows
            except SqlError:
                if namespace is not None:
                    raise
                continue
            names = [r[1] for r in rows]
        else:
            names = [r[1] for r in GovernedSql(spark, settings, who).execute(f"SHOW TABLES IN `{ns}`").rows]
        out += [{"namespace": ns, "table": t, "name": f"{ns}.{t}"} for t in names]
    return sorted(out, key=lambda t: t["name"])


def table_schema(
    spark: Any, settings: Settings, table: str, *, principal: str | Principal | None = None
) -> list[dict[str, Any]]:
    """[{name, type, nullable, comment}] per column; with a principal, only if it may discover the table."""
    name = TableName.parse(table)
    who = _who(settings, principal)
    if who is not None:
        # Refuses (AccessDenied) a table the principal may not discover, and audits the look.
        GovernedSql(spark, settings, who).execute(f"DESCRIBE TABLE {name}")
    schema = spark.table(_existing(spark, settings, name)).schema
    return [
        {
            "name": f.name,
            "type": f.dataType.simpleString(),
            "nullable": f.nullable,
            "comment": (f.metadata or {}).get("comment"),
        }
        for f in schema.fields
    ]


def table_properties(
    spark: Any, settings: Settings, table: str, *, principal: str | Principal | None = None
) -> dict[str, str]:
    """The table's properties (Iceberg's and the user's); storage paths only for admins and the operator."""
    name = TableName.parse(table)
    who = _who(settings, principal)
    if who is not None:
        GovernedSql(spark, settings, who).execute(f"DESCRIBE TABLE {name}")
    rows = run(spark, f"SHOW TBLPROPERTIES {_existing(spark, settings, name)}").rows
    props = {str(k): str(v) for k, v in rows}
    if who is not None and not who.is_admin:
        props = {k: v for k, v in props.items() if _shown(k, v)}
    return dict(sorted(props.items()))


def describe_table(
    spark: Any, settings: Settings, table: str, *, principal: str | Principal | None = None
) -> dict[str, Any]:
    """Name, location, format, partitioning, current snapshot, owner, schema and properties."""
    from shoal.governance.grants import Governance

    name = TableName.parse(table)
    who = _who(settings, principal)
    schema = table_schema(spark, settings, table, principal=who)
    props = table_properties(spark, settings, table, principal=None)
    qualified = name.qualified(settings.catalog.name)
    extended = run(spark, f"DESCRIBE TABLE EXTENDED {qualified}").rows
    partitioning = _partitioning(extended)
    location = next((str(r[1]) for r in extended if r[0] == "Location"), None)
    snapshots = run(spark, f"SELECT count(*) FROM {qualified}.snapshots").rows[0][0]
    info = Governance(settings).info(str(name))
    out: dict[str, Any] = {
        "table": str(name),
        "location": location,
        "format": props.get("format"),
        "format_version": props.get("format-version"),
        "current_snapshot_id": props.get("current-snapshot-id"),
        "snapshots": int(snapshots),
        "partitioning": partitioning,
        "owner": info.get("owner"),
        "description": info.get("description"),
        "schema": schema,
        "properties": table_properties(spark, settings, table, principal=who) if who is not None else props,
    }
    if who is not None and not who.is_admin:
        out.pop("location")
    return out


def _partitioning(rows: list[tuple[Any, ...]]) -> list[str]:
    """The partition spec from DESCRIBE's rows: Spark lists identity columns under "# Partition
    Information" (one row per column) and transforms under "# Partitioning" ("Part 0", "bucket(16, id)")."""
    out: list[str] = []
    section = None
    for row in rows:
        head = str(row[0] or "").strip()
        if head in ("# Partition Information", "# Partitioning"):
            section = head
            continue
        if section is None:
            continue
        if not head or (head.startswith("#") and head != "# col_name"):
            if out:
                break
            continue
        if section == "# Partitioning" and head.startswith("Part "):
            out.append(str(row[1]))
        elif section == "# Partition Information" and head != "# col_name":
            out.append(head)
    return out


def drop_table(
    spark: Any, settings: Settings, table: str, *, principal: str | Principal | None = None, purge: bool = False
) -> None:
    """Drop a table; `purge` deletes its data files too. With a principal: needs DROP (audited)."""
    name = TableName.parse(table)
    who = _who(settings, principal)
    statement = f"DROP TABLE {name}" + (" PURGE" if purge else "")
    if who is None:
        run(spark, f"DROP TABLE {_existing(spark, settings, name)}" + (" PURGE" if purge else ""))
    else:
        GovernedSql(spark, settings, who).execute(statement)
