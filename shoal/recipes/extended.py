"""More recipe operations, named and parameterised as in the cloud data-prep recipe action
reference: dates and time zones, column moves, merges, flags, extraction, splits by position,
fills, duplicate flags, hashing and masking, nesting, transpose, encoding, binning, and the
math, text and window functions.

Everything is built from Spark's own column functions (no per-row Python). Operations that
depend on row order (last valid value, duplicates seen "earlier", rolling windows) follow
the DataFrame's current order, as set by the input or by a SORT step.
"""

from __future__ import annotations

import math
import re
import zoneinfo
from collections.abc import Callable
from typing import Any

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, MapType, StructType

from shoal.recipes.operations import (
    _AGGS,
    OPERATIONS,
    Operation,
    RecipeError,
    StepContext,
    _as_timestamp,
    _bool,
    _expression,
    _json,
    _names,
    _param,
    _require,
    _target,
    col,
    data_columns,
    operation,
    spark_date_format,
)

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


def _ordered(df: DataFrame) -> tuple[DataFrame, Window]:
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


# ---- dates and times ----------------------------------------------------------------------

_OFFSET_ZONE = re.compile(r"(UTC|GMT)?[+-]\d{1,2}(:\d{2})?|Z|UTC|GMT")


def _zone(p: dict[str, Any], key: str, ctx: StepContext) -> str:
    zone = str(p.get(key) or "UTC").strip()
    if _OFFSET_ZONE.fullmatch(zone) or zone in zoneinfo.available_timezones():
        return zone
    raise _fail(ctx, f"unknown time zone {zone!r} in {key} (use a region name like 'US/Pacific' or 'UTC+08:00')")


@operation("CONVERT_TIMEZONE")
def convert_timezone(df: DataFrame, p: dict[str, Any], ctx: StepContext) -> DataFrame:
    src = _param(p, "sourceColumn", ctx)
    _require(df, [src], ctx)
    # Wall-clock time read in fromTimeZone, shown as the same instant in toTimeZone.
    utc = F.to_utc_timestamp(_as_timestamp(col(src)), _zone(p, "fromTimeZone", ctx))
    local = F.from_utc_timestamp(utc, _zone(p, "toTimeZone", ctx))
    fmt = spark_date_format(p.get("dateTimeFormat") or "yyyy-mm-dd HH:MM:SS")
    return df.withColumn(_target(p, ctx, f"{src}_CONVERT_TIMEZONE"), F.date_format(local, fmt))


_DIFF_UNITS = {
    "MICROSECONDS": "MICROSECOND",
    "MILLISECONDS": "MILLISECOND",
    "SECONDS": "SECOND",
    "MINUTES": "MINUTE",
    "HOURS": "HOUR",
    "DAYS": "DAY",
    "WEEKS": "WEEK",
    "MONTHS": "MONTH",
    "QUARTERS": "QUARTER",
    "YEARS": "YEAR",
}


@operation("DATE_DIFF")
def date_diff(df: DataFrame, p: dict[str, Any], ctx: StepContext) -> DataFrame:
    unit = str(p.get("units") or "DAYS").upper()
    if unit not in _DIFF_UNITS:
        raise _fail(ctx, f"unknown units {unit!r} (known: {', '.join(_DIFF_UNITS)})")
    a, b = "__shoal_date_1__", "__shoal_date_2__"
    out = df.withColumn(a, _as_timestamp(_pair(df, p, ctx, "1"))).withColumn(b, _as_timestamp(_pair(df, p, ctx, "2")))
    # The unit comes from the fixed table above, never from the recipe text.
    diff = F.expr(f"timestampdiff({_DIFF_UNITS[unit]}, `{a}`, `{b}`)")
    return out.withColumn(_target(p, ctx, "DATEDIFF"), diff).drop(a, b)


@operation("UNIX_TIME")
def unix_time(df: DataFrame, p: dict[str, Any], ctx: StepContext) -> DataFrame:
    value = F.unix_timestamp(_as_timestamp(_one(df, p, ctx)))
    return df.withColumn(_target(p, ctx, _default_target(p, "UNIXTIME")), value)


@operation("UNIX_TIME_FORMAT")
def unix_time_format(df: DataFrame, p: dict[str, Any], ctx: StepContext) -> DataFrame:
    seconds = F.expr("try_cast(`__shoal_epoch__` AS bigint)")
    out = df.withColumn("__shoal_epoch__", _one(df, p, ctx).cast("string"))
    fmt = spark_date_format(p.get("dateTimeFormat") or "yyyy-mm-dd HH:MM:SS")
    value = F.date_format(F.timestamp_seconds(seconds), fmt)
    return out.withColumn(_target(p, ctx, _default_target(p, "UNIXTIMEFORMAT")), value).drop("__shoal_epoch__")


