"""Governed SQL: parse, resolve every table reference, check, rewrite, and only then run.

Each real table reference becomes a subquery that selects only the cells the principal
may see (columns, row filters, masks; see grants.TableAccess), so a hidden column or row
cannot be reached by any expression over the query, however it is written. Common table
expressions are renamed to private names first, following the language's scoping: a
name that is not a CTE in scope is a real table and is governed; a mistake in either
direction fails closed (a reference that does not resolve).

Refused outright, before anything runs: file reads (`parquet.\\`/path\\``), functions
that reveal files or reach the JVM, script transforms, `SET`/`RESET`/`USE`/`ADD JAR`,
creating functions or views, DDL and DML without the privilege, metadata tables and
time travel unless the principal sees the whole table.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import logging
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import sqlglot
from sqlglot import exp

from shoal.config import Settings
from shoal.exceptions import SqlError, first_line
from shoal.governance import point_lookup
from shoal.governance.audit import AuditLog
from shoal.governance.errors import AccessDenied, GovernanceError
from shoal.governance.grants import IDENTIFIER, Governance, TableAccess, forbidden_function, table_key
from shoal.governance.masks import register_mask_functions
from shoal.governance.principals import Principal
from shoal.sql import QueryResult, run, split_statements
from shoal.sql.positions import parse_error, without_positions

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

FILE_SOURCES = {
    "parquet",
    "csv",
    "json",
    "orc",
    "text",
    "avro",
    "binaryfile",
    "delta",
    "iceberg",
    "hive",
    "jdbc",
    "file",
}
_TABLE_FUNCTIONS = {"range"}
_UNRESOLVED = re.compile(r"UNRESOLVED_COLUMN|cannot be resolved|cannot resolve", re.I)
# Deeper nesting than any real query: refused before the parser recurses into it.
MAX_NESTING = 64
# Marks the table nodes the rewrite produced or checked; any other table left in a statement
# is a construct the rewrite did not understand, and the statement is refused.
_GOVERNED = "shoal_governed"
# INSERT clauses the rewrite does not govern (conditions, upserts, statement-level CTEs).
_INSERT_REFUSED = {
    "where": "REPLACE WHERE",
    "conflict": "ON CONFLICT",
    "returning": "RETURNING",
    "alternative": "INSERT OR ...",
    "with_": "WITH before INSERT",
}
# ALTER TABLE actions that change columns only; renaming or relocating a table is refused.
_ALTER_ACTIONS = (exp.ColumnDef, exp.Schema, exp.Drop, exp.RenameColumn, exp.AlterColumn)


# ---- names --------------------------------------------------------------------------------------
# Iceberg's Spark catalog reads `ns.table.<suffix>` as a metadata table (these names, any case), a
# changelog (`changes`) or a snapshot selector; it tries the whole name as a table first. So one
# multi-part name can mean several objects, and the check must know which one Spark will read.
_METADATA_TABLES = frozenset(
    {
        "entries",
        "files",
        "data_files",
        "delete_files",
        "history",
        "metadata_log_entries",
        "snapshots",
        "refs",
        "manifests",
        "partitions",
        "all_data_files",
        "all_delete_files",
        "all_files",
        "all_manifests",
        "all_entries",
        "position_deletes",
        "changes",
    }
)
_SELECTOR = re.compile(r"^(at_timestamp_\d+|snapshot_id_\d+|branch_.+|tag_.+)$", re.I)


@dataclass(frozen=True)
class TableRef:
    """One catalog object a name resolved to: a table, or what a suffix reads of it (a metadata
    table, a branch, a tag, a snapshot)."""

    namespace: tuple[str, ...]
    name: str
    suffixes: tuple[str, ...] = ()

    @property
    def table(self) -> str:
        return ".".join((*self.namespace, self.name))

    def __str__(self) -> str:
        return ".".join((*self.namespace, self.name, *self.suffixes))


def _statement_action(tree: exp.Expr) -> str:
    """The audit action for a statement: the names governed statements use, else sqlglot's kind."""
    if isinstance(tree, exp.Query):
        return "select"
    for kind, action in ((exp.Describe, "describe"), (exp.Insert, "insert"), (exp.Drop, "drop"), (exp.Alter, "alter")):
        if isinstance(tree, kind):
            return action
    return str(tree.key).lower()


def _is_suffix(part: str) -> bool:
    return part.lower() in _METADATA_TABLES or bool(_SELECTOR.match(part))


def name_parts(table: exp.Table) -> list[str]:
    """Every part of a table name, in order (`a.b.c.d.e` parses into catalog, db and a Dot chain)."""
    parts: list[str] = []

    def walk(node: exp.Expr | None) -> None:
        if node is None:
            return
        if isinstance(node, exp.Dot):
            walk(node.this)
            walk(node.expression)
        elif isinstance(node, exp.Identifier):
            parts.append(node.name)
        else:
            raise AccessDenied(f"a table name part {node.sql(dialect='spark')[:60]} is not a plain name")

    for key in ("catalog", "db", "this"):
        walk(table.args.get(key))
    return parts


