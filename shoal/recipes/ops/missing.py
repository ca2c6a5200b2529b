"""Missing values and duplicates: fills, removals and duplicate flags."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from shoal.recipes.operations import (
    _ORDER,
    OPERATIONS,
    Operation,
    StepContext,
    _fail,
    _first,
    _ordered,
    _param,
    _require,
    _target,
    col,
    operation,
)

# ---- missing values and duplicates -------------------------------------------------------------


def _fill(value_of: Callable[[DataFrame, str], Any]) -> Operation:
    def op(df: DataFrame, p: dict[str, Any], ctx: StepContext) -> DataFrame:
        src = _param(p, "sourceColumn", ctx)
        _require(df, [src], ctx)
        value = value_of(df, src) if value_of is not None else None
        return df.withColumn(src, F.coalesce(col(src), F.lit(value).cast(df.schema[src].dataType)))

    return op


OPERATIONS["FILL_WITH_AVERAGE"] = _fill(lambda df, c: df.select(F.avg(col(c))).collect()[0][0])


OPERATIONS["FILL_WITH_MEDIAN"] = _fill(lambda df, c: df.select(F.percentile_approx(col(c), 0.5)).collect()[0][0])


OPERATIONS["FILL_WITH_SUM"] = _fill(lambda df, c: df.select(F.sum(col(c))).collect()[0][0])


OPERATIONS["FILL_WITH_MOST_FREQUENT"] = _fill(
    lambda df, c: (df.where(col(c).isNotNull()).groupBy(col(c)).count().orderBy(F.desc("count")).first() or [None])[0]
)


OPERATIONS["FILL_WITH_EMPTY"] = _fill(lambda df, c: "")


@operation("FILL_WITH_CUSTOM")
def fill_custom(df: DataFrame, p: dict[str, Any], ctx: StepContext) -> DataFrame:
    src = _param(p, "sourceColumn", ctx)
    _require(df, [src], ctx)
    return df.withColumn(src, F.coalesce(col(src), F.lit(_param(p, "value", ctx)).cast(df.schema[src].dataType)))


@operation("FILL_WITH_NULL")
def fill_null(df: DataFrame, p: dict[str, Any], ctx: StepContext) -> DataFrame:
    src = _param(p, "sourceColumn", ctx)
    _require(df, [src], ctx)
    return df.withColumn(src, F.when(F.trim(col(src).cast("string")) == "", None).otherwise(col(src)))


@operation("REMOVE_MISSING")
def remove_missing(df: DataFrame, p: dict[str, Any], ctx: StepContext) -> DataFrame:
    src = _param(p, "sourceColumn", ctx)
    _require(df, [src], ctx)
    return df.where(col(src).isNotNull() & (F.trim(col(src).cast("string")) != ""))


@operation("REMOVE_DUPLICATES")
def remove_duplicates(df: DataFrame, p: dict[str, Any], ctx: StepContext) -> DataFrame:
    src = _param(p, "sourceColumn", ctx)
    _require(df, [src], ctx)
    return df.dropDuplicates([src])


def data_columns(df: DataFrame) -> list[str]:
    """The dataset's own columns, without the helper columns a conditional step adds."""
    return [c for c in df.columns if not (c.startswith("__shoal_") and c.endswith("__"))]


@operation("DELETE_DUPLICATE_ROWS")
def delete_duplicate_rows(df: DataFrame, p: dict[str, Any], ctx: StepContext) -> DataFrame:
    return df.dropDuplicates(data_columns(df))


@operation("FILL_WITH_LAST_VALID")
def fill_with_last_valid(df: DataFrame, p: dict[str, Any], ctx: StepContext) -> DataFrame:
    src = _param(p, "sourceColumn", ctx)
    _require(df, [src], ctx)
    out, window = _ordered(df)
    last = F.last(col(src), ignorenulls=True).over(window.rowsBetween(Window.unboundedPreceding, 0))
    return out.withColumn(src, F.coalesce(col(src), last)).drop(_ORDER)


_MODE_TYPES = ("MINIMUM", "MAXIMUM", "AVERAGE", "NONE")


@operation("FILL_WITH_MODE")
def fill_with_mode(df: DataFrame, p: dict[str, Any], ctx: StepContext) -> DataFrame:
    src = _param(p, "sourceColumn", ctx)
    _require(df, [src], ctx)
    kind = str(p.get("modeType") or "MINIMUM").upper()
    if kind not in _MODE_TYPES:
        raise _fail(ctx, f"unknown modeType {kind!r} (known: {', '.join(_MODE_TYPES)})")
    counts = df.where(col(src).isNotNull()).groupBy(col(src).alias("v")).count()
    top = _first(counts.select(F.max("count")))[0]
    if top is None:
        return df
    ties = counts.where(F.col("count") == top)
    # NONE has no tie-breaker in the reference; the smallest value keeps runs repeatable.
    pick = {"MINIMUM": F.min("v"), "NONE": F.min("v"), "MAXIMUM": F.max("v"), "AVERAGE": F.avg("v")}[kind]
    value = _first(ties.select(pick))[0]
    return df.withColumn(src, F.coalesce(col(src), F.lit(value).cast(df.schema[src].dataType)))


def _flag_duplicates(df: DataFrame, keys: list[str], p: dict[str, Any], ctx: StepContext) -> DataFrame:
    out, _ = _ordered(df)
    seen = F.row_number().over(Window.partitionBy(*[col(k) for k in keys]).orderBy(_ORDER)) > 1
    true_s, false_s = p.get("trueString") or "True", p.get("falseString") or "False"
    flagged = out.withColumn(_target(p, ctx, "duplicate"), F.when(seen, true_s).otherwise(false_s))
    # The partitioned window shuffles rows; put them back in their order.
    return flagged.orderBy(_ORDER).drop(_ORDER)


@operation("FLAG_DUPLICATE_ROWS")
def flag_duplicate_rows(df: DataFrame, p: dict[str, Any], ctx: StepContext) -> DataFrame:
    return _flag_duplicates(df, data_columns(df), p, ctx)


@operation("FLAG_DUPLICATES_IN_COLUMN")
def flag_duplicates_in_column(df: DataFrame, p: dict[str, Any], ctx: StepContext) -> DataFrame:
    src = _param(p, "sourceColumn", ctx)
    _require(df, [src], ctx)
    return _flag_duplicates(df, [src], p, ctx)
