"""Point lookups without Spark: the narrow shape of a governed query, read by PyIceberg + Arrow.

Issue 43. A lookup by key through the PostgreSQL endpoint spent most of its time starting a
Spark job for one row. This module answers the same governed query without Spark, but only
for a shape whose answer it can prove is Spark's:

- the statement is the governed rewrite's output (never the text a client sent: governance has
  already chosen the columns, the row filter and the masks), a SELECT over one governed lake
  table, the subquery the rewrite made of it;
- the rewrite's projection is plain columns only (no mask, no CASE: a masked column -> Spark),
  with no time travel; the outer SELECT list is plain column references (or `*`), aliased or
  spelled exactly as the column is named;
- the outer WHERE and the row filter are AND/OR combinations of a column compared with one
  literal (=, <>, <, <=, >, >=, IN, IS [NOT] NULL) on integer, decimal, string, boolean, date
  and timestamp columns, with literals of the column's own kind (no casts Spark would add);
- no GROUP BY, ORDER BY, LIMIT, DISTINCT, joins, functions, windows, CTEs, set operations;
- the table's current snapshot has no delete files in the files the predicate leaves (merge-on-
  read deletes go to Spark), and those files hold at most `[sql] point_lookup_max_rows` rows.

PyIceberg plans the files from the predicate at the current snapshot (what Spark reads: the
catalog cache is off) and Arrow reads and filters them; the rows are then checked again here
against the same predicate with SQL's NULL semantics, so a row Spark would not return is never
returned. Names, Spark type names and Python values are Spark's (QueryResult as `run` gives it).
Anything outside the shape returns None and runs on Spark as before.
"""

from __future__ import annotations

import datetime as dt
import decimal
import functools
import logging
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlglot import exp

from shoal.config import Settings
from shoal.sql import QueryResult

log = logging.getLogger(__name__)

ENGINE_SPARK = "spark"
ENGINE_ARROW = "pyiceberg+arrow"

_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_TIMESTAMP = re.compile(r"^\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(\.\d{1,6})?$")
_INTEGER = re.compile(r"^\d+$")
_DECIMAL = re.compile(r"^\d+(\.\d+)?$")
_RANGES = {"int": (-(2**31), 2**31 - 1), "bigint": (-(2**63), 2**63 - 1)}
_TIMESTAMP_TYPES = {exp.DataType.Type.TIMESTAMP, exp.DataType.Type.TIMESTAMPTZ, exp.DataType.Type.TIMESTAMPLTZ}
_COMPARISONS: dict[type[exp.Expr], str] = {
    exp.EQ: "=",
    exp.NEQ: "<>",
    exp.LT: "<",
    exp.LTE: "<=",
    exp.GT: ">",
    exp.GTE: ">=",
}
_FLIPPED = {"=": "=", "<>": "<>", "<": ">", "<=": ">=", ">": "<", ">=": "<="}
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


# Lookups answered without Spark in this process (tests and operators read it; never reset).
answered = 0
_answered_lock = threading.Lock()


class NotNarrow(Exception):
    """The statement is outside the shape this module can answer exactly: Spark runs it."""


# ---- the predicate ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Compare:
    column: str
    op: str  # = <> < <= > >= in isnull notnull
    values: tuple[Any, ...] = ()  # comparable with the column's values as `_value` reads them


@dataclass(frozen=True)
class Bool:
    op: str  # and / or
    parts: tuple[Pred, ...]


Pred = Compare | Bool


def evaluate(pred: Pred, row: dict[str, Any]) -> bool | None:
    """SQL's three-valued result of `pred` on one row (None: unknown, which WHERE drops)."""
    if isinstance(pred, Bool):
        results = [evaluate(p, row) for p in pred.parts]
        if pred.op == "and":
            return False if False in results else (None if None in results else True)
        return True if True in results else (None if None in results else False)
    v = row[pred.column]
    if pred.op == "isnull":
        return v is None
    if pred.op == "notnull":
        return v is not None
    if v is None:
        return None
    if pred.op == "in":
        return v in pred.values
    w = pred.values[0]
    return {
        "=": v == w,
        "<>": v != w,
        "<": v < w,
        "<=": v <= w,
        ">": v > w,
        ">=": v >= w,
    }[pred.op]


