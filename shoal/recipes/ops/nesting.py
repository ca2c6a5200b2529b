"""Nesting: arrays, structs and maps built from columns, and unnested into columns."""

from __future__ import annotations

import re
import typing
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, MapType, StructType

from shoal.recipes.operations import (
    OPERATIONS,
    Operation,
    StepContext,
    _bool,
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

# ---- nesting -----------------------------------------------------------------------------------


def _nest(kind: str) -> Operation:
    def op(df: DataFrame, p: dict[str, Any], ctx: StepContext) -> DataFrame:
        names = _names(p, "sourceColumns", ctx)
        _require(df, names, ctx)
        types = {df.schema[n].dataType.simpleString() for n in names}
        # Arrays and maps need one element type; mixed columns become strings.
        cast = (lambda c: c.cast("string")) if len(types) > 1 else (lambda c: c)
        if kind == "ARRAY":
            value = F.array(*[cast(col(n)) for n in names])
        elif kind == "MAP":
            value = F.create_map(*[x for n in names for x in (F.lit(n), cast(col(n)))])
        else:
            value = F.struct(*[col(n).alias(n) for n in names])
        out = df.withColumn(_target(p, ctx), value)
        return out.drop(*names) if _bool(p.get("removeSourceColumns", "false")) else out

    return op


OPERATIONS["NEST_TO_ARRAY"] = _nest("ARRAY")


OPERATIONS["NEST_TO_MAP"] = _nest("MAP")


OPERATIONS["NEST_TO_STRUCT"] = _nest("STRUCT")


@operation("UNNEST_ARRAY")
def unnest_array(df: DataFrame, p: dict[str, Any], ctx: StepContext) -> DataFrame:
    src = _param(p, "sourceColumn", ctx)
    _require(df, [src], ctx)
    if not isinstance(df.schema[src].dataType, ArrayType):
        raise _fail(ctx, f"column {src!r} is {df.schema[src].dataType.simpleString()}, not an array")
    # explode_outer keeps rows whose array is null or empty (with a null element).
    return df.withColumn(_target(p, ctx, src), F.explode_outer(col(src)))


def _struct_fields(df: DataFrame, src: str, ctx: StepContext) -> list[str]:
    kind = df.schema[src].dataType
    if not isinstance(kind, StructType):
        raise _fail(ctx, f"column {src!r} is {kind.simpleString()}, not a struct")
    return kind.fieldNames()


@operation("UNNEST_STRUCT")
def unnest_struct(df: DataFrame, p: dict[str, Any], ctx: StepContext) -> DataFrame:
    src = _param(p, "sourceColumn", ctx)
    _require(df, [src], ctx)
    prefix = p.get("targetColumn") or src
    out = df
    for f in _struct_fields(df, src, ctx):
        out = out.withColumn(f"{prefix}.{f}", col(src).getField(f))
    return out.drop(src) if _bool(p.get("removeSourceColumn", "false")) else out


@operation("UNNEST_STRUCT_N")
def unnest_struct_n(df: DataFrame, p: dict[str, Any], ctx: StepContext) -> DataFrame:
    names = _names(p, "sourceColumns", ctx) if p.get("sourceColumns") else []
    if p.get("regexColumnSelector"):
        selector = _regex(str(p["regexColumnSelector"]), "regexColumnSelector", ctx)
        names += [c for c in df.columns if re.fullmatch(selector, c) and c not in names]
    if not names:
        raise _fail(ctx, "needs sourceColumns or regexColumnSelector")
    _require(df, names, ctx)
    levels, delimiter = _int(p, "unnestLevel", ctx, 1), str(p.get("delimiter") or ".")
    out = df
    for src in names:
        _struct_fields(df, src, ctx)

        def walk(c: Column, kind: StructType, path: list[str], depth: int) -> list[tuple[str, Column]]:
            cols = []
            for field in kind.fields:
                child, name = c.getField(field.name), [*path, field.name]
                if isinstance(field.dataType, StructType) and depth < levels:
                    cols += walk(child, field.dataType, name, depth + 1)
                else:
                    cols.append((delimiter.join(name), child))
            return cols

        for name, value in walk(col(src), typing.cast(StructType, df.schema[src].dataType), [src], 1):
            out = out.withColumn(name, value)
        if _bool(p.get("removeSourceColumn", "false")):
            out = out.drop(src)
    return out


@operation("UNNEST_MAP")
def unnest_map(df: DataFrame, p: dict[str, Any], ctx: StepContext) -> DataFrame:
    src = _param(p, "sourceColumn", ctx)
    _require(df, [src], ctx)
    if not isinstance(df.schema[src].dataType, MapType):
        raise _fail(ctx, f"column {src!r} is {df.schema[src].dataType.simpleString()}, not a map")
    keys = sorted(r[0] for r in df.select(F.explode(F.map_keys(col(src)))).distinct().collect() if r[0] is not None)
    prefix = p.get("targetColumn") or src
    out = df
    for k in keys:
        out = out.withColumn(f"{prefix}.{k}", col(src).getItem(k))
    return out.drop(src) if _bool(p.get("removeSourceColumn", "false")) else out