def candidates(parts: list[str]) -> list[TableRef]:
    """Each reading Iceberg's catalog may give the parts (after the catalog): the whole name as a
    table, or a table followed by one or two suffixes (`t.files`, `t.branch_b`, `t.files.tag_x`)."""
    out: list[TableRef] = []
    if len(parts) == 1:
        return [TableRef(("default",), parts[0].lower())]
    for n_suffix in (0, 1, 2):
        if len(parts) - n_suffix < 2 or not all(_is_suffix(p) for p in parts[len(parts) - n_suffix :]):
            continue
        head, suffixes = parts[: len(parts) - n_suffix], parts[len(parts) - n_suffix :]
        out.append(TableRef(tuple(p.lower() for p in head[:-1]), head[-1].lower(), tuple(s.lower() for s in suffixes)))
    return out


class GovernedSql:
    def __init__(self, spark: SparkSession, settings: Settings, principal: Principal) -> None:
        self.spark = spark
        self.settings = settings
        self.principal = principal
        self.gov = Governance(settings)
        self.audit = AuditLog(settings)
        self.catalog = settings.catalog.name.lower()
        self._ctes = itertools.count(1)
        self._listings: dict[tuple[str, ...], set[str]] = {}
        # The engine that ran the last query (point_lookup.ENGINE_*), and how many ran without Spark.
        self.engine: str | None = None
        self._iceberg: dict[tuple[str, str], Any] = {}  # PyIceberg tables this statement loaded
        self.fast_lookups = 0
        register_mask_functions(spark, settings)

    def execute(self, sql: str, *, limit: int | None = None, stream: bool = False) -> QueryResult:
        """Check every statement first; run them only if all are allowed (never partially).

        Every outcome is audited: refusals, statements that fail while running, and each
        statement run, with the tables it reads and writes. `stream`: the last statement's rows
        come as `result.stream`, read from Spark as they are asked for (the same governed plan);
        its audit row is written when the stream ends or is closed, with the rows read.
        """
        try:
            statements = split_statements(sql)
        except SqlError as exc:
            self.audit.record(
                self.principal.name, "query", None, False, reason=f"error: {first_line(exc)}", sql=sql[:10_000]
            )
            raise
        if not statements:
            raise SqlError("no SQL statement given")
        last = len(statements) - 1  # only the result returned streams: the others are read here
        planned = [self._planned(st, limit, stream and i == last) for i, st in enumerate(statements)]
        result = QueryResult([], [], [])
        for plan in planned:
            try:
                result = plan.runner()
            except Exception as exc:
                self._record(plan, True, reason=f"failed: {first_line(exc)}")
                raise
            if result.stream is not None:
                result.stream = AuditedRows(result.stream, functools.partial(self._streamed, plan))
                continue
            self._record(plan, True, rows=len(result.rows))
            if not result.columns:
                result.statement, result.affected = plan.action, self._affected(plan)
        return result

    def _affected(self, plan: _Plan) -> int | None:
        """The rows an INSERT added, from its Iceberg snapshot's summary (Spark returns no count);
        None for other statements or where the table keeps no such summary."""
        if plan.action != "insert" or len(plan.writes) != 1:
            return None
        table = ".".join(f"`{p.replace('`', '``')}`" for p in (self.catalog, *plan.writes[0].split(".")))
        try:
            found = run(
                self.spark,
                f"SELECT summary['added-records'] FROM {table}.snapshots ORDER BY committed_at DESC LIMIT 1",
            ).rows
        except SqlError:
            return None
        return int(found[0][0]) if found and found[0][0] is not None else None

    def _streamed(self, plan: _Plan, rows: int, failure: BaseException | None) -> None:
        if failure is not None:
            self._record(plan, True, reason=f"failed: {first_line(failure)}", rows=rows)
        else:
            self._record(plan, True, rows=rows)

    def _record(self, plan: _Plan, allowed: bool, *, reason: str | None = None, **detail: Any) -> None:
        """One audit row for a statement, naming every table it reads and writes."""
        self.audit.record(
            self.principal.name,
            plan.action,
            plan.resource,
            allowed,
            reason=reason,
            sql=plan.sql,
            reads=plan.reads,
            writes=plan.writes,
            **detail,
        )

    # ---- one statement --------------------------------------------------------------------------
    def _planned(self, sql: str, limit: int | None, stream: bool = False) -> _Plan:
        plan = _Plan(sql)
        self._listings.clear()  # the catalog as it is now, for this statement's names
        self._iceberg.clear()
        try:
            try:
                if _nesting(sql) > MAX_NESTING:
                    raise AccessDenied(f"the statement nests deeper than {MAX_NESTING} levels, so it is not run")
                plan.action, plan.runner = self._plan(sql, plan, limit, stream)
            except GovernanceError as exc:  # e.g. a malformed table name: refused like the rest
                raise AccessDenied(str(exc).splitlines()[0], hint=exc.hint) from exc
            except (RecursionError, sqlglot.errors.SqlglotError) as exc:
                raise AccessDenied(f"the statement cannot be checked, so it is not run: {first_line(exc)}") from exc
        except SqlError as exc:  # names, types: the statement is not run, and that is on record
            self._record(plan, False, reason=f"error: {first_line(exc)}")
            raise
        except AccessDenied as exc:
            self._record(plan, False, reason=first_line(exc))
            raise
        return plan

    def _plan(
        self, sql: str, plan: _Plan, limit: int | None, stream: bool = False
    ) -> tuple[str, Callable[[], QueryResult]]:
        """All checks and the rewrite; returns the action and what runs it."""
        tables = plan.reads
        if "/*+" in sql and not self.principal.is_admin:
            # Spark reads `/*+` inside a comment as a hint, not a nested comment, so the
            # comment's end differs between the checker and Spark. Hints do nothing here anyway.
            raise AccessDenied("optimizer hints (/*+ ... */) are not allowed in governed SQL")
        head = " ".join(sql.split()[:2]).upper()
        if head.startswith(("SHOW TABLES", "SHOW DATABASES", "SHOW NAMESPACES", "SHOW SCHEMAS")):
            return "show", lambda: self._show(sql)
        try:
            tree = sqlglot.parse_one(sql, read="spark")
        except sqlglot.errors.ParseError as exc:
            raise AccessDenied(f"cannot parse the statement, so it is not run: {parse_error(exc)}") from exc
        if self.principal.is_admin:
            self._collect_tables(tree, plan)
            # Audited as what ran (select, insert, create...), like anyone's statement; that an
            # admin ran it is the row's principal.
            return _statement_action(tree), lambda: run(self.spark, sql, limit=limit, stream=stream)
        explain = isinstance(tree, exp.Command) and str(tree.this).upper() == "EXPLAIN"
        if explain:  # EXPLAIN <query>: which engine would run it (issue 43); nothing runs
            tree = _explained(tree)
        self._forbid(tree)
        if isinstance(tree, exp.Query):
            return self._query(tree, tables, explain, limit, stream)
        if isinstance(tree, exp.Describe):
            target = self._describable(tree, tables)
            return "describe", lambda: self._describe(target)
        if isinstance(tree, exp.Insert):
            insert_sql = self._insert(tree, plan)
            return "insert", lambda: self._run(insert_sql, limit, stream)
        # Every statement below runs as regenerated from the checked tree, never as the text
        # sent: Spark and sqlglot need only disagree once (on a comment, say) for the text to
        # run something other than what was checked.
        if isinstance(tree, exp.Drop) and (tree.args.get("kind") or "").upper() == "TABLE":
            tree = tree.copy()
            for t in tree.args.get("tables") or [tree.this]:
                name = self._real_name(t)
                plan.writes.append(name)
                self._require(name, "DROP")
                self._qualify(t, name)
            drop_sql = tree.sql(dialect="spark")
            return "drop", lambda: run(self.spark, drop_sql, limit=limit, stream=stream)
        if isinstance(tree, exp.Alter) and (tree.args.get("kind") or "").upper() == "TABLE":
            tree = tree.copy()
            name = self._real_name(tree.this)
            plan.writes.append(name)
            self._require(name, "ALTER")
            unrestricted: bool | None = None  # looked up once, only if a column action needs it
            for action in tree.args.get("actions") or []:
                if not isinstance(action, _ALTER_ACTIONS) or (
                    isinstance(action, exp.Drop) and (action.args.get("kind") or "COLUMN").upper() != "COLUMN"
                ):
                    raise AccessDenied(
                        f"ALTER TABLE ... {action.sql(dialect='spark')[:60]} is not allowed for {self.principal.name}",
                        hint="under governance ALTER TABLE adds, drops, renames or changes columns only",
                    )
                # Grants name columns: renaming, dropping or retyping one could move data out
                # from under an exclusion, mask or filter. Only a principal who sees the whole
                # table may; adding a column changes nobody's view.
                if isinstance(action, exp.ColumnDef | exp.Schema):
                    continue
                if unrestricted is None:
                    unrestricted = self._access(name).unrestricted
                if not unrestricted:
                    raise AccessDenied(
                        f"ALTER TABLE {name} ... {action.sql(dialect='spark')[:60]} needs access to the whole table",
                        hint="renaming, dropping or changing columns could bypass column grants and masks",
                    )
            self._qualify(tree.this, name)
            alter_sql = tree.sql(dialect="spark")
            return "alter", lambda: run(self.spark, alter_sql, limit=limit, stream=stream)
        kind = type(tree).__name__.upper() if not isinstance(tree, exp.Command) else str(tree.this).upper()
        raise AccessDenied(
            f"{kind} statements are not allowed for {self.principal.name}",
            hint="only queries, INSERT INTO, DROP/ALTER TABLE with the privilege, DESCRIBE and SHOW TABLES run under governance",
        )

    def _insert(self, tree: exp.Insert, plan: _Plan) -> str:
        """INSERT INTO t <source>: the privilege on t, and the source governed like a query,
        whatever form it takes (SELECT, TABLE src, VALUES with subqueries)."""
        if tree.args.get("overwrite") or not isinstance(tree.this, exp.Table | exp.Schema):
            raise AccessDenied(
                f"INSERT OVERWRITE is not allowed for {self.principal.name}", hint="use INSERT INTO with the privilege"
            )
        for arg, what in _INSERT_REFUSED.items():
            if tree.args.get(arg):
                raise AccessDenied(
                    f"{what} is not allowed in a governed INSERT",
                    hint="write INSERT INTO t SELECT ... (a WITH clause goes inside the SELECT)",
                )
        tree = tree.copy()
        target_node = tree.this
        target = target_node.this if isinstance(target_node, exp.Schema) else target_node
        name = self._real_name(target)
        plan.writes.append(name)
        self._require(name, "INSERT")
        source = tree.args.get("expression") or tree.args.get("source")
        tree.set("source", None)
        if isinstance(source, exp.Table):  # INSERT INTO t TABLE src
            source = exp.select("*").from_(source)
        if not isinstance(source, exp.Query | exp.Values):
            raise AccessDenied("the INSERT has no source the rewrite understands, so it is not run")
        governed_source = self.govern(source, plan.reads)
        _verify_covered(governed_source)
        if isinstance(governed_source, exp.Query):
            self._analyze(governed_source.sql(dialect="spark"))
        tree.set("expression", governed_source)
        self._qualify(target, name)
        return tree.sql(dialect="spark")

    def _query(
        self, tree: exp.Query, tables: list[str], explain: bool, limit: int | None, stream: bool
    ) -> tuple[str, Callable[[], QueryResult]]:
        governed_tree = self.govern(tree, tables)
        _verify_covered(governed_tree)
        # After the rewrite, from its tree: the fast path reads what governance chose.
        fast = point_lookup.plan(self.settings, governed_tree, self.catalog, _GOVERNED, dict(self._iceberg))
        if fast is None:
            governed = governed_tree.sql(dialect="spark")
            self._analyze(governed)
            if explain:
                return "explain", lambda: self._explain(None)
            return "select", lambda: self._run(self._ran_on_spark(governed), limit, stream)
        if explain:
            return "explain", lambda: self._explain(fast)
        return "select", lambda: self._select(fast, governed_tree, limit, stream)

    def _ran_on_spark(self, governed: str) -> str:
        self.engine = point_lookup.ENGINE_SPARK
        return governed

    def _select(
        self, fast: Callable[..., QueryResult | None], governed_tree: exp.Expr, limit: int | None, stream: bool
    ) -> QueryResult:
        """A governed query of the point-lookup shape: without Spark where point_lookup can read
        it (no delete files, a small read), else on Spark as any other."""
        result = None
        try:
            result = fast()
        except Exception:  # the fast path never fails a query Spark can answer
            log.warning("point lookup failed; Spark runs the query", exc_info=True)
        if result is None:
            self.engine = point_lookup.ENGINE_SPARK
            governed = governed_tree.sql(dialect="spark")
            self._analyze(governed)  # checked as always before Spark runs it
            return self._run(governed, limit, stream)
        self.engine = point_lookup.ENGINE_ARROW
        self.fast_lookups += 1
        rows = result.rows[:limit] if limit else result.rows
        if stream:
            return QueryResult(result.columns, result.types, [], stream=iter(rows))
        return QueryResult(result.columns, result.types, rows)

    def _explain(self, fast: Callable[..., QueryResult | None] | None) -> QueryResult:
        result = None
        if fast is not None:
            try:
                result = fast(dry=True)
            except Exception:  # e.g. delete files PyIceberg cannot plan: Spark would run it
                log.debug("point lookup: EXPLAIN falls back to Spark", exc_info=True)
        return result or QueryResult(["plan"], ["string"], [(f"engine: {point_lookup.ENGINE_SPARK}",)])

    def _run(self, sql: str, limit: int | None, stream: bool = False) -> QueryResult:
        try:
            return run(self.spark, sql, limit=limit, stream=stream)
        except SqlError as exc:
            denied = self._denied_column(exc)
            if denied is None:  # Spark's position is in the rewrite, not in what was typed
                raise SqlError(without_positions(exc.args[0]), hint=exc.hint) from exc
            raise denied from exc

    def _analyze(self, sql: str) -> None:
        """Spark's analysis (names, types) without running anything."""
        try:
            self.spark.sql(sql)
        except Exception as exc:  # analysis errors carry the reason in their text
            err = SqlError(without_positions(first_line(exc)))
            raise (self._denied_column(err) or err) from exc

    def _denied_column(self, exc: SqlError) -> AccessDenied | None:
        # A column outside the permitted projection does not resolve: say so without telling
        # whether it exists.
        m = re.search(r"name `?([^`\s]+)`? cannot be resolved", str(exc))
        if m or _UNRESOLVED.search(str(exc)):
            what = f"column {m.group(1)}" if m else "a column"
            return AccessDenied(
                f"{what} is not available: it does not exist or is not granted to {self.principal.name}"
            )
        return None

    # ---- checks ---------------------------------------------------------------------------------
    def _forbid(self, tree: exp.Expr) -> None:
        if tree.find(exp.QueryTransform) is not None:
            raise AccessDenied("script transforms (TRANSFORM ... USING) are not allowed")
        for fn in tree.find_all(exp.Func):
            name = (fn.name if isinstance(fn, exp.Anonymous) else fn.sql_name()).lower()
            if forbidden_function(name):
                raise AccessDenied(
                    f"function {name} is not allowed (it reveals files, reaches the JVM or is Shoal's own)"
                )
        for node in tree.find_all(
            exp.Set, exp.Use, exp.Command, exp.Create, exp.Cache, exp.Uncache, exp.Merge, exp.Delete, exp.Update
        ):
            raise AccessDenied(f"{type(node).__name__.upper()} is not allowed for {self.principal.name}")

    def _require(self, table: str, privilege: str) -> None:
        if privilege not in self.gov.privileges(self.principal, table):
            raise AccessDenied(
                f"{self.principal.name} has no {privilege} on {table} (or it does not exist)",
                hint=f"ask for it: shoal access request {table} --reason ...",
            )

    # ---- the rewrite ----------------------------------------------------------------------------
    def govern(self, query: exp.Expr, tables: list[str]) -> exp.Expr:
        tree = query.copy()
        for hint in list(tree.find_all(exp.Hint)):
            hint.pop()  # hints name tables without reading them; the rewrite would misread them
        renames = self._rename_ctes(tree)
        for table in list(tree.find_all(exp.Table)):
            if id(table) in renames:
                new, alias = renames[id(table)]
                table.set("this", exp.to_identifier(new))
                if not table.alias:
                    table.set("alias", exp.TableAlias(this=exp.to_identifier(alias)))
                table.meta[_GOVERNED] = True
                continue
            self._replace(table, tables)
        return tree

    def _rename_ctes(self, tree: exp.Expr) -> dict[int, tuple[str, str]]:
        """Give every CTE a private name; map each reference (by node id) to it."""
        renames: dict[int, tuple[str, str]] = {}
        private: dict[int, dict[str, str]] = {}
        for with_ in tree.find_all(exp.With):
            names = {}
            for cte in with_.expressions:
                names[cte.alias_or_name.lower()] = f"__shoal_cte_{next(self._ctes)}"
            private[id(with_)] = names
        for table in tree.find_all(exp.Table):
            if table.args.get("db") or table.args.get("catalog") or not isinstance(table.this, exp.Identifier):
                continue
            name = table.name.lower()
            node = table.parent
            while node is not None:
                clause = node.args.get("with_") or node.args.get("with")
                if isinstance(clause, exp.With) and id(clause) in private and name in self._visible_ctes(clause, table):
                    renames[id(table)] = (private[id(clause)][name], table.alias_or_name)
                    break
                node = node.parent
        for with_ in tree.find_all(exp.With):
            for cte in with_.expressions:
                cte.set("alias", exp.TableAlias(this=exp.to_identifier(private[id(with_)][cte.alias_or_name.lower()])))
        return renames

    @staticmethod
    def _visible_ctes(with_: exp.With, table: exp.Table) -> set[str]:
        """CTEs of `with_` visible at `table`: all of them from the main query; inside a CTE's
        own definition only the ones defined before it (a CTE does not see itself)."""
        names = [c.alias_or_name.lower() for c in with_.expressions]
        ancestors = set()
        node = table.parent
        while node is not None and node is not with_:
            ancestors.add(id(node))
            node = node.parent
        if node is None:
            return set(names)
        for i, cte in enumerate(with_.expressions):
            if id(cte) in ancestors:
                return set(names[:i])
        return set(names)

    def _replace(self, table: exp.Table, tables: list[str]) -> None:
        if not isinstance(table.this, exp.Identifier | exp.Dot):
            fn = table.this
            fname = (
                (fn.name if isinstance(fn, exp.Anonymous) else type(fn).__name__).lower()
                if isinstance(fn, exp.Func)
                else ""
            )
            if fname in _TABLE_FUNCTIONS:
                table.meta[_GOVERNED] = True
                return
            raise AccessDenied(f"table function {fname or table.sql()} is not allowed")
        db = table.text("db").lower()
        if db in FILE_SOURCES and (table.this.args.get("quoted") or "/" in table.name or ":" in table.name):
            raise AccessDenied(f"direct file reads ({db}.`...`) are not allowed; query tables")
        ref = self.resolve(table)
        tables.append(str(ref))
        full = ref.table
        db, name = ref.namespace[0], ref.name
        access = self._access(full)
        if ref.suffixes:
            if not access.whole_table:
                raise AccessDenied(
                    f"{ref} (metadata, history, branch or tag of {full}) reveals more than {self.principal.name} may see",
                    hint="metadata tables and history need a grant on the whole table (no column list, filter or mask)",
                )
            # Rewritten to the object that was checked, spelled so Spark cannot read it otherwise.
            table.set("catalog", exp.to_identifier(self.catalog, quoted=True))
            table.set("db", exp.to_identifier(db, quoted=True))
            table.set("this", exp.Dot.build([exp.to_identifier(p, quoted=True) for p in (name, *ref.suffixes)]))
            table.meta[_GOVERNED] = True
            return
        version = table.args.get("version")
        if version is not None and not access.whole_table:
            raise AccessDenied(
                f"time travel on {full} is allowed only with access to the whole table (filters and masks apply to the current table)"
            )
        select, where = access.projection()
        source = f"{self.catalog}.`{db}`.`{name}`"
        inner = sqlglot.parse_one(
            f"SELECT {', '.join(select)} FROM {source}" + (f" WHERE {where}" if where else ""), read="spark"
        )
        inner.args["from_"].this.meta[_GOVERNED] = True
        if version is not None:
            inner.args["from_"].this.set("version", version.copy())
        alias = table.args.get("alias") or exp.TableAlias(this=exp.to_identifier(name))
        sub = exp.Subquery(this=inner, alias=alias)
        for key in ("pivots", "laterals", "joins"):
            if table.args.get(key):
                sub.set(key, table.args[key])
        table.replace(sub)

    def _access(self, full: str) -> TableAccess:
        columns = self._columns(full)
        access = self.gov.access(self.principal, full, columns) if columns is not None else None
        if access is None or not access.visible_columns:
            raise AccessDenied(
                f"{self.principal.name} has no SELECT on {full} (or it does not exist)",
                hint=f"ask for it: shoal access request {full} --reason ...",
            )
        return access

    def _columns(self, full: str) -> list[str] | None:
        db, name = full.split(".")
        if self.settings.sql.point_lookup:
            # The same Iceberg schema Spark would read, without a trip to the JVM; the table is
            # kept for this statement's point lookup. A view, or no PyIceberg: Spark's answer.
            table = point_lookup.load(self.settings, db, name)
            if table is not None:
                self._iceberg[(db, name)] = table
                return [f.name for f in table.schema().fields]
        try:
            return [f.name for f in self.spark.table(f"{self.catalog}.`{db}`.`{name}`").schema.fields]
        except Exception:  # noqa: BLE001 - a missing table reads as "not granted or does not exist"
            return None

    def _real_name(self, table: exp.Expr) -> str:
        """The DATABASE.TABLE a statement writes to or describes: the whole name, never a suffix
        reading (Iceberg would take `t.branch_b` as a branch of `t` when no such table exists)."""
        if not isinstance(table, exp.Table) or not table.name:
            raise AccessDenied("the statement's target is not a table name")
        return self.resolve(table, suffixes=False).table

    def resolve(self, table: exp.Table, *, suffixes: bool = True) -> TableRef:
        """The one catalog object a table name reads, or a refusal.

        Where Iceberg's catalog may read the name more than one way, each reading is looked up;
        none existing is "no such table", more than one is ambiguous and refused (a name with one
        reading is checked for existence where its columns are read). Tables in nested namespaces cannot
        be granted (grants name DATABASE.TABLE), so they resolve for nobody but admins. With
        `suffixes=False` (a write or DDL target) the whole name is the table, unchecked here.
        """
        parts = name_parts(table)
        if len(parts) > 1 and parts[0].lower() in (self.catalog, "spark_catalog"):
            parts = parts[1:]
            if len(parts) == 1:  # `catalog.t`: Spark reads a table with no namespace
                raise AccessDenied(f"{parts[0]} has no database; write DATABASE.TABLE")
        elif len(parts) > 1 and parts[0].lower() in self._catalogs:
            raise AccessDenied(f"unknown catalog {parts[0]}")
        for part in parts:
            if not IDENTIFIER.match(part):
                raise AccessDenied(f"invalid table name part {part!r}", hint="names are letters, digits and _")
        options = [c for c in candidates(parts) if suffixes or not c.suffixes]
        spelled = ".".join(parts)
        if len(options) > 1:  # one reading needs no listing: _access finds a missing table
            found = [c for c in options if self._exists(c)]
            if len(found) > 1:
                raise AccessDenied(
                    f"{spelled} is ambiguous: it names {' and '.join(str(c) for c in found)}",
                    hint="rename the table in the nested namespace, or ask an admin",
                )
            options = found
        if not options:
            raise AccessDenied(
                f"{self.principal.name} has no SELECT on {spelled} (or it does not exist)",
                hint=f"ask for it: shoal access request {spelled} --reason ...",
            )
        ref = options[0]
        if len(ref.namespace) != 1:
            raise AccessDenied(
                f"{self.principal.name} has no access to {ref.table} (or it does not exist)",
                hint="grants name DATABASE.TABLE; tables in nested namespaces are read by admins only",
            )
        table_key(ref.table)  # a valid identifier pair, or refuse
        return ref

    def _exists(self, ref: TableRef) -> bool:
        """Whether the namespace lists the table by this exact name (a listing never reads a
        suffix as a metadata table, unlike loading the table)."""
        if not ref.namespace:
            return False
        if ref.namespace not in self._listings:
            ns = ".".join(f"`{p}`" for p in ref.namespace)
            names: set[str] = set()
            for kind in ("TABLES", "VIEWS"):
                with contextlib.suppress(SqlError):  # no such namespace, or no views: nothing listed
                    names |= {str(r[1]).lower() for r in run(self.spark, f"SHOW {kind} IN {self.catalog}.{ns}").rows}
            self._listings[ref.namespace] = names
        return ref.name in self._listings[ref.namespace]

    @functools.cached_property
    def _catalogs(self) -> set[str]:
        """Catalog names this session knows besides the lake's (a name starting with one reads it)."""
        conf = self.spark.sparkContext.getConf().getAll()
        return {k.split(".")[3].lower() for k, _ in conf if re.match(r"spark\.sql\.catalog\.[^.]+$", k)} | {
            "spark_catalog"
        }

    def _qualify(self, table: exp.Table, full: str) -> None:
        db, name = full.split(".")
        table.set("catalog", exp.to_identifier(self.catalog))
        table.set("db", exp.to_identifier(db))
        table.set("this", exp.to_identifier(name))

    def _collect_tables(self, tree: exp.Expr, plan: _Plan) -> None:
        """An admin's statement runs as written; the audit still names what it touches."""
        ctes = {c.alias_or_name.lower() for c in tree.find_all(exp.CTE)}
        target = tree.this if isinstance(tree, exp.Insert | exp.Drop | exp.Alter | exp.Create | exp.Merge) else None
        if isinstance(target, exp.Schema):
            target = target.this
        extra = (
            [t for t in tree.args.get("tables") or [] if isinstance(t, exp.Table)] if isinstance(tree, exp.Drop) else []
        )
        written = {id(t) for t in [target, *extra] if isinstance(t, exp.Table)}
        for t in tree.find_all(exp.Table):
            if not t.name or (not t.text("db") and t.name.lower() in ctes):
                continue
            try:  # the name as written, every part of it (nested namespaces, suffixes)
                parts = name_parts(t)
            except AccessDenied:
                parts = [t.sql(dialect="spark")]
            if len(parts) > 1 and parts[0].lower() == self.catalog:
                parts = parts[1:]
            name = ".".join(parts)
            bucket = plan.writes if id(t) in written else plan.reads
            if name not in bucket:
                bucket.append(name)

    # ---- catalog statements -------------------------------------------------------------------
    def _describable(self, tree: exp.Describe, tables: list[str]) -> str:
        target = tree.this
        if not isinstance(target, exp.Table):
            raise AccessDenied("DESCRIBE works on tables only")
        name = self._real_name(target)
        tables.append(name)
        if self._columns(name) is None or not self.gov.discoverable(self.principal, name):
            raise AccessDenied(f"{name} is not discoverable for {self.principal.name} (or it does not exist)")
        return name

    def _describe(self, name: str) -> QueryResult:
        schema = self.spark.table(f"{self.catalog}.{name}").schema
        info = self.gov.info(name)
        rows: list[tuple[Any, ...]] = [
            (f.name, f.dataType.simpleString(), f.metadata.get("comment") if f.metadata else None)
            for f in schema.fields
        ]
        rows += [("# owner", info["owner"] or "", None), ("# description", info["description"] or "", None)]
        return QueryResult(["col_name", "data_type", "comment"], ["string", "string", "string"], rows)

    def _show(self, sql: str) -> QueryResult:
        words = sql.split()
        if words[1].upper() in ("DATABASES", "NAMESPACES", "SCHEMAS"):
            result = run(self.spark, "SHOW NAMESPACES")
            names = [r[0] for r in result.rows]
            visible = [
                n for n in names if any(self.gov.discoverable(self.principal, f"{n}.{t}") for t in self._tables_in(n))
            ]
            return QueryResult(["namespace"], ["string"], [(n,) for n in visible])
        m = re.match(r"(?is)SHOW\s+TABLES(?:\s+(?:IN|FROM)\s+`?([A-Za-z_][A-Za-z0-9_]*)`?)?\s*$", sql.strip())
        if not m:
            raise AccessDenied("only SHOW TABLES [IN db] and SHOW DATABASES are allowed")
        db = (m.group(1) or "default").lower()
        rows = [(db, t, False) for t in self._tables_in(db) if self.gov.discoverable(self.principal, f"{db}.{t}")]
        return QueryResult(["namespace", "tableName", "isTemporary"], ["string", "string", "boolean"], rows)

    def _tables_in(self, db: str) -> list[str]:
        try:
            return [r[1] for r in run(self.spark, f"SHOW TABLES IN {self.catalog}.`{db}`").rows]
        except SqlError:
            return []


