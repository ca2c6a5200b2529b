"""Math functions, window (rolling) functions and aggregates across a row's columns."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from shoal.recipes.operations import (
    _ORDER,
    OPERATIONS,
    Operation,
    StepContext,
    _count,
    _default_target,
    _fail,
    _float,
    _int,
    _names,
    _one,
    _ordered,
    _param,
    _require,
    _target,
    col,
    operation,
)

# ---- math functions ----------------------------------------------------------------------------


def _math(fn: Callable[[Column, dict[str, Any], StepContext], Column], suffix: str) -> Operation:
    def op(df: DataFrame, p: dict[str, Any], ctx: StepContext) -> DataFrame:
        value = _one(df, p, ctx).cast("double")
        return df.withColumn(_target(p, ctx, _default_target(p, suffix)), fn(value, p, ctx))

    return op


for _name, _fn in {
    "CEILING": lambda c, p, ctx: F.ceil(c),
    "FLOOR": lambda c, p, ctx: F.floor(c),
    "DEGREES": lambda c, p, ctx: F.degrees(c),
    "RADIANS": lambda c, p, ctx: F.radians(c),
    "EXPONENT": lambda c, p, ctx: F.exp(c),
    "LN": lambda c, p, ctx: F.when(c > 0, F.log(c)),
    "LOG": lambda c, p, ctx: F.when(c > 0, F.log(c) / math.log(_float(p, "base", ctx, "10"))),
    "SQUARE_ROOT": lambda c, p, ctx: F.when(c >= 0, F.sqrt(c)),
    "SIGN": lambda c, p, ctx: F.signum(c).cast("int"),
    "NEGATE": lambda c, p, ctx: -c,
    "IS_EVEN": lambda c, p, ctx: F.when(c == F.floor(c), (c % 2) == 0).otherwise(False),
    "IS_ODD": lambda c, p, ctx: F.when(c == F.floor(c), F.abs(c % 2) == 1).otherwise(False),
    "POWER": lambda c, p, ctx: F.pow(c, _float(p, "exponent", ctx)),
    "TRUNCATE": lambda c, p, ctx: F.when(c >= 0, F.floor(c)).otherwise(F.ceil(c)),
}.items():
    OPERATIONS[_name] = _math(_fn, _name)


@operation("PI")
def pi(df: DataFrame, p: dict[str, Any], ctx: StepContext) -> DataFrame:
    return df.withColumn(_target(p, ctx, "PI"), F.lit(math.pi))


@operation("RANDOM")
def random_(df: DataFrame, p: dict[str, Any], ctx: StepContext) -> DataFrame:
    return df.withColumn(_target(p, ctx, "RANDOM"), F.rand())


@operation("RANDOM_BETWEEN")
def random_between(df: DataFrame, p: dict[str, Any], ctx: StepContext) -> DataFrame:
    lo, hi = _int(p, "lowerBound", ctx), _int(p, "upperBound", ctx)
    if hi < lo:
        raise _fail(ctx, f"upperBound {hi} is below lowerBound {lo}")
    return df.withColumn(_target(p, ctx, "RANDOM_BETWEEN"), (F.floor(F.rand() * (hi - lo + 1)) + lo).cast("bigint"))


# ---- window functions --------------------------------------------------------------------------


def _rolling(fn: Callable[[Column], Column]) -> Operation:
    def op(df: DataFrame, p: dict[str, Any], ctx: StepContext) -> DataFrame:
        src = _param(p, "sourceColumn", ctx)
        _require(df, [src], ctx)
        before, after = _count(p, "numRowsBefore", ctx), _count(p, "numRowsAfter", ctx)
        out, window = _ordered(df)
        value = fn(col(src)).over(window.rowsBetween(-before, after))
        return out.withColumn(_target(p, ctx, f"{src}_{ctx.operation}"), value).drop(_ORDER)

    return op


_ROLLING: dict[str, Callable[[Column], Column]] = {
    "ROLLING_AVERAGE": lambda c: F.avg(c.cast("double")),
    "ROLLING_SUM": lambda c: F.sum(c.cast("double")),
    "ROLLING_MIN": F.min,
    "ROLLING_MAX": F.max,
    "ROLLING_COUNT_A": F.count,
    "ROLLING_STANDARD_DEVIATION": lambda c: F.stddev_samp(c.cast("double")),
    "ROLLING_VARIANCE": lambda c: F.var_samp(c.cast("double")),
    "ROLLING_MODE": F.mode,
}


for _rolling_name, _aggregate in _ROLLING.items():
    OPERATIONS[_rolling_name] = _rolling(_aggregate)


def _shift(forward: bool) -> Operation:
    def op(df: DataFrame, p: dict[str, Any], ctx: StepContext) -> DataFrame:
        src = _param(p, "sourceColumn", ctx)
        _require(df, [src], ctx)
        n = _count(p, "numRows", ctx) if p.get("numRows") not in (None, "") else 1
        out, window = _ordered(df)
        value = (F.lead if forward else F.lag)(col(src), n).over(window)
        return out.withColumn(_target(p, ctx, f"{src}_{ctx.operation}"), value).drop(_ORDER)

    return op


OPERATIONS["NEXT"] = _shift(forward=True)


OPERATIONS["PREV"] = _shift(forward=False)


@operation("FILL")
def fill(df: DataFrame, p: dict[str, Any], ctx: StepContext) -> DataFrame:
    src = _param(p, "sourceColumn", ctx)
    _require(df, [src], ctx)
    before, after = _count(p, "numRowsBefore", ctx), _count(p, "numRowsAfter", ctx)
    out, window = _ordered(df)
    blank = col(src).isNull() | (F.trim(col(src).cast("string")) == "")
    valid = F.when(~blank, col(src))
    # The nearest earlier value wins; failing that, the nearest later one.
    prev = F.last(valid, ignorenulls=True).over(window.rowsBetween(-before, 0))
    nxt = F.first(valid, ignorenulls=True).over(window.rowsBetween(0, after))
    return out.withColumn(_target(p, ctx, f"{src}_FILL"), F.coalesce(prev, nxt)).drop(_ORDER)


# ---- aggregate functions (across the selected columns of each row) -----------------------------


def _numbers(df: DataFrame, p: dict[str, Any], ctx: StepContext) -> Column:
    """The row's numeric values from sourceColumns; text that is not a number is left out."""
    names = _names(p, "sourceColumns", ctx)
    _require(df, names, ctx)
    values = F.array(*[F.expr(f"try_cast(`{n.replace('`', '``')}` AS double)") for n in names])
    return F.filter(values, lambda x: x.isNotNull())


