"""Derived columns: arithmetic, rounding, expressions, boolean and case operations."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from shoal.recipes.operations import (
    OPERATIONS,
    Operation,
    RecipeError,
    StepContext,
    _expression,
    _fail,
    _first,
    _json,
    _param,
    _require,
    _target,
    col,
    operation,
)

# ---- derived columns ---------------------------------------------------------------------------


def _arith(fn: Callable[[Column, Column], Column]) -> Operation:
    def op(df: DataFrame, p: dict[str, Any], ctx: StepContext) -> DataFrame:
        def side(n: str) -> Column:
            if p.get(f"sourceColumn{n}") not in (None, ""):
                _require(df, [p[f"sourceColumn{n}"]], ctx)
                return col(p[f"sourceColumn{n}"]).cast("double")
            if p.get(f"value{n}") not in (None, ""):
                return F.lit(float(p[f"value{n}"]))
            raise RecipeError(f"step {ctx.step} ({ctx.operation}): needs sourceColumn{n} or value{n}")

        return df.withColumn(_target(p, ctx), fn(side("1"), side("2")))

    return op


OPERATIONS["ADD"] = _arith(lambda a, b: a + b)


OPERATIONS["SUBTRACT"] = _arith(lambda a, b: a - b)


OPERATIONS["MULTIPLY"] = _arith(lambda a, b: a * b)


OPERATIONS["DIVIDE"] = _arith(lambda a, b: F.when(b != 0, a / b))


OPERATIONS["MOD"] = _arith(lambda a, b: F.when(b != 0, a % b))


@operation("ROUND")
def round_(df: DataFrame, p: dict[str, Any], ctx: StepContext) -> DataFrame:
    src = _param(p, "sourceColumn", ctx)
    _require(df, [src], ctx)
    return df.withColumn(p.get("targetColumn") or src, F.round(col(src).cast("double"), int(p.get("decimalPlaces", 0))))


@operation("ABSOLUTE")
def absolute(df: DataFrame, p: dict[str, Any], ctx: StepContext) -> DataFrame:
    src = _param(p, "sourceColumn", ctx)
    _require(df, [src], ctx)
    return df.withColumn(p.get("targetColumn") or src, F.abs(col(src)))


@operation("DERIVE_COLUMN", "CREATE_COLUMN")
def derive(df: DataFrame, p: dict[str, Any], ctx: StepContext) -> DataFrame:
    """Shoal extension: a new column from a Spark SQL expression over the row."""
    return df.withColumn(_target(p, ctx), _expression(df, _param(p, "expression", ctx), ctx))


# ---- logical expressions -----------------------------------------------------------------------


_AGG_REF = re.compile(r"`:([^`]+)`")


def _with_expressions(df: DataFrame, p: dict[str, Any], ctx: StepContext) -> tuple[DataFrame, dict[str, str]]:
    """Compute the aggregates named in `withExpressions` once; `:name` refers to them."""
    specs = _json(p.get("withExpressions") or "[]")
    if not isinstance(specs, list):
        raise _fail(ctx, "withExpressions must be a JSON list of {name, value, type}")
    names: dict[str, str] = {}
    if not specs:
        return df, names
    exprs = []
    for i, spec in enumerate(specs):
        if not isinstance(spec, dict) or not spec.get("name") or not spec.get("value"):
            raise _fail(ctx, f"withExpressions[{i}] needs name and value")
        if str(spec.get("type", "aggregate")).lower() != "aggregate":
            raise _fail(ctx, f"withExpressions[{i}]: only type 'aggregate' is supported")
        exprs.append(_expression(df, str(spec["value"]), ctx).alias(f"a{i}"))
    try:
        row = _first(df.select(*exprs))
    except Exception as exc:  # an expression that is not an aggregate fails here
        raise _fail(ctx, f"withExpressions must be aggregates over columns: {exc}") from exc
    for i, spec in enumerate(specs):
        hidden = f"__shoal_with_{i}__"
        df = df.withColumn(hidden, F.lit(row[f"a{i}"]))
        names[str(spec["name"])] = hidden
    return df, names


def _resolve(text: str, refs: dict[str, str], ctx: StepContext) -> str:
    def sub(m: re.Match[str]) -> str:
        if m.group(1) not in refs:
            raise _fail(ctx, f"`:{m.group(1)}` is not defined in withExpressions")
        return f"`{refs[m.group(1)]}`"

    return _AGG_REF.sub(sub, text)


def _result(df: DataFrame, text: str, refs: dict[str, str], ctx: StepContext) -> Column:
    """trueValueExpression / falseValueExpression: a column, an aggregate, or a constant."""
    stripped = text.strip()
    m = re.fullmatch(r"`([^`]+)`", stripped)
    if m and m.group(1).startswith(":"):
        hidden = refs.get(m.group(1)[1:])
        if hidden is None:
            raise _fail(ctx, f"{stripped} is not defined in withExpressions")
        return col(hidden)
    if m:
        _require(df, [m.group(1)], ctx)
        return col(m.group(1))
    return F.lit(text)


def _drop_hidden(df: DataFrame, refs: dict[str, str]) -> DataFrame:
    return df.drop(*refs.values()) if refs else df


@operation("BOOLEAN_OPERATION")
def boolean_operation(df: DataFrame, p: dict[str, Any], ctx: StepContext) -> DataFrame:
    out, refs = _with_expressions(df, p, ctx)
    test = _expression(out, _resolve(str(_param(p, "valueExpression", ctx)), refs, ctx), ctx)
    yes = _result(out, str(p.get("trueValueExpression", "true")), refs, ctx)
    no = _result(out, str(p.get("falseValueExpression", "false")), refs, ctx)
    value = F.when(F.coalesce(test, F.lit(False)), yes).otherwise(no)
    return _drop_hidden(out.withColumn(_target(p, ctx), value), refs)


@operation("CASE_OPERATION")
def case_operation(df: DataFrame, p: dict[str, Any], ctx: StepContext) -> DataFrame:
    out, refs = _with_expressions(df, p, ctx)
    text = _resolve(str(_param(p, "valueExpression", ctx)), refs, ctx)
    if not re.match(r"\s*case\b", text, re.IGNORECASE):
        raise _fail(ctx, f"valueExpression must be a CASE expression, got {text!r}")
    return _drop_hidden(out.withColumn(_target(p, ctx), _expression(out, text, ctx)), refs)