def _spark_type(t: Any) -> str | None:
    """Spark's simpleString for an Iceberg primitive type; None for types this path skips."""
    from pyiceberg import types as it

    simple: dict[type, str] = {
        it.BooleanType: "boolean",
        it.IntegerType: "int",
        it.LongType: "bigint",
        it.FloatType: "float",
        it.DoubleType: "double",
        it.StringType: "string",
        it.DateType: "date",
        it.TimestampType: "timestamp_ntz",
        it.TimestamptzType: "timestamp",
        it.BinaryType: "binary",
    }
    if type(t) in simple:
        return simple[type(t)]
    if isinstance(t, it.DecimalType):
        return f"decimal({t.precision},{t.scale})"
    return None


def _literal(node: exp.Expr, spark_type: str) -> Any:
    """The value of a literal compared with a column of `spark_type`, as `_value` reads the column;
    NotNarrow for a literal Spark would cast (or compare) in a way this module does not copy."""
    negative = False
    if isinstance(node, exp.Neg):
        negative, node = True, node.this
    if spark_type in _RANGES:
        if not (isinstance(node, exp.Literal) and not node.is_string and _INTEGER.match(node.this)):
            raise NotNarrow("not an integer literal")
        value = -int(node.this) if negative else int(node.this)
        low, high = _RANGES[spark_type]
        if not low <= value <= high:
            raise NotNarrow("integer literal out of the column's range")
        return value
    if spark_type.startswith("decimal("):
        if not (isinstance(node, exp.Literal) and not node.is_string and _DECIMAL.match(node.this)):
            raise NotNarrow("not a decimal literal")
        precision, scale = (int(x) for x in spark_type[len("decimal(") : -1].split(","))
        number = decimal.Decimal(node.this)
        exact = number.quantize(decimal.Decimal(1).scaleb(-scale))
        if exact != number or len(exact.as_tuple().digits) > precision:
            raise NotNarrow("a decimal literal the column cannot hold")  # Spark widens; not copied
        return -exact if negative else exact
    if negative:
        raise NotNarrow("negated non-number")
    if spark_type == "string":
        if not (isinstance(node, exp.Literal) and node.is_string) or "\\" in node.this:
            raise NotNarrow("not a plain string literal")
        return node.this
    if spark_type == "boolean":
        if not isinstance(node, exp.Boolean):
            raise NotNarrow("not a boolean literal")
        return bool(node.this)
    if isinstance(node, exp.Cast | exp.TryCast) and isinstance(node.this, exp.Literal) and node.this.is_string:
        kind, text = node.to.this, node.this.this
        if spark_type == "date" and kind == exp.DataType.Type.DATE and _DATE.match(text):
            return dt.date.fromisoformat(text)
        timestamp_kind = kind in _TIMESTAMP_TYPES or kind == exp.DataType.Type.TIMESTAMPNTZ
        if spark_type in ("timestamp", "timestamp_ntz") and _TIMESTAMP.match(text) and timestamp_kind:
            # Spark's session time zone is UTC (shoal.spark): a zoned literal is that wall time
            # in UTC, and a zone-less column compares by wall time.
            naive = dt.datetime.fromisoformat(text.replace("T", " "))
            return naive.replace(tzinfo=dt.UTC) if spark_type == "timestamp" else naive
    raise NotNarrow("not a literal of the column's kind")


