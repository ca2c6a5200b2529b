"""Combining datasets and rows: join, union, group by, pivot, unpivot, sort."""

from __future__ import annotations

from typing import Any

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from shoal.recipes.operations import (
    _AGGS,
    _TYPES,
    RecipeError,
    StepContext,
    _bool,
    _json,
    _names,
    _param,
    _require,
    col,
    operation,
)

# ---- combining ---------------------------------------------------------------------------------


_JOINS = {
    "INNER_JOIN": "inner",
    "LEFT_JOIN": "left",
    "RIGHT_JOIN": "right",
    "OUTER_JOIN": "full",
    "LEFT_EXCLUDING_JOIN": "left_anti",
    "RIGHT_EXCLUDING_JOIN": "right_anti",
    "FULL_JOIN": "full",
}


def _secondary(p: dict[str, Any], ctx: StepContext) -> Any:
    for key in ("secondaryDatasetName", "secondInput", "secondaryInput"):
        if p.get(key) not in (None, ""):
            return _json(p[key])
    raise RecipeError(
        f"step {ctx.step} ({ctx.operation}): name the other dataset with secondaryDatasetName or secondInput"
    )


@operation("JOIN")
def join(df: DataFrame, p: dict[str, Any], ctx: StepContext) -> DataFrame:
    other = ctx.load(_secondary(p, ctx))
    keys = _json(_param(p, "joinKeys", ctx))
    pairs = [(k["key"], k["value"]) if isinstance(k, dict) else (k, k) for k in keys]
    _require(df, [a for a, _ in pairs], ctx)
    missing = [b for _, b in pairs if b not in other.columns]
    if missing:
        raise RecipeError(f"step {ctx.step} (JOIN): the other dataset has no column {', '.join(missing)}")
    kind = str(p.get("joinType", "INNER_JOIN")).upper()
    if kind not in _JOINS:
        raise RecipeError(f"step {ctx.step} (JOIN): unknown joinType {kind!r} (known: {', '.join(_JOINS)})")
    how = _JOINS[kind]
    left, right = df.alias("l"), other.alias("r")
    cond = None
    for a, b in pairs:
        c = F.col(f"l.`{a}`") == F.col(f"r.`{b}`")
        cond = c if cond is None else cond & c
    if how == "right_anti":
        return right.join(left, cond, "left_anti")
    joined = left.join(right, cond, how)
    if how == "left_anti":
        return joined
    keep_left = _json(p["leftColumns"]) if p.get("leftColumns") else df.columns
    keep_right = (
        _json(p["rightColumns"])
        if p.get("rightColumns")
        else [c for c in other.columns if c not in {b for a, b in pairs if a == b}]
    )
    cols = [F.col(f"l.`{c}`").alias(c) for c in keep_left]
    cols += [F.col(f"r.`{c}`").alias(c if c not in keep_left else f"{c}_right") for c in keep_right]
    return joined.select(*cols)


@operation("UNION")
def union(df: DataFrame, p: dict[str, Any], ctx: StepContext) -> DataFrame:
    others = _json(p.get("secondaryDatasetNames") or p.get("secondInputs") or _secondary(p, ctx))
    if not isinstance(others, list):
        others = [others]
    out = df
    for other in others:
        out = out.unionByName(ctx.load(other), allowMissingColumns=True)
    return out


def _agg(name: str, c: Column, ctx: StepContext) -> Column:
    fn = _AGGS.get(str(name).upper())
    if fn is None:
        raise RecipeError(f"step {ctx.step} ({ctx.operation}): unknown aggregate {name!r} (known: {', '.join(_AGGS)})")
    return fn(c)


@operation("GROUP_BY")
def group_by(df: DataFrame, p: dict[str, Any], ctx: StepContext) -> DataFrame:
    keys = _names(p, "sourceColumns", ctx)
    _require(df, keys, ctx)
    options = _json(p.get("groupByAggFunctionOptions") or p.get("groupByAggFunctions") or "[]")
    aggs = []
    for o in options:
        src = o["sourceColumnName"]
        _require(df, [src], ctx)
        target = o.get("targetColumnName") or f"{src}_{o['functionName'].lower()}"
        value = _agg(o["functionName"], col(src), ctx)
        if (
            o.get("targetColumnDataType")
            and o["targetColumnDataType"] in _TYPES
            and o["targetColumnDataType"] != "number"
        ):
            value = value.cast(_TYPES[o["targetColumnDataType"]])
        aggs.append((target, value))
    if _bool(p.get("useNewDataFrame", "true")):
        return (
            df.groupBy(*[col(k) for k in keys]).agg(*[v.alias(t) for t, v in aggs])
            if aggs
            else df.select(*keys).distinct()
        )
    window = Window.partitionBy(*[col(k) for k in keys])
    for target, value in aggs:
        df = df.withColumn(target, value.over(window))
    return df


@operation("PIVOT")
def pivot(df: DataFrame, p: dict[str, Any], ctx: StepContext) -> DataFrame:
    src, value = _param(p, "sourceColumn", ctx), _param(p, "valueColumn", ctx)
    _require(df, [src, value], ctx)
    others = [c for c in df.columns if c not in (src, value)]
    return (
        df.groupBy(*[col(c) for c in others]).pivot(src).agg(_agg(p.get("aggregateFunction", "SUM"), col(value), ctx))
    )


@operation("UNPIVOT")
def unpivot(df: DataFrame, p: dict[str, Any], ctx: StepContext) -> DataFrame:
    names = _names(p, "sourceColumns", ctx)
    _require(df, names, ctx)
    ids = [c for c in df.columns if c not in names]
    types = {df.schema[n].dataType.simpleString() for n in names}
    cast = "string" if len(types) > 1 else None
    source = df.select(*[col(c) for c in ids], *[(col(n).cast(cast) if cast else col(n)).alias(n) for n in names])
    return source.unpivot(
        list[Column | str](ids),
        list[Column | str](names),
        p.get("unpivotColumn", "column"),
        p.get("valueColumn", "value"),
    )


@operation("SORT")
def sort(df: DataFrame, p: dict[str, Any], ctx: StepContext) -> DataFrame:
    expressions = _json(_param(p, "expressions", ctx))
    order = []
    for e in expressions:
        name = e["sourceColumn"] if isinstance(e, dict) else e
        _require(df, [name], ctx)
        desc = isinstance(e, dict) and str(e.get("ordering", "ASCENDING")).upper().startswith("DESC")
        nulls_first = isinstance(e, dict) and str(e.get("nullsOrdering", "NULLS_BOTTOM")).upper() in (
            "NULLS_TOP",
            "NULLS_FIRST",
        )
        c = col(name)
        order.append(
            (c.desc_nulls_first() if nulls_first else c.desc_nulls_last())
            if desc
            else (c.asc_nulls_first() if nulls_first else c.asc_nulls_last())
        )
    return df.orderBy(*order)
