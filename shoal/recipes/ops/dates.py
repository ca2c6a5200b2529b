"""Date and time steps: formats, parts, arithmetic, time zones, Unix time, now/today."""

from __future__ import annotations

import re
import zoneinfo
from collections.abc import Callable
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from shoal.recipes.operations import (
    OPERATIONS,
    Operation,
    RecipeError,
    StepContext,
    _as_timestamp,
    _default_target,
    _fail,
    _json,
    _one,
    _pair,
    _param,
    _require,
    _source,
    _target,
    col,
    operation,
)

# ---- dates -------------------------------------------------------------------------------------


def _date_part(fn: Callable[[Column], Column], suffix: str) -> Operation:
    def op(df: DataFrame, p: dict[str, Any], ctx: StepContext) -> DataFrame:
        source = _source(df, p, ctx)
        default = f"{p.get('sourceColumn', 'value')}_{suffix}"
        return df.withColumn(_target(p, ctx, default), fn(_as_timestamp(source)))

    return op


for _name, _fn, _suffix in [
    ("YEAR", F.year, "YEAR"),
    ("MONTH", F.month, "MONTH"),
    ("DAY", F.dayofmonth, "DAY"),
    ("HOUR", F.hour, "HOUR"),
    ("MINUTE", F.minute, "MINUTE"),
    ("SECOND", F.second, "SECOND"),
    ("QUARTER", F.quarter, "QUARTER"),
    ("WEEK_NUMBER", F.weekofyear, "WEEKNUMBER"),
    ("WEEK_DAY", lambda c: F.date_format(c, "EEEE"), "WEEKDAY"),
    ("MONTH_NAME", lambda c: F.date_format(c, "MMMM"), "MONTHNAME"),
    ("DAY_OF_YEAR", F.dayofyear, "DAYOFYEAR"),
]:
    OPERATIONS[_name] = _date_part(_fn, _suffix)


# The recipe format's date tokens (mm = month, MM = minutes, month = month name) -> Spark's.
_FORMAT_TOKENS = [
    ("yyyy", "yyyy"),
    ("yy", "yy"),
    ("month", "MMMM"),
    ("mon", "MMM"),
    ("mm", "MM"),
    ("dd", "dd"),
    ("HH", "HH"),
    ("MM", "mm"),
    ("SS", "ss"),
    ("ss", "ss"),
    ("hh", "hh"),
]


def spark_date_format(fmt: str) -> str:
    out, i = "", 0
    while i < len(fmt):
        for token, spark in _FORMAT_TOKENS:
            if fmt.startswith(token, i):
                out += spark
                i += len(token)
                break
        else:
            ch = fmt[i]
            out += ch if not ch.isalpha() else f"'{ch}'"
            i += 1
    return out.replace("*", " ")


@operation("DATE_FORMAT")
def date_format(df: DataFrame, p: dict[str, Any], ctx: StepContext) -> DataFrame:
    source = _source(df, p, ctx)
    fmt = spark_date_format(p.get("dateTimeFormat") or "yyyy-mm-dd HH:MM:SS")
    return df.withColumn(
        _target(p, ctx, f"{p.get('sourceColumn', 'value')}_DATEFORMAT"), F.date_format(_as_timestamp(source), fmt)
    )


@operation("FORMAT_DATE")
def format_date(df: DataFrame, p: dict[str, Any], ctx: StepContext) -> DataFrame:
    src = _param(p, "sourceColumn", ctx)
    _require(df, [src], ctx)
    return df.withColumn(
        src, F.date_format(_as_timestamp(col(src)), spark_date_format(_param(p, "targetDateFormat", ctx)))
    )


@operation("DATE_ADD")
def date_add(df: DataFrame, p: dict[str, Any], ctx: StepContext) -> DataFrame:
    source = _as_timestamp(_source(df, p, ctx))
    amount, unit = int(_param(p, "dateAddValue", ctx)), str(p.get("units", "DAYS")).upper().rstrip("S")
    units = {
        "YEAR": "YEAR",
        "MONTH": "MONTH",
        "WEEK": "WEEK",
        "DAY": "DAY",
        "HOUR": "HOUR",
        "MINUTE": "MINUTE",
        "SECOND": "SECOND",
    }
    if unit not in units:
        raise RecipeError(f"step {ctx.step} (DATE_ADD): unknown units {p.get('units')!r}")
    return df.withColumn(_target(p, ctx), source + F.expr(f"INTERVAL {amount} {units[unit]}"))


# ---- dates and times ---------------------------------------------------------------------------


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
