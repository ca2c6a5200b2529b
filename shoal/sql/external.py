"""SQL steps written for serverless query engines (Athena/Presto/Trino style), run on Spark.

- `CREATE EXTERNAL TABLE ... PARTITIONED BY ... STORED AS PARQUET LOCATION ...` registers
  an external table: its definition is stored in the catalog database
  (`shoal_external_tables`) and materialised in each Spark process's session catalog
  (`spark_catalog.DB.TABLE`) on first use, so it survives across processes.
- `MSCK REPAIR TABLE` discovers partitions; the table remembers it was repaired, and a new
  process repeats the discovery when it first uses the table.
- `DROP TABLE [IF EXISTS]` forgets an external table (its files stay, as with any external
  table) or drops a lake table.
- `CREATE TABLE ... WITH (format=..., external_location=..., partitioned_by=ARRAY[...]) AS
  SELECT` writes files and registers an external table; without `WITH` it creates an
  Iceberg table in the lake.
- Every other statement is parsed with sqlglot in the source dialect, its references to
  external tables pointed at the session catalog, and generated as Spark SQL.
"""

from __future__ import annotations

import re
import threading
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError

from shoal.config import Settings
from shoal.exceptions import SqlError, first_line
from shoal.sql import QueryResult, athena_statements, run, split_statements
from shoal.sql.athena import AthenaTranslator, ShoalAthena, athena_session
from shoal.sql.athena import at_offset as athena_position
from shoal.sql.external_tables import (
    SESSION_CATALOG,
    ExternalTable,
    Registry,
    _is_empty,
    _q,
    run_df,
    table_location,
)
from shoal.sql.positions import without_positions

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

ATHENA_DIALECTS = {"athena", "trino", "presto"}

_SERDE_FORMATS = {
    "org.apache.hadoop.hive.ql.io.parquet.serde.parquethiveserde": "parquet",
    "org.openx.data.jsonserde.jsonserde": "json",
    "org.apache.hive.hcatalog.data.jsonserde": "json",
    "org.apache.hadoop.hive.serde2.opencsvserde": "csv",
    "org.apache.hadoop.hive.serde2.lazy.lazysimpleserde": "csv",
    "org.apache.hadoop.hive.ql.io.orc.orcserde": "orc",
}
_STORED_AS = {"PARQUET": "parquet", "ORC": "orc", "TEXTFILE": "csv", "JSON": "json", "AVRO": "avro"}
# STORED AS INPUTFORMAT '<class>': the Hadoop input format names the file format.
_INPUT_FORMATS = {
    "org.apache.hadoop.mapred.textinputformat": "csv",
    "org.apache.hadoop.hive.ql.io.parquet.mapredparquetinputformat": "parquet",
    "parquet.hive.deprecatedparquetinputformat": "parquet",
    "org.apache.hadoop.hive.ql.io.orc.orcinputformat": "orc",
    "org.apache.hadoop.hive.ql.io.avro.avrocontainerinputformat": "avro",
}
# Hive's text tables separate fields with Ctrl-A unless told otherwise; OpenCSVSerde with ','.
_OPEN_CSV = "org.apache.hadoop.hive.serde2.opencsvserde"
_SERDE_OPTIONS = {"field.delim": "sep", "separatorchar": "sep", "quotechar": "quote", "escapechar": "escape"}
# Athena's Iceberg table properties, as Iceberg names them.
_ICEBERG_PROPERTIES = {
    "format": "write.format.default",
    "write_compression": "write.parquet.compression-codec",
    "write_target_data_file_size_bytes": "write.target-file-size-bytes",
}