class AuditedRows(Iterator[tuple[Any, ...]]):
    """A streamed statement's rows; `done(rows read, failure or None)` is called once, when the
    rows run out, reading them fails, or the reader closes the stream early."""

    def __init__(self, rows: Iterator[tuple[Any, ...]], done: Callable[[int, BaseException | None], None]) -> None:
        self._rows, self.count = rows, 0
        self._done: Callable[[int, BaseException | None], None] | None = done

    def __next__(self) -> tuple[Any, ...]:
        if self._done is None:
            raise StopIteration
        try:
            row = next(self._rows)
        except StopIteration:
            self._finish(None)
            raise
        except Exception as exc:
            self._finish(exc)
            raise
        self.count += 1
        return row

    def close(self) -> None:
        close = getattr(self._rows, "close", None)
        if close is not None:
            close()  # Spark stops serving the rest
        self._finish(None)

    def _finish(self, failure: BaseException | None) -> None:
        done, self._done = self._done, None
        if done is not None:
            done(self.count, failure)


class _Plan:
    """One statement: what it reads and writes (for the audit) and what runs it."""

    def __init__(self, sql: str) -> None:
        self.sql = sql
        self.reads: list[str] = []
        self.writes: list[str] = []
        self.action = "query"
        self.runner: Callable[[], QueryResult] = lambda: QueryResult([], [], [])

    @property
    def resource(self) -> str | None:
        return ",".join(dict.fromkeys(self.writes + self.reads)) or None