@operation("NOW", "TODAY")
def now(df: DataFrame, p: dict[str, Any], ctx: StepContext) -> DataFrame:
    local = F.from_utc_timestamp(F.current_timestamp(), _zone(p, "timeZone", ctx))
    fmt = "yyyy-MM-dd HH:mm:ss" if ctx.operation == "NOW" else "yyyy-MM-dd"
    return df.withColumn(_target(p, ctx, ctx.operation), F.date_format(local, fmt))


_PARTS = ("year", "month", "day", "hour", "minute", "second")
_PART_DEFAULTS = {"year": 1970, "month": 1, "day": 1, "hour": 0, "minute": 0, "second": 0}


def _date_time(df: DataFrame, p: dict[str, Any], ctx: StepContext, default_format: str) -> DataFrame:
    spec = _json(_param(p, "dateTimeParameters", ctx))
    if not isinstance(spec, dict) or set(spec) - set(_PARTS):
        raise _fail(ctx, f"dateTimeParameters must be a JSON object with keys among {', '.join(_PARTS)}")
    values = {}
    for part in _PARTS:
        given = spec.get(part) or {}
        if not isinstance(given, dict):
            raise _fail(ctx, f"dateTimeParameters.{part} must be {{'sourceColumn': ...}} or {{'value': ...}}")
        if given.get("sourceColumn"):
            _require(df, [given["sourceColumn"]], ctx)
            raw = col(given["sourceColumn"])
        elif given.get("value") not in (None, ""):
            raw = F.lit(str(given["value"]))
        else:
            raw = F.lit(_PART_DEFAULTS[part])
        values[part] = raw.cast("double" if part == "second" else "int")
    # make_timestamp gives null for impossible dates (month 13) instead of failing the job.
    ts = F.make_timestamp(*[values[k] for k in _PARTS])
    fmt = spark_date_format(p.get("dateTimeFormat") or default_format)
    return df.withColumn(_target(p, ctx, ctx.operation), F.date_format(ts, fmt))


OPERATIONS["DATE"] = lambda df, p, ctx: _date_time(df, p, ctx, "yyyy-mm-dd")
OPERATIONS["TIME"] = lambda df, p, ctx: _date_time(df, p, ctx, "HH:MM:SS")
OPERATIONS["DATE_TIME"] = lambda df, p, ctx: _date_time(df, p, ctx, "yyyy-mm-dd HH:MM:SS")


# ---- moving columns -----------------------------------------------------------------------


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


# ---- merging, flags, prefixes ----------------------------------------------------------------


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


# ---- logical expressions ------------------------------------------------------------------

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
        row = df.select(*exprs).first()
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


# ---- extraction and replacement -----------------------------------------------------------


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


def _slice(text: Column, start: Column, end: Column) -> Column:
    """Characters [start, end) with 0-based positions, as Python slices them (no negatives)."""
    length = F.greatest(end - start, F.lit(0))
    return text.substr(start + 1, length)


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


# ---- splitting by position ----------------------------------------------------------------


def _split_at(df: DataFrame, src: str, cuts: list[int], ctx: StepContext) -> DataFrame:
    """Split `src` at 0-based character offsets into src_1..src_n; the source is replaced."""
    _require(df, [src], ctx)
    text = col(src).cast("string")
    bounds = [0, *cuts, None]
    out = df
    for i in range(len(bounds) - 1):
        a, b = bounds[i], bounds[i + 1]
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
    longest = df.select(F.max(F.length(col(src).cast("string")))).first()[0] or 0
    cuts = ([start] if start > 0 else []) + list(range(start + interval, max(longest, start + interval), interval))
    return _split_at(df, src, cuts, ctx)


# ---- missing values and duplicates --------------------------------------------------------


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
    top = counts.select(F.max("count")).first()[0]
    if top is None:
        return df
    ties = counts.where(F.col("count") == top)
    # NONE has no tie-breaker in the reference; the smallest value keeps runs repeatable.
    pick = {"MINIMUM": F.min("v"), "NONE": F.min("v"), "MAXIMUM": F.max("v"), "AVERAGE": F.avg("v")}[kind]
    value = ties.select(pick).first()[0]
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


# ---- personal information -----------------------------------------------------------------

_HASHES: dict[str, Callable[[Column], Column]] = {
    "MD5": F.md5,
    "SHA1": F.sha1,
    "SHA256": lambda c: F.sha2(c, 256),
    "SHA512": lambda c: F.sha2(c, 512),
}