class SqlRunner:
    """Runs SQL scripts in a source dialect against the lake and the external tables."""

    def __init__(
        self, spark: SparkSession, settings: Settings, *, dialect: str = "athena", database_name: str | None = None
    ) -> None:
        self.spark = spark
        self.settings = settings
        self.dialect = dialect
        # Athena runs a statement without a database in `default`; so does Shoal, for every
        # dialect but Spark's own (where the session's current namespace decides).
        self.database = database_name.lower() if database_name else (None if dialect == "spark" else "default")
        self.registry = Registry(settings)
        if self.database == "default":
            _ensure_default_database(spark)
        # Athena's SQL (Trino engine v3) runs with Athena's answers: see shoal.sql.athena.
        self.athena = dialect in ATHENA_DIALECTS
        self.session = athena_session(spark) if self.athena else spark
        self._script = ""
        self._offset = 0
        self._schemas: dict[str, list[tuple[str, str]]] = {}  # table -> columns, while nothing changes them

    @property
    def _split_dialect(self) -> Any:
        # Athena's strings escape only a quote: 'a\_b' LIKE ... ESCAPE '\' (Spark's tokenizer
        # reads the backslash as an escape and rejects the statement).
        return ShoalAthena if self.athena else "spark"

    def execute(self, sql: str, *, limit: int | None = None) -> tuple[QueryResult, int]:
        """Run every statement; returns the last result and how many statements ran."""
        statements = split_statements(sql, self._split_dialect)
        if not statements:
            raise SqlError("no SQL statement given")
        result = QueryResult([], [], [])
        cursor = 0
        for i, statement in enumerate(statements, 1):
            # Where the statement starts in the script: errors name the line and column there.
            self._script, self._offset = sql, max(sql.find(statement, cursor), 0)
            cursor = self._offset + len(statement)
            try:
                result = self.statement(statement, limit=limit)
            except SqlError as exc:
                if len(statements) == 1:
                    raise
                # args[0]: the message alone (str() would repeat the hint given again here).
                raise SqlError(f"statement {i} of {len(statements)}: {exc.args[0]}", hint=exc.hint) from exc
        return result, len(statements)

    # ---- one statement ------------------------------------------------------------------------
    def statement(self, sql: str, *, limit: int | None = None) -> QueryResult:
        head = " ".join(sql.split()[:3]).upper()
        if head.startswith("MSCK REPAIR TABLE"):
            return self._repair(sql.split()[3].strip('`"; '))
        if not self._script or self._script.find(sql) < 0:
            self._script, self._offset = sql, 0
        if not tree_is_query(sql):
            self._schemas.clear()  # DDL may change the columns the type checks rely on
        if self.athena:
            done = athena_statements.statement(self, sql, limit)
            if done is not None:
                return done
        try:
            tree = sqlglot.parse_one(sql, read=ShoalAthena if self.athena else self.dialect)
        except ParseError as exc:
            if self.athena:
                raise self._parse_error(exc) from exc
            tree = None
        if self.athena and isinstance(tree, exp.Create):
            self._athena_create_form(tree, sql)
        if isinstance(tree, exp.Create) and self._is_iceberg_create(tree):
            return self._create_iceberg(tree)
        if isinstance(tree, exp.Create) and self._is_external_create(tree):
            return self._create_external(tree)
        if (
            isinstance(tree, exp.Create)
            and (tree.args.get("kind") or "").upper() == "TABLE"
            and isinstance(tree.expression, exp.Query | exp.Select)
        ):
            return self._ctas(tree)
        if isinstance(tree, exp.Drop) and (tree.args.get("kind") or "").upper() == "TABLE":
            targets = tree.args.get("tables") or [tree.this]  # sqlglot >= 30 lists the tables
            name = self._name(targets[0]) if len(targets) == 1 else None
            ext = self.registry.get(name) if name else None
            if ext is not None:
                self.spark.sql(f"DROP TABLE IF EXISTS {ext.spark_name}")
                self.registry.remove(ext.name)
                return _message(f"dropped external table {ext.name} (its files at {ext.location} are kept)")
        if tree is None or isinstance(tree, exp.Command):
            return run(self.session, sql, limit=limit)  # Spark understands it, or says why not
        rewritten, changed = self._rewrite(tree)
        if self.dialect == "spark" and not changed:
            return run(self.spark, sql, limit=limit)  # Spark SQL as written (no round trip)
        if not self.athena:
            return run(self.session, rewritten, limit=limit)
        try:
            return run(self.session, rewritten, limit=limit)
        except SqlError as exc:
            raise self._located(exc, sql) from exc

    def _located(self, exc: SqlError, statement: str) -> SqlError:
        """Spark's error about the rewritten SQL, pointed at the user's text instead: Spark's own
        position is dropped, and a name it quotes is found in the statement as written."""
        message = without_positions(exc.args[0]).rstrip("; ")
        raised = re.search(r"RuntimeException: (.+)", message)  # RAISE_ERROR in the translation
        if raised:
            return SqlError(raised.group(1).strip(), hint=exc.hint)
        named = re.search(r"((?:`[^`]+`\.)*`[^`]+`)", message)
        if named and "(line " not in message:
            target = named.group(1).split("`.`")[-1].strip("`").lower()
            try:
                tokens = sqlglot.tokenize(statement, read=ShoalAthena)
            except Exception:  # noqa: BLE001 - a statement sqlglot cannot tokenize just has no position to report
                tokens = []
            for tok in tokens:
                if tok.text.strip('"`').lower() == target:
                    message += athena_position(self._script, tok.start, self._offset)
                    break
        return SqlError(message, hint=exc.hint)

    def translate(self, sql: str) -> str:
        """Spark SQL for each statement of `sql` (nothing runs): what governed SQL checks and runs.

        Refusals (`not supported in Shoal: ...`) and parse errors are raised here."""
        out = []
        cursor = 0
        for statement in split_statements(sql, self._split_dialect):
            self._script, self._offset = sql, max(sql.find(statement, cursor), 0)
            cursor = self._offset + len(statement)
            try:
                tree = sqlglot.parse_one(statement, read=ShoalAthena if self.athena else self.dialect)
            except ParseError as exc:
                raise self._parse_error(exc) if self.athena else SqlError(first_line(exc)) from exc
            out.append(statement if isinstance(tree, exp.Command) else self._rewrite(tree)[0])
        return ";\n".join(out)

    def to_spark(self, tree: exp.Expr) -> str:
        """Spark SQL for `tree`, with references to external tables made to resolve."""
        return self._rewrite(tree)[0]

    def _rewrite(self, tree: exp.Expr) -> tuple[str, bool]:
        changed = False
        tree = tree.copy()
        ctes = {c.alias_or_name.lower() for c in tree.find_all(exp.CTE)}
        externals = self.registry.names()
        for table in list(tree.find_all(exp.Table)):
            if self.athena and "$" in table.name:  # "t$snapshots": Iceberg's metadata tables
                sub = athena_statements.metadata_subquery(table, self.database)
                if sub is not None:
                    table.replace(sub)
                    changed = True
                    continue
            if not table.name or table.args.get("catalog") is not None:
                continue
            if not table.args.get("db"):
                if table.name.lower() in ctes:
                    continue
                if self.database:
                    table.set("db", exp.to_identifier(self.database))
            name = self._name(table)
            ext = self.registry.get(name) if name in externals else None
            if ext is not None:
                self.materialize(ext)
                table.set("catalog", exp.to_identifier(SESSION_CATALOG))
                changed = True
        if self.athena:
            translator = AthenaTranslator(self._script or "", lambda: self._column_types(tree), offset=self._offset)
            tree = translator.translate(tree)
            changed = True
        return tree.sql(dialect="spark"), changed

    def _column_types(self, tree: exp.Expr) -> dict[str, str | None]:
        """Spark type of each column name the statement's tables have (None where two differ)."""
        types: dict[str, str | None] = {}
        for table in tree.find_all(exp.Table):
            if not table.name or not table.args.get("db"):
                continue
            name = ".".join(f"`{p}`" for p in (table.text("catalog"), table.text("db"), table.name) if p)
            if name not in self._schemas:
                try:
                    fields = self.session.table(name).schema.fields
                except Exception:  # noqa: BLE001 - a table Spark cannot resolve has no known column types
                    continue
                self._schemas[name] = [(f.name, f.dataType.simpleString()) for f in fields]
            for field, t in self._schemas[name]:
                for key in (field.lower(), f"{table.alias_or_name}.{field}".lower()):
                    types[key] = t if types.get(key, t) == t else None
        # Common table expressions and subqueries in FROM: their columns' types as Spark
        # analyses them (no job runs).
        derived = [(c.alias_or_name, c.this) for c in tree.find_all(exp.CTE)]
        derived += [(q.alias_or_name, q.this) for q in tree.find_all(exp.Subquery) if q.alias_or_name]
        # Inline VALUES ... AS v(a, b): a query over it gives its columns' types.
        derived += [(v.alias_or_name, exp.select("*").from_(v.copy())) for v in tree.find_all(exp.Values) if v.alias]
        for alias, query in derived:
            if not isinstance(query, exp.Query):
                continue
            try:
                fields = self.session.sql(self._rewrite(query)[0]).schema.fields
            except Exception:  # noqa: BLE001 - a query Spark cannot analyse has no known column types
                continue
            for f in fields:
                t = f.dataType.simpleString()
                for key in (f.name.lower(), f"{alias}.{f.name}".lower()):
                    types[key] = t if types.get(key, t) == t else None
        return types

    def _parse_error(self, exc: ParseError) -> SqlError:
        """A parse error naming the line and column in the user's script."""
        err = (exc.errors or [{}])[0]
        line, col = err.get("line"), err.get("col")
        where = ""
        if line:
            base_line = self._script.count("\n", 0, self._offset)
            base_col = self._offset - (self._script.rfind("\n", 0, self._offset) + 1) if line == 1 else 0
            where = f" (line {base_line + line}, column {base_col + int(col or 0)})"
        near = err.get("highlight") or ""
        return SqlError(
            f"cannot parse the statement{where}: {err.get('description', str(exc).splitlines()[0])}"
            + (f" near {near!r}" if near else "")
        )

    def _name(self, table: exp.Expr) -> str | None:
        if not isinstance(table, exp.Table) or not table.name:
            return None
        db = table.text("db") or self.database
        return f"{db}.{table.name}".lower() if db else None

    # ---- external tables ----------------------------------------------------------------------
    def materialize(self, table: ExternalTable) -> None:
        """Make the external table exist in this process's session catalog."""
        if self.spark.catalog.tableExists(f"{SESSION_CATALOG}.{table.name}"):
            return
        db = table.name.split(".")[0]
        self.spark.sql(f"CREATE DATABASE IF NOT EXISTS {SESSION_CATALOG}.`{db}`")
        self.spark.sql(table.spark_ddl())
        if table.repaired and table.partition_columns:
            self.spark.sql(f"MSCK REPAIR TABLE {table.spark_name}")

    def _athena_create_form(self, tree: exp.Create, sql: str) -> None:
        """CREATE TABLE forms Athena rejects fail here, naming the clause and where, before
        anything is created: a CTAS with a LOCATION clause (Athena's CTAS names its location in
        WITH), and a table with columns that is neither EXTERNAL nor an Iceberg table."""
        if (tree.args.get("kind") or "").upper() != "TABLE":
            return
        props = (tree.args.get("properties") or exp.Properties(expressions=[])).expressions
        clause = re.search(r"\bLOCATION\s+'", sql, re.I)  # the clause, not WITH (location = '...')
        if isinstance(tree.expression, exp.Query) and clause is not None:
            raise SqlError(
                "CREATE TABLE ... LOCATION '...' AS SELECT is not Athena SQL"
                + athena_position(self._script, clause.start(), self._offset),
                hint="name it in WITH (table_type = 'ICEBERG', location = '...') or WITH (external_location = '...')",
            )
        spark_iceberg = any(isinstance(p, exp.FileFormatProperty) and p.name.upper() == "ICEBERG" for p in props)
        if (
            tree.expression is None
            and isinstance(tree.this, exp.Schema)
            and not self._is_iceberg_create(tree)
            and not spark_iceberg
            and not any(isinstance(p, exp.ExternalProperty) for p in props)
        ):
            raise SqlError(
                f"CREATE TABLE {tree.this.this.sql(dialect='athena')}: Athena creates only EXTERNAL tables and "
                "Iceberg tables (TBLPROPERTIES ('table_type'='ICEBERG'))" + self._word_at(sql, "CREATE"),
                hint="write CREATE EXTERNAL TABLE, or add TBLPROPERTIES ('table_type'='ICEBERG')",
            )

    def _word_at(self, sql: str, word: str) -> str:
        """' (line L, column C)' of the first `word` in the statement, in the user's script."""
        m = re.search(rf"\b{word}\b", sql, re.I)
        return athena_position(self._script, m.start(), self._offset) if m else ""

    @staticmethod
    def _is_iceberg_create(tree: exp.Create) -> bool:
        """Athena's DDL for an Iceberg table: CREATE TABLE ... TBLPROPERTIES ('table_type'='ICEBERG')."""
        props = tree.args.get("properties")
        if tree.expression is not None or props is None or (tree.args.get("kind") or "").upper() != "TABLE":
            return False
        return any(
            type(p) is exp.Property
            and p.name.lower() == "table_type"
            and _literal(p.args["value"]).upper() == "ICEBERG"
            for p in props.expressions
        )

    def _create_iceberg(self, tree: exp.Create) -> QueryResult:
        """A lake table with exactly the declared columns, partition spec and location."""
        from shoal.lake.partitioning import partition_sql, quote

        schema = tree.this
        name = self._name(schema.this if isinstance(schema, exp.Schema) else schema)
        if not name or not isinstance(schema, exp.Schema):
            raise SqlError("CREATE TABLE needs a table name and its columns")
        columns = _column_defs(schema)
        ddl = ", ".join(f"{quote(n)} {t}" for n, t in columns)
        clauses, properties = "", {}
        for prop in tree.args["properties"].expressions:
            if isinstance(prop, exp.PartitionedByProperty):
                spec = ", ".join(e.sql(dialect="spark") for e in prop.this.expressions)
                clauses += f" PARTITIONED BY ({partition_sql(spec, [n for n, _ in columns])})"
            elif isinstance(prop, exp.LocationProperty):
                clauses += f" LOCATION '{_q(table_location(_literal(prop.this)))}'"
            elif type(prop) is exp.Property:
                key, value = prop.name.lower(), _literal(prop.args["value"])
                if key in _ICEBERG_PROPERTIES:
                    properties[_ICEBERG_PROPERTIES[key]] = value.lower()
                elif key.startswith(("write.", "read.", "commit.", "history.")):
                    properties[key] = value
        if properties:
            clauses += " TBLPROPERTIES (" + ", ".join(f"'{_q(k)}' = '{_q(v)}'" for k, v in properties.items()) + ")"
        db, table = name.split(".")
        self.spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {quote(db)}")
        exists = "IF NOT EXISTS " if tree.args.get("exists") else ""
        run(self.spark, f"CREATE TABLE {exists}{quote(db)}.{quote(table)} ({ddl}) USING iceberg{clauses}")
        return _message(f"created Iceberg table {name}")

    def _ctas_iceberg(self, name: str, query: str, props: dict[str, Any], iceberg: bool) -> QueryResult:
        """CTAS into a lake (Iceberg) table: Athena's partitioned_by, partitioning (transforms),
        bucketed_by/bucket_count (as bucket transforms), location, format, write_compression."""
        from shoal.lake.partitioning import partition_sql

        specs = list(_names(props.get("partitioned_by")))
        specs += [_athena_transform(p) for p in _names(props.get("partitioning"))]
        buckets = _names(props.get("bucketed_by"))
        if buckets:
            count = props.get("bucket_count")
            if count is None:
                raise SqlError("bucketed_by needs bucket_count")
            specs += [f"bucket({int(_literal(count))}, {c})" for c in buckets]
        clauses = ""
        if specs:
            columns = [f.name for f in run_df(self.session, query).schema.fields]
            clauses += f" PARTITIONED BY ({partition_sql(', '.join(specs), columns)})"
        location = props.get("external_location") or props.get("location")
        if iceberg and location is not None:
            clauses += f" LOCATION '{_q(table_location(_literal(location)))}'"
        properties = {}
        for key, iceberg_key in _ICEBERG_PROPERTIES.items():
            if props.get(key) is not None:
                properties[iceberg_key] = _literal(props[key]).lower()
        if properties.get("write.format.default") == "iceberg":  # Spark's `USING iceberg`: the table type
            del properties["write.format.default"]
        if properties:
            clauses += " TBLPROPERTIES (" + ", ".join(f"'{_q(k)}' = '{_q(v)}'" for k, v in properties.items()) + ")"
        db = name.split(".")[0]
        self.spark.sql(f"CREATE NAMESPACE IF NOT EXISTS `{db}`")
        fq = ".".join(f"`{p}`" for p in name.split("."))
        run(self.session, f"CREATE TABLE {fq} USING iceberg{clauses} AS {query}")
        return _message(f"created table {name}")

    def _is_external_create(self, tree: exp.Create) -> bool:
        props = tree.args.get("properties")
        if tree.expression is not None or props is None:
            return False
        return any(isinstance(p, exp.ExternalProperty | exp.LocationProperty) for p in props.expressions)

    def _create_external(self, tree: exp.Create) -> QueryResult:
        schema = tree.this
        name = self._name(schema.this if isinstance(schema, exp.Schema) else schema)
        if not name:
            raise SqlError("CREATE EXTERNAL TABLE needs a table name with a database (db.table)")
        columns = _column_defs(schema)
        parts: list[tuple[str, str]] = []
        fmt, location, serde, options = None, None, None, {}
        for prop in tree.args["properties"].expressions:
            if isinstance(prop, exp.PartitionedByProperty):
                parts = _column_defs(prop.this)
            elif isinstance(prop, exp.FileFormatProperty) and isinstance(prop.this, exp.InputOutputFormat):
                input_format = _literal(prop.this.args.get("input_format") or "").lower()
                fmt = fmt or _INPUT_FORMATS.get(input_format)
                if fmt is None:
                    raise SqlError(
                        f"CREATE EXTERNAL TABLE {name}: unknown INPUTFORMAT {input_format!r}",
                        hint="known: " + ", ".join(sorted(_INPUT_FORMATS)),
                    )
            elif isinstance(prop, exp.FileFormatProperty):
                stored = prop.this.name.upper() if prop.this is not None else ""
                fmt = fmt or _STORED_AS.get(stored)
                if stored and stored not in _STORED_AS and "parquet" in stored.lower():
                    fmt = "parquet"
            elif isinstance(prop, exp.RowFormatSerdeProperty):
                serde = prop.this.name.lower()
                fmt = _SERDE_FORMATS.get(serde, fmt)
                serde_props = prop.args.get("serde_properties")
                for sp in serde_props.expressions if serde_props is not None else []:
                    option = _SERDE_OPTIONS.get(sp.name.lower())
                    if option:
                        options[option] = _literal(sp.args["value"])
            elif isinstance(prop, exp.RowFormatDelimitedProperty):
                fmt = fmt or "csv"
                if prop.args.get("fields"):
                    options["sep"] = prop.args["fields"].name
            elif isinstance(prop, exp.LocationProperty):
                location = prop.this.name
            elif isinstance(prop, exp.Property) and prop.name.lower() == "skip.header.line.count":
                options["header"] = "true" if str(prop.args["value"].name) != "0" else "false"
        if not location:
            raise SqlError(f"CREATE EXTERNAL TABLE {name}: LOCATION is required")
        if fmt == "csv" and "sep" not in options and serde != _OPEN_CSV:
            options["sep"] = "\u0001"  # Hive's text tables: Ctrl-A unless a delimiter is named
        location = table_location(location)
        table = ExternalTable(name, columns, parts, fmt or "parquet", location, options)
        existing = self.registry.get(name)
        if existing is not None:
            if tree.args.get("exists"):
                return _message(f"external table {name} already exists")
            raise SqlError(
                f"table {name} already exists", hint="DROP TABLE it first, or use CREATE EXTERNAL TABLE IF NOT EXISTS"
            )
        self.registry.put(table)
        self.spark.sql(f"DROP TABLE IF EXISTS {table.spark_name}")
        try:
            self.materialize(table)
        except Exception as exc:
            self.registry.remove(name)
            raise SqlError(f"CREATE EXTERNAL TABLE {name}: {exc}".splitlines()[0]) from exc
        return _message(f"created external table {name} ({table.format} at {location})")

    def _repair(self, raw_name: str) -> QueryResult:
        name = (
            raw_name.lower()
            if "." in raw_name
            else (f"{self.database}.{raw_name.lower()}" if self.database else raw_name.lower())
        )
        ext = self.registry.get(name)
        if ext is None:
            return _message(f"{name} is not an external table; lake tables track their own partitions")
        self.materialize(ext)
        self.spark.sql(f"MSCK REPAIR TABLE {ext.spark_name}")
        self.registry.mark_repaired(ext.name)
        count = len(self.spark.sql(f"SHOW PARTITIONS {ext.spark_name}").collect()) if ext.partition_columns else 0
        return QueryResult(["table", "partitions"], ["string", "int"], [(ext.name, count)])

    def _ctas(self, tree: exp.Create) -> QueryResult:
        target = tree.this.this if isinstance(tree.this, exp.Schema) else tree.this
        name = self._name(target)
        if not name:
            raise SqlError("CREATE TABLE ... AS SELECT needs a table name with a database (db.table)")
        props = {}
        for prop in (tree.args.get("properties") or exp.Properties(expressions=[])).expressions:
            # The specific properties subclass exp.Property: test them first.
            if isinstance(prop, exp.FileFormatProperty):
                props["format"] = prop.this
            elif isinstance(prop, exp.PartitionedByProperty):
                props["partitioned_by"] = prop.this
            elif isinstance(prop, exp.LocationProperty):
                props["external_location"] = prop.this
            elif isinstance(prop, exp.Property):
                props[prop.name.lower()] = prop.args.get("value")
        query = self.to_spark(tree.expression)
        if self.registry.get(name) is not None or (
            not props.get("external_location") and self.spark.catalog.tableExists(name)
        ):
            if tree.args.get("exists"):
                return _message(f"table {name} already exists")
            raise SqlError(f"table {name} already exists", hint="DROP TABLE IF EXISTS it first")
        iceberg = _literal(props.get("table_type") or "").upper() == "ICEBERG"
        if iceberg or not props.get("external_location"):
            return self._ctas_iceberg(name, query, props, iceberg)
        location = table_location(_literal(props["external_location"]))
        fmt = _literal(props.get("format") or "parquet").lower()
        fmt = {"textfile": "csv"}.get(fmt, fmt)
        parts = _names(props.get("partitioned_by"))
        df = run_df(self.session, query)
        if not _is_empty(self.settings, location):
            raise SqlError(
                f"external_location {location} is not empty",
                hint="choose an empty location, as the query engines require",
            )
        writer = df.write.format(fmt)
        if parts:
            writer = writer.partitionBy(*parts)
        comp = props.get("write_compression") or props.get("parquet_compression")
        if comp is not None:
            writer = writer.option("compression", _literal(comp).lower())
        if "://" in location:
            # An object store has no atomic rename: Spark's commit protocol writes under the
            # location's _temporary prefix and removes it if the job fails, and the table is
            # registered only after the write succeeded.
            try:
                writer.mode("errorifexists").save(location)
            except Exception as exc:
                raise SqlError(f"CTAS {name}: writing {location} failed: {first_line(exc)}") from exc
        else:
            staging = str(Path(location).with_name(f".{Path(location).name}.staging-{uuid.uuid4().hex[:8]}"))
            writer.save(staging)
            Path(location).parent.mkdir(parents=True, exist_ok=True)
            if Path(location).exists():
                Path(location).rmdir()
            Path(staging).rename(location)
        fields = [(f.name, f.dataType.simpleString()) for f in df.schema.fields]
        table = ExternalTable(
            name,
            [f for f in fields if f[0] not in parts],
            [f for f in fields if f[0] in parts],
            fmt,
            location,
            {"header": "true"} if fmt == "csv" else {},
            repaired=True,
        )
        self.registry.put(table)
        self.spark.sql(f"DROP TABLE IF EXISTS {table.spark_name}")
        self.materialize(table)
        return _message(f"created external table {name} ({fmt} at {location})")