def _explained(tree: exp.Expr) -> exp.Query:
    """The query of `EXPLAIN <query>` (sqlglot leaves EXPLAIN a command holding the text)."""
    try:
        inner = sqlglot.parse_one(str(tree.expression.this), read="spark")
    except sqlglot.errors.ParseError as exc:
        raise AccessDenied(f"cannot parse the statement, so it is not run: {parse_error(exc)}") from exc
    if not isinstance(inner, exp.Query):
        raise AccessDenied(f"EXPLAIN of a {type(inner).__name__.upper()} statement is not allowed")
    return inner


def _nesting(sql: str) -> int:
    """Deepest parenthesis nesting outside quoted literals and names (a cheap pre-check;
    parentheses in comments count too, which only ever refuses more)."""
    depth = deepest = 0
    quote = None
    i, n = 0, len(sql)
    while i < n:
        ch = sql[i]
        if quote:
            if ch == "\\":
                i += 1
            elif ch == quote:
                quote = None
        elif ch in "'\"`":
            quote = ch
        elif ch == "(":
            depth += 1
            deepest = max(deepest, depth)
        elif ch == ")":
            depth -= 1
        i += 1
    return deepest


def _verify_covered(tree: exp.Expr) -> None:
    """Deny by default: every table left in a rewritten statement must be one the rewrite made
    or checked. Anything else (a syntax the rewrite walked past) refuses the statement."""
    for table in tree.find_all(exp.Table):
        if not table.meta.get(_GOVERNED):
            raise AccessDenied(
                f"the statement reads {table.sql(dialect='spark')[:80]} in a way governance does not check"
            )
