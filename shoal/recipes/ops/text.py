"""Text steps: replace, extract, split by delimiter or position, and the text functions."""

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
    _count,
    _default_target,
    _fail,
    _first,
    _int,
    _json,
    _one,
    _pair,
    _param,
    _regex,
    _require,
    _slice,
    _target,
    col,
    operation,
)

# ---- text --------------------------------------------------------------------------------------


def _text_op(fn: Callable[[Column], Column]) -> Operation:
    def op(df: DataFrame, p: dict[str, Any], ctx: StepContext) -> DataFrame:
        src = _param(p, "sourceColumn", ctx)
        _require(df, [src], ctx)
        return df.withColumn(p.get("targetColumn") or src, fn(col(src).cast("string")))

    return op


OPERATIONS["UPPER_CASE"] = _text_op(F.upper)


OPERATIONS["LOWER_CASE"] = _text_op(F.lower)


OPERATIONS["CAPITAL_CASE"] = _text_op(F.initcap)


OPERATIONS["SENTENCE_CASE"] = _text_op(
    lambda c: F.concat(F.upper(F.substring(c, 1, 1)), F.lower(F.substring(c, 2, 1 << 30)))
)


OPERATIONS["TRIM"] = _text_op(F.trim)


OPERATIONS["REMOVE_WHITESPACE"] = _text_op(lambda c: F.regexp_replace(c, r"\s+", ""))


OPERATIONS["COLLAPSE_WHITESPACE"] = _text_op(lambda c: F.trim(F.regexp_replace(c, r"\s+", " ")))


@operation("REPLACE_TEXT")
def replace_text(df: DataFrame, p: dict[str, Any], ctx: StepContext) -> DataFrame:
    src = _param(p, "sourceColumn", ctx)
    _require(df, [src], ctx)
    return df.withColumn(
        src, F.replace(col(src).cast("string"), F.lit(_param(p, "pattern", ctx)), F.lit(p.get("value", "")))
    )


@operation("REPLACE_PATTERN")
def replace_pattern(df: DataFrame, p: dict[str, Any], ctx: StepContext) -> DataFrame:
    src, pattern = _param(p, "sourceColumn", ctx), _param(p, "pattern", ctx)
    _require(df, [src], ctx)
    try:
        re.compile(pattern)
    except re.error as exc:
        raise RecipeError(f"step {ctx.step} (REPLACE_PATTERN): bad pattern {pattern!r}: {exc}") from exc
    return df.withColumn(src, F.regexp_replace(col(src).cast("string"), pattern, p.get("value", "")))


def _split(df: DataFrame, src: str, regex: str, limit: int, ctx: StepContext) -> DataFrame:
    _require(df, [src], ctx)
    parts = F.split(col(src).cast("string"), regex, limit + 1 if limit > 0 else -1)
    width = limit + 1 if limit > 0 else df.select(F.max(F.size(parts))).collect()[0][0] or 1
    out = df
    for i in range(width):
        out = out.withColumn(f"{src}_{i + 1}", parts.getItem(i))
    return out.drop(src)


@operation("SPLIT_COLUMN_SINGLE_DELIMITER")
def split_single(df: DataFrame, p: dict[str, Any], ctx: StepContext) -> DataFrame:
    return _split(df, _param(p, "sourceColumn", ctx), re.escape(_param(p, "pattern", ctx)), int(p.get("limit", 1)), ctx)


@operation("SPLIT_COLUMN_MULTIPLE_DELIMITER")
def split_multiple(df: DataFrame, p: dict[str, Any], ctx: StepContext) -> DataFrame:
    options = _json(_param(p, "patternOptions", ctx))
    delimiters = [o["pattern"] if isinstance(o, dict) else str(o) for o in options]
    return _split(df, _param(p, "sourceColumn", ctx), "|".join(map(re.escape, delimiters)), int(p.get("limit", 1)), ctx)


# ---- extraction and replacement ----------------------------------------------------------------


@operation("EXTRACT_PATTERN")
def extract_pattern(df: DataFrame, p: dict[str, Any], ctx: StepContext) -> DataFrame:
    src = _param(p, "sourceColumn", ctx)
    _require(df, [src], ctx)
    pattern = _regex(_param(p, "pattern", ctx), "pattern", ctx)
    text = col(src).cast("string")
    return df.withColumn(
        _target(p, ctx, f"{src}_extracted"), F.when(text.rlike(pattern), F.regexp_extract(text, pattern, 0))
    )


