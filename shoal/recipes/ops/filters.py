"""Row filters: conditions, keep/remove values, SQL filter expressions."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from shoal.recipes.operations import (
    RecipeError,
    StepContext,
    _expression,
    _json,
    _param,
    _require,
    col,
    operation,
)

# ---- filters -----------------------------------------------------------------------------------


def condition(df: DataFrame, cond: dict[str, Any], ctx: StepContext) -> Column:
    """One ConditionExpression ({Condition, Value, TargetColumn}) as a Spark predicate."""
    name = cond.get("TargetColumn") or cond.get("targetColumn")
    kind = str(cond.get("Condition") or cond.get("condition") or "").upper()
    if not name or not kind:
        raise RecipeError(f"step {ctx.step} ({ctx.operation}): a condition needs Condition and TargetColumn")
    _require(df, [name], ctx)
    c, raw = col(name), _json(cond.get("Value", cond.get("value")))
    text = c.cast("string")
    values = raw if isinstance(raw, list) else [raw]
    number = c.cast("double")
    checks: dict[str, Callable[[], Column]] = {
        "IS": lambda: text.isin([str(v) for v in values]),
        "IS_NOT": lambda: ~text.isin([str(v) for v in values]) | c.isNull(),
        "IS_MISSING": lambda: c.isNull() | (F.trim(text) == ""),
        "IS_NOT_MISSING": lambda: c.isNotNull() & (F.trim(text) != ""),
        "LESS_THAN": lambda: number < float(values[0]),
        "LESS_THAN_EQUAL": lambda: number <= float(values[0]),
        "GREATER_THAN": lambda: number > float(values[0]),
        "GREATER_THAN_EQUAL": lambda: number >= float(values[0]),
        "IS_BETWEEN": lambda: number.between(float(_bounds(raw)[0]), float(_bounds(raw)[1])),
        "CONTAINS": lambda: text.contains(str(values[0])),
        "DOES_NOT_CONTAIN": lambda: ~text.contains(str(values[0])) | c.isNull(),
        "STARTS_WITH": lambda: text.startswith(str(values[0])),
        "ENDS_WITH": lambda: text.endswith(str(values[0])),
        "MATCHES": lambda: text.rlike(str(values[0])),
    }
    if kind not in checks:
        raise RecipeError(f"step {ctx.step} ({ctx.operation}): unknown Condition {kind!r} (known: {', '.join(checks)})")
    try:
        return F.coalesce(checks[kind](), F.lit(False))
    except (TypeError, ValueError, IndexError) as exc:
        raise RecipeError(f"step {ctx.step} ({ctx.operation}): bad Value {raw!r} for {kind}: {exc}") from exc


def _bounds(raw: Any) -> tuple[Any, Any]:
    if isinstance(raw, dict):
        return raw.get("min", raw.get("Min")), raw.get("max", raw.get("Max"))
    return raw[0], raw[1]


def _conditions(df: DataFrame, p: dict[str, Any], ctx: StepContext) -> Column:
    conds = p.get("__conditions__") or []
    if not conds and "condition" in p:
        conds = [{"Condition": p["condition"], "Value": p.get("value"), "TargetColumn": p.get("sourceColumn")}]
    if not conds:
        raise RecipeError(f"step {ctx.step} ({ctx.operation}): needs ConditionExpressions")
    out = condition(df, conds[0], ctx)
    for c in conds[1:]:
        out = out & condition(df, c, ctx)
    return out


@operation("REMOVE_VALUES")
def remove_values(df: DataFrame, p: dict[str, Any], ctx: StepContext) -> DataFrame:
    return df.where(~_conditions(df, p, ctx))


@operation("KEEP_VALUES")
def keep_values(df: DataFrame, p: dict[str, Any], ctx: StepContext) -> DataFrame:
    return df.where(_conditions(df, p, ctx))


@operation("FILTER")
def filter_expression(df: DataFrame, p: dict[str, Any], ctx: StepContext) -> DataFrame:
    """Shoal extension: keep rows where a Spark SQL predicate holds."""
    return df.where(_expression(df, _param(p, "expression", ctx), ctx))