def predicate(node: exp.Expr, columns: dict[str, str], qualifiers: set[str]) -> Pred:
    """The WHERE tree as a predicate over `columns` (lower-case name -> Spark type)."""
    if isinstance(node, exp.Paren):
        return predicate(node.this, columns, qualifiers)
    if isinstance(node, exp.And | exp.Or):
        op = "and" if isinstance(node, exp.And) else "or"
        return Bool(op, (predicate(node.this, columns, qualifiers), predicate(node.expression, columns, qualifiers)))
    if isinstance(node, exp.Not) and isinstance(node.this, exp.Is) and isinstance(node.this.expression, exp.Null):
        return Compare(_column(node.this.this, columns, qualifiers), "notnull")
    if isinstance(node, exp.Is) and isinstance(node.expression, exp.Null):
        return Compare(_column(node.this, columns, qualifiers), "isnull")
    if isinstance(node, exp.In):
        if node.args.get("query") or node.args.get("unnest") or node.args.get("field") or not node.expressions:
            raise NotNarrow("IN over a query")
        name = _column(node.this, columns, qualifiers)
        return Compare(name, "in", tuple(_literal(v, columns[name]) for v in node.expressions))
    found = _COMPARISONS.get(type(node))
    if found is None:
        raise NotNarrow(f"{type(node).__name__} in WHERE")
    op = found
    left, right = node.this, node.expression
    if not isinstance(left, exp.Column):
        left, right, op = right, left, _FLIPPED[op]
    name = _column(left, columns, qualifiers)
    return Compare(name, op, (_literal(right, columns[name]),))


def _column(node: exp.Expr, columns: dict[str, str], qualifiers: set[str]) -> str:
    if not isinstance(node, exp.Column) or not isinstance(node.this, exp.Identifier):
        raise NotNarrow("not a column reference")
    if node.args.get("db") or node.args.get("catalog"):
        raise NotNarrow("column qualified beyond its table")
    if node.table and node.table.lower() not in qualifiers:
        raise NotNarrow("column of another relation")
    name = node.name.lower()
    spark_type = columns.get(name)
    if spark_type is None:
        raise NotNarrow("column not in the governed projection")  # Spark reports it, as today
    if spark_type in ("float", "double", "binary"):
        raise NotNarrow("comparison on a floating-point or binary column")  # NaN, byte order
    return name


# ---- the statement ------------------------------------------------------------------------------
_OUTER_ARGS = {"expressions", "from_", "where"}
_INNER_ARGS = {"expressions", "from_", "where"}


@dataclass
class Lookup:
    """A governed query of the narrow shape: what to read and how to name it."""

    namespace: str
    table: str
    outputs: list[tuple[str, str]]  # (output name, column name as in the table)
    visible: list[str]  # the governed projection's columns


def shape(
    tree: exp.Expr, catalog: str, governed_mark: str
) -> tuple[Lookup, exp.Where | None, exp.Where | None, set[str]]:
    """The lookup a governed tree asks for, its row filter, its WHERE and the names that qualify
    its columns; or NotNarrow."""
    if type(tree) is not exp.Select:
        raise NotNarrow("not a plain SELECT")
    _only(tree, _OUTER_ARGS)
    source = tree.args["from_"].this
    if not isinstance(source, exp.Subquery) or set(k for k, v in source.args.items() if v) - {"this", "alias"}:
        raise NotNarrow("not one governed table")
    alias = source.args.get("alias")
    if not isinstance(alias, exp.TableAlias) or alias.columns:
        raise NotNarrow("table alias with column names")
    inner = source.this
    if type(inner) is not exp.Select:
        raise NotNarrow("not the rewrite's subquery")
    _only(inner, _INNER_ARGS)
    table = inner.args["from_"].this
    if not isinstance(table, exp.Table) or not table.meta.get(governed_mark):
        raise NotNarrow("not a governed table")
    if set(k for k, v in table.args.items() if v) - {"this", "db", "catalog"} or not isinstance(
        table.this, exp.Identifier
    ):
        raise NotNarrow("table with time travel, alias or suffix")
    if table.catalog.lower() != catalog:
        raise NotNarrow("not the lake catalog")
    names: list[str] = []
    where = inner.args.get("where")
    for item in inner.expressions:
        item = _filtered_column(item, where)
        if not isinstance(item, exp.Column) or item.table or not isinstance(item.this, exp.Identifier):
            raise NotNarrow("a masked or computed column")  # masks are CASE ... END AS `c`
        names.append(item.name)
    qualifiers = {alias.name.lower()}
    lookup = Lookup(
        namespace=table.db,
        table=table.name,
        outputs=_outputs(tree.expressions, names, qualifiers),
        visible=names,
    )
    return lookup, inner.args.get("where"), tree.args.get("where"), qualifiers


