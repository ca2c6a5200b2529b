"""Personal information: cryptographic hashes and masks."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from shoal.recipes.operations import (
    StepContext,
    _as_timestamp,
    _bool,
    _fail,
    _json,
    _param,
    _regex,
    _slice,
    _source_columns,
    col,
    operation,
)

# ---- personal information ----------------------------------------------------------------------


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
