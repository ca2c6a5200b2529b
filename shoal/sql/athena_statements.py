"""Statements people bring from Athena, with Athena's meaning, on the lake's Iceberg tables.

- `SHOW COLUMNS IN t`, `SHOW CREATE TABLE t` (Athena's DDL, which Shoal reads back),
  `SHOW PARTITIONS t`, `DESCRIBE t`.
- `"t$partitions"`, `"t$files"`, `"t$snapshots"`, `"t$history"`, `"t$manifests"`, `"t$refs"`:
  Iceberg's metadata tables, with Athena's column names.
- `OPTIMIZE t REWRITE DATA USING BIN_PACK [WHERE ...]`: Iceberg's rewrite_data_files.
- `VACUUM t`: expire_snapshots and remove_orphan_files, by the table's
  `vacuum_max_snapshot_age_seconds` (default 5 days) and `vacuum_min_snapshots_to_keep` (1).
- `PREPARE name FROM ...`, `EXECUTE name [USING ...]`, `DEALLOCATE PREPARE name`: kept in the
  catalog database, so a statement prepared by one `shoal sql` runs in the next.
- `EXPLAIN [ANALYZE] statement`: Spark's plan of the translated statement.
- `UNLOAD (SELECT ...) TO 'location' WITH (format = ..., compression = ..., partitioned_by = ARRAY[...])`.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Protocol

import sqlglot
from sqlalchemy import Column, DateTime, MetaData, String, Table, Text, delete, select
from sqlglot import exp
from sqlglot.errors import ParseError

from shoal.exceptions import SqlError
from shoal.lake import database
from shoal.sql import QueryResult, run
from shoal.sql.external_tables import ExternalTable, Registry, _is_empty, run_df, table_location

if TYPE_CHECKING:
    from shoal.config import Settings


class SqlRunner(Protocol):
    """What these statements need of `shoal.sql.external.SqlRunner`, which runs them: a protocol,
    so that this module needs nothing from the runner's."""

    settings: Settings
    session: Any  # the SparkSession the runner's dialect uses
    registry: Registry

    def statement(self, sql: str, *, limit: int | None = None) -> QueryResult: ...
    def translate(self, sql: str) -> str: ...
    def materialize(self, table: ExternalTable) -> None: ...
    def _name(self, table: exp.Expr) -> str | None: ...


prepared_tables = MetaData()
prepared_statements = Table(
    "shoal_prepared_statements",
    prepared_tables,
    Column("name", String(300), primary_key=True),
    Column("statement", Text, nullable=False),
    Column("created_at", DateTime, nullable=False),
)

# Athena's metadata tables: Iceberg's, with the columns Athena shows.
METADATA_TABLES = {
    "partitions": "partition, record_count, file_count, total_data_file_size_in_bytes AS total_size",
    "files": "content, file_path, file_format, spec_id, partition, record_count, file_size_in_bytes, "
    "column_sizes, value_counts, null_value_counts, nan_value_counts, lower_bounds, upper_bounds, "
    "key_metadata, split_offsets, equality_ids, sort_order_id",
    "snapshots": "committed_at, snapshot_id, parent_id, operation, manifest_list, summary",
    "history": "made_current_at, snapshot_id, parent_id, is_current_ancestor",
    # Athena's row counts per manifest are not in Iceberg's Spark table.
    "manifests": "path, length, partition_spec_id, added_snapshot_id, added_data_files_count, "
    "existing_data_files_count, deleted_data_files_count, partition_summaries",
    "refs": "name, type, snapshot_id, max_reference_age_in_ms, min_snapshots_to_keep, max_snapshot_age_in_ms",
}
_ATHENA_DDL_TYPES = {"string": "string", "int": "int", "bigint": "bigint", "double": "double", "float": "float"}


def metadata_subquery(table: exp.Table, database: str | None) -> exp.Expr | None:
    """`"t$snapshots"` as a subquery over Iceberg's `db.t.snapshots`; None for other tables."""
    if "$" not in table.name:
        return None
    base, kind = table.name.rsplit("$", 1)
    if kind.lower() not in METADATA_TABLES:
        raise SqlError(
            f"not supported in Shoal: metadata table {table.name!r}",
            hint="available: " + ", ".join(f'"{base}${k}"' for k in METADATA_TABLES),
        )
    db = table.text("db") or database
    if not db:
        raise SqlError(f'{table.name}: name the database (db."t$kind")')
    source = ".".join(_q(p) for p in (table.text("catalog"), db, base, kind.lower()) if p)
    query = sqlglot.parse_one(f"SELECT {METADATA_TABLES[kind.lower()]} FROM {source}", read="spark")
    alias = table.alias or table.name
    return exp.Subquery(this=query, alias=exp.TableAlias(this=exp.to_identifier(alias, quoted=True)))


