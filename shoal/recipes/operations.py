"""Recipe operations on Spark DataFrames, named and parameterised as in the common cloud
data-prep recipe format (`{"Action": {"Operation": ..., "Parameters": {...}}}`).

Parameters arrive as that format writes them: strings, lists JSON-encoded inside strings,
booleans as "true"/"false". Each operation is a function `(df, params, ctx) -> df`; an
unknown operation or a missing parameter fails with the step number and the name.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from shoal.exceptions import ShoalError


class RecipeError(ShoalError):
    """A recipe step cannot be applied (unknown operation, bad parameter, missing column)."""


@dataclass
class StepContext:
    step: int
    operation: str
    # Loads a secondary dataset (JOIN, UNION) by name or inline definition.
    load: Callable[[Any], DataFrame]


Operation = Callable[[DataFrame, dict[str, Any], StepContext], DataFrame]
OPERATIONS: dict[str, Operation] = {}


def operation(*names: str) -> Callable[[Operation], Operation]:
    def register(fn: Operation) -> Operation:
        for n in names:
            OPERATIONS[n] = fn
        return fn

    return register


# ---- parameter helpers ---------------------------------------------------------------------


def col(name: str) -> Column:
    return F.col("`" + name.replace("`", "``") + "`")


def _param(params: dict[str, Any], key: str, ctx: StepContext, default: Any = ...) -> Any:
    if key in params and params[key] not in (None, ""):
        return params[key]
    if default is ...:
        raise RecipeError(f"step {ctx.step} ({ctx.operation}): parameter {key!r} is required")
    return default


def _json(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return value
    return value


def _names(params: dict[str, Any], key: str, ctx: StepContext) -> list[str]:
    value = _json(_param(params, key, ctx))
    if isinstance(value, str):
        value = [v.strip() for v in value.split(",") if v.strip()]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise RecipeError(f"step {ctx.step} ({ctx.operation}): {key!r} must be a list of column names")
    return value


def _bool(value: Any) -> bool:
    return value is True or str(value).strip().lower() == "true"


def _source(df: DataFrame, params: dict[str, Any], ctx: StepContext, key: str = "sourceColumn") -> Column:
    """A column reference, or a literal from `value` (the format allows either)."""
    if params.get(key) not in (None, ""):
        _require(df, [params[key]], ctx)
        return col(params[key])
    if "value" in params:
        return F.lit(params["value"])
    raise RecipeError(f"step {ctx.step} ({ctx.operation}): parameter {key!r} (or 'value') is required")


def _require(df: DataFrame, names: list[str], ctx: StepContext) -> None:
    missing = [n for n in names if n not in df.columns]
    if missing:
        raise RecipeError(
            f"step {ctx.step} ({ctx.operation}): no column {', '.join(map(repr, missing))}; "
            f"the data has {', '.join(df.columns)}"
        )


def _target(params: dict[str, Any], ctx: StepContext, default: str | None = None) -> str:
    return _param(params, "targetColumn", ctx, default)


# ---- columns -------------------------------------------------------------------------------


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


_TYPES = {
    "string": "string",
    "text": "string",
    "integer": "bigint",
    "int": "int",
    "long": "bigint",
    "bigint": "bigint",
    "double": "double",
    "float": "double",
    "number": "double",
    "decimal": "decimal(38,10)",
    "boolean": "boolean",
    "date": "date",
    "timestamp": "timestamp",
    "datetime": "timestamp",
}


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


# ---- dates ---------------------------------------------------------------------------------

_DATE_PATTERNS = [
    "yyyy-MM-dd HH:mm:ss",
    "yyyy-MM-dd'T'HH:mm:ss",
    "yyyy-MM-dd",
    "MM/dd/yyyy HH:mm:ss",
    "MM/dd/yyyy",
    "yyyy/MM/dd",
    "dd-MM-yyyy",
    "dd.MM.yyyy",
    "yyyyMMdd",
]


def _as_timestamp(c: Column) -> Column:
    as_text = c.cast("string")
    return F.coalesce(c.cast("timestamp"), *[F.try_to_timestamp(as_text, F.lit(fmt)) for fmt in _DATE_PATTERNS])


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


# ---- text ----------------------------------------------------------------------------------


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


# ---- missing values and duplicates ---------------------------------------------------------


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


# ---- filters -------------------------------------------------------------------------------


def condition(df: DataFrame, cond: dict[str, Any], ctx: StepContext) -> Column:
    """One ConditionExpression ({Condition, Value, TargetColumn}) as a Spark predicate."""
    name = cond.get("TargetColumn") or cond.get("targetColumn")
    kind = str(cond.get("Condition") or cond.get("condition") or "").upper()
    if not name or not kind:
        raise RecipeError(f"step {ctx.step} ({ctx.operation}): a condition needs Condition and TargetColumn")
    _require(df, [name], ctx)
    c, raw = col(name), _json(cond.get("Value", cond.get("value")))
    text = c.cast("string")
    values = raw if isinstance(raw, list) else [raw]
    number = c.cast("double")
    checks: dict[str, Callable[[], Column]] = {
        "IS": lambda: text.isin([str(v) for v in values]),
        "IS_NOT": lambda: ~text.isin([str(v) for v in values]) | c.isNull(),
        "IS_MISSING": lambda: c.isNull() | (F.trim(text) == ""),
        "IS_NOT_MISSING": lambda: c.isNotNull() & (F.trim(text) != ""),
        "LESS_THAN": lambda: number < float(values[0]),
        "LESS_THAN_EQUAL": lambda: number <= float(values[0]),
        "GREATER_THAN": lambda: number > float(values[0]),
        "GREATER_THAN_EQUAL": lambda: number >= float(values[0]),
        "IS_BETWEEN": lambda: number.between(float(_bounds(raw)[0]), float(_bounds(raw)[1])),
        "CONTAINS": lambda: text.contains(str(values[0])),
        "DOES_NOT_CONTAIN": lambda: ~text.contains(str(values[0])) | c.isNull(),
        "STARTS_WITH": lambda: text.startswith(str(values[0])),
        "ENDS_WITH": lambda: text.endswith(str(values[0])),
        "MATCHES": lambda: text.rlike(str(values[0])),
    }
    if kind not in checks:
        raise RecipeError(f"step {ctx.step} ({ctx.operation}): unknown Condition {kind!r} (known: {', '.join(checks)})")
    try:
        return F.coalesce(checks[kind](), F.lit(False))
    except (TypeError, ValueError, IndexError) as exc:
        raise RecipeError(f"step {ctx.step} ({ctx.operation}): bad Value {raw!r} for {kind}: {exc}") from exc


def _bounds(raw: Any) -> tuple[Any, Any]:
    if isinstance(raw, dict):
        return raw.get("min", raw.get("Min")), raw.get("max", raw.get("Max"))
    return raw[0], raw[1]


def _conditions(df: DataFrame, p: dict[str, Any], ctx: StepContext) -> Column:
    conds = p.get("__conditions__") or []
    if not conds and "condition" in p:
        conds = [{"Condition": p["condition"], "Value": p.get("value"), "TargetColumn": p.get("sourceColumn")}]
    if not conds:
        raise RecipeError(f"step {ctx.step} ({ctx.operation}): needs ConditionExpressions")
    out = condition(df, conds[0], ctx)
    for c in conds[1:]:
        out = out & condition(df, c, ctx)
    return out


@operation("REMOVE_VALUES")
def remove_values(df: DataFrame, p: dict[str, Any], ctx: StepContext) -> DataFrame:
    return df.where(~_conditions(df, p, ctx))


@operation("KEEP_VALUES")
def keep_values(df: DataFrame, p: dict[str, Any], ctx: StepContext) -> DataFrame:
    return df.where(_conditions(df, p, ctx))


@operation("FILTER")
def filter_expression(df: DataFrame, p: dict[str, Any], ctx: StepContext) -> DataFrame:
    """Shoal extension: keep rows where a Spark SQL predicate holds."""
    return df.where(_expression(df, _param(p, "expression", ctx), ctx))


_DENIED_FUNCTIONS = {"reflect", "java_method", "try_reflect"}


def _expression(df: DataFrame, text: str, ctx: StepContext) -> Column:
    import sqlglot
    from sqlglot import exp

    try:
        tree = sqlglot.parse_one(text, read="spark")
    except sqlglot.errors.ParseError as exc:
        raise RecipeError(f"step {ctx.step} ({ctx.operation}): cannot parse expression {text!r}: {exc}") from exc
    # An expression works on the row: no subqueries, no table reads.
    if tree.find(exp.Select, exp.Subquery, exp.Table) is not None:
        raise RecipeError(f"step {ctx.step} ({ctx.operation}): the expression must not contain a query: {text!r}")
    # Nor calls into the JVM: reflect() and java_method() run arbitrary static Java methods.
    called = {f.name.lower() for f in tree.find_all(exp.Anonymous)}
    if called & _DENIED_FUNCTIONS:
        raise RecipeError(
            f"step {ctx.step} ({ctx.operation}): the expression calls "
            f"{', '.join(sorted(called & _DENIED_FUNCTIONS))}, which recipes may not use: {text!r}"
        )
    missing = {c.name for c in tree.find_all(exp.Column)} - set(df.columns)
    if missing:
        raise RecipeError(
            f"step {ctx.step} ({ctx.operation}): expression {text!r} names unknown column(s) {', '.join(sorted(missing))}"
        )
    return F.expr(text)


# ---- derived columns -----------------------------------------------------------------------


def _arith(fn: Callable[[Column, Column], Column]) -> Operation:
    def op(df: DataFrame, p: dict[str, Any], ctx: StepContext) -> DataFrame:
        def side(n: str) -> Column:
            if p.get(f"sourceColumn{n}") not in (None, ""):
                _require(df, [p[f"sourceColumn{n}"]], ctx)
                return col(p[f"sourceColumn{n}"]).cast("double")
            if p.get(f"value{n}") not in (None, ""):
                return F.lit(float(p[f"value{n}"]))
            raise RecipeError(f"step {ctx.step} ({ctx.operation}): needs sourceColumn{n} or value{n}")

        return df.withColumn(_target(p, ctx), fn(side("1"), side("2")))

    return op


OPERATIONS["ADD"] = _arith(lambda a, b: a + b)
OPERATIONS["SUBTRACT"] = _arith(lambda a, b: a - b)
OPERATIONS["MULTIPLY"] = _arith(lambda a, b: a * b)
OPERATIONS["DIVIDE"] = _arith(lambda a, b: F.when(b != 0, a / b))
OPERATIONS["MOD"] = _arith(lambda a, b: F.when(b != 0, a % b))


@operation("ROUND")
def round_(df: DataFrame, p: dict[str, Any], ctx: StepContext) -> DataFrame:
    src = _param(p, "sourceColumn", ctx)
    _require(df, [src], ctx)
    return df.withColumn(p.get("targetColumn") or src, F.round(col(src).cast("double"), int(p.get("decimalPlaces", 0))))


@operation("ABSOLUTE")
def absolute(df: DataFrame, p: dict[str, Any], ctx: StepContext) -> DataFrame:
    src = _param(p, "sourceColumn", ctx)
    _require(df, [src], ctx)
    return df.withColumn(p.get("targetColumn") or src, F.abs(col(src)))


@operation("DERIVE_COLUMN", "CREATE_COLUMN")
def derive(df: DataFrame, p: dict[str, Any], ctx: StepContext) -> DataFrame:
    """Shoal extension: a new column from a Spark SQL expression over the row."""
    return df.withColumn(_target(p, ctx), _expression(df, _param(p, "expression", ctx), ctx))


# ---- combining ---------------------------------------------------------------------------

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


_AGGS: dict[str, Callable[[Column], Column]] = {
    "SUM": F.sum,
    "COUNT": F.count,
    "COUNT_DISTINCT": F.countDistinct,
    "AVERAGE": F.avg,
    "MEAN": F.avg,
    "AVG": F.avg,
    "MIN": F.min,
    "MAX": F.max,
    "MEDIAN": lambda c: F.percentile_approx(c, 0.5),
    "STDDEV": F.stddev,
    "VARIANCE": F.variance,
    "FIRST": F.first,
    "LAST": F.last,
}


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