@operation("EXTRACT_BETWEEN_DELIMITERS")
def extract_between_delimiters(df: DataFrame, p: dict[str, Any], ctx: StepContext) -> DataFrame:
    src = _param(p, "sourceColumn", ctx)
    _require(df, [src], ctx)
    start = _regex(_param(p, "startPattern", ctx), "startPattern", ctx)
    end = _regex(_param(p, "endPattern", ctx), "endPattern", ctx)
    pattern = f"(?:{start})(.*?)(?:{end})"
    text = col(src).cast("string")
    return df.withColumn(
        _target(p, ctx, f"{src}_extracted"), F.when(text.rlike(pattern), F.regexp_extract(text, pattern, 1))
    )


@operation("EXTRACT_BETWEEN_POSITIONS", "SUBSTRING")
def extract_between_positions(df: DataFrame, p: dict[str, Any], ctx: StepContext) -> DataFrame:
    text = _one(df, p, ctx).cast("string")
    start, end = _int(p, "startPosition", ctx), _int(p, "endPosition", ctx)
    if start < 0 or end < start:
        raise _fail(ctx, f"positions must satisfy 0 <= startPosition <= endPosition, got {start}..{end}")
    return df.withColumn(_target(p, ctx, _default_target(p, "extracted")), _slice(text, F.lit(start), F.lit(end)))


@operation("REPLACE_BETWEEN_DELIMITERS")
def replace_between_delimiters(df: DataFrame, p: dict[str, Any], ctx: StepContext) -> DataFrame:
    src = _param(p, "sourceColumn", ctx)
    _require(df, [src], ctx)
    start = _regex(_param(p, "startPattern", ctx), "startPattern", ctx)
    end = _regex(_param(p, "endPattern", ctx), "endPattern", ctx)
    # Keep the delimiters, replace what lies between them; "$" in the value stays literal.
    value = str(p.get("value", "")).replace("\\", "\\\\").replace("$", "\\$")
    replaced = F.regexp_replace(col(src).cast("string"), f"({start})(.*?)({end})", f"$1{value}$3")
    return df.withColumn(p.get("targetColumn") or src, replaced)


@operation("REPLACE_BETWEEN_POSITIONS")
def replace_between_positions(df: DataFrame, p: dict[str, Any], ctx: StepContext) -> DataFrame:
    src = _param(p, "sourceColumn", ctx)
    _require(df, [src], ctx)
    start, end = _int(p, "startPosition", ctx), _int(p, "endPosition", ctx)
    if start < 0 or end < start:
        raise _fail(ctx, f"positions must satisfy 0 <= startPosition <= endPosition, got {start}..{end}")
    text = col(src).cast("string")
    value = F.concat(text.substr(1, start), F.lit(str(p.get("value", ""))), text.substr(end + 1, 1 << 30))
    return df.withColumn(p.get("targetColumn") or src, value)


# ---- splitting by position ---------------------------------------------------------------------


def _split_at(df: DataFrame, src: str, cuts: list[int], ctx: StepContext) -> DataFrame:
    """Split `src` at 0-based character offsets into src_1..src_n; the source is replaced."""
    _require(df, [src], ctx)
    text = col(src).cast("string")
    bounds: list[int | None] = [0, *cuts, None]
    out = df
    for i in range(len(bounds) - 1):
        a, b = bounds[i], bounds[i + 1]
        assert a is not None
        piece = text.substr(a + 1, 1 << 30) if b is None else text.substr(a + 1, b - a)
        out = out.withColumn(f"{src}_{i + 1}", piece)
    return out.drop(src)


@operation("SPLIT_COLUMN_FROM_START")
def split_from_start(df: DataFrame, p: dict[str, Any], ctx: StepContext) -> DataFrame:
    position = _int(p, "position", ctx)
    if position < 0:
        raise _fail(ctx, f"position must be 0 or more, got {position}")
    return _split_at(df, _param(p, "sourceColumn", ctx), [position], ctx)


@operation("SPLIT_COLUMN_FROM_END")
def split_from_end(df: DataFrame, p: dict[str, Any], ctx: StepContext) -> DataFrame:
    src, position = _param(p, "sourceColumn", ctx), _int(p, "position", ctx)
    _require(df, [src], ctx)
    if position < 0:
        raise _fail(ctx, f"position must be 0 or more, got {position}")
    text = col(src).cast("string")
    cut = F.greatest(F.length(text) - position, F.lit(0))
    out = df.withColumn(f"{src}_1", text.substr(F.lit(1), cut)).withColumn(
        f"{src}_2", text.substr(cut + 1, F.lit(1 << 30))
    )
    return out.drop(src)