def _q(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _words(sql: str) -> list[str]:
    return sql.split()


def _table_name(runner: SqlRunner, raw: str) -> tuple[str, str]:
    """(db.table lower case, the Spark name to use) for a name as written."""
    try:
        table = sqlglot.parse_one(raw, read="athena", into=exp.Table)
    except ParseError as exc:
        raise SqlError(f"not a table name: {raw!r}") from exc
    name = runner._name(table)
    if not name:
        raise SqlError(f"{raw}: name the database (db.table) or pass --database")
    ext = runner.registry.get(name)
    if ext is not None:
        runner.materialize(ext)
        return name, ext.spark_name
    db, tbl = name.split(".")
    return name, f"{_q(db)}.{_q(tbl)}"


def statement(runner: SqlRunner, sql: str, limit: int | None) -> QueryResult | None:
    """Run `sql` if it is one of the statements above; None otherwise."""
    words = _words(sql)
    head = [w.upper() for w in words[:3]]
    if head[:2] == ["SHOW", "COLUMNS"] and len(words) >= 4 and head[2] in ("IN", "FROM"):
        rest = " ".join(words[3:])
        m = re.fullmatch(r"(\S+)\s+(?:IN|FROM)\s+(\S+)", rest, re.I)
        raw = f"{m.group(2)}.{m.group(1)}" if m else rest
        _, spark_name = _table_name(runner, raw)
        fields = runner.session.table(spark_name).schema.fields
        return QueryResult(["field"], ["string"], [(f.name,) for f in fields])
    if head == ["SHOW", "CREATE", "TABLE"] and len(words) == 4:
        return show_create_table(runner, words[3])
    if head[:2] == ["SHOW", "PARTITIONS"] and len(words) == 3:
        return show_partitions(runner, words[2])
    if head[:1] == ["OPTIMIZE"]:
        return optimize(runner, sql)
    if head[:1] == ["VACUUM"] and len(words) == 2:
        return vacuum(runner, words[1])
    if head[:1] == ["PREPARE"]:
        m = re.fullmatch(r"PREPARE\s+(\w+)\s+FROM\s+(.+)", sql, re.I | re.S)
        if not m:
            raise SqlError("PREPARE name FROM statement")
        runner.translate(m.group(2))  # refused now, not when executed
        prepare(runner, m.group(1), m.group(2))
        return QueryResult(["result"], ["string"], [(f"prepared {m.group(1).lower()}",)])
    if head[:1] == ["EXECUTE"] and len(words) >= 2 and head[1:2] != ["IMMEDIATE"]:
        return execute(runner, sql, limit)
    if head[:2] == ["DEALLOCATE", "PREPARE"] and len(words) == 3:
        with database.engine(runner.settings, prepared_tables).begin() as conn:
            conn.execute(delete(prepared_statements).where(prepared_statements.c.name == words[2].lower()))
        return QueryResult(["result"], ["string"], [(f"deallocated {words[2].lower()}",)])
    if head[:1] == ["EXPLAIN"]:
        m = re.fullmatch(r"EXPLAIN\s+(ANALYZE\s+)?(?:\([^)]*\)\s*)?(.+)", sql, re.I | re.S)
        if not m:
            raise SqlError("EXPLAIN statement")
        mode = "EXTENDED " if m.group(1) else ""
        plan = run(runner.session, f"EXPLAIN {mode}{runner.translate(m.group(2))}")
        return QueryResult(["Query Plan"], ["string"], plan.rows)
    if head[:1] == ["UNLOAD"]:
        return unload(runner, sql)
    return None


def show_create_table(runner: SqlRunner, raw: str) -> QueryResult:
    """Athena's DDL for a lake table (which `--dialect athena` reads back), or Spark's for others."""
    name, spark_name = _table_name(runner, raw)
    if runner.registry.get(name) is not None:
        return run(runner.session, f"SHOW CREATE TABLE {spark_name}")
    rows = runner.session.sql(f"DESCRIBE TABLE EXTENDED {spark_name}").collect()
    columns, transforms, info, section = [], [], {}, "columns"
    for r in rows:
        key, value = (r[0] or "").strip(), (r[1] or "").strip()
        if not key:
            continue
        if key == "# col_name":  # the header of a section's rows
            continue
        if key.startswith("#"):
            section = key
            continue
        if section == "columns":
            columns.append((key, value))
        elif section == "# Partitioning" and key.startswith("Part "):
            transforms.append(value)
        elif section == "# Partition Information":  # identity partitions only
            transforms.append(key)
        else:
            info[key] = value
    provider = info.get("Provider", "").lower()
    if provider != "iceberg":
        return run(runner.session, f"SHOW CREATE TABLE {spark_name}")
    cols = ",\n".join(f"  {c} {t}" for c, t in columns)
    ddl = f"CREATE TABLE {name} (\n{cols})"
    if transforms:
        ddl += "\nPARTITIONED BY (" + ", ".join(transforms) + ")"
    if info.get("Location"):
        ddl += f"\nLOCATION '{info['Location']}'"
    props = {"table_type": "iceberg"}
    table_props = info.get("Table Properties", "").strip("[]")
    for item in table_props.split(","):
        k, _, v = item.partition("=")
        if k.strip() == "write.format.default":
            props["format"] = v.strip()
    ddl += "\nTBLPROPERTIES (\n" + ",\n".join(f"  '{k}'='{v}'" for k, v in props.items()) + ")"
    return QueryResult(["createtab_stmt"], ["string"], [(ddl,)])


def show_partitions(runner: SqlRunner, raw: str) -> QueryResult:
    """Each partition as Athena lists them: `k=v/k2=v2`."""
    name, spark_name = _table_name(runner, raw)
    if runner.registry.get(name) is not None:
        return run(runner.session, f"SHOW PARTITIONS {spark_name}")
    df = runner.session.sql(f"SELECT partition FROM {spark_name}.partitions")
    fields = (
        df.schema.fields[0].dataType.fields
        if df.schema.fields and hasattr(df.schema.fields[0].dataType, "fields")
        else []
    )
    if not fields:
        raise SqlError(f"SHOW PARTITIONS: table {name} is not partitioned")
    rows = []
    for r in df.collect():
        part = r[0]
        rows.append(("/".join(f"{f.name}={'null' if part[f.name] is None else part[f.name]}" for f in fields),))
    return QueryResult(["partition"], ["string"], sorted(rows))


def _catalog(runner: SqlRunner) -> str:
    return runner.settings.catalog.name


def optimize(runner: SqlRunner, sql: str) -> QueryResult:
    m = re.fullmatch(
        r"OPTIMIZE\s+(\S+)\s+REWRITE\s+DATA\s+USING\s+BIN_PACK(?:\s+WHERE\s+(.+))?", sql.strip(), re.I | re.S
    )
    if not m:
        raise SqlError("not supported in Shoal: OPTIMIZE other than OPTIMIZE t REWRITE DATA USING BIN_PACK [WHERE ...]")
    name, _ = _table_name(runner, m.group(1))
    # Athena merges every small file of a partition: two are enough for a rewrite.
    args = f"table => '{name}', strategy => 'binpack', options => map('min-input-files', '2')"
    if m.group(2):
        # The filter in Spark SQL, translated like any Athena expression.
        where = runner.translate(f"SELECT * FROM {m.group(1)} WHERE {m.group(2)}")
        tree = sqlglot.parse_one(where, read="spark")
        cond = tree.args["where"].this
        for col in cond.find_all(exp.Column):
            col.set("table", None)
        args += ", where => '" + cond.sql(dialect="spark").replace("'", "\\'") + "'"
    return run(runner.session, f"CALL {_catalog(runner)}.system.rewrite_data_files({args})")


def vacuum(runner: SqlRunner, raw: str) -> QueryResult:
    name, spark_name = _table_name(runner, raw)
    props = {r[0]: r[1] for r in runner.session.sql(f"SHOW TBLPROPERTIES {spark_name}").collect()}
    age = int(props.get("vacuum_max_snapshot_age_seconds", 432000))
    keep = int(props.get("vacuum_min_snapshots_to_keep", 1))
    cat = _catalog(runner)
    older = f"TIMESTAMP '{_cutoff(runner, age)}'"
    expired = run(
        runner.session,
        f"CALL {cat}.system.expire_snapshots(table => '{name}', older_than => {older}, retain_last => {keep})",
    )
    orphans = run(runner.session, f"CALL {cat}.system.remove_orphan_files(table => '{name}', older_than => {older})")
    files = sum(v for v in expired.rows[0] if isinstance(v, int)) if expired.rows else 0
    return QueryResult(
        ["table", "expired_files", "orphan_files_removed"],
        ["string", "bigint", "bigint"],
        [(name, files, len(orphans.rows))],
    )


def _cutoff(runner: SqlRunner, seconds: int) -> str:
    import datetime as dt

    return (dt.datetime.now(dt.UTC) - dt.timedelta(seconds=seconds)).strftime("%Y-%m-%d %H:%M:%S")


def prepare(runner: SqlRunner, name: str, statement_sql: str) -> None:
    with database.engine(runner.settings, prepared_tables).begin() as conn:
        database.upsert(
            conn,
            prepared_statements,
            {"name": name.lower()},
            {"statement": statement_sql, "created_at": database.utcnow()},
        )


def execute(runner: SqlRunner, sql: str, limit: int | None) -> QueryResult:
    m = re.fullmatch(r"EXECUTE\s+(\w+)(?:\s+USING\s+(.+))?", sql.strip(), re.I | re.S)
    if not m:
        raise SqlError("EXECUTE name [USING value, ...]")
    with database.engine(runner.settings, prepared_tables).connect() as conn:
        row = conn.execute(select(prepared_statements).where(prepared_statements.c.name == m.group(1).lower())).first()
    if row is None:
        raise SqlError(f"prepared statement {m.group(1)!r} not found", hint="PREPARE it first")
    values = []
    if m.group(2):
        try:
            values = list(sqlglot.parse_one(f"SELECT {m.group(2)}", read="athena").expressions)
        except ParseError as exc:
            raise SqlError(f"EXECUTE {m.group(1)} USING: cannot read the values: {exc}") from exc
    tree = sqlglot.parse_one(row.statement, read="athena")
    holes = list(tree.find_all(exp.Placeholder))
    if len(holes) != len(values):
        raise SqlError(f"EXECUTE {m.group(1)}: the statement has {len(holes)} parameters, USING gives {len(values)}")
    for hole, value in zip(holes, values, strict=True):
        hole.replace(value)
    return runner.statement(tree.sql(dialect="athena"), limit=limit)


def with_properties(options: str) -> dict[str, exp.Expr]:
    """`format = 'JSON', partitioned_by = ARRAY['c']` as Athena's CTAS reads its WITH (...)."""
    props: dict[str, exp.Expr] = {}
    if not options.strip():
        return props
    try:
        tree = sqlglot.parse_one(f"CREATE TABLE x WITH ({options}) AS SELECT 1", read="athena")
    except ParseError as exc:
        raise SqlError(f"cannot read WITH ({options}): {str(exc).splitlines()[0]}") from exc
    for prop in (tree.args.get("properties") or exp.Properties(expressions=[])).expressions:
        if isinstance(prop, exp.FileFormatProperty):
            props["format"] = prop.this
        elif isinstance(prop, exp.PartitionedByProperty):
            props["partitioned_by"] = prop.this
        elif isinstance(prop, exp.Property) and isinstance(prop.args.get("value"), exp.Expr):
            props[prop.name.lower()] = prop.args["value"]
    return props


def _text(node: exp.Expr | str) -> str:
    if isinstance(node, str):
        return node
    return node.name if isinstance(node, exp.Literal | exp.Var | exp.Identifier | exp.Column) else node.sql()


def unload(runner: SqlRunner, sql: str) -> QueryResult:
    """UNLOAD (query) TO 'location' WITH (format, compression, field_delimiter, partitioned_by)."""

    m = re.fullmatch(r"UNLOAD\s*\((.+)\)\s*TO\s*'([^']+)'\s*(?:WITH\s*\((.*)\))?", sql.strip(), re.I | re.S)
    if not m:
        raise SqlError("UNLOAD (SELECT ...) TO 'location' WITH (format = '...')")
    query, location, options = m.group(1), table_location(m.group(2)), m.group(3) or ""
    props = with_properties(options)
    fmt = (_text(props["format"]) if "format" in props else "PARQUET").lower()
    fmt = {"textfile": "csv"}.get(fmt, fmt)
    if fmt not in {"parquet", "orc", "avro", "json", "csv"}:
        raise SqlError(f"not supported in Shoal: UNLOAD format {fmt!r}")
    df = run_df(runner.session, runner.translate(query))
    if not _is_empty(runner.settings, location):
        raise SqlError(f"UNLOAD: {location} is not empty", hint="Athena writes only to an empty location")
    writer = df.write.format(fmt).mode("errorifexists")
    parts = [_text(e) for e in props["partitioned_by"].expressions] if "partitioned_by" in props else []
    if parts:
        writer = writer.partitionBy(*parts)
    if "compression" in props:
        writer = writer.option("compression", _text(props["compression"]).lower())
    if fmt == "csv":
        delim = _text(props["field_delimiter"]) if "field_delimiter" in props else ","
        writer = writer.option("sep", delim).option("header", "false")
    try:
        writer.save(location)
    except Exception as exc:
        raise SqlError(f"UNLOAD to {location} failed: {str(exc).splitlines()[0]}") from exc
    return QueryResult(["result"], ["string"], [(f"unloaded to {location} ({fmt})",)])