def _median(v: Column) -> Column:
    s, n = F.array_sort(v), F.size(v)
    mid = F.element_at(s, (n / 2 + 1).cast("int"))
    low = F.element_at(s, F.greatest((n / 2).cast("int"), F.lit(1)))
    return F.when(n == 0, None).when(n % 2 == 1, F.element_at(s, ((n + 1) / 2).cast("int"))).otherwise((low + mid) / 2)


def _variance(v: Column) -> Column:
    n = F.size(v)
    mean = F.aggregate(v, F.lit(0.0), lambda a, x: a + x) / n
    squares = F.aggregate(v, F.lit(0.0), lambda a, x: a + (x - mean) * (x - mean))
    # The sample variance, as Spark's var_samp: undefined for fewer than two values.
    return F.when(n > 1, squares / (n - 1))


def _mode(v: Column) -> Column:
    # Most frequent value; among equally frequent ones the smallest (hence -x in the key).
    counted = F.transform(
        F.array_distinct(v), lambda x: F.struct(F.size(F.filter(v, lambda y: y == x)).alias("c"), (-x).alias("k"))
    )
    return -F.array_max(counted).getField("k")


def _kth(p: dict[str, Any], ctx: StepContext, unique: bool) -> Callable[[Column], Column]:
    k = _int(p, "value", ctx)
    if k < 1:
        raise _fail(ctx, f"value (k) must be 1 or more, got {k}")

    def pick(v: Column) -> Column:
        desc = F.reverse(F.array_sort(F.array_distinct(v) if unique else v))
        return F.when(F.size(desc) >= k, F.element_at(desc, k))

    return pick


_ROW_AGGREGATES: dict[str, Callable[[Column], Column]] = {
    "SUM": lambda v: F.aggregate(v, F.lit(0.0), lambda a, x: a + x),
    "AVERAGE": lambda v: F.when(F.size(v) > 0, F.aggregate(v, F.lit(0.0), lambda a, x: a + x) / F.size(v)),
    "MIN": F.array_min,
    "MAX": F.array_max,
    "MEDIAN": _median,
    "MODE": _mode,
    "VARIANCE": _variance,
    "STANDARD_DEVIATION": lambda v: F.sqrt(_variance(v)),
}


def _row_aggregate(name: str) -> Operation:
    def op(df: DataFrame, p: dict[str, Any], ctx: StepContext) -> DataFrame:
        if name in ("KTH_LARGEST", "KTH_LARGEST_UNIQUE"):
            fn = _kth(p, ctx, unique=name.endswith("UNIQUE"))
        else:
            fn = _ROW_AGGREGATES[name]
        return df.withColumn(_target(p, ctx, f"{name}_value"), fn(_numbers(df, p, ctx)))

    return op


for _name in [*_ROW_AGGREGATES, "KTH_LARGEST", "KTH_LARGEST_UNIQUE"]:
    OPERATIONS[_name] = _row_aggregate(_name)


def _texts(df: DataFrame, p: dict[str, Any], ctx: StepContext) -> Column:
    names = _names(p, "sourceColumns", ctx)
    _require(df, names, ctx)
    values = F.array(*[col(n).cast("string") for n in names])
    return F.filter(values, lambda x: x.isNotNull() & (F.trim(x) != ""))


@operation("COUNT")
def count_values(df: DataFrame, p: dict[str, Any], ctx: StepContext) -> DataFrame:
    return df.withColumn(_target(p, ctx, "COUNT_value"), F.size(_texts(df, p, ctx)))


@operation("COUNT_DISTINCT")
def count_distinct_values(df: DataFrame, p: dict[str, Any], ctx: StepContext) -> DataFrame:
    return df.withColumn(_target(p, ctx, "COUNT_DISTINCT_value"), F.size(F.array_distinct(_texts(df, p, ctx))))


@operation("ANY")
def any_value(df: DataFrame, p: dict[str, Any], ctx: StepContext) -> DataFrame:
    # The first present value, in the order the columns are listed.
    present = _texts(df, p, ctx)
    return df.withColumn(_target(p, ctx, "ANY_value"), F.when(F.size(present) > 0, F.element_at(present, 1)))