def _filtered_column(item: exp.Expr, where: exp.Where | None) -> exp.Expr:
    """`CASE WHEN <the row filter> THEN `c` END AS `c``, the rewrite's column under a grant with a
    row filter, is `c` itself on every row the same filter lets through: the column. Only when
    the condition is the whole WHERE, node for node; anything else (other grants' filters, masks,
    ELSE branches) stays a computed column."""
    if not (isinstance(item, exp.Alias) and isinstance(item.this, exp.Case) and where is not None):
        return item
    case = item.this
    ifs = case.args.get("ifs") or []
    if case.this is not None or case.args.get("default") is not None or len(ifs) != 1:
        return item
    then = ifs[0].args.get("true")
    if ifs[0].this != where.this or not isinstance(then, exp.Column) or then.name != item.alias:
        return item
    return then


def _only(select: exp.Select, allowed: set[str]) -> None:
    extra = [k for k, v in select.args.items() if v and k not in allowed]
    if extra or not select.args.get("from_") or select.args["from_"].args.get("joins"):
        raise NotNarrow(f"SELECT with {', '.join(extra) or 'no FROM'}")


def _outputs(items: list[exp.Expr], names: list[str], qualifiers: set[str]) -> list[tuple[str, str]]:
    by_lower = {n.lower(): n for n in names}
    out: list[tuple[str, str]] = []
    for item in items:
        if isinstance(item, exp.Star):
            if any(item.args.values()):
                raise NotNarrow("* with EXCEPT or REPLACE")  # Spark's answer (or error), not copied
            out += [(n, n) for n in names]
            continue
        shown: str | None = None
        if isinstance(item, exp.Alias):
            shown, item = item.alias, item.this
        if not isinstance(item, exp.Column) or not isinstance(item.this, exp.Identifier):
            raise NotNarrow("an expression in the SELECT list")
        if item.args.get("db") or item.args.get("catalog") or (item.table and item.table.lower() not in qualifiers):
            raise NotNarrow("a column of another relation")
        column = by_lower.get(item.name.lower())
        if column is None:
            raise NotNarrow("a column outside the governed projection")  # Spark's error, as today
        if shown is None:
            if item.name != column:
                raise NotNarrow("a column spelled in another case")  # Spark's output name: not copied here
            shown = column
        out.append((shown, column))
    if not out:
        raise NotNarrow("no columns")
    return out


# ---- reading ------------------------------------------------------------------------------------
def _catalog(settings: Settings) -> Any:
    from shoal.pyiceberg_catalog import cached_catalog

    return cached_catalog(settings)


def _to_iceberg(pred: Pred, types: dict[str, str]) -> Any:
    from pyiceberg import expressions

    ie: Any = expressions  # the classes take a column name where their stubs say a term

    if isinstance(pred, Bool):
        parts = [_to_iceberg(p, types) for p in pred.parts]
        return functools.reduce(ie.And if pred.op == "and" else ie.Or, parts)
    if pred.op == "isnull":
        return ie.IsNull(pred.column)
    if pred.op == "notnull":
        return ie.NotNull(pred.column)
    values = [_iceberg_value(v, types[pred.column]) for v in pred.values]
    if pred.op == "in":
        return ie.In(pred.column, values)
    cls = {
        "=": ie.EqualTo,
        "<>": ie.NotEqualTo,
        "<": ie.LessThan,
        "<=": ie.LessThanOrEqual,
        ">": ie.GreaterThan,
        ">=": ie.GreaterThanOrEqual,
    }[pred.op]
    return cls(pred.column, values[0])