def tree_is_query(sql: str) -> bool:
    """Whether a statement only reads (SELECT, WITH, VALUES, TABLE, SHOW, DESCRIBE, EXPLAIN)."""
    head = sql.lstrip("( \n\t").split(None, 1)[0].upper() if sql.strip() else ""
    return head in {"SELECT", "WITH", "VALUES", "TABLE", "SHOW", "DESCRIBE", "DESC", "EXPLAIN"}


def _athena_transform(text: str) -> str:
    """Athena's `bucket(col, 16)`, `truncate(col, 4)`, `day(ts)` as Iceberg's `bucket(16, col)`,
    `truncate(4, col)`, `days(ts)`; a column as given."""
    m = re.fullmatch(r"\s*(bucket|truncate)\s*\(\s*(\w+)\s*,\s*(\d+)\s*\)\s*", text, re.I)
    if m:
        return f"{m.group(1).lower()}({m.group(3)}, {m.group(2)})"
    m = re.fullmatch(r"\s*(year|month|day|hour)\s*\(\s*(\w+)\s*\)\s*", text, re.I)
    return f"{m.group(1).lower()}s({m.group(2)})" if m else text


def _column_defs(schema: exp.Expr) -> list[tuple[str, str]]:
    """(name, Spark type) of each column a DDL schema declares."""
    return [(c.name, c.args["kind"].sql(dialect="spark")) for c in schema.expressions if isinstance(c, exp.ColumnDef)]