@operation("SPLIT_COLUMN_BETWEEN_POSITIONS")
def split_between_positions(df: DataFrame, p: dict[str, Any], ctx: StepContext) -> DataFrame:
    start, end = _int(p, "startPosition", ctx), _int(p, "endPosition", ctx)
    if start < 0 or end < start:
        raise _fail(ctx, f"positions must satisfy 0 <= startPosition <= endPosition, got {start}..{end}")
    return _split_at(df, _param(p, "sourceColumn", ctx), [start, end], ctx)


@operation("SPLIT_COLUMN_WITH_INTERVALS")
def split_with_intervals(df: DataFrame, p: dict[str, Any], ctx: StepContext) -> DataFrame:
    src = _param(p, "sourceColumn", ctx)
    _require(df, [src], ctx)
    start, interval = _int(p, "startPosition", ctx, 0), _int(p, "interval", ctx)
    if start < 0 or interval <= 0:
        raise _fail(ctx, f"startPosition must be >= 0 and interval > 0, got {start} and {interval}")
    longest = _first(df.select(F.max(F.length(col(src).cast("string")))))[0] or 0
    cuts = ([start] if start > 0 else []) + list(range(start + interval, max(longest, start + interval), interval))
    return _split_at(df, src, cuts, ctx)


# ---- text functions ----------------------------------------------------------------------------


def _text(fn: Callable[[Column, dict[str, Any], StepContext], Column], suffix: str) -> Operation:
    def op(df: DataFrame, p: dict[str, Any], ctx: StepContext) -> DataFrame:
        value = _one(df, p, ctx).cast("string")
        return df.withColumn(_target(p, ctx, _default_target(p, suffix)), fn(value, p, ctx))

    return op


for _name, _fn in {
    "LEN": lambda c, p, ctx: F.length(c),
    "LEFT": lambda c, p, ctx: c.substr(1, _count(p, "position", ctx)),
    "LOWER": lambda c, p, ctx: F.lower(c),
    "UPPER": lambda c, p, ctx: F.upper(c),
    "PROPER": lambda c, p, ctx: F.initcap(c),
    "REPEAT_STRING": lambda c, p, ctx: F.repeat(c, _count(p, "count", ctx)),
    "REMOVE_SYMBOLS": lambda c, p, ctx: F.regexp_replace(c, r"[^\p{L}\p{N}\s]", ""),
    "STARTS_WITH": lambda c, p, ctx: c.startswith(str(_param(p, "pattern", ctx))),
    "ENDS_WITH": lambda c, p, ctx: c.endswith(str(_param(p, "pattern", ctx))),
}.items():
    OPERATIONS[_name] = _text(_fn, _name)


def _right(df: DataFrame, p: dict[str, Any], ctx: StepContext) -> DataFrame:
    value = _one(df, p, ctx).cast("string")
    n = _count(p, "position", ctx)
    # substr with a negative start counts from the end; 0 characters is the empty string.
    out = F.lit("") if n == 0 else F.when(F.length(value) <= n, value).otherwise(value.substr(-n, n))
    return df.withColumn(_target(p, ctx, _default_target(p, "RIGHT")), F.when(value.isNotNull(), out))


def _char(df: DataFrame, p: dict[str, Any], ctx: StepContext) -> DataFrame:
    out = df.withColumn("__shoal_text__", _one(df, p, ctx).cast("string"))
    code = F.expr("try_cast(`__shoal_text__` AS bigint)")
    # Spark's chr() wraps at 256; two UTF-16 bytes give any character of the basic plane.
    utf16 = F.decode(F.unhex(F.lpad(F.hex(code), 4, "0")), "UTF-16BE")
    value = F.when(code.between(0, 0xD7FF) | code.between(0xE000, 0xFFFF), utf16)
    return out.withColumn(_target(p, ctx, _default_target(p, "CHAR")), value).drop("__shoal_text__")


def _unicode(df: DataFrame, p: dict[str, Any], ctx: StepContext) -> DataFrame:
    value = _one(df, p, ctx).cast("string")
    # ascii() returns the code point of the first character (not only ASCII ones).
    return df.withColumn(_target(p, ctx, _default_target(p, "UNICODE")), F.when(F.length(value) > 0, F.ascii(value)))


OPERATIONS["RIGHT"] = _right


OPERATIONS["CHAR"] = _char


OPERATIONS["UNICODE"] = _unicode


@operation("EXACT")
def exact(df: DataFrame, p: dict[str, Any], ctx: StepContext) -> DataFrame:
    a, b = _pair(df, p, ctx, "1").cast("string"), _pair(df, p, ctx, "2").cast("string")
    return df.withColumn(_target(p, ctx, "EXACT"), F.coalesce(a == b, F.lit(False)))
