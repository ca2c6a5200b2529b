"""Column steps: rename, delete, duplicate, change type, move, merge, flag and prefix/suffix columns."""

from __future__ import annotations

import re
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from shoal.recipes.operations import (
    _TYPES,
    OPERATIONS,
    Operation,
    RecipeError,
    StepContext,
    _as_timestamp,
    _fail,
    _int,
    _names,
    _param,
    _regex,
    _require,
    _target,
    col,
    operation,
)

# ---- columns -----------------------------------------------------------------------------------


@operation("RENAME")
def rename(df: DataFrame, p: dict[str, Any], ctx: StepContext) -> DataFrame:
    src, dst = _param(p, "sourceColumn", ctx), _param(p, "targetColumn", ctx)
    _require(df, [src], ctx)
    return df.withColumnRenamed(src, dst)


@operation("DELETE")
def delete(df: DataFrame, p: dict[str, Any], ctx: StepContext) -> DataFrame:
    names = _names(p, "sourceColumns", ctx)
    _require(df, names, ctx)
    return df.drop(*names)


@operation("DUPLICATE")
def duplicate(df: DataFrame, p: dict[str, Any], ctx: StepContext) -> DataFrame:
    src = _param(p, "sourceColumn", ctx)
    _require(df, [src], ctx)
    return df.withColumn(_target(p, ctx, f"{src}_copy"), col(src))


@operation("CHANGE_DATA_TYPE")
def change_type(df: DataFrame, p: dict[str, Any], ctx: StepContext) -> DataFrame:
    src, kind = _param(p, "sourceColumn", ctx), str(_param(p, "columnDataType", ctx)).lower()
    _require(df, [src], ctx)
    if kind not in _TYPES and not re.fullmatch(r"decimal\(\d+,\s*\d+\)", kind):
        raise RecipeError(
            f"step {ctx.step} (CHANGE_DATA_TYPE): unknown columnDataType {kind!r} (known: {', '.join(_TYPES)})"
        )
    spark_type = _TYPES.get(kind, kind)
    value = col(src)
    if spark_type in ("date", "timestamp"):
        value = _as_timestamp(value)
        if spark_type == "date":
            value = F.to_date(value)
    else:
        # try_cast keeps the job running on a bad value (it becomes null) instead of failing mid-write.
        value = F.expr(f"try_cast(`{src.replace('`', '``')}` AS {spark_type})")
    return df.withColumn(src, value)


# ---- moving columns ----------------------------------------------------------------------------


def _move(df: DataFrame, src: str, index: int) -> DataFrame:
    rest = [c for c in df.columns if c != src]
    index = max(0, min(index, len(rest)))
    return df.select(*[col(c) for c in rest[:index] + [src] + rest[index:]])


@operation("MOVE_TO_START")
def move_to_start(df: DataFrame, p: dict[str, Any], ctx: StepContext) -> DataFrame:
    src = _param(p, "sourceColumn", ctx)
    _require(df, [src], ctx)
    return _move(df, src, 0)


@operation("MOVE_TO_END")
def move_to_end(df: DataFrame, p: dict[str, Any], ctx: StepContext) -> DataFrame:
    src = _param(p, "sourceColumn", ctx)
    _require(df, [src], ctx)
    return _move(df, src, len(df.columns))


@operation("MOVE_TO_INDEX")
def move_to_index(df: DataFrame, p: dict[str, Any], ctx: StepContext) -> DataFrame:
    src = _param(p, "sourceColumn", ctx)
    _require(df, [src], ctx)
    index = _int(p, "targetIndex", ctx)
    if index < 0 or index >= len(df.columns):
        raise _fail(ctx, f"targetIndex {index} is outside 0..{len(df.columns) - 1}")
    return _move(df, src, index)


def _move_relative(after: bool) -> Operation:
    def op(df: DataFrame, p: dict[str, Any], ctx: StepContext) -> DataFrame:
        src, other = _param(p, "sourceColumn", ctx), _param(p, "targetColumn", ctx)
        _require(df, [src, other], ctx)
        rest = [c for c in df.columns if c != src]
        return _move(df, src, rest.index(other) + (1 if after else 0))

    return op


OPERATIONS["MOVE_AFTER"] = _move_relative(after=True)


OPERATIONS["MOVE_BEFORE"] = _move_relative(after=False)


# ---- merging, flags, prefixes ------------------------------------------------------------------


@operation("MERGE", "MERGE_COLUMNS_AND_VALUES")
def merge(df: DataFrame, p: dict[str, Any], ctx: StepContext) -> DataFrame:
    names = _names(p, "sourceColumns", ctx)
    _require(df, names, ctx)
    delimiter = str(p.get("delimiter") or "")
    # concat_ws skips nulls, so a missing part leaves no doubled delimiter.
    value = F.concat_ws(delimiter, *[col(n).cast("string") for n in names])
    return df.withColumn(_target(p, ctx, "_".join(names)), value)


def _flag(p: dict[str, Any], hit: Column) -> Column:
    true_s, false_s = p.get("trueString"), p.get("falseString")
    if true_s in (None, "") and false_s in (None, ""):
        return hit
    return F.when(hit, F.lit(true_s if true_s not in (None, "") else "True")).otherwise(
        F.lit(false_s if false_s not in (None, "") else "False")
    )


@operation("FLAG_COLUMN_FROM_NULL")
def flag_from_null(df: DataFrame, p: dict[str, Any], ctx: StepContext) -> DataFrame:
    src = _param(p, "sourceColumn", ctx)
    _require(df, [src], ctx)
    missing = col(src).isNull() | (F.trim(col(src).cast("string")) == "")
    return df.withColumn(_target(p, ctx, f"{src}_flagged"), _flag(p, F.coalesce(missing, F.lit(True))))


@operation("FLAG_COLUMN_FROM_PATTERN")
def flag_from_pattern(df: DataFrame, p: dict[str, Any], ctx: StepContext) -> DataFrame:
    src = _param(p, "sourceColumn", ctx)
    _require(df, [src], ctx)
    pattern = _regex(_param(p, "pattern", ctx), "pattern", ctx)
    hit = F.coalesce(col(src).cast("string").rlike(pattern), F.lit(False))
    return df.withColumn(_target(p, ctx, f"{src}_flagged"), _flag(p, hit))


def _affix(prefix: bool) -> Operation:
    def op(df: DataFrame, p: dict[str, Any], ctx: StepContext) -> DataFrame:
        src = _param(p, "sourceColumn", ctx)
        _require(df, [src], ctx)
        text, value = F.lit(str(_param(p, "pattern", ctx))), col(src).cast("string")
        return df.withColumn(p.get("targetColumn") or src, F.concat(text, value) if prefix else F.concat(value, text))

    return op


OPERATIONS["ADD_PREFIX"] = _affix(prefix=True)


OPERATIONS["ADD_SUFFIX"] = _affix(prefix=False)
