"""Reshaping and encoding: transpose, one-hot encoding, binning."""

from __future__ import annotations

import math
import typing
from typing import Any

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from shoal.recipes.operations import (
    _AGGS,
    StepContext,
    _fail,
    _float,
    _json,
    _names,
    _param,
    _require,
    _target,
    col,
    operation,
)

# ---- reshaping and encoding --------------------------------------------------------------------


@operation("TRANSPOSE")
def transpose(df: DataFrame, p: dict[str, Any], ctx: StepContext) -> DataFrame:
    pivots, values = _names(p, "pivotColumns", ctx), _names(p, "valueColumns", ctx)
    _require(df, pivots + values, ctx)
    new = str(p.get("newColumn") or "column")
    fn = str(p.get("aggregateFunction") or "COLLECT_LIST").upper()
    if fn not in _AGGS:
        raise _fail(ctx, f"unknown aggregateFunction {fn!r} (known: {', '.join(_AGGS)})")
    types = {df.schema[v].dataType.simpleString() for v in values}
    key = (
        col(pivots[0]).cast("string")
        if len(pivots) == 1
        else F.concat_ws("_", *[col(c).cast("string") for c in pivots])
    )
    cast = (lambda c: c.cast("string")) if len(types) > 1 else (lambda c: c)
    long = df.select(key.alias("__shoal_key__"), *[cast(col(v)).alias(v) for v in values]).unpivot(
        ["__shoal_key__"], typing.cast(list[Column | str], values), new, "__shoal_value__"
    )
    order = F.create_map(*[x for i, v in enumerate(values) for x in (F.lit(v), F.lit(i))])
    wide = long.groupBy(new).pivot("__shoal_key__").agg(_AGGS[fn](F.col("__shoal_value__")))
    # Rows come out in the order the value columns were listed.
    return wide.orderBy(order[F.col(new)]).select(*[col(c) for c in wide.columns])


@operation("ONE_HOT_ENCODING")
def one_hot_encoding(df: DataFrame, p: dict[str, Any], ctx: StepContext) -> DataFrame:
    src = _param(p, "sourceColumn", ctx)
    _require(df, [src], ctx)
    values = [r[0] for r in df.where(col(src).isNotNull()).select(col(src)).distinct().limit(11).collect()]
    if len(values) > 10:
        raise _fail(ctx, f"column {src!r} has more than 10 distinct values; the encoding allows at most 10")
    out = df
    for v in sorted(values, key=str):
        out = out.withColumn(f"{src}_{v}", F.when(col(src) == F.lit(v), 1).otherwise(0))
    return out


def _bound(raw: Any, ctx: StepContext) -> float:
    text = str(raw).strip()
    if text.lower() in ("infinity", "+infinity", "inf"):
        return math.inf
    if text.lower() in ("-infinity", "-inf"):
        return -math.inf
    try:
        return float(text)
    except ValueError as exc:
        raise _fail(ctx, f"bad split {raw!r}") from exc


@operation("BUCKETIZATION")
def bucketization(df: DataFrame, p: dict[str, Any], ctx: StepContext) -> DataFrame:
    src = _param(p, "sourceColumn", ctx)
    _require(df, [src], ctx)
    names = _json(_param(p, "bucketNames", ctx))
    if not isinstance(names, list) or not names:
        raise _fail(ctx, "bucketNames must be a JSON list of names")
    number = col(src).cast("double")
    if p.get("splits") not in (None, ""):
        splits = [_bound(s, ctx) for s in _json(p["splits"])]
        if len(splits) != len(names) + 1 or splits != sorted(splits):
            raise _fail(ctx, f"splits must be {len(names) + 1} ascending bounds for {len(names)} buckets")
    else:
        pct = _float(p, "percentage", ctx)
        if not 0 < pct <= 100 or round(100 / pct) != len(names):
            raise _fail(ctx, f"percentage {pct:g} gives {100 / pct:g} buckets but bucketNames has {len(names)}")
        # Equal shares of the non-null rows, in value order.
        tile = F.ntile(len(names)).over(Window.partitionBy(number.isNull()).orderBy(number))
        label = F.element_at(F.array(*[F.lit(str(n)) for n in names]), tile)
        return df.withColumn(_target(p, ctx, f"{src}_binned"), F.when(number.isNotNull(), label))
    value = None
    for i, name in enumerate(names):
        lo, hi = splits[i], splits[i + 1]
        # [lo, hi) except the last bucket, which also holds its upper bound.
        inside = (number >= lo) & ((number <= hi) if i == len(names) - 1 else (number < hi))
        value = F.when(inside, F.lit(str(name))) if value is None else value.when(inside, F.lit(str(name)))
    assert value is not None  # at least one bucket (checked above)
    return df.withColumn(_target(p, ctx, f"{src}_binned"), value)