@operation("CRYPTOGRAPHIC_HASH")
def cryptographic_hash(df: DataFrame, p: dict[str, Any], ctx: StepContext) -> DataFrame:
    names = _source_columns(df, p, ctx)
    algorithm = str(p.get("algorithm") or "HMAC_SHA256").upper()
    if algorithm.startswith("HMAC_"):
        # Keyed hashes need the cloud secret store the recipe names; Shoal has no such key.
        raise _fail(
            ctx,
            f"algorithm {algorithm} needs a secret (secretId) that Shoal cannot read; "
            f"use one of {', '.join(_HASHES)} or hash with a key in a DERIVE_COLUMN step",
        )
    if algorithm not in _HASHES:
        raise _fail(ctx, f"unknown algorithm {algorithm!r} (known: {', '.join(_HASHES)})")
    out = df
    for n in names:
        out = out.withColumn(n, _HASHES[algorithm](col(n).cast("string")))
    return out


def _mask_class(p: dict[str, Any], ctx: StepContext) -> str:
    keep = {str(a).upper() for a in (_json(p.get("alphabet") or "[]") or [])}
    unknown = keep - {"SYMBOLS", "WHITESPACE"}
    if unknown:
        raise _fail(ctx, f"unknown alphabet {', '.join(sorted(unknown))} (known: SYMBOLS, WHITESPACE)")
    if keep == {"SYMBOLS", "WHITESPACE"}:
        return r"[\p{L}\p{N}]"
    if keep == {"SYMBOLS"}:
        return r"[\p{L}\p{N}\s]"
    if keep == {"WHITESPACE"}:
        return r"\S"
    return r"(?s)."


def _mask(text: Column, start: Column, end: Column, symbol: str, chars: str) -> Column:
    symbol = symbol.replace("\\", "\\\\").replace("$", "\\$")
    middle = F.regexp_replace(_slice(text, start, end), chars, symbol)
    return F.concat(text.substr(F.lit(1), start), middle, text.substr(end + 1, F.lit(1 << 30)))


def _mask_symbol(p: dict[str, Any], ctx: StepContext) -> str:
    symbol = str(p.get("maskSymbol") or "#")
    if len(symbol) != 1:
        raise _fail(ctx, f"maskSymbol must be one character, got {symbol!r}")
    return symbol


@operation("MASK_RANGE")
def mask_range(df: DataFrame, p: dict[str, Any], ctx: StepContext) -> DataFrame:
    names, symbol, chars = _source_columns(df, p, ctx), _mask_symbol(p, ctx), _mask_class(p, ctx)
    start_raw, stop_raw = p.get("start"), p.get("stop")
    out = df
    for n in names:
        text = col(n).cast("string")
        length = F.length(text)

        def pos(raw: Any, default: Column, length: Column = length) -> Column:
            if raw in (None, ""):
                return default
            v = int(raw)
            # Negative positions count from the end, as in Python.
            return F.greatest(length + v, F.lit(0)) if v < 0 else F.least(F.lit(v), length)

        out = out.withColumn(n, _mask(text, pos(start_raw, F.lit(0)), pos(stop_raw, length), symbol, chars))
    return out


@operation("MASK_DELIMITER")
def mask_delimiter(df: DataFrame, p: dict[str, Any], ctx: StepContext) -> DataFrame:
    names, symbol, chars = _source_columns(df, p, ctx), _mask_symbol(p, ctx), _mask_class(p, ctx)
    start_d, end_d = str(p.get("startDelimiter") or ""), str(p.get("endDelimiter") or "")
    keep = _bool(p.get("preserveDelimiters", "true"))
    out = df
    for n in names:
        text = col(n).cast("string")
        length = F.length(text)
        # 0-based index of the first start delimiter (0 when none is given), and of the
        # first end delimiter after it (the end of the text when none is given or found).
        s0 = F.locate(start_d, text) - 1 if start_d else F.lit(0)
        found = s0 >= 0
        opened = s0 + len(start_d)
        after = opened if keep else s0
        rest = text.substr(opened + 1, F.lit(1 << 30))
        e_rel = F.locate(end_d, rest) - 1 if end_d else F.lit(-1)
        stop = F.when(e_rel >= 0, opened + e_rel + (0 if keep else len(end_d))).otherwise(length)
        out = out.withColumn(n, F.when(found, _mask(text, after, stop, symbol, chars)).otherwise(text))
    return out