def _iceberg_value(v: Any, spark_type: str) -> Any:
    if isinstance(v, dt.datetime):
        aware = v if v.tzinfo else v.replace(tzinfo=dt.UTC)
        return (aware - _EPOCH) // dt.timedelta(microseconds=1)
    if isinstance(v, dt.date):
        return (v - dt.date(1970, 1, 1)).days
    return v


def _converter(spark_type: str) -> Callable[[Any], Any]:
    """Arrow's Python value -> the value PySpark's collect() gives for the same cell."""
    if spark_type == "timestamp":
        # PySpark: datetime.fromtimestamp(seconds) in the process's local zone, naive.
        def zoned(v: Any) -> Any:
            if v is None:
                return None
            us = (v - _EPOCH) // dt.timedelta(microseconds=1)
            return dt.datetime.fromtimestamp(us // 1_000_000).replace(microsecond=us % 1_000_000)

        return zoned
    if spark_type == "binary":
        return lambda v: None if v is None else bytearray(v)
    return lambda v: v


def read(
    settings: Settings,
    table: Any,
    lookup: Lookup,
    pred: Pred | None,
    types: dict[str, str],
    *,
    dry: bool = False,
) -> QueryResult | None:
    """The rows of the lookup from the table's current snapshot; None where Spark must read it
    (delete files, too many rows to be a small read). `dry` (EXPLAIN): the engine, one line,
    nothing read."""
    from pyiceberg.expressions import AlwaysTrue
    from pyiceberg.io.pyarrow import ArrowScan

    # The snapshot current when it runs, as Spark reads it: a script plans all its statements
    # before running any, so an earlier INSERT of the same script is seen.
    table = table.refresh()
    actual = {f.name.lower(): f.name for f in table.schema().fields}  # the predicate's names are lower case
    needed = [c.lower() for _, c in lookup.outputs] + _pred_columns(pred)
    if not set(needed) <= set(actual):
        return None  # the schema moved since the rewrite read it: Spark decides
    wanted = list(dict.fromkeys(actual[c] for c in needed))
    row_filter = _to_iceberg(pred, types) if pred is not None else AlwaysTrue()
    scan = table.scan(row_filter=row_filter, selected_fields=tuple(wanted), case_sensitive=False)
    tasks = list(scan.plan_files())
    if any(t.delete_files for t in tasks):
        return None
    rows_in_files = sum(t.file.record_count for t in tasks)
    if rows_in_files > settings.sql.point_lookup_max_rows:
        return None
    if dry:  # no counts, files or snapshot ids: they would tell of rows and history the grant hides
        return QueryResult(["plan"], ["string"], [(f"engine: {ENGINE_ARROW} (point lookup)",)])
    arrow = ArrowScan(table.metadata, table.io, scan.projection(), row_filter, case_sensitive=False).to_table(tasks)
    cols = {name: arrow.column(name).to_pylist() for name in wanted}
    rows: list[tuple[Any, ...]] = []
    converters = [_converter(types[c.lower()]) for _, c in lookup.outputs]
    for i in range(arrow.num_rows):
        row = {name.lower(): cols[name][i] for name in wanted}
        if pred is not None and evaluate(pred, row) is not True:
            continue  # Arrow's filter is checked again: never a row SQL would drop
        rows.append(tuple(conv(row[c.lower()]) for conv, (_, c) in zip(converters, lookup.outputs, strict=True)))
    global answered
    with _answered_lock:
        answered += 1
    return QueryResult(
        columns=[shown for shown, _ in lookup.outputs],
        types=[types[c.lower()] for _, c in lookup.outputs],
        rows=rows,
    )


def _pred_columns(pred: Pred | None) -> list[str]:
    if pred is None:
        return []
    if isinstance(pred, Bool):
        return [c for p in pred.parts for c in _pred_columns(p)]
    return [pred.column]


def warm(settings: Settings) -> None:
    """Import PyIceberg's Arrow reader and open the catalog (a server calls it at start, so the
    first lookup does not pay for them)."""
    try:
        import pyiceberg.io.pyarrow  # noqa: F401

        _catalog(settings)
    except Exception as exc:  # noqa: BLE001 - no PyIceberg: every query runs on Spark
        log.info("point lookups without Spark are unavailable: %s", exc)


def load(settings: Settings, namespace: str, name: str) -> Any | None:
    """The PyIceberg table at its current metadata; None where PyIceberg cannot load it (no
    PyIceberg, a view, no such table): the caller asks Spark."""
    try:
        return _catalog(settings).load_table((namespace, name))
    except Exception as exc:  # noqa: BLE001 - Spark gives the answer, or the error, as before
        log.debug("point lookup: PyIceberg cannot load %s.%s (%s)", namespace, name, exc)
        return None


# Session settings under which Spark would read or compare differently from this module (which
# assumes Shoal's defaults: UTC, case-insensitive names, the main branch): Spark runs everything.
_SPARK_DEFAULTS = {
    "spark.sql.session.timezone": "utc",
    "spark.sql.casesensitive": "false",
    "spark.wap.branch": None,
    "spark.wap.id": None,
    "spark.sql.ansi.enabled": "false",
}


def _spark_reads_otherwise(settings: Settings) -> bool:
    conf = {k.lower(): str(v).strip().lower() for k, v in settings.spark.conf.items()}
    return any(k in conf and conf[k] != v for k, v in _SPARK_DEFAULTS.items())


def plan(
    settings: Settings,
    tree: exp.Expr,
    catalog: str,
    governed_mark: str,
    loaded: dict[tuple[str, str], Any] | None = None,
) -> Callable[..., QueryResult | None] | None:
    """What answers the governed `tree` without Spark, or None (Spark runs it). Called after the
    governed rewrite, with its tree; decides nothing about access. `loaded`: tables this statement
    has loaded already (namespace, name -> PyIceberg table)."""
    if not settings.sql.point_lookup or _spark_reads_otherwise(settings):
        return None
    try:
        lookup, inner_where, outer_where, qualifiers = shape(tree, catalog, governed_mark)
        table = (loaded or {}).get((lookup.namespace, lookup.table)) or _catalog(settings).load_table(
            (lookup.namespace, lookup.table)
        )
    except NotNarrow as exc:
        log.debug("point lookup: Spark runs it (%s)", exc)
        return None
    except Exception as exc:  # noqa: BLE001 - no PyIceberg, no such table: Spark decides, as today
        log.debug("point lookup: Spark runs it (%s)", exc)
        return None
    types: dict[str, str] = {}
    for field in table.schema().fields:
        spark_type = _spark_type(field.field_type)
        if spark_type is not None:
            types[field.name.lower()] = spark_type
    try:
        projected = {c.lower() for _, c in lookup.outputs}
        if not projected <= set(types):
            raise NotNarrow("a column of a type this path does not read")
        inner_names = {n.lower() for n in types}
        preds = []
        if inner_where is not None:  # the row filter, over the table's own columns
            preds.append(predicate(inner_where.this, {n: types[n] for n in inner_names}, {lookup.table.lower()}))
        if outer_where is not None:  # the query's WHERE, over the governed projection only
            visible = {n.lower(): types[n.lower()] for n in lookup.visible if n.lower() in types}
            preds.append(predicate(outer_where.this, visible, qualifiers))
    except Exception as exc:  # noqa: BLE001 - NotNarrow, or a literal Python cannot read (DATE '2024-13-45'): Spark's answer
        log.debug("point lookup: Spark runs it (%s)", exc)
        return None
    pred: Pred | None = preds[0] if len(preds) == 1 else (Bool("and", tuple(preds)) if preds else None)
    return functools.partial(read, settings, table, lookup, pred, types)