_default_ready: set[int] = set()
_default_lock = threading.Lock()


def _ensure_default_database(spark: SparkSession) -> None:
    """The `default` database exists in the lake, as it does in every Athena catalog.

    Parallel branches start runners at once; Iceberg's JDBC catalog checks and inserts in two
    steps, so two creators race (a primary-key violation). One thread per process creates it,
    and a creator that loses to another process finds it there."""
    with _default_lock:
        if id(spark) in _default_ready:
            return
        try:
            spark.sql("CREATE NAMESPACE IF NOT EXISTS `default`")
        except Exception:
            if not spark.sql("SHOW NAMESPACES LIKE 'default'").collect():
                raise
        _default_ready.add(id(spark))


def _literal(node: Any) -> str:
    if isinstance(node, exp.Expression):
        return node.name if isinstance(node, exp.Literal | exp.Var | exp.Identifier) else node.sql()
    return str(node)


def _names(node: Any) -> list[str]:
    if node is None:
        return []
    if isinstance(node, exp.Array | exp.Schema | exp.Tuple):
        return [_literal(e) if not isinstance(e, exp.ColumnDef) else e.name for e in node.expressions]
    return [_literal(node)]


def _message(text: str) -> QueryResult:
    return QueryResult(["result"], ["string"], [(text,)])