@operation("MASK_CUSTOM")
def mask_custom(df: DataFrame, p: dict[str, Any], ctx: StepContext) -> DataFrame:
    names, symbol = _source_columns(df, p, ctx), _mask_symbol(p, ctx)
    value = str(_param(p, "customValue", ctx))
    sym = symbol.replace("\\", "\\\\").replace("$", "\\$")
    out = df
    for n in names:
        text = col(n).cast("string")
        if _bool(p.get("regex", "false")):
            pattern = _regex(value, "customValue", ctx)
            # Each matched text is replaced by as many symbols as it has characters.
            found = F.regexp_extract_all(text, F.lit(pattern), 0)
            masked = F.aggregate(found, text, lambda acc, m: F.replace(acc, m, F.regexp_replace(m, "(?s).", sym)))
        else:
            masked = F.replace(text, F.lit(value), F.lit(symbol * len(value)))
        out = out.withColumn(n, masked)
    return out


_DATE_PARTS = [("YEAR", "yyyy"), "-", ("MONTH", "MM"), "-", ("DAY", "dd")]
_TIME_PARTS = [" ", ("HOUR", "HH"), ":", ("MINUTE", "mm"), ":", ("SECOND", "ss")]


@operation("MASK_DATE")
def mask_date(df: DataFrame, p: dict[str, Any], ctx: StepContext) -> DataFrame:
    names, symbol = _source_columns(df, p, ctx), _mask_symbol(p, ctx)
    redact = {str(r).upper() for r in (_json(p.get("redact") or "[]") or [])}
    known = {"YEAR", "MONTH", "DAY", "HOUR", "MINUTE", "SECOND", "MILLISECOND"}
    if not redact or redact - known:
        raise _fail(ctx, f"redact must list date parts among {', '.join(sorted(known))}, got {sorted(redact)}")
    out = df
    for n in names:
        is_date = df.schema[n].dataType.simpleString() == "date"
        layout = _DATE_PARTS if is_date else _DATE_PARTS + _TIME_PARTS
        if "MILLISECOND" in redact and not is_date:
            layout = [*layout, ".", ("MILLISECOND", "SSS")]
        ts = _as_timestamp(col(n))
        pieces = [
            F.lit(part)
            if isinstance(part, str)
            else (F.lit(symbol * len(part[1])) if part[0] in redact else F.date_format(ts, part[1]))
            for part in layout
        ]
        # A value that is not a date is left as it is.
        out = out.withColumn(n, F.when(ts.isNotNull(), F.concat(*pieces)).otherwise(col(n).cast("string")))
    return out


# ---- nesting ------------------------------------------------------------------------------


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

        for name, value in walk(col(src), df.schema[src].dataType, [src], 1):
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


# ---- reshaping and encoding ---------------------------------------------------------------


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
        ["__shoal_key__"], values, new, "__shoal_value__"
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
    return df.withColumn(_target(p, ctx, f"{src}_binned"), value)


# ---- math functions -----------------------------------------------------------------------


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
    "LOG": lambda c, p, ctx: F.when(c > 0, F.log(_float(p, "base", ctx, "10"), c)),
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


# ---- text functions -----------------------------------------------------------------------


def _text(fn: Callable[[Column, dict[str, Any], StepContext], Column], suffix: str) -> Operation:
    def op(df: DataFrame, p: dict[str, Any], ctx: StepContext) -> DataFrame:
        value = _one(df, p, ctx).cast("string")
        return df.withColumn(_target(p, ctx, _default_target(p, suffix)), fn(value, p, ctx))

    return op


def _count(p: dict[str, Any], key: str, ctx: StepContext) -> int:
    n = _int(p, key, ctx)
    if n < 0:
        raise _fail(ctx, f"{key} must be 0 or more, got {n}")
    return n


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


# ---- window functions ---------------------------------------------------------------------


def _rolling(fn: Callable[[Column], Column]) -> Operation:
    def op(df: DataFrame, p: dict[str, Any], ctx: StepContext) -> DataFrame:
        src = _param(p, "sourceColumn", ctx)
        _require(df, [src], ctx)
        before, after = _count(p, "numRowsBefore", ctx), _count(p, "numRowsAfter", ctx)
        out, window = _ordered(df)
        value = fn(col(src)).over(window.rowsBetween(-before, after))
        return out.withColumn(_target(p, ctx, f"{src}_{ctx.operation}"), value).drop(_ORDER)

    return op


for _name, _fn in {
    "ROLLING_AVERAGE": lambda c: F.avg(c.cast("double")),
    "ROLLING_SUM": lambda c: F.sum(c.cast("double")),
    "ROLLING_MIN": F.min,
    "ROLLING_MAX": F.max,
    "ROLLING_COUNT_A": F.count,
    "ROLLING_STANDARD_DEVIATION": lambda c: F.stddev_samp(c.cast("double")),
    "ROLLING_VARIANCE": lambda c: F.var_samp(c.cast("double")),
    "ROLLING_MODE": F.mode,
}.items():
    OPERATIONS[_name] = _rolling(_fn)


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


# ---- aggregate functions (across the selected columns of each row) --------------------------


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
