"""The recipe format's core: the operation registry (`@operation`, `OPERATIONS`), a step's
context and errors, and the parameter helpers every operation shares.

Recipe steps are named and parameterised as in the common cloud data-prep recipe format
(`{"Action": {"Operation": ..., "Parameters": {...}}}`). Parameters arrive as that format writes
them: strings, lists JSON-encoded inside strings, booleans as "true"/"false". Each operation is a
function `(df, params, ctx) -> df`; an unknown operation or a missing parameter fails with the
step number and the name. The operations themselves live in `shoal.recipes.ops`, one module per
topic; `shoal.recipes.registry` imports them all.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pyspark.sql import Column, DataFrame, Row, Window
from pyspark.sql import functions as F
from pyspark.sql.window import WindowSpec

from shoal.exceptions import ShoalError


class RecipeError(ShoalError):
    """A recipe step cannot be applied (unknown operation, bad parameter, missing column)."""


@dataclass
class StepContext:
    step: int
    operation: str
    # Loads a secondary dataset (JOIN, UNION) by name or inline definition.
    load: Callable[[Any], DataFrame]


Operation = Callable[[DataFrame, dict[str, Any], StepContext], DataFrame]
OPERATIONS: dict[str, Operation] = {}


def operation(*names: str) -> Callable[[Operation], Operation]:
    def register(fn: Operation) -> Operation:
        for n in names:
            OPERATIONS[n] = fn
        return fn

    return register


# ---- parameter helpers -------------------------------------------------------------------------


def col(name: str) -> Column:
    return F.col("`" + name.replace("`", "``") + "`")


def _param(params: dict[str, Any], key: str, ctx: StepContext, default: Any = ...) -> Any:
    if key in params and params[key] not in (None, ""):
        return params[key]
    if default is ...:
        raise RecipeError(f"step {ctx.step} ({ctx.operation}): parameter {key!r} is required")
    return default


def _json(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return value
    return value


def _names(params: dict[str, Any], key: str, ctx: StepContext) -> list[str]:
    value = _json(_param(params, key, ctx))
    if isinstance(value, str):
        value = [v.strip() for v in value.split(",") if v.strip()]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise RecipeError(f"step {ctx.step} ({ctx.operation}): {key!r} must be a list of column names")
    return value


def _bool(value: Any) -> bool:
    return value is True or str(value).strip().lower() == "true"


def _source(df: DataFrame, params: dict[str, Any], ctx: StepContext, key: str = "sourceColumn") -> Column:
    """A column reference, or a literal from `value` (the format allows either)."""
    if params.get(key) not in (None, ""):
        _require(df, [params[key]], ctx)
        return col(params[key])
    if "value" in params:
        return F.lit(params["value"])
    raise RecipeError(f"step {ctx.step} ({ctx.operation}): parameter {key!r} (or 'value') is required")


def _require(df: DataFrame, names: list[str], ctx: StepContext) -> None:
    missing = [n for n in names if n not in df.columns]
    if missing:
        raise RecipeError(
            f"step {ctx.step} ({ctx.operation}): no column {', '.join(map(repr, missing))}; "
            f"the data has {', '.join(df.columns)}"
        )


def _target(params: dict[str, Any], ctx: StepContext, default: str | None = None) -> str:
    return _param(params, "targetColumn", ctx, default)


# ---- helpers the topic modules share --------------------------------------------------------


_TYPES = {
    "string": "string",
    "text": "string",
    "integer": "bigint",
    "int": "int",
    "long": "bigint",
    "bigint": "bigint",
    "double": "double",
    "float": "double",
    "number": "double",
    "decimal": "decimal(38,10)",
    "boolean": "boolean",
    "date": "date",
    "timestamp": "timestamp",
    "datetime": "timestamp",
}


def _as_timestamp(c: Column) -> Column:
    as_text = c.cast("string")
    return F.coalesce(c.cast("timestamp"), *[F.try_to_timestamp(as_text, F.lit(fmt)) for fmt in _DATE_PATTERNS])


def _slice(text: Column, start: Column, end: Column) -> Column:
    """Characters [start, end) with 0-based positions, as Python slices them (no negatives)."""
    length = F.greatest(end - start, F.lit(0))
    return text.substr(start + 1, length)


def _count(p: dict[str, Any], key: str, ctx: StepContext) -> int:
    n = _int(p, key, ctx)
    if n < 0:
        raise _fail(ctx, f"{key} must be 0 or more, got {n}")
    return n


def _expression(df: DataFrame, text: str, ctx: StepContext) -> Column:
    import sqlglot
    from sqlglot import exp

    try:
        tree = sqlglot.parse_one(text, read="spark")
    except sqlglot.errors.ParseError as exc:
        raise RecipeError(f"step {ctx.step} ({ctx.operation}): cannot parse expression {text!r}: {exc}") from exc
    # An expression works on the row: no subqueries, no table reads.
    if tree.find(exp.Select, exp.Subquery, exp.Table) is not None:
        raise RecipeError(f"step {ctx.step} ({ctx.operation}): the expression must not contain a query: {text!r}")
    # Nor calls into the JVM: reflect() and java_method() run arbitrary static Java methods.
    called = {f.name.lower() for f in tree.find_all(exp.Anonymous)}
    if called & _DENIED_FUNCTIONS:
        raise RecipeError(
            f"step {ctx.step} ({ctx.operation}): the expression calls "
            f"{', '.join(sorted(called & _DENIED_FUNCTIONS))}, which recipes may not use: {text!r}"
        )
    missing = {c.name for c in tree.find_all(exp.Column)} - set(df.columns)
    if missing:
        raise RecipeError(
            f"step {ctx.step} ({ctx.operation}): expression {text!r} names unknown column(s) {', '.join(sorted(missing))}"
        )
    return F.expr(text)


_AGGS: dict[str, Callable[[Column], Column]] = {
    "SUM": F.sum,
    "COUNT": F.count,
    "COUNT_DISTINCT": F.countDistinct,
    "AVERAGE": F.avg,
    "MEAN": F.avg,
    "AVG": F.avg,
    "MIN": F.min,
    "MAX": F.max,
    "MEDIAN": lambda c: F.percentile_approx(c, 0.5),
    "STDDEV": F.stddev,
    "VARIANCE": F.variance,
    "FIRST": F.first,
    "LAST": F.last,
}


_DATE_PATTERNS = [
    "yyyy-MM-dd HH:mm:ss",
    "yyyy-MM-dd'T'HH:mm:ss",
    "yyyy-MM-dd",
    "MM/dd/yyyy HH:mm:ss",
    "MM/dd/yyyy",
    "yyyy/MM/dd",
    "dd-MM-yyyy",
    "dd.MM.yyyy",
    "yyyyMMdd",
]


_DENIED_FUNCTIONS = {"reflect", "java_method", "try_reflect"}


# Aggregates the reference also names for PIVOT / TRANSPOSE.
_AGGS.setdefault("COLLECT_LIST", F.collect_list)
_AGGS.setdefault("COLLECT_SET", F.collect_set)
_AGGS.setdefault("MODE", F.mode)

_ORDER = "__shoal_row_order__"


def _fail(ctx: StepContext, message: str) -> RecipeError:
    return RecipeError(f"step {ctx.step} ({ctx.operation}): {message}")


def _int(p: dict[str, Any], key: str, ctx: StepContext, default: Any = ...) -> int:
    raw = _param(p, key, ctx, default)
    try:
        return int(str(raw).strip())
    except ValueError as exc:
        raise _fail(ctx, f"{key!r} must be a whole number, got {raw!r}") from exc


def _float(p: dict[str, Any], key: str, ctx: StepContext, default: Any = ...) -> float:
    raw = _param(p, key, ctx, default)
    try:
        return float(str(raw).strip())
    except ValueError as exc:
        raise _fail(ctx, f"{key!r} must be a number, got {raw!r}") from exc


def _regex(pattern: str, key: str, ctx: StepContext) -> str:
    try:
        re.compile(pattern)
    except re.error as exc:
        raise _fail(ctx, f"bad {key} {pattern!r}: {exc}") from exc
    return pattern


def _one(df: DataFrame, p: dict[str, Any], ctx: StepContext, key: str = "sourceColumn") -> Column:
    """`sourceColumn` or a literal `value`; the reference allows one of the two."""
    name = p.get(key)
    if name not in (None, ""):
        _require(df, [name], ctx)
        return col(name)
    if p.get("value") is not None:
        return F.lit(p["value"])
    raise _fail(ctx, f"needs {key} or value")


def _pair(df: DataFrame, p: dict[str, Any], ctx: StepContext, n: str) -> Column:
    name = p.get(f"sourceColumn{n}")
    if name not in (None, ""):
        _require(df, [name], ctx)
        return col(name)
    if p.get(f"value{n}") not in (None, ""):
        return F.lit(p[f"value{n}"])
    raise _fail(ctx, f"needs sourceColumn{n} or value{n}")


def _default_target(p: dict[str, Any], suffix: str) -> str:
    return f"{p.get('sourceColumn') or 'value'}_{suffix}"


def _first(df: DataFrame) -> Row:
    """The first row of a one-row aggregate (an aggregate without GROUP BY always has one)."""
    row = df.first()
    assert row is not None
    return row


def _ordered(df: DataFrame) -> tuple[DataFrame, WindowSpec]:
    """A row-position column for order-dependent steps; the id follows partition order."""
    return df.withColumn(_ORDER, F.monotonically_increasing_id()), Window.orderBy(_ORDER)


def _source_columns(df: DataFrame, p: dict[str, Any], ctx: StepContext) -> list[str]:
    names = _names(p, "sourceColumns", ctx) if p.get("sourceColumns") not in (None, "") else []
    if not names and p.get("sourceColumn") not in (None, ""):
        names = [p["sourceColumn"]]
    if not names:
        raise _fail(ctx, "parameter 'sourceColumns' is required")
    _require(df, names, ctx)
    return names
