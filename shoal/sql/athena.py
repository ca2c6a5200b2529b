"""Athena (Trino engine v3) SQL with Athena's answers, run on Spark.

sqlglot parses the statement as Athena SQL; `AthenaTranslator` then walks the tree and
rewrites every construct whose Spark spelling would give a different answer (ISO
`day_of_week`, integer division, `CAST` rounding, MySQL and Joda date formats, JSON
paths, `array_agg` keeping NULLs, ...). Every function call must be on the list of those
whose answers the conformance suite (tests/sql/athena_cases.py) checks against Athena's
documented ones; any other is refused before anything runs with
`not supported in Shoal: NAME (line L, column C)`, never answered differently.

Athena's errors are part of the translation: a CAST that finds no value, integer overflow,
division by zero, a subscript out of bounds, a missing map key and text that does not match
date_parse's format fail, as in Athena, instead of giving NULL or wrapping around (Spark's
defaults). The session's `spark.sql.ansi.enabled` is left alone.
"""

from __future__ import annotations

import decimal
import json
import re
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from sqlglot import exp
from sqlglot.dialects.athena import Athena
from sqlglot.dialects.trino import Trino
from sqlglot.parsers.athena import AthenaParser, AthenaTrinoParser

from shoal.exceptions import SqlError
from shoal.sql import athena_udfs as udfs

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# ---- parsing: keep the functions whose arguments sqlglot would rewrite on the way in -------------
# sqlglot turns date_format's MySQL specifiers into its own notation while parsing, losing the
# ones it has no equivalent for; these stay as written and are translated here.
_RAW_FUNCTIONS = (
    "DATE_FORMAT",
    "DATE_PARSE",
    "FORMAT_DATETIME",
    "PARSE_DATETIME",
    "JSON_EXTRACT",
    "JSON_EXTRACT_SCALAR",
    "JSON_FORMAT",
    "JSON_PARSE",
    "JSON_SIZE",
    "JSON_ARRAY_LENGTH",
    "JSON_ARRAY_GET",
    "JSON_ARRAY_CONTAINS",
    "IS_JSON_SCALAR",
    "TYPEOF",
)


def _raw(name: str) -> Callable[[list], exp.Anonymous]:
    return lambda args: exp.Anonymous(this=name, expressions=args)


class _TrinoParser(AthenaTrinoParser):
    FUNCTIONS = {**AthenaTrinoParser.FUNCTIONS, **{n: _raw(n) for n in _RAW_FUNCTIONS}}


class _Trino(Trino):
    # Subscripts stay as written (1-based) in the tree: sqlglot would shift only those whose
    # type it knows (a[2] -> a[1], a[i] unchanged); the translation makes them 1-based calls.
    INDEX_OFFSET = 0


class _Parser(AthenaParser):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._trino_parser = _TrinoParser(
            error_level=self.error_level,
            error_message_context=self.error_message_context,
            max_errors=self.max_errors,
            dialect=_Trino(),
        )


class ShoalAthena(Athena):
    """Athena's dialect, parsing the functions Shoal translates itself as plain calls."""

    Parser = _Parser


# ---- errors ------------------------------------------------------------------------------------
def position(sql: str, node: exp.Expr | None, name: str | None = None, offset: int = 0) -> str:
    """' (line L, column C)' for a node (or the first call of `name`) in the user's text;
    `offset`: where the statement starts in `sql` (a script of several statements)."""
    meta = node.meta if node is not None else {}
    start = meta.get("start")
    if start is None and name:
        m = re.compile(rf"\b{re.escape(name)}\s*\(", re.I).search(sql, offset) or re.compile(
            rf"\b{re.escape(name)}\b", re.I
        ).search(sql, offset)
        start = m.start() - offset if m else None
    if start is None:
        return ""
    return at_offset(sql, start, offset)


def at_offset(sql: str, start: int, offset: int = 0) -> str:
    """' (line L, column C)' of character `start` of the statement that begins at `offset` in `sql`."""
    at = offset + start
    line = sql.count("\n", 0, at) + 1
    col = at - (sql.rfind("\n", 0, at) + 1) + 1
    return f" (line {line}, column {col})"


class NotSupported(SqlError):
    """A construct Shoal cannot give Athena's answer for: refused before anything runs."""


# ---- types (Spark's simple type names) -----------------------------------------------------------
_INTEGRAL = {"tinyint", "smallint", "int", "bigint"}
_FRACTIONAL = {"double", "float"}
_ATHENA_TYPES = {
    "int": "integer",
    "string": "varchar",
    "float": "real",
    "binary": "varbinary",
    "timestamp": "timestamp(6)",  # an Iceberg column: microseconds
    "timestamp_ntz": "timestamp(6)",
}


def _is_decimal(t: str | None) -> bool:
    return bool(t) and t.startswith("decimal")  # type: ignore[union-attr]


def _numeric(t: str | None) -> bool:
    return t in _FRACTIONAL or t in _INTEGRAL or _is_decimal(t)


def _decimal_precision(t: str) -> int:
    m = re.fullmatch(r"decimal\((\d+),\s*\d+\)", t)
    return int(m.group(1)) if m else 38


def _decimal_of(t: str) -> tuple[int | None, int]:
    """(precision, scale) of a decimal or integer type as Trino coerces it to a decimal."""
    whole = {"tinyint": 3, "smallint": 5, "int": 10, "bigint": 19}
    if t in whole:
        return whole[t], 0
    m = re.fullmatch(r"decimal\((\d+)(?:,\s*(\d+))?\)", t)
    return (int(m.group(1)), int(m.group(2) or 0)) if m else (None, 0)


def _decimal_scale(t: str) -> int | None:
    m = re.fullmatch(r"decimal\((\d+),\s*(\d+)\)", t)
    return int(m.group(2)) if m else None


def _athena_type(spark_type: str) -> str:
    """An Athena type name for a Spark simple type string."""
    t = spark_type.lower()
    if t in _ATHENA_TYPES:
        return _ATHENA_TYPES[t]
    if t.startswith("array<") and t.endswith(">"):
        return f"array({_athena_type(t[6:-1])})"
    if t.startswith("map<") and t.endswith(">"):
        k, v = _split_top(t[4:-1])
        return f"map({_athena_type(k)}, {_athena_type(v)})"
    if t.startswith("decimal("):
        return t.replace(" ", "")
    return t


def _split_top(text: str) -> tuple[str, str]:
    depth = 0
    for i, ch in enumerate(text):
        depth += ch in "<(" and 1 or (-1 if ch in ">)" else 0)
        if ch == "," and depth == 0:
            return text[:i], text[i + 1 :]
    return text, ""


def _widest_int(a: str, b: str) -> str:
    order = ["tinyint", "smallint", "int", "bigint"]
    return order[max(order.index(a), order.index(b))]


# ---- the functions whose Spark spelling gives Athena's answer (checked by the suite) ---------------
_SAME = {
    exp.Count, exp.Sum, exp.Avg, exp.Min, exp.Max, exp.Stddev, exp.StddevSamp, exp.StddevPop,
    exp.Variance, exp.VariancePop, exp.CountIf, exp.ApproxDistinct, exp.AnyValue, exp.ArgMax,
    exp.ArgMin, exp.LogicalAnd, exp.LogicalOr, exp.Coalesce, exp.Nullif, exp.If, exp.Case,
    exp.Lower, exp.Upper, exp.Length, exp.Trim, exp.Substring, exp.Concat, exp.ConcatWs, exp.Pad,
    exp.Reverse, exp.Levenshtein, exp.StartsWith, exp.Split, exp.RegexpLike, exp.RegexpReplace,
    exp.RegexpSplit, exp.RegexpExtractAll, exp.RegexpCount, exp.Replace, exp.Abs,
    exp.Ceil, exp.Floor, exp.Round, exp.Sqrt, exp.Pow, exp.Ln, exp.Log, exp.Exp, exp.Sign, exp.Mod,
    exp.Array, exp.ArraySize, exp.ArrayContains, exp.ArrayToString, exp.GenerateSeries,
    exp.ArraySlice, exp.ArrayPosition, exp.Flatten, exp.ArrayDistinct, exp.ArrayMax, exp.ArrayMin,
    exp.ArraySort, exp.ArrayRemove, exp.ArrayIntersect, exp.ArrayExcept, exp.Map, exp.MapKeys,
    exp.Transform, exp.ArrayFilter, exp.Reduce, exp.RowNumber, exp.Rank, exp.DenseRank, exp.Lag,
    exp.Lead, exp.FirstValue, exp.LastValue, exp.NthValue, exp.PercentRank, exp.CumeDist,
    exp.Ntile, exp.DayOfYear, exp.WeekOfYear, exp.Year, exp.Month, exp.Day, exp.Hour, exp.Minute,
    exp.Second, exp.Quarter, exp.DayOfMonth, exp.Bracket, exp.FromISO8601Timestamp,
    exp.FromISO8601Date, exp.StrPosition, exp.ApproxQuantile, exp.AtTimeZone, exp.Translate, exp.Struct,
    exp.MapFromEntries, exp.CovarSamp, exp.CovarPop,
}  # fmt: skip
# Unknown to sqlglot, same name and answer in Spark.
_SAME_ANONYMOUS = {"MAP_VALUES", "ARRAY_UNION", "ARRAYS_OVERLAP", "ZIP_WITH", "MAP_CONCAT", "MAP_FILTER",
                   "TRANSFORM_VALUES", "TRANSFORM_KEYS", "MAP_ENTRIES", "MAP_FROM_ENTRIES", "EVERY", "MAP_ZIP_WITH"}  # fmt: skip

# extract(field FROM x): the function each field is (datetime.md).
_EXTRACT = {
    "YEAR": "year", "QUARTER": "quarter", "MONTH": "month", "WEEK": "week", "DAY": "day",
    "DAY_OF_MONTH": "day_of_month", "DAY_OF_WEEK": "day_of_week", "DOW": "day_of_week",
    "DAY_OF_YEAR": "day_of_year", "DOY": "day_of_year", "YEAR_OF_WEEK": "year_of_week",
    "YOW": "year_of_week", "HOUR": "hour", "MINUTE": "minute", "SECOND": "second",
}  # fmt: skip
# binary.md's one-argument encodings: the Spark type each gives.
_BINARY_UDFS = {
    "to_base64url": "string", "from_base64url": "binary", "to_base32": "string", "from_base32": "binary",
    "from_big_endian_32": "int", "from_big_endian_64": "bigint", "to_big_endian_32": "binary",
    "to_big_endian_64": "binary", "from_ieee754_32": "float", "from_ieee754_64": "double",
    "to_ieee754_32": "binary", "to_ieee754_64": "binary",
}  # fmt: skip

# MySQL-style specifiers (date_format/date_parse): Spark pattern for printing, for parsing.
_MYSQL = {
    "a": ("EEE", "EEE"), "b": ("MMM", "MMM"), "c": ("M", "M"), "d": ("dd", "d"), "e": ("d", "d"),
    "f": ("SSSSSS", "SSSSSSSSS"), "H": ("HH", "H"), "h": ("hh", "h"), "I": ("hh", "h"), "i": ("mm", "m"),
    "j": ("DDD", "D"), "k": ("H", "H"), "l": ("h", "h"), "M": ("MMMM", "MMMM"), "m": ("MM", "M"),
    "p": ("a", "a"), "r": ("hh:mm:ss a", "h:m:s a"), "S": ("ss", "s"), "s": ("ss", "s"),
    "T": ("HH:mm:ss", "H:m:s"), "W": ("EEEE", "EEEE"), "Y": ("yyyy", "yyyy"), "y": ("yy", "yy"),
}  # fmt: skip
_FIXED = {"d": "dd", "e": "dd", "c": "MM", "m": "MM", "H": "HH", "k": "HH", "h": "hh", "I": "hh", "l": "hh",
          "i": "mm", "s": "ss", "S": "ss", "j": "DDD"}  # fmt: skip
_MYSQL_ATHENA_UNSUPPORTED = set("DUuVwX")
# Joda letters Spark prints the same way (count for count).
_JODA_SAME = set("yMdHmshKkDSaG")


def _quote_pattern(text: str) -> str:
    """Literal text in a pattern, marked so that `_render` quotes each run of it once."""
    return "".join("\x00" + ch for ch in text)


def _render(pattern: str) -> str:
    """A Spark datetime pattern: each run of literal text quoted ('' for a quote)."""
    return re.sub(r"(?:\x00.)+", lambda m: "'" + m.group(0)[1::2].replace("'", "''") + "'", pattern, flags=re.S)


class AthenaTranslator:
    """Rewrites one parsed Athena statement into a Spark tree with Athena's answers."""

    def __init__(
        self, sql: str, column_types: Callable[[], dict[str, str | None]] | None = None, *, offset: int = 0
    ) -> None:
        self.sql = sql
        self.offset = offset
        self._column_types_source = column_types
        self._column_types: dict[str, str | None] | None = None
        self.uses_udfs = False

    # -- entry ---------------------------------------------------------------------------------
    def translate(self, tree: exp.Expr) -> exp.Expr:
        tree = tree.copy()
        # Children first: a handler sees its arguments already translated.
        for node in reversed(list(tree.walk(bfs=False))):
            if node is tree:
                continue
            new = self._node(node)
            if new is not None and new is not node:
                node.replace(new)
        return tree

    def refuse(self, what: str, node: exp.Expr | None = None, name: str | None = None) -> NotSupported:
        return NotSupported(f"not supported in Shoal: {what}{position(self.sql, node, name, self.offset)}")

    # -- types ------------------------------------------------------------------------------------
    def columns(self) -> dict[str, str | None]:
        if self._column_types is None:
            self._column_types = self._column_types_source() if self._column_types_source else {}
        return self._column_types

    def type_of(self, node: exp.Expr | None) -> str | None:  # noqa: C901 - a case per expression type
        if node is None:
            return None
        known = node.meta.get("spark_type") if node.meta else None
        if known:
            return known
        if isinstance(node, exp.Paren | exp.Neg):
            return self.type_of(node.this)
        if isinstance(node, exp.Identifier) or (isinstance(node, exp.Column) and not node.table):
            is_param, t = self._param_type(node)
            if is_param:
                return t
        if isinstance(node, exp.Literal):
            if node.is_string:
                return "string"
            text = node.this.lower()
            if "e" in text:
                return "double"
            if "." in text:
                whole, frac = text.split(".", 1)
                digits = len(whole.lstrip("-").lstrip("0")) + len(frac)
                return f"decimal({max(digits, len(frac), 1)},{len(frac)})"
            return "int" if -(2**31) <= int(text) < 2**31 else "bigint"
        if isinstance(node, exp.Boolean):
            return "boolean"
        if isinstance(node, exp.Map | exp.VarMap):
            return "map"
        if isinstance(node, exp.Array | exp.Split | exp.RegexpSplit | exp.RegexpExtractAll | exp.GenerateSeries):
            return "array"
        if isinstance(node, exp.Cast | exp.TryCast):
            return node.to.sql(dialect="spark").lower().replace(" ", "")
        if isinstance(node, exp.Column) and not node.table:
            return self.columns().get(node.name.lower())
        if isinstance(node, exp.Column):
            return self.columns().get(f"{node.table}.{node.name}".lower()) or self.columns().get(node.name.lower())
        if isinstance(node, exp.Add | exp.Sub | exp.Mul | exp.Mod):
            a, b = self.type_of(node.this), self.type_of(node.expression)
            if a in _INTEGRAL and b in _INTEGRAL:
                return _widest_int(a, b)
            if a in _FRACTIONAL or b in _FRACTIONAL:
                return "double"
            return None
        if isinstance(node, exp.Count | exp.ArraySize | exp.Length | exp.StrPosition | exp.CountIf):
            return "bigint"
        if isinstance(node, exp.Sum):
            return "bigint" if self.type_of(node.this) in _INTEGRAL else None
        if isinstance(node, exp.Avg):
            return "double" if self.type_of(node.this) in _INTEGRAL | _FRACTIONAL else None
        if isinstance(node, exp.Min | exp.Max):
            return self.type_of(node.this)
        return None

    def _param_type(self, node: exp.Expr) -> tuple[bool, str | None]:
        """(whether `node` names a lambda's parameter, its type): the elements' type of the array
        that transform, filter or any_match/all_match/none_match walk; None for other lambdas."""
        lam = node.find_ancestor(exp.Lambda)
        while lam is not None:
            params = [p.name for p in lam.expressions]
            if node.name in params:
                call = lam.parent
                walks = isinstance(call, exp.Transform | exp.ArrayFilter) or (
                    isinstance(call, exp.Anonymous) and call.name.upper() in ("ANY_MATCH", "ALL_MATCH", "NONE_MATCH")
                )
                if walks and params.index(node.name) == 0 and call is not None:
                    array = call.expressions[0] if isinstance(call, exp.Anonymous) else call.this
                    return True, self._element_type(array)
                return True, self._fold_param_type(call, lam, params.index(node.name))
            lam = lam.find_ancestor(exp.Lambda)
        return False, None

    def _fold_param_type(self, call: exp.Expr | None, lam: exp.Lambda, index: int) -> str | None:
        """reduce(array, s0, (s, x) -> ...) and reduce_agg(x, s0, (s, x) -> ...): the state has
        the initial state's type, x the elements' (or the values')."""
        if isinstance(call, exp.Reduce) and call.args.get("merge") is lam:
            return self.type_of(call.args["initial"]) if index == 0 else self._element_type(call.this)
        if isinstance(call, exp.Anonymous) and call.name.upper() == "REDUCE_AGG" and call.expressions[2:3] == [lam]:
            return self.type_of(call.expressions[1 if index == 0 else 0])
        return None

    def _element_type(self, array: exp.Expr) -> str | None:
        t = self.type_of(array)
        if t and t.startswith("array<") and t.endswith(">"):
            return t[6:-1]
        if isinstance(array, exp.Array) and array.expressions:
            types = {self.type_of(e) for e in array.expressions}
            return types.pop() if len(types) == 1 else None
        return None

    def _typed(self, node: exp.Expr, spark_type: str) -> exp.Expr:
        node.meta["spark_type"] = spark_type
        return node

    # -- one node ---------------------------------------------------------------------------------
    def _node(self, node: exp.Expr) -> exp.Expr | None:
        handler = getattr(self, f"_h_{type(node).__name__}", None)
        if handler is not None:
            return handler(node)
        if isinstance(node, exp.Anonymous):
            return self._anonymous(node)
        if (
            isinstance(node, exp.Func)
            and type(node) not in _SAME
            and not isinstance(node, exp.Window | exp.Connector | exp.Binary)
        ):
            raise self.refuse(_func_name(node), node, _func_name(node))
        return None

    def _anonymous(self, node: exp.Anonymous) -> exp.Expr | None:
        name = node.name.upper()
        args = node.expressions
        handler = getattr(self, f"_f_{name.lower()}", None)
        if handler is not None:
            return handler(node, args)
        if name in _SAME_ANONYMOUS:
            return None
        if name in ("ANY_MATCH", "ALL_MATCH", "NONE_MATCH"):
            call = exp.Anonymous(this="EXISTS" if name != "ALL_MATCH" else "FORALL", expressions=args)
            return exp.Not(this=call) if name == "NONE_MATCH" else call
        raise self.refuse(name, node, name)

    # -- dates and times --------------------------------------------------------------------------
    def _h_DayOfWeekIso(self, node: exp.Expr) -> exp.Expr:
        return self._typed(_sp("WEEKDAY(A) + 1", A=node.this), "int")

    def _f_dow(self, node: exp.Anonymous, args: list) -> exp.Expr:
        return self._typed(_sp("WEEKDAY(A) + 1", A=args[0]), "int")

    def _f_doy(self, node: exp.Anonymous, args: list) -> exp.Expr:
        return _sp("DAYOFYEAR(A)", A=args[0])

    def _h_YearOfWeek(self, node: exp.Expr) -> exp.Expr:
        return _iso_year(node.this)

    def _f_yow(self, node: exp.Anonymous, args: list) -> exp.Expr:
        return _iso_year(args[0])

    def _f_year_of_week(self, node: exp.Anonymous, args: list) -> exp.Expr:
        return _iso_year(args[0])

    def _f_week(self, node: exp.Anonymous, args: list) -> exp.Expr:
        return _sp("WEEKOFYEAR(A)", A=args[0])

    def _f_day_of_week(self, node: exp.Anonymous, args: list) -> exp.Expr:
        return self._f_dow(node, args)

    def _date_input(self, node: exp.Expr, arg: exp.Expr, what: str) -> bool:
        t = self.type_of(arg)
        if t == "date":
            return True
        if t in ("timestamp", "timestamp_ntz"):
            return False
        raise self.refuse(f"{what} of a value whose type (date or timestamp) Shoal cannot tell", node, what)

    def _h_DateTrunc(self, node: exp.Expr) -> exp.Expr:
        return self._trunc(node, node.this, node.args.get("unit"))

    def _h_TimestampTrunc(self, node: exp.Expr) -> exp.Expr:
        return self._trunc(node, node.this, node.args.get("unit"))

    def _trunc(self, node: exp.Expr, arg: exp.Expr, unit: Any) -> exp.Expr:
        unit_name = (unit.name if isinstance(unit, exp.Expr) else str(unit)).upper()
        if unit_name not in {"MILLISECOND", "SECOND", "MINUTE", "HOUR", "DAY", "WEEK", "MONTH", "QUARTER", "YEAR"}:
            raise self.refuse(f"DATE_TRUNC unit {unit_name!r}", node, "date_trunc")
        is_date = self._date_input(node, arg, "DATE_TRUNC")
        if is_date and unit_name in {"MILLISECOND", "SECOND", "MINUTE", "HOUR"}:
            raise self.refuse(f"DATE_TRUNC of a DATE by {unit_name.lower()}", node, "date_trunc")
        out = exp.Anonymous(this="DATE_TRUNC", expressions=[exp.Literal.string(unit_name), arg])
        return self._typed(_sp("CAST(A AS DATE)", A=out), "date") if is_date else self._typed(out, "timestamp")

    def _h_DateAdd(self, node: exp.Expr) -> exp.Expr:
        unit = (node.text("unit") or "DAY").upper()
        if unit not in {"MILLISECOND", "SECOND", "MINUTE", "HOUR", "DAY", "WEEK", "MONTH", "QUARTER", "YEAR"}:
            raise self.refuse(f"DATE_ADD unit {unit!r}", node, "date_add")
        arg = node.this
        is_date = self._date_input(node, arg, "DATE_ADD")
        if is_date and unit in {"MILLISECOND", "SECOND", "MINUTE", "HOUR"}:
            raise self.refuse(f"DATE_ADD of {unit.lower()}s to a DATE", node, "date_add")
        out = exp.Anonymous(this="TIMESTAMPADD", expressions=[exp.Var(this=unit), node.expression, arg])
        return self._typed(_sp("CAST(A AS DATE)", A=out), "date") if is_date else self._typed(out, "timestamp")

    def _h_DateDiff(self, node: exp.Expr) -> exp.Expr:
        unit = (node.text("unit") or "DAY").upper()
        if unit not in {"MILLISECOND", "SECOND", "MINUTE", "HOUR", "DAY", "WEEK", "MONTH", "QUARTER", "YEAR"}:
            raise self.refuse(f"DATE_DIFF unit {unit!r}", node, "date_diff")
        start, end = node.expression, node.this
        if unit in {"MONTH", "QUARTER", "YEAR"}:
            # Athena (Joda) counts a month from a later day of month to the last day of a
            # shorter month as whole: 2024-01-31 to 2024-02-29 is one month.
            months = _sp(
                "CASE WHEN E >= S THEN F ELSE -B END",
                S=start,
                E=end,
                F=_sp(_MONTHS, S=start, E=end),
                B=_sp(_MONTHS, S=end, E=start),
            )
            divisor = {"MONTH": 1, "QUARTER": 3, "YEAR": 12}[unit]
            out = months if divisor == 1 else _sp(f"CAST(M / {divisor} AS BIGINT)", M=months)
            return self._typed(out, "bigint")
        out = exp.Anonymous(this="TIMESTAMPDIFF", expressions=[exp.Var(this=unit), start, end])
        return self._typed(out, "bigint")

    def _h_Sign(self, node: exp.Expr) -> exp.Expr:
        t = self.type_of(node.this)
        if t in _INTEGRAL:
            return self._typed(_sp(f"CAST(SIGN(A) AS {t.upper()})", A=node.this), t)
        return node

    def _h_Ceil(self, node: exp.Expr) -> exp.Expr:
        return self._rounded(node, "CEIL")

    def _h_Floor(self, node: exp.Expr) -> exp.Expr:
        return self._rounded(node, "FLOOR")

    def _rounded(self, node: exp.Expr, fn: str) -> exp.Expr:
        if node.args.get("decimals") or node.args.get("to"):
            raise self.refuse(f"{fn} with a scale", node, fn.lower())
        t = self.type_of(node.this)
        if t in _INTEGRAL or t in _FRACTIONAL:
            # Athena keeps the argument's type (Spark gives BIGINT for a DOUBLE).
            return self._typed(_sp(f"CAST({fn}(A) AS {t.upper()})", A=node.this), t)
        if _is_decimal(t):
            return node
        raise self.refuse(f"{fn} of a value whose type Shoal cannot tell", node, fn.lower())

    def _h_UnixToTime(self, node: exp.Expr) -> exp.Expr:
        if any(node.args.get(k) for k in ("hours", "minutes", "format", "scale")):
            raise self.refuse("FROM_UNIXTIME with an hours and minutes offset", node, "from_unixtime")
        instant = self._typed(
            _sp("TIMESTAMP_MILLIS(CAST(FLOOR(CAST(A AS DOUBLE) * 1000) AS BIGINT))", A=node.this), "timestamp"
        )
        zone = node.args.get("zone")
        if zone is None:
            return instant
        # from_unixtime(t, zone): a timestamp with time zone in `zone` (datetime.md).
        use = _zoned_use(node)
        if use == "wall clock":
            return self._typed(exp.Anonymous(this="FROM_UTC_TIMESTAMP", expressions=[instant, zone]), "timestamp")
        if use == "instant" or (isinstance(zone, exp.Literal) and zone.is_string and _is_utc(zone.this)):
            return instant
        raise self.refuse(
            "FROM_UNIXTIME with a time zone as a value (Spark keeps no zone): read it with hour(), "
            "date_format() or CAST(... AS TIMESTAMP)",
            node,
            "from_unixtime",
        )

    def _h_TimeToUnix(self, node: exp.Expr) -> exp.Expr:
        return self._typed(_sp("CAST(UNIX_MICROS(CAST(A AS TIMESTAMP)) AS DOUBLE) / 1000000D", A=node.this), "double")

    def _f_date_format(self, node: exp.Anonymous, args: list) -> exp.Expr:
        value, fmt = self._two(node, args, "DATE_FORMAT")
        parts: list[exp.Expr] = []
        pattern = ""
        i = 0
        while i < len(fmt):
            ch = fmt[i]
            if ch != "%" or i + 1 == len(fmt):
                pattern += _quote_pattern(ch)
                i += 1
                continue
            spec = fmt[i + 1]
            i += 2
            if spec in _MYSQL:
                pattern += _MYSQL[spec][0]
            elif spec == "v":
                parts, pattern = _flush(parts, pattern, value), ""
                parts.append(_sp("LPAD(CAST(WEEKOFYEAR(A) AS STRING), 2, '0')", A=value))
            elif spec == "x":
                parts, pattern = _flush(parts, pattern, value), ""
                parts.append(_sp("CAST(A AS STRING)", A=_iso_year(value)))
            elif spec in _MYSQL_ATHENA_UNSUPPORTED:
                raise self.refuse(
                    f"DATE_FORMAT specifier %{spec} (Athena does not support it either)", node, "date_format"
                )
            else:  # %% and any other character stand for themselves
                pattern += _quote_pattern(spec)
        parts = _flush(parts, pattern, value)
        return self._typed(parts[0] if len(parts) == 1 else exp.Concat(expressions=parts), "string")

    def _f_date_parse(self, node: exp.Anonymous, args: list) -> exp.Expr:
        value, fmt = self._two(node, args, "DATE_PARSE")
        pattern, i, prev_spec = "", 0, False
        while i < len(fmt):
            ch = fmt[i]
            if ch != "%" or i + 1 == len(fmt):
                pattern += _quote_pattern(ch)
                i, prev_spec = i + 1, False
                continue
            spec = fmt[i + 1]
            i += 2
            if spec not in _MYSQL:
                if spec == "%":
                    pattern += _quote_pattern("%")
                    prev_spec = False
                    continue
                raise self.refuse(f"DATE_PARSE specifier %{spec}", node, "date_parse")
            nxt_spec = i < len(fmt) and fmt[i] == "%"
            # Adjacent numbers (%Y%m%d) need fixed widths to be told apart.
            pattern += _FIXED.get(spec, _MYSQL[spec][1]) if (prev_spec or nxt_spec) else _MYSQL[spec][1]
            prev_spec = True
        return self._parsed(value, _render(pattern))

    def _parsed(self, value: exp.Expr, pattern: str) -> exp.Expr:
        out = exp.Anonymous(this="TO_TIMESTAMP", expressions=[value, exp.Literal.string(pattern)])
        # Text that does not match is an error in Athena (NULL in Spark); Athena's timestamp(3)
        # truncates parsed fractions to milliseconds.
        checked = _sp(
            "CASE WHEN S IS NOT NULL AND T IS NULL THEN RAISE_ERROR(M) ELSE DATE_TRUNC('MILLISECOND', T) END",
            S=value,
            T=out,
            M=exp.Literal.string(f"Invalid format: the text does not match {pattern!r}"),
        )
        return self._typed(checked, "timestamp")

    def _joda(self, node: exp.Expr, fmt: str, value: exp.Expr | None, what: str) -> list[exp.Expr] | str:
        """Spark pieces for a Joda pattern (value None: parsing, returns one Spark pattern)."""
        parts: list[exp.Expr] = []
        pattern, i = "", 0
        while i < len(fmt):
            ch = fmt[i]
            if ch == "'":
                end = fmt.find("'", i + 1)
                if end == i + 1:  # '' is a quote
                    pattern += _quote_pattern("'")
                    i += 2
                    continue
                if end < 0:
                    raise self.refuse(f"{what} pattern with an unterminated quote", node, what)
                pattern += _quote_pattern(fmt[i + 1 : end].replace("''", "'"))
                i = end + 1
                continue
            if not ch.isalpha():
                pattern += _quote_pattern(ch)
                i += 1
                continue
            n = 1
            while i + n < len(fmt) and fmt[i + n] == ch:
                n += 1
            i += n
            if ch in _JODA_SAME:
                pattern += ch * (min(n, 4) if ch == "M" else n)
            elif ch == "Y":
                pattern += "y" * n
            elif ch == "E":
                pattern += "EEEE" if n >= 4 else "EEE"
            elif ch in "ewx" and value is not None:
                parts, pattern = _flush(parts, pattern, value), ""
                number = {
                    "e": _sp("WEEKDAY(A) + 1", A=value),
                    "w": _sp("WEEKOFYEAR(A)", A=value),
                    "x": _iso_year(value),
                }[ch]
                text = _sp("CAST(A AS STRING)", A=number)
                if ch == "x" and n == 2:
                    text = _sp("RIGHT(A, 2)", A=text)
                elif n > 1:
                    text = _sp(f"LPAD(A, {n}, '0')", A=text)
                parts.append(text)
            else:
                raise self.refuse(f"{what} pattern letter {ch!r}", node, what)
        if value is None:
            return _render(pattern)
        return _flush(parts, pattern, value)

    def _f_format_datetime(self, node: exp.Anonymous, args: list) -> exp.Expr:
        value, fmt = self._two(node, args, "FORMAT_DATETIME")
        parts = self._joda(node, fmt, value, "FORMAT_DATETIME")
        assert isinstance(parts, list)
        return self._typed(parts[0] if len(parts) == 1 else exp.Concat(expressions=parts), "string")

    def _f_parse_datetime(self, node: exp.Anonymous, args: list) -> exp.Expr:
        value, fmt = self._two(node, args, "PARSE_DATETIME")
        pattern = self._joda(node, fmt, None, "PARSE_DATETIME")
        assert isinstance(pattern, str)
        return self._parsed(value, pattern)

    def _two(self, node: exp.Anonymous, args: list, what: str) -> tuple[exp.Expr, str]:
        if len(args) != 2:
            raise self.refuse(f"{what} with {len(args)} arguments", node, what)
        if not (isinstance(args[1], exp.Literal) and args[1].is_string):
            raise self.refuse(f"{what} with a format that is not a string literal", node, what)
        return args[0], args[1].this

    # -- typeof, casts, arithmetic ----------------------------------------------------------------
    def _f_typeof(self, node: exp.Anonymous, args: list) -> exp.Expr:
        arg = args[0]
        if isinstance(arg, exp.Literal) and arg.is_string:
            return exp.Literal.string(f"varchar({len(arg.this)})")
        t = self.type_of(arg)
        if t is None or (t == "string" and not isinstance(arg, exp.Column)):
            raise self.refuse("TYPEOF of an expression whose Athena type Shoal cannot tell", node, "typeof")
        if t in ("timestamp", "timestamp_ntz") and not isinstance(arg, exp.Column):
            raise self.refuse("TYPEOF of a computed timestamp", node, "typeof")
        if t == "decimal":
            raise self.refuse("TYPEOF of a DECIMAL without a precision", node, "typeof")
        m = re.fullmatch(r"decimal\((\d+)\)", t)
        if m:  # DECIMAL(p): the scale defaults to 0 (language/types.md)
            t = f"decimal({m.group(1)},0)"
        return exp.Literal.string(_athena_type(t))

    def _h_Cast(self, node: exp.Cast) -> exp.Expr | None:
        return self._cast(node, "CAST")

    def _h_TryCast(self, node: exp.Cast) -> exp.Expr | None:
        return self._cast(node, "TRY_CAST")

    def _h_Tuple(self, node: exp.Expr) -> exp.Expr | None:
        # ARRAY[(1, 'x'), ...] (map.md): anonymous rows; Spark writes them STRUCT(1, 'x').
        return exp.Struct(expressions=node.expressions) if isinstance(node.parent, exp.Array) else None

    def _h_JSONValue(self, node: exp.Expr) -> exp.Expr:
        # json_value/json_query (SQL/JSON paths, lax and strict modes): no Spark equivalent.
        raise self.refuse("JSON_VALUE", node, "json_value")

    def _h_JSONExtract(self, node: exp.Expr) -> exp.Expr:
        raise self.refuse("JSON_QUERY", node, "json_query")

    def _h_Log(self, node: exp.Expr) -> exp.Expr | None:
        # math.md has log(b, x); Spark's one-argument log is ln, which Trino does not accept.
        if node.args.get("expression") is None:
            raise self.refuse("LOG with one argument (Trino has log(b, x) and ln(x))", node, "log")
        return None

    def _h_ParseJSON(self, node: exp.Expr) -> exp.Expr:
        # JSON '...' (json.md): a JSON value, its text canonical as json_parse prints it.
        return self._json(node, [node.this], "athena_json_parse", (1,))  # type: ignore[arg-type]

    def _json_cast(self, node: exp.Cast, what: str) -> exp.Expr:
        """CAST(json AS ARRAY|MAP|ROW|scalar) (json.md): converted by a Python function to JSON
        text Spark's from_json reads exactly (see athena_udfs.json_cast)."""
        target = _json_target(node.to)
        if what != "CAST" or target is None:
            raise self.refuse(f"{what} of a JSON value to {node.to.sql(dialect='athena')}", node, what.lower())
        self.uses_udfs = True
        converted = exp.Anonymous(
            this="athena_json_cast", expressions=[node.this, exp.Literal.string(json.dumps(target))]
        )
        schema = exp.Literal.string(f"STRUCT<v: {node.to.sql(dialect='spark')}>")
        out = exp.Dot(
            this=exp.Anonymous(this="FROM_JSON", expressions=[converted, schema]), expression=exp.to_identifier("v")
        )
        return self._typed(out, node.to.sql(dialect="spark").lower().replace(" ", ""))

    def _cast(self, node: exp.Cast, what: str) -> exp.Expr | None:
        if isinstance(node.this, exp.Anonymous) and node.this.name.upper() in _JSON_VALUED:
            return self._json_cast(node, what)
        kind = node.to.this
        if kind in (exp.DataType.Type.TIME, exp.DataType.Type.TIMETZ):
            # Spark has no time-of-day type: `TIME '01:00' - INTERVAL '3' HOUR` would be a
            # timestamp with today's date (Trino: 22:00:00.000).
            raise self.refuse("TIME values (Spark has no time-of-day type)", node, what.lower())
        if kind == exp.DataType.Type.TIMESTAMPTZ:
            if self.type_of(node.this) in ("date", "timestamp", "timestamp_ntz"):
                # A date or timestamp is read in the session zone, UTC: Spark's timestamp.
                return self._typed(_sp("CAST(A AS TIMESTAMP)", A=node.this), "timestamp")
            return self._zoned(node, node.this, "TIMESTAMP WITH TIME ZONE")
        if kind == exp.DataType.Type.DECIMAL and not node.to.expressions:
            self._decimal_literal_type(node)
        if kind == exp.DataType.Type.TIMESTAMP:
            precision = _precision(node.to, 3)  # Trino's TIMESTAMP is TIMESTAMP(3)
            literal = node.this if isinstance(node.this, exp.Literal) and node.this.is_string else None
            digits = _fraction_digits(literal.this) if literal is not None else None
            if digits is not None and digits > 6 and precision > 6:
                raise self.refuse("timestamps finer than microseconds (Spark keeps 6 digits)", node, what.lower())
            out = self._cast_checked(node, what) or node
            if precision >= 6 or (digits is not None and digits <= precision):
                return out
            # Casting to a lower precision rounds (Trino's types page); Spark keeps microseconds.
            unit = 10 ** (6 - precision)
            rounded = _sp(
                f"TIMESTAMP_MICROS(UNIX_MICROS(A) + {unit // 2} - PMOD(UNIX_MICROS(A) + {unit // 2}, {unit}))",
                A=out if out is not node else node.copy(),
            )
            return self._typed(rounded, "timestamp")
        return self._cast_checked(node, what)

    def _decimal_literal_type(self, node: exp.Cast) -> None:
        """DECIMAL '1.20' is a decimal(3,2): every digit written, leading zeros too (decimal.md), not
        Spark's decimal(10,0)."""
        text = node.this.this if isinstance(node.this, exp.Literal) and node.this.is_string else None
        m = re.fullmatch(r"\s*[+-]?(\d*)(?:\.(\d*))?\s*", text.replace("_", "")) if text else None
        if m is None or not (m.group(1) or m.group(2)):
            return
        whole, frac = m.group(1), m.group(2) or ""
        precision = max(len(whole) + len(frac), 1)
        if precision > 38:
            raise self.refuse("a DECIMAL literal of more than 38 digits", node, "decimal")
        node.set("to", exp.DataType.build(f"DECIMAL({precision}, {len(frac)})"))

    def _zoned(self, node: exp.Expr, text: exp.Expr, what: str) -> exp.Expr:
        """A TIMESTAMP WITH TIME ZONE from ISO text. Spark's timestamps have no zone: a UTC value
        (Athena's session zone) is Spark's timestamp; another zone keeps its answer only where
        the wall clock is read (hour(), date_format(), CAST to DATE/TIMESTAMP: the local time as
        written) or the instant (to_unixtime, AT TIME ZONE, comparisons); refused elsewhere."""
        literal = text.this if isinstance(text, exp.Literal) and text.is_string else None
        if literal is not None:
            m = _ZONED_TEXT.fullmatch(literal.strip())
            if m is None:
                raise self.refuse(f"{what} text {literal!r}", node, what.split()[0].lower())
            if _is_utc(m.group("zone")):
                return self._typed(self._checked_timestamp(exp.Literal.string(m.group("local"))), "timestamp")
        use = _zoned_use(node)
        if use == "wall clock":
            local = (
                exp.Literal.string(m.group("local"))  # type: ignore[union-attr]
                if literal is not None
                else _sp("REGEXP_EXTRACT(A, P, 1)", A=text, P=exp.Literal.string(_LOCAL_PART))
            )
            return self._typed(self._checked_timestamp(local), "timestamp")
        if use == "instant":
            return self._typed(self._checked_timestamp(text), "timestamp")  # the instant, in UTC
        raise self.refuse(
            f"{what} in a zone other than UTC as a value (Spark keeps no zone): read it with hour(), "
            "date_format(), CAST(... AS TIMESTAMP) or to_unixtime()",
            node,
            what.split()[0].lower(),
        )

    def _checked_timestamp(self, text: exp.Expr) -> exp.Expr:
        """CAST(text AS TIMESTAMP), an error (as in Trino) where the text is no timestamp."""
        tried = exp.TryCast(this=text.copy(), to=exp.DataType.build("TIMESTAMP"), safe=True)
        return _sp(
            "CASE WHEN A IS NOT NULL AND T IS NULL THEN RAISE_ERROR(CONCAT(P, CAST(A AS STRING), M)) ELSE T END",
            A=text,
            T=tried,
            P=exp.Literal.string("Invalid timestamp: '"),
            M=exp.Literal.string("'"),
        )

    def _cast_checked(self, node: exp.Cast, what: str) -> exp.Expr | None:
        target = node.to.sql(dialect="spark").lower().replace(" ", "")
        source = self.type_of(node.this)
        if isinstance(node.this, exp.Anonymous) and node.this.name.upper().startswith("ATHENA_JSON"):
            raise self.refuse(f"{what} of a JSON value", node, what.lower())
        if target in _INTEGRAL:
            if source in _FRACTIONAL or _is_decimal(source):
                # Athena rounds to the nearest integer (half away from zero); Spark truncates.
                node.set("this", exp.Anonymous(this="ROUND", expressions=[node.this]))
            elif source not in _INTEGRAL and source not in ("string", "boolean"):
                raise self.refuse(
                    f"{what} to {target.upper()} of a value whose type Shoal cannot tell", node, what.lower()
                )
        if target == "string":
            if source in ("timestamp", "timestamp_ntz"):
                # Spark drops a timestamp's trailing zeros; Athena prints an Iceberg column's six digits.
                if not isinstance(node.this, exp.Column) or what != "CAST":
                    raise self.refuse(f"{what} of a computed timestamp to VARCHAR", node, what.lower())
                return _sp("DATE_FORMAT(A, 'yyyy-MM-dd HH:mm:ss.SSSSSS')", A=node.this)
            return None
        # TRY_CAST has Athena's rules (no truncation, no wrap-around); a CAST that finds no
        # value is an error in Athena, as it is here, never a NULL.
        tried = exp.TryCast(this=node.this, to=node.to.copy(), safe=True)
        if what == "TRY_CAST" or source == target:
            return tried if what == "TRY_CAST" else None
        return self._typed(
            _sp(
                "CASE WHEN A IS NOT NULL AND T IS NULL THEN RAISE_ERROR(CONCAT(P, CAST(A AS STRING), M)) ELSE T END",
                A=node.this,
                T=tried,
                P=exp.Literal.string("Cannot cast '"),
                M=exp.Literal.string(f"' to {_athena_type(target).upper()}"),
            ),
            target,
        )

    def _h_Add(self, node: exp.Expr) -> exp.Expr | None:
        return self._checked(node, "TRY_ADD")

    def _h_Sub(self, node: exp.Expr) -> exp.Expr | None:
        return self._checked(node, "TRY_SUBTRACT")

    def _h_Mul(self, node: exp.Expr) -> exp.Expr | None:
        return self._checked(node, "TRY_MULTIPLY")

    def _checked(self, node: exp.Expr, fn: str) -> exp.Expr | None:
        """Integer arithmetic that overflows is an error in Athena (Spark wraps around)."""
        a, b = self.type_of(node.this), self.type_of(node.expression)
        if a not in _INTEGRAL or b not in _INTEGRAL:
            return None
        out = _sp(
            f"CASE WHEN A IS NULL OR B IS NULL THEN NULL ELSE COALESCE({fn}(A, B), RAISE_ERROR('integer overflow')) END",
            A=node.this,
            B=node.expression,
        )
        return self._typed(out, _widest_int(a, b))

    def _h_ArraySize(self, node: exp.Expr) -> exp.Expr:
        # cardinality(NULL) is NULL (Spark's size gives -1).
        return self._typed(_sp("CASE WHEN A IS NULL THEN NULL ELSE SIZE(A) END", A=node.this), "int")

    # -- comparisons of floating-point values ---------------------------------------------------
    # Trino compares NaN as IEEE 754 does (NaN = NaN, NaN < x and NaN > x are false; NaN <> x is
    # true); Spark calls NaN equal to itself and greater than every number. Where a side is
    # DOUBLE or REAL, the comparison gains that side's NaN test, as its own conjunct (`a > b`
    # stays pushable to the scan). "b IS NOT NULL" keeps NaN = NULL NULL, as in Trino.
    def _nan_side(self, side: exp.Expr) -> bool:
        if isinstance(side, exp.Literal) or self.type_of(side) not in _FRACTIONAL:
            return False
        # A side computed from rand() is never NaN; repeating it would draw again.
        return not any(isinstance(n, exp.Rand) for n in side.walk())

    def _nan_compare(self, node: exp.Binary, *, differs: bool) -> exp.Expr | None:
        a, b = node.this, node.expression
        checks = [(x, y) for x, y in ((a, b), (b, a)) if self._nan_side(x)]
        if not checks:
            return None
        tests = [_sp("(ISNAN(X) AND Y IS NOT NULL)", X=x, Y=y) for x, y in checks]
        if differs:  # NaN <> x is true
            return self._typed(exp.paren(exp.or_(node.copy(), *tests, copy=False), copy=False), "boolean")
        out = exp.and_(node.copy(), *(exp.not_(t) for t in tests), copy=False)
        return self._typed(exp.paren(out, copy=False), "boolean")

    def _h_Between(self, node: exp.Between) -> exp.Expr | None:
        """As Trino defines it, x >= low AND x <= high, each compared as above."""
        x, low, high = node.this, node.args["low"], node.args["high"]
        if not any(self._nan_side(v) for v in (x, low, high)):
            return None
        ge, le = exp.GTE(this=x.copy(), expression=low.copy()), exp.LTE(this=x.copy(), expression=high.copy())
        both = exp.and_(self._h_GTE(ge) or ge, self._h_LTE(le) or le, copy=False)
        return self._typed(exp.paren(both, copy=False), "boolean")

    def _h_In(self, node: exp.In) -> exp.Expr | None:
        """NaN IN (...) matches nothing (NULL where the list holds a NULL); Spark's In finds
        NaN in a list holding NaN. A value that is not NaN compares alike in both."""
        x, values = node.this, node.expressions
        if not values or not self._nan_side(x):
            return None
        has_null = exp.or_(*(exp.Is(this=v.copy(), expression=exp.Null()) for v in values), copy=False)
        out = _sp("CASE WHEN ISNAN(X) THEN IF(N, NULL, FALSE) ELSE I END", X=x, N=has_null, I=node)
        return self._typed(out, "boolean")

    def _h_EQ(self, node: exp.EQ) -> exp.Expr | None:
        return self._nan_compare(node, differs=False)

    def _h_NEQ(self, node: exp.NEQ) -> exp.Expr | None:
        return self._nan_compare(node, differs=True)

    def _h_GT(self, node: exp.GT) -> exp.Expr | None:
        return self._nan_compare(node, differs=False)

    def _h_GTE(self, node: exp.GTE) -> exp.Expr | None:
        return self._nan_compare(node, differs=False)

    def _h_LT(self, node: exp.LT) -> exp.Expr | None:
        return self._nan_compare(node, differs=False)

    def _h_LTE(self, node: exp.LTE) -> exp.Expr | None:
        return self._nan_compare(node, differs=False)

    def _h_Div(self, node: exp.Div) -> exp.Expr:
        a, b = self.type_of(node.this), self.type_of(node.expression)
        if a in _INTEGRAL and b in _INTEGRAL:
            # Integer division truncates toward zero; dividing by zero is an error.
            result = _widest_int(a, b)
            out = _sp(
                f"CAST(CASE WHEN B = 0 THEN RAISE_ERROR('Division by zero') ELSE A DIV B END AS {result.upper()})",
                A=node.this,
                B=node.expression,
            )
            return self._typed(out, result)
        if (a in _FRACTIONAL or b in _FRACTIONAL) and _numeric(a) and _numeric(b):
            out = _sp(
                "CASE WHEN CAST(B AS DOUBLE) = 0 THEN CAST(A AS DOUBLE) * CAST('Infinity' AS DOUBLE) "
                "ELSE CAST(A AS DOUBLE) / CAST(B AS DOUBLE) END",
                A=node.this,
                B=node.expression,
            )
            return self._typed(out, "double")
        if (_is_decimal(a) or _is_decimal(b)) and _numeric(a) and _numeric(b):
            return self._decimal_div(node, a, b)  # type: ignore[arg-type]
        raise self.refuse(
            "division of values whose types Shoal cannot tell (Athena divides integers as integers): "
            "CAST one side to DOUBLE or to BIGINT",
            node,
        )

    def _decimal_div(self, node: exp.Div, a: str, b: str) -> exp.Expr:
        """decimal(p1,s1) / decimal(p2,s2) is a decimal(min(38, p1 + s2 + max(s2 - s1, 0)), max(s1, s2))
        rounded half up (Trino's DecimalOperators; decimal.md prints the precision rule garbled).
        Spark's quotient is rounded once more to its own scale first: refused unless that scale
        keeps every digit that can decide the rounding (one more than s + p2)."""
        (p1, s1), (p2, s2) = _decimal_of(a), _decimal_of(b)
        if p1 is None or p2 is None:
            raise self.refuse("division of a DECIMAL whose precision Shoal cannot tell", node)
        rp, rs = min(38, p1 + s2 + max(s2 - s1, 0)), max(s1, s2)
        spark_s = max(6, s1 + p2 + 1)
        int_digits = p1 - s1 + s2
        if int_digits + spark_s > 38:
            spark_s = max(38 - int_digits, min(spark_s, 6))
        if spark_s < rs + p2 + 1:
            raise self.refuse(f"DECIMAL({p1},{s1}) / DECIMAL({p2},{s2}): Spark keeps too few digits to round it", node)
        out_type = f"decimal({rp},{rs})"
        out = _sp(
            f"CASE WHEN B = 0 THEN RAISE_ERROR('Division by zero') "
            f"WHEN TRY_CAST(ROUND(A / B, {rs}) AS DECIMAL({rp}, {rs})) IS NULL AND A IS NOT NULL AND B IS NOT NULL "
            f"THEN RAISE_ERROR('Value is out of range') ELSE CAST(ROUND(A / B, {rs}) AS DECIMAL({rp}, {rs})) END",
            A=node.this,
            B=node.expression,
        )
        return self._typed(out, out_type)

    def _h_Bracket(self, node: exp.Bracket) -> exp.Expr | None:
        if node.args.get("safe"):
            return None  # element_at: NULL when missing, in both
        container = self.type_of(node.this) or ""
        keys = node.expressions
        if container.startswith("map") and len(keys) == 1:
            # A missing key is an error in Athena (Spark's m[k] gives NULL).
            return _sp(
                "CASE WHEN MAP_CONTAINS_KEY(M, K) THEN ELEMENT_AT(M, K) ELSE RAISE_ERROR('Key not present in map') END",
                M=node.this,
                K=keys[0],
            )
        if container.startswith("array") and len(keys) == 1:
            index = keys[0]
            return _sp(
                "CASE WHEN K < 1 OR K > SIZE(A) THEN RAISE_ERROR('Array subscript out of bounds') "
                "ELSE ELEMENT_AT(A, K) END",
                A=node.this,
                K=index,
            )
        raise self.refuse("a subscript [...] on a value whose type (array or map) Shoal cannot tell", node)

    def _h_AtTimeZone(self, node: exp.Expr) -> exp.Expr | None:
        """Spark holds `ts AT TIME ZONE 'z'` as the wall-clock time in z, without the zone: the
        same answer where only the wall clock is read (fields, formatting, CAST to DATE or
        TIMESTAMP), another instant anywhere else, so refused there."""
        parent = node.parent
        if isinstance(parent, _WALL_CLOCK_READERS):
            return None
        if isinstance(parent, exp.Anonymous) and parent.name.upper() in {"DATE_FORMAT", "FORMAT_DATETIME"}:
            return None
        if isinstance(parent, exp.Cast) and parent.to.sql(dialect="spark").upper() in {"DATE", "TIMESTAMP"}:
            return None
        raise self.refuse(
            "AT TIME ZONE except inside hour(), date_format(), CAST(... AS DATE|TIMESTAMP) and other "
            "functions that read the wall clock",
            node,
            "AT TIME ZONE",
        )

    def _h_FromISO8601Timestamp(self, node: exp.Expr) -> exp.Expr:
        # Trino keeps the text's zone (datetime.md: '2020-05-11T11:15:05.055+01:00' is
        # 2020-05-11 11:15:05.055 +01:00): see _zoned.
        return self._zoned(node, node.this, "FROM_ISO8601_TIMESTAMP")

    def _h_FromISO8601Date(self, node: exp.Expr) -> exp.Expr:
        """A calendar date, an ISO week date (2020-W10 is 2020-03-02) or a year and day of year
        (2020-123 is 2020-05-02), as datetime.md prints; other text is an error, as in Trino."""
        out = _sp(
            "CASE WHEN S IS NULL THEN NULL "
            "WHEN S RLIKE '^[0-9]{4}-W[0-9]{2}(-[1-7])?$' AND CAST(SUBSTR(S, 7, 2) AS INT) BETWEEN 1 AND "
            "WEEKOFYEAR(MAKE_DATE(CAST(LEFT(S, 4) AS INT), 12, 28)) THEN "
            "DATE_ADD(DATE_ADD(MAKE_DATE(CAST(LEFT(S, 4) AS INT), 1, 4), -WEEKDAY(MAKE_DATE(CAST(LEFT(S, 4) AS INT), 1, 4))), "
            "(CAST(SUBSTR(S, 7, 2) AS INT) - 1) * 7 + COALESCE(CAST(SUBSTR(S, 10, 1) AS INT), 1) - 1) "
            "WHEN S RLIKE '^[0-9]{4}-[0-9]{3}$' AND CAST(SUBSTR(S, 6, 3) AS INT) BETWEEN 1 AND "
            "DAYOFYEAR(MAKE_DATE(CAST(LEFT(S, 4) AS INT), 12, 31)) THEN "
            "DATE_ADD(MAKE_DATE(CAST(LEFT(S, 4) AS INT), 1, 1), CAST(SUBSTR(S, 6, 3) AS INT) - 1) "
            "WHEN S RLIKE '^[0-9]{4}(-[0-9]{2}(-[0-9]{2})?)?$' AND TRY_CAST(S AS DATE) IS NOT NULL THEN "
            "TRY_CAST(S AS DATE) "
            "ELSE RAISE_ERROR(CONCAT('Invalid ISO 8601 date: ', S)) END",
            S=node.this,
        )
        return self._typed(out, "date")

    def _h_AnyValue(self, node: exp.Expr) -> exp.Expr:
        # arbitrary/any_value: "an arbitrary non-null value of x, if one exists" (aggregate.md);
        # Spark's any_value may pick a NULL unless told to ignore them.
        return exp.Anonymous(this="ANY_VALUE", expressions=[node.this, exp.true()])

    def _h_ArgMax(self, node: exp.Expr) -> exp.Expr | None:
        return self._by_n(node, "max_by", descending=True)

    def _h_ArgMin(self, node: exp.Expr) -> exp.Expr | None:
        return self._by_n(node, "min_by", descending=False)

    def _by_n(self, node: exp.Expr, name: str, descending: bool) -> exp.Expr | None:
        """max_by(x, y, n): the x of the n largest y, in descending order of y (aggregate.md)."""
        n = node.args.get("count")
        if n is None:
            return None
        if isinstance(node.parent, exp.Window):
            raise self.refuse(f"{name.upper()} with n and OVER", node, name)
        # Rows whose y is NULL are left out; no such row at all gives NULL.
        pairs = "SORT_ARRAY(COLLECT_LIST(CASE WHEN Y IS NULL THEN NULL ELSE NAMED_STRUCT('y', Y, 'x', X) END) F)"
        ordered = f"REVERSE({pairs})" if descending else pairs
        return self._aggregate(
            node,
            "CASE WHEN COUNT(Y) F = 0 THEN NULL WHEN N < 1 THEN RAISE_ERROR('n must be greater than zero') "
            f"ELSE SLICE(TRANSFORM({ordered}, e -> e.x), 1, N) END",
            X=node.this,
            Y=node.expression,
            N=n,
        )

    def _h_Split(self, node: exp.Expr) -> exp.Expr | None:
        """split(s, d, limit): at most `limit` parts, the last holding the rest (string.md)."""
        limit = node.args.get("limit")
        if limit is None:
            return None
        return _sp(
            "CASE WHEN L < 1 THEN RAISE_ERROR('Limit must be positive') "
            "ELSE SPLIT(S, CONCAT('\\\\Q', D, '\\\\E'), L) END",
            S=node.this,
            D=node.expression,
            L=limit,
        )

    def _h_CurrentDate(self, node: exp.Expr) -> exp.Expr:
        # The date as of the query's start in the session zone (UTC in Athena and in Shoal).
        return self._typed(exp.Anonymous(this="CURRENT_DATE", expressions=[]), "date")

    def _h_CurrentTimestamp(self, node: exp.Expr) -> exp.Expr:
        # current_timestamp/now(): timestamp(3) with time zone in the session zone, UTC (datetime.md).
        if node.this is not None:
            raise self.refuse("CURRENT_TIMESTAMP with a precision", node, "current_timestamp")
        return self._typed(_sp("DATE_TRUNC('MILLISECOND', CURRENT_TIMESTAMP())"), "timestamp")

    def _h_LastDay(self, node: exp.Expr) -> exp.Expr:
        # last_day_of_month(x) -> date (datetime.md).
        if node.args.get("unit"):
            raise self.refuse("LAST_DAY with a unit", node, "last_day")
        return self._typed(exp.Anonymous(this="LAST_DAY", expressions=[node.this]), "date")

    def _h_Encode(self, node: exp.Expr) -> exp.Expr:
        # to_utf8(s) -> varbinary (binary.md / string.md).
        return self._typed(exp.Anonymous(this="ENCODE", expressions=[node.this, exp.Literal.string("UTF-8")]), "binary")

    def _h_MD5Digest(self, node: exp.Expr) -> exp.Expr:
        # md5(binary) -> varbinary (binary.md); Spark's md5 gives hex text.
        return self._typed(_sp("UNHEX(MD5(A))", A=node.this), "binary")

    def _h_SHA2Digest(self, node: exp.Expr) -> exp.Expr:
        length = node.args.get("length")
        bits = int(length.name) if isinstance(length, exp.Literal) else 256
        if bits not in (256, 512):
            raise self.refuse(f"SHA2 of {bits} bits", node, "sha256")
        return self._typed(_sp(f"UNHEX(SHA2(A, {bits}))", A=node.this), "binary")

    def _h_Hex(self, node: exp.Expr) -> exp.Expr:
        # to_hex(binary) -> varchar, upper-case digits (binary.md).
        if self.type_of(node.this) != "binary":
            raise self.refuse("TO_HEX of a value that is not VARBINARY", node, "to_hex")
        return self._typed(exp.Anonymous(this="HEX", expressions=[node.this]), "string")

    def _h_LowerHex(self, node: exp.Expr) -> exp.Expr:
        # lower(to_hex(binary)): sqlglot folds the pair into one node.
        if self.type_of(node.this) != "binary":
            raise self.refuse("TO_HEX of a value that is not VARBINARY", node, "to_hex")
        return self._typed(_sp("LOWER(HEX(A))", A=node.this), "string")

    def _h_Trunc(self, node: exp.Expr) -> exp.Expr:
        """truncate(x): x rounded toward zero (math.md), for a DOUBLE or REAL; doubles of 2^52
        and more (and infinities) are already whole."""
        t = self.type_of(node.this)
        n = node.args.get("decimals")
        if t is not None and _is_decimal(t) and _decimal_scale(t) is not None:
            return self._truncate_decimal(node, t, n)
        if n is not None and t == "double":
            return self._udf("truncate_double", [node.this, n], "double")
        if n is not None or t not in _FRACTIONAL:
            raise self.refuse(
                "TRUNCATE of a REAL with a scale, or of a value whose type Shoal cannot tell", node, "truncate"
            )
        out = _sp(f"CAST(CASE WHEN ABS(A) >= 4503599627370496D THEN A ELSE A - A % 1 END AS {t.upper()})", A=node.this)
        return self._typed(out, t)

    def _truncate_decimal(self, node: exp.Expr, t: str, n: exp.Expr | None) -> exp.Expr:
        """truncate(decimal(p,s)) is a decimal(max(1, p-s), 0); truncate(x, n) keeps decimal(p,s)
        with the digits after the n-th zeroed: x - x % 10^-n (the remainder has x's sign)."""
        p, scale = _decimal_precision(t), _decimal_scale(t) or 0
        if n is None:
            out_type, digits = f"decimal({max(1, p - scale)},0)", 0
        elif isinstance(n, exp.Literal) and not n.is_string and re.fullmatch(r"-?\d+", n.this):
            out_type, digits = t, int(n.this)
        elif isinstance(n, exp.Neg) and isinstance(n.this, exp.Literal) and re.fullmatch(r"\d+", n.this.this):
            out_type, digits = t, -int(n.this.this)
        else:
            raise self.refuse("TRUNCATE of a DECIMAL to a number of places that is not a literal", node, "truncate")
        if p > 36:
            raise self.refuse("TRUNCATE of a DECIMAL of more than 36 digits", node, "truncate")
        if digits >= scale:
            return self._typed(_sp(f"CAST(A AS {out_type.upper()})", A=node.this), out_type)
        step = exp.Literal.number(str(decimal.Decimal(1).scaleb(-digits)) if digits > 0 else str(10**-digits))
        if -digits >= 38:
            return self._typed(_sp(f"CAST(A * 0 AS {out_type.upper()})", A=node.this), out_type)
        out = _sp(f"CAST(A - A % S AS {out_type.upper()})", A=node.this, S=step)
        return self._typed(out, out_type)

    def _h_Unnest(self, node: exp.Expr) -> exp.Expr | None:
        """CROSS JOIN UNNEST(array) AS t(x) / UNNEST(map) AS t(k, v): one row per element (or
        entry), rows with empty or NULL arrays dropped, NULL elements kept: Spark's explode."""
        if len(node.expressions) != 1:
            raise self.refuse("UNNEST of several arrays at once", node, "unnest")
        offset = node.args.get("offset")
        if not offset:  # None, or False where sqlglot read no WITH ORDINALITY
            return None
        # WITH ORDINALITY counts from 1 (Spark's posexplode from 0): a NULL is put first and its
        # row (position 0) left out by the query's WHERE, so the ordinal needs no rewriting.
        alias = node.args.get("alias")
        join = node.parent if isinstance(node.parent, exp.Join) else None
        select = node.find_ancestor(exp.Select)
        if (
            not isinstance(offset, exp.Identifier)
            or alias is None
            or not alias.name
            or select is None
            or (join is not None and (join.side or join.args.get("on") or join.args.get("using")))
        ):
            raise self.refuse("UNNEST ... WITH ORDINALITY except in FROM or CROSS JOIN with AS t(...)", node, "unnest")
        node.set(
            "expressions",
            [exp.Anonymous(this="ARRAY_INSERT", expressions=[node.expressions[0], exp.Literal.number(1), exp.null()])],
        )
        keep = exp.NEQ(
            this=exp.column(offset.copy(), table=alias.args["this"].copy()), expression=exp.Literal.number(0)
        )
        select.where(keep, copy=False)
        return None

    def _h_Greatest(self, node: exp.Expr) -> exp.Expr:
        return self._null_if_any(node)

    def _h_Least(self, node: exp.Expr) -> exp.Expr:
        return self._null_if_any(node)

    def _null_if_any(self, node: exp.Expr) -> exp.Expr:
        args = [node.this, *node.expressions]
        any_null = exp.or_(*[exp.Is(this=a.copy(), expression=exp.Null()) for a in args])
        return exp.Case(ifs=[exp.If(this=any_null, true=exp.Null())], default=node.copy())

    # -- strings, arrays, maps -------------------------------------------------------------------
    def _h_Repeat(self, node: exp.Expr) -> exp.Expr:
        return exp.Anonymous(this="ARRAY_REPEAT", expressions=[node.this, node.args["times"]])

    def _h_SplitPart(self, node: exp.Expr) -> exp.Expr:
        return _sp(
            "CASE WHEN N < 1 THEN RAISE_ERROR('Index must be greater than zero') "
            "ELSE TRY_ELEMENT_AT(SPLIT(S, CONCAT('\\\\Q', D, '\\\\E'), -1), N) END",
            S=node.this,
            D=node.args["delimiter"],
            N=node.args["part_index"],
        )

    def _h_StrPosition(self, node: exp.Expr) -> exp.Expr | None:
        if node.args.get("position"):
            raise self.refuse("STRPOS with a start position", node, "strpos")
        instance = node.args.get("occurrence")
        if instance is None:
            return None
        # strpos(s, sub, instance) (string.md): the N-th from the start, or from the end when N < 0.
        return self._udf("strpos_instance", [node.this, node.args["substr"], instance], "bigint")

    def _h_If(self, node: exp.Expr) -> exp.Expr | None:
        # if(condition, true_value) (conditional.md): NULL when the condition is not true.
        if node.args.get("false") is None and not isinstance(node.parent, exp.Case):
            return exp.Case(ifs=[exp.If(this=node.this, true=node.args["true"])])
        return None

    def _h_DPipe(self, node: exp.Expr) -> exp.Expr | None:
        """`||` (array.md): an element before or after an array joins it; two arrays concatenate."""
        a, b = self.type_of(node.this), self.type_of(node.expression)
        arrays = [t is not None and t.startswith("array") for t in (a, b)]
        if not any(arrays):
            return None
        if None in (a, b):
            raise self.refuse("|| of a value whose type (array or element) Shoal cannot tell", node)
        left, right = (
            x if is_array else exp.Array(expressions=[x])
            for x, is_array in zip((node.this, node.expression), arrays, strict=True)
        )
        return self._typed(exp.Anonymous(this="CONCAT", expressions=[left, right]), "array")

    def _h_RegexpExtract(self, node: exp.Expr) -> exp.Expr:
        group = node.args.get("group") or exp.Literal.number(0)
        # No match is NULL in Athena, an empty string in Spark's regexp_extract.
        return exp.Anonymous(
            this="TRY_ELEMENT_AT",
            expressions=[
                exp.Anonymous(this="REGEXP_EXTRACT_ALL", expressions=[node.this, node.expression, group]),
                exp.Literal.number(1),
            ],
        )

    def _h_RegexpExtractAll(self, node: exp.Expr) -> exp.Expr:
        group = node.args.get("group") or exp.Literal.number(0)
        return exp.Anonymous(this="REGEXP_EXTRACT_ALL", expressions=[node.this, node.expression, group])

    def _h_ArrayAgg(self, node: exp.Expr) -> exp.Expr:
        arg = node.this
        if isinstance(arg, exp.Distinct) or isinstance(node.parent, exp.Window):
            raise self.refuse("ARRAY_AGG with DISTINCT or OVER", node, "array_agg")
        if isinstance(arg, exp.Order):
            return self._ordered_agg(node, arg)
        # Athena keeps NULLs (Spark's collect_list drops them) and gives NULL for no rows.
        return self._aggregate(
            node,
            "CASE WHEN COUNT(1) F = 0 THEN NULL ELSE TRANSFORM(COLLECT_LIST(NAMED_STRUCT('v', A)) F, s -> s.v) END",
            A=arg,
        )

    def _ordered_agg(self, node: exp.Expr, order: exp.Order, keep_nulls: bool = True) -> exp.Expr:
        """array_agg(x ORDER BY k1 [DESC], ...): NULLs kept, NULL keys last unless NULLS FIRST
        (Trino's ORDER BY), NULL for no rows; an array_sort with a comparator over the keys."""
        nodes: dict[str, exp.Expr] = {"V": order.this}
        fields = ["'v', V"]
        compare = "0"
        for i, ordered in reversed(list(enumerate(order.expressions))):
            nodes[f"K{i}"] = ordered.this
            fields.append(f"'k{i}', K{i}")
            desc = bool(ordered.args.get("desc"))
            nulls_first = bool(ordered.args.get("nulls_first"))
            lt, gt = ("1", "-1") if desc else ("-1", "1")
            nf, nl = ("-1", "1") if nulls_first else ("1", "-1")
            compare = (
                f"CASE WHEN l.k{i} IS NULL AND r.k{i} IS NULL THEN {compare} WHEN l.k{i} IS NULL THEN {nf} "
                f"WHEN r.k{i} IS NULL THEN {nl} WHEN l.k{i} < r.k{i} THEN {lt} WHEN l.k{i} > r.k{i} THEN {gt} "
                f"ELSE {compare} END"
            )
        entry = f"NAMED_STRUCT({', '.join(fields)})"
        if not keep_nulls:  # listagg: NULL values left out
            entry = f"CASE WHEN V IS NULL THEN NULL ELSE {entry} END"
        return self._aggregate(
            node,
            f"CASE WHEN COUNT({1 if keep_nulls else 'V'}) F = 0 THEN NULL ELSE TRANSFORM(ARRAY_SORT(COLLECT_LIST({entry}) F, "
            f"(l, r) -> {compare}), e -> e.v) END",
            **nodes,
        )

    def _f_map_agg(self, node: exp.Anonymous, args: list) -> exp.Expr:
        if isinstance(node.parent, exp.Window) or len(args) != 2:
            raise self.refuse("MAP_AGG with OVER", node, "map_agg")
        return self._aggregate(
            node,
            "CASE WHEN COUNT(1) F = 0 THEN NULL ELSE MAP_FROM_ENTRIES(COLLECT_LIST("
            "CASE WHEN K IS NULL THEN NULL ELSE NAMED_STRUCT('k', K, 'v', V) END) F) END",
            K=args[0],
            V=args[1],
        )

    def _aggregate(self, node: exp.Expr, template: str, **nodes: exp.Expr) -> exp.Expr:
        """An aggregate rewritten as several; `F` marks where the call's FILTER (WHERE ...) goes."""
        parent = node.parent
        where = parent.expression if isinstance(parent, exp.Filter) else None
        out = _sp(template.replace(" F", " FILTER (WHERE TRUE)"), **nodes)
        for f in list(out.find_all(exp.Filter)):
            if where is None:
                f.replace(f.this)
            else:
                f.set("expression", where.copy())
        if isinstance(parent, exp.Filter):
            parent.replace(out)  # the FILTER now sits on each aggregate inside
            return node
        return out

    def _h_ApproxQuantile(self, node: exp.Expr) -> exp.Expr | None:
        if node.args.get("accuracy") or node.args.get("weight"):
            raise self.refuse("APPROX_PERCENTILE with a weight or accuracy", node, "approx_percentile")
        return None

    # -- functions Spark spells otherwise (issue 44) ------------------------------------------------
    def _udf(self, name: str, args: list, spark_type: str) -> exp.Expr:
        self.uses_udfs = True
        return self._typed(exp.Anonymous(this=f"athena_{name}", expressions=list(args)), spark_type)

    def _f_hamming_distance(self, node: exp.Anonymous, args: list) -> exp.Expr:
        return self._udf("hamming_distance", self._arity(node, args, 2), "bigint")

    def _f_codepoint(self, node: exp.Anonymous, args: list) -> exp.Expr:
        # codepoint takes a varchar(1) (string.md): a one-character literal; Trino rejects a VARCHAR column.
        arg = self._arity(node, args, 1)[0]
        if not (isinstance(arg, exp.Literal) and arg.is_string and len(arg.this) == 1):
            raise self.refuse("CODEPOINT of anything but a one-character literal", node, "codepoint")
        return self._typed(exp.Literal.number(ord(arg.this)), "int")

    def _f_format_number(self, node: exp.Anonymous, args: list) -> exp.Expr:
        # format_number takes a BIGINT or a DOUBLE (conversion.md); other numbers are coerced.
        arg = self._arity(node, args, 1)[0]
        t = self.type_of(arg)
        if not _numeric(t):
            raise self.refuse("FORMAT_NUMBER of a value whose type Shoal cannot tell", node, node.name)
        spark_type = "BIGINT" if t in _INTEGRAL else "DOUBLE"
        return self._udf("format_number", [_sp(f"CAST(A AS {spark_type})", A=arg)], "string")

    def _f_url_encode(self, node: exp.Anonymous, args: list) -> exp.Expr:
        return self._udf("url_encode", self._arity(node, args, 1), "string")

    def _f_url_decode(self, node: exp.Anonymous, args: list) -> exp.Expr:
        return self._udf("url_decode", self._arity(node, args, 1), "string")

    def _f_url_extract_parameter(self, node: exp.Anonymous, args: list) -> exp.Expr:
        return self._udf("url_extract_parameter", self._arity(node, args, 2), "string")

    def _url_part(self, node: exp.Anonymous, args: list) -> exp.Expr:
        part = node.name.lower()
        return self._udf(part, self._arity(node, args, 1), "bigint" if part.endswith("port") else "string")

    _f_url_extract_host = _f_url_extract_path = _f_url_extract_port = _url_part
    _f_url_extract_protocol = _f_url_extract_query = _f_url_extract_fragment = _url_part

    def _arity(self, node: exp.Anonymous, args: list, n: int) -> list:
        if len(args) != n:
            raise self.refuse(f"{node.name.upper()} with {len(args)} arguments", node, node.name)
        return args

    def _f_zip(self, node: exp.Anonymous, args: list) -> exp.Expr:
        # array.md: rows of the M-th elements, the shorter arrays padded with NULL (arrays_zip).
        if len(args) < 2:
            raise self.refuse("ZIP of fewer than two arrays", node, "zip")
        return self._typed(exp.Anonymous(this="ARRAYS_ZIP", expressions=args), "array")

    def _f_map_concat(self, node: exp.Anonymous, args: list) -> exp.Expr:
        """map.md: a key in several maps takes its value from the last (Spark refuses the
        duplicate): each map keeps only the keys no later map has."""
        kept = []
        for i, m in enumerate(args):
            later = args[i + 1 :]
            if not later:
                kept.append(m)
                continue
            hidden = exp.or_(*[_sp("MAP_CONTAINS_KEY(L, shoal_k)", L=m2) for m2 in later])
            keep = _sp("MAP_FILTER(M, (shoal_k, shoal_v) -> NOT H)", M=m, H=hidden)
            kept.append(keep)
        return exp.Anonymous(this="MAP_CONCAT", expressions=kept)

    def _f_multimap_from_entries(self, node: exp.Anonymous, args: list) -> exp.Expr:
        """map.md: each key with the array of its values, in order. The entries' fields are read
        by position (a one-entry map_from_entries); a NULL key is an error, as in Trino."""
        entries = self._arity(node, args, 1)[0]
        pairs = _sp(
            "TRANSFORM(A, shoal_e -> NAMED_STRUCT('k', MAP_KEYS(MAP_FROM_ENTRIES(ARRAY(shoal_e)))[0], "
            "'v', MAP_VALUES(MAP_FROM_ENTRIES(ARRAY(shoal_e)))[0]))",
            A=entries,
        )
        return self._typed(
            _sp(
                "MAP_FROM_ARRAYS(ARRAY_DISTINCT(TRANSFORM(P, shoal_p -> shoal_p.k)), TRANSFORM("
                "ARRAY_DISTINCT(TRANSFORM(P, shoal_p -> shoal_p.k)), shoal_key -> TRANSFORM("
                "FILTER(P, shoal_p -> shoal_p.k = shoal_key), shoal_p -> shoal_p.v)))",
                P=pairs,
            ),
            "map",
        )

    def _f_geometric_mean(self, node: exp.Anonymous, args: list) -> exp.Expr:
        # aggregate.md; the mean of the logarithms: 0 among the values gives 0, a negative NaN.
        x = self._arity(node, args, 1)[0]
        if isinstance(node.parent, exp.Window) or not _numeric(self.type_of(x)):
            raise self.refuse("GEOMETRIC_MEAN with OVER, or of a value whose type Shoal cannot tell", node, node.name)
        return self._typed(
            self._aggregate(
                node,
                "EXP(AVG(CASE WHEN X > 0 THEN LN(CAST(X AS DOUBLE)) WHEN X = 0 THEN CAST('-Infinity' AS DOUBLE) "
                "WHEN X < 0 THEN CAST('NaN' AS DOUBLE) END) F)",
                X=x,
            ),
            "double",
        )

    def _f_reduce_agg(self, node: exp.Anonymous, args: list) -> exp.Expr:
        """aggregate.md: the input function folded over the non-null values from the initial
        state (the combine function has nothing to combine in one aggregation); NULL for none."""
        value, init, fold, _ = self._arity(node, args, 4)
        if isinstance(node.parent, exp.Window) or not isinstance(fold, exp.Lambda):
            raise self.refuse("REDUCE_AGG with OVER", node, node.name)
        return self._aggregate(
            node,
            "CASE WHEN COUNT(X) F = 0 THEN NULL ELSE AGGREGATE(COLLECT_LIST(X) F, I, L) END",
            X=value,
            I=init,
            L=fold,
        )

    def _h_GroupConcat(self, node: exp.Expr) -> exp.Expr:
        """listagg(x, sep) WITHIN GROUP (ORDER BY ...) (aggregate.md): the non-null values in that
        order joined by sep ('' by default); NULL for none."""
        order = node.this
        if (
            not isinstance(order, exp.Order)
            or node.args.get("on_overflow")
            or isinstance(node.parent, exp.Window)
            or isinstance(order.this, exp.Distinct)
        ):
            raise self.refuse(
                "LISTAGG without WITHIN GROUP (ORDER BY ...), or with DISTINCT, ON OVERFLOW or OVER", node, "listagg"
            )
        if self.type_of(order.this) != "string":
            raise self.refuse("LISTAGG of a value that is not VARCHAR (Trino takes only VARCHAR)", node, "listagg")
        sep = node.args.get("separator") or exp.Literal.string("")
        joined = self._ordered_agg(node, order, keep_nulls=False)
        return self._typed(_sp("ARRAY_JOIN(A, S)", A=joined, S=sep), "string")

    def _h_Format(self, node: exp.Expr) -> exp.Expr:
        """format(fmt, args...) (conversion.md): Java's Formatter, as Spark's format_string; the
        arguments passed as Trino passes them (integers as BIGINT); dates, timestamps and
        values Shoal cannot type are refused, decimals only for %f and %e."""
        fmt, args = node.this, node.expressions
        passed = []
        for arg in args:
            t = self.type_of(arg)
            if t in _INTEGRAL:
                arg = _sp("CAST(A AS BIGINT)", A=arg)
            elif t is not None and _is_decimal(t) and _decimal_precision(t) <= 15 and self._float_only(fmt):
                arg = _sp("CAST(A AS DOUBLE)", A=arg)
            elif not (t in _FRACTIONAL or t in ("string", "boolean") or isinstance(arg, exp.Null)):
                raise self.refuse(f"FORMAT of a value of type {t or 'Shoal cannot tell'}", node, "format")
            passed.append(arg)
        return self._typed(exp.Anonymous(this="FORMAT_STRING", expressions=[fmt, *passed]), "string")

    @staticmethod
    def _float_only(fmt: exp.Expr) -> bool:
        """A literal format whose conversions are all %f/%e: a DECIMAL of up to 15 digits reads
        the same as a DOUBLE there."""
        if not (isinstance(fmt, exp.Literal) and fmt.is_string):
            return False
        convs = re.findall(r"%(?:\d+\$)?[-#+ 0,(<]*\d*(?:\.\d+)?([a-zA-Z%])", fmt.this)
        return all(c in "feE%n" for c in convs)

    # -- JSON (Athena's JSON paths, run by Python functions registered in the session) --------------
    def _json(self, node: exp.Anonymous, args: list, udf: str, arity: tuple[int, ...], path: bool = False) -> exp.Expr:
        if len(args) not in arity:
            raise self.refuse(f"{node.name.upper()} with {len(args)} arguments", node, node.name)
        if path and isinstance(args[1], exp.Literal) and args[1].is_string:
            try:
                parse_json_path(args[1].this)
            except ValueError as exc:
                raise self.refuse(f"JSON path {args[1].this!r} ({exc})", node, node.name) from exc
        self.uses_udfs = True
        return exp.Anonymous(this=udf, expressions=[a for a in args])

    def _f_json_extract(self, node: exp.Anonymous, args: list) -> exp.Expr:
        return self._json(node, args, "athena_json_extract", (2,), path=True)

    def _f_json_extract_scalar(self, node: exp.Anonymous, args: list) -> exp.Expr:
        return self._json(node, args, "athena_json_extract_scalar", (2,), path=True)

    def _f_json_size(self, node: exp.Anonymous, args: list) -> exp.Expr:
        return self._json(node, args, "athena_json_size", (2,), path=True)

    def _f_json_array_length(self, node: exp.Anonymous, args: list) -> exp.Expr:
        return self._json(node, args, "athena_json_array_length", (1,))

    def _f_json_array_get(self, node: exp.Anonymous, args: list) -> exp.Expr:
        return self._json(node, args, "athena_json_array_get", (2,))

    def _f_is_json_scalar(self, node: exp.Anonymous, args: list) -> exp.Expr:
        return self._json(node, args, "athena_is_json_scalar", (1,))

    def _f_json_parse(self, node: exp.Anonymous, args: list) -> exp.Expr:
        return self._json(node, args, "athena_json_parse", (1,))

    def _f_json_format(self, node: exp.Anonymous, args: list) -> exp.Expr:
        return self._json(node, args, "athena_json_parse", (1,))

    def _f_json_array_contains(self, node: exp.Anonymous, args: list) -> exp.Expr:
        if len(args) != 2:
            raise self.refuse("JSON_ARRAY_CONTAINS", node, node.name)
        self.uses_udfs = True
        value = args[1]
        return exp.Anonymous(
            this="athena_json_array_contains", expressions=[args[0], _sp("TO_JSON(ARRAY(A))", A=value)]
        )

    # -- math.md: trigonometry, constants, floating point (issue 44) ---------------------------------
    def _numbers(self, node: exp.Expr, *args: exp.Expr | None) -> None:
        """Trino's math functions take numbers only (Spark would read text as a number)."""
        for arg in args:
            if arg is not None and not (_numeric(self.type_of(arg)) or isinstance(arg, exp.Null)):
                name = _func_name(node)
                raise self.refuse(
                    f"{name} of a value that is not a number (or whose type Shoal cannot tell)", node, name
                )

    def _double_fn(self, node: exp.Expr) -> exp.Expr:
        # acos ... tanh, cbrt, degrees, radians: double (math.md); Spark's functions agree, NaN included.
        self._numbers(node, node.this, node.args.get("expression"))
        return self._typed(node, "double")

    _h_Acos = _h_Asin = _h_Cos = _h_Cosh = _h_Sin = _h_Sinh = _h_Tan = _h_Tanh = _double_fn
    _h_Atan = _h_Atan2 = _h_Cbrt = _h_Degrees = _h_Radians = _double_fn

    def _h_Pi(self, node: exp.Expr) -> exp.Expr:
        return self._typed(node, "double")

    def _f_e(self, node: exp.Anonymous, args: list) -> exp.Expr:
        self._arity(node, args, 0)
        return self._typed(exp.Anonymous(this="E", expressions=[]), "double")

    def _f_nan(self, node: exp.Anonymous, args: list) -> exp.Expr:
        self._arity(node, args, 0)
        return self._typed(_sp("CAST('NaN' AS DOUBLE)"), "double")

    def _f_infinity(self, node: exp.Anonymous, args: list) -> exp.Expr:
        self._arity(node, args, 0)
        return self._typed(_sp("CAST('Infinity' AS DOUBLE)"), "double")

    def _h_IsNan(self, node: exp.Expr) -> exp.Expr:
        # Spark's isnan(NULL) is false; Trino's is_nan(NULL) is NULL.
        self._numbers(node, node.this)
        return self._typed(_sp("CASE WHEN X IS NULL THEN NULL ELSE ISNAN(X) END", X=node.this), "boolean")

    def _f_is_finite(self, node: exp.Anonymous, args: list) -> exp.Expr:
        # Spark orders NaN above +Infinity, so NaN is neither finite nor infinite, as in Java.
        x = self._arity(node, args, 1)[0]
        self._numbers(node, x)
        return self._typed(_sp("ABS(CAST(X AS DOUBLE)) < CAST('Infinity' AS DOUBLE)", X=x), "boolean")

    def _f_is_infinite(self, node: exp.Anonymous, args: list) -> exp.Expr:
        x = self._arity(node, args, 1)[0]
        self._numbers(node, x)
        return self._typed(_sp("ABS(CAST(X AS DOUBLE)) = CAST('Infinity' AS DOUBLE)", X=x), "boolean")

    def _h_WidthBucket(self, node: exp.Expr) -> exp.Expr:
        """width_bucket(x, bound1, bound2, n) (math.md), Trino's MathFunctions.widthBucket: errors
        for n <= 0, a NaN x, infinite or equal bounds; descending bounds mirror the buckets
        (Spark's own width_bucket returns NULL for those and counts descending edges otherwise)."""
        x, b1, b2, n = (node.this, node.args.get("min_value"), node.args.get("max_value"), node.args.get("num_buckets"))
        if b1 is None or b2 is None or n is None or node.args.get("threshold") is not None:
            raise self.refuse("WIDTH_BUCKET(x, bins)", node, "width_bucket")
        self._numbers(node, x, b1, b2, n)
        return self._typed(
            _sp(
                "CASE WHEN N <= 0 THEN RAISE_ERROR('bucketCount must be greater than 0') "
                "WHEN CAST(N AS BIGINT) = 9223372036854775807 "
                "THEN RAISE_ERROR('not supported in Shoal: WIDTH_BUCKET with 2^63 - 1 buckets') "
                "WHEN ISNAN(CAST(X AS DOUBLE)) THEN RAISE_ERROR('operand must not be NaN') "
                "WHEN NOT ABS(CAST(B AS DOUBLE)) < CAST('Infinity' AS DOUBLE) THEN RAISE_ERROR('first bound must be finite') "
                "WHEN NOT ABS(CAST(C AS DOUBLE)) < CAST('Infinity' AS DOUBLE) THEN RAISE_ERROR('second bound must be finite') "
                "WHEN CAST(B AS DOUBLE) = CAST(C AS DOUBLE) THEN RAISE_ERROR('bounds cannot equal each other') "
                "ELSE (CASE WHEN CAST(B AS DOUBLE) > CAST(C AS DOUBLE) THEN CAST(N AS BIGINT) + 1 - W ELSE W END) END",
                W=_sp(
                    "CASE WHEN X < LEAST(B, C) THEN CAST(0 AS BIGINT) WHEN X >= GREATEST(B, C) THEN CAST(N AS BIGINT) + 1 "
                    "ELSE CAST(CAST(N AS DOUBLE) * (X - LEAST(B, C)) / (GREATEST(B, C) - LEAST(B, C)) + 1 AS BIGINT) END",
                    X=_sp("CAST(A AS DOUBLE)", A=x),
                    B=_sp("CAST(A AS DOUBLE)", A=b1),
                    C=_sp("CAST(A AS DOUBLE)", A=b2),
                    N=n,
                ),
                X=x,
                B=b1,
                C=b2,
                N=n,
            ),
            "bigint",
        )

    def _h_Rand(self, node: exp.Expr) -> exp.Expr:
        """rand()/random() in [0, 1); random(n), random(m, n): an integer of n's type in [0, n) or
        [m, n) (math.md). Spark's rand(seed) takes a seed, so the bounds are written out."""
        bounds = [a for a in (node.this, node.args.get("lower"), node.args.get("upper")) if a is not None]
        if not bounds:
            return self._typed(_sp("RAND()"), "double")
        if len(bounds) > 2:
            raise self.refuse("RANDOM with three arguments", node, "random")
        low, high = bounds if len(bounds) == 2 else (exp.Literal.number(0), bounds[0])
        t = self.type_of(high)
        if t not in _INTEGRAL or self.type_of(low) not in _INTEGRAL:
            raise self.refuse("RANDOM of bounds that are not integers", node, "random")
        t = _widest_int(t, self.type_of(low))  # type: ignore[arg-type]
        return self._typed(
            _sp(
                f"CASE WHEN H <= L THEN RAISE_ERROR('bound must be greater than the lower bound') "
                f"ELSE CAST(L + FLOOR(RAND() * (CAST(H AS DOUBLE) - L)) AS {t.upper()}) END",
                L=low,
                H=high,
            ),
            t,
        )

    # -- strings, dates (issue 44) ---------------------------------------------------------------------
    def _h_EndsWith(self, node: exp.Expr) -> exp.Expr:
        for arg in (node.this, node.expression):
            if self.type_of(arg) != "string" and not isinstance(arg, exp.Null):
                raise self.refuse("ENDS_WITH of a value that is not VARCHAR", node, "ends_with")
        return self._typed(node, "boolean")

    def _h_Date(self, node: exp.Expr) -> exp.Expr:
        # date(x) is CAST(x AS DATE) (datetime.md).
        if node.args.get("zone") or node.expressions:
            raise self.refuse("DATE with more than one argument", node, "date")
        cast = exp.Cast(this=node.this, to=exp.DataType.build("DATE"))
        return self._h_Cast(cast) or cast

    def _h_Extract(self, node: exp.Expr) -> exp.Expr:
        """extract(field FROM x) (datetime.md) is the field's function: Spark's extract numbers the
        days of the week from Sunday and gives the second with its fraction."""
        import sqlglot

        field = node.name.upper()
        fn = _EXTRACT.get(field)
        if fn is None:
            raise self.refuse(f"EXTRACT({field} FROM ...)", node, "extract")
        call = sqlglot.parse_one(f"SELECT {fn}(shoal_x)", read=ShoalAthena).expressions[0]
        call.find(exp.Column).replace(node.expression.copy())
        return self._node(call) or call

    def _f_millisecond(self, node: exp.Anonymous, args: list) -> exp.Expr:
        # millisecond(x) -> bigint, the millisecond of the second (datetime.md); timestamps only.
        x = self._arity(node, args, 1)[0]
        if self.type_of(x) not in ("timestamp", "timestamp_ntz"):
            raise self.refuse("MILLISECOND of a value that is not a TIMESTAMP", node, "millisecond")
        return self._typed(
            _sp("CAST(DIV(PMOD(UNIX_MICROS(CAST(X AS TIMESTAMP)), 1000000), 1000) AS BIGINT)", X=x), "bigint"
        )

    def _f_regexp_position(self, node: exp.Anonymous, args: list) -> exp.Expr:
        """regexp_position(s, pattern) (regexp.md): the position (from 1) of the first match, -1 for
        none. Spark counts UTF-16 units: text with characters beyond U+FFFF is refused at run time."""
        s, pattern = self._arity(node, args, 2)
        return self._typed(
            _sp(
                "CASE WHEN S RLIKE '[\\\\x{10000}-\\\\x{10FFFF}]' THEN "
                "RAISE_ERROR('not supported in Shoal: REGEXP_POSITION of text with characters beyond U+FFFF') "
                "WHEN REGEXP_INSTR(S, P, 0) = 0 THEN CAST(-1 AS BIGINT) ELSE CAST(REGEXP_INSTR(S, P, 0) AS BIGINT) END",
                S=s,
                P=pattern,
            ),
            "bigint",
        )

    def _h_StrToMap(self, node: exp.Expr) -> exp.Expr:
        # split_to_map (string.md): the delimiters are plain text (Spark's str_to_map reads regexes).
        args = [node.this, node.args.get("pair_delim"), node.args.get("key_value_delim")]
        if any(a is None for a in args) or node.args.get("duplicate_resolution_callback"):
            raise self.refuse("SPLIT_TO_MAP with other than three arguments", node, "split_to_map")
        return self._udf("split_to_map", args, "map<string,string>")

    # -- binary.md (issue 44) ----------------------------------------------------------------------------
    def _binary(self, node: exp.Expr, *args: exp.Expr) -> None:
        for arg in args:
            if self.type_of(arg) != "binary":
                name = _func_name(node)
                raise self.refuse(f"{name} of a value that is not VARBINARY", node, name)

    def _h_ToBase64(self, node: exp.Expr) -> exp.Expr:
        self._binary(node, node.this)
        return self._udf("to_base64", [node.this], "string")

    def _h_FromBase64(self, node: exp.Expr) -> exp.Expr:
        return self._udf("from_base64", [node.this], "binary")

    def _h_Unhex(self, node: exp.Expr) -> exp.Expr:
        # from_hex: an odd length or a non-hex digit is an error (Spark's unhex gives NULL or pads).
        if node.args.get("expression") is not None:
            raise self.refuse("FROM_HEX with two arguments", node, "from_hex")
        return self._udf("from_hex", [node.this], "binary")

    def _h_Decode(self, node: exp.Expr) -> exp.Expr:
        # from_utf8(binary) -> varchar; the replacement-character forms are refused.
        if (node.args.get("replace") is not None) or self.type_of(node.this) != "binary":
            raise self.refuse("FROM_UTF8 with a replacement, or of a value that is not VARBINARY", node, "from_utf8")
        return self._udf("from_utf8", [node.this], "string")

    def _h_SHA(self, node: exp.Expr) -> exp.Expr:
        self._binary(node, node.this)
        return self._typed(_sp("UNHEX(SHA1(A))", A=node.this), "binary")

    def _f_crc32(self, node: exp.Anonymous, args: list) -> exp.Expr:
        x = self._arity(node, args, 1)[0]
        self._binary(node, x)
        return self._typed(exp.Anonymous(this="CRC32", expressions=[x]), "bigint")

    def _binary_udf(self, node: exp.Anonymous, args: list) -> exp.Expr:
        name = node.name.lower()
        x = self._arity(node, args, 1)[0]
        if name.startswith(("from_big_endian", "from_ieee754", "to_base64url", "to_base32")):
            self._binary(node, x)
        elif name in ("to_big_endian_32", "to_big_endian_64", "to_ieee754_64"):
            # Trino coerces only a narrower type: a BIGINT to an INTEGER, a DOUBLE to a REAL never.
            allowed = {"to_big_endian_32": {"tinyint", "smallint", "int"}, "to_big_endian_64": _INTEGRAL}.get(name)
            t = self.type_of(x)
            if not (t in allowed if allowed is not None else _numeric(t)):
                raise self.refuse(f"{name.upper()} of a value of type {t or 'Shoal cannot tell'}", node, name)
            x = _sp(f"CAST(A AS {'INT' if name.endswith('32') else 'BIGINT' if allowed else 'DOUBLE'})", A=x)
        elif name == "to_ieee754_32" and self.type_of(x) != "float":
            raise self.refuse("TO_IEEE754_32 of a value that is not REAL", node, name)
        returns = _BINARY_UDFS[name]
        return self._udf(name, [x], returns)

    _f_to_base64url = _f_from_base64url = _binary_udf

    def _h_ToBase32(self, node: exp.Expr) -> exp.Expr:
        self._binary(node, node.this)
        return self._udf("to_base32", [node.this], "string")

    def _h_FromBase32(self, node: exp.Expr) -> exp.Expr:
        return self._udf("from_base32", [node.this], "binary")

    _f_from_big_endian_32 = _f_from_big_endian_64 = _f_to_big_endian_32 = _f_to_big_endian_64 = _binary_udf
    _f_from_ieee754_32 = _f_from_ieee754_64 = _f_to_ieee754_32 = _f_to_ieee754_64 = _binary_udf

    def _hmac(self, node: exp.Anonymous, args: list) -> exp.Expr:
        value, key = self._arity(node, args, 2)
        self._binary(node, value, key)
        return self._udf(node.name.lower(), [value, key], "binary")

    _f_hmac_md5 = _f_hmac_sha1 = _f_hmac_sha256 = _f_hmac_sha512 = _hmac

    def _f_to_base(self, node: exp.Anonymous, args: list) -> exp.Expr:
        x, radix = self._arity(node, args, 2)
        if self.type_of(x) not in _INTEGRAL or self.type_of(radix) not in _INTEGRAL:
            raise self.refuse("TO_BASE of values that are not integers", node, "to_base")
        return self._udf("to_base", [_sp("CAST(A AS BIGINT)", A=x), _sp("CAST(A AS BIGINT)", A=radix)], "string")

    def _h_FromBase(self, node: exp.Expr) -> exp.Expr:
        text, radix = node.this, node.expression
        if self.type_of(text) != "string" or self.type_of(radix) not in _INTEGRAL:
            raise self.refuse("FROM_BASE of values that are not VARCHAR and an integer", node, "from_base")
        return self._udf("from_base", [text, _sp("CAST(A AS BIGINT)", A=radix)], "bigint")

    def _h_Chr(self, node: exp.Expr) -> exp.Expr:
        # chr(n): code point n (string.md); Spark's chr gives chr(n % 256) and '' for n < 0.
        if len(node.expressions) != 1 or self.type_of(node.expressions[0]) not in _INTEGRAL:
            raise self.refuse("CHR of anything but one integer", node, "chr")
        return self._udf("chr", [_sp("CAST(A AS BIGINT)", A=node.expressions[0])], "string")

    def _f_split_to_multimap(self, node: exp.Anonymous, args: list) -> exp.Expr:
        return self._udf("split_to_multimap", self._arity(node, args, 3), "map<string,array<string>>")

    def _f_luhn_check(self, node: exp.Anonymous, args: list) -> exp.Expr:
        # string.md / Trino's LuhnCheckFunction: '' is false, a non-digit an error (Spark: false).
        s = self._arity(node, args, 1)[0]
        return self._typed(
            _sp(
                "CASE WHEN S RLIKE '[^0-9]' THEN RAISE_ERROR('Input contains non-digit character') "
                "ELSE LUHN_CHECK(S) END",
                S=s,
            ),
            "boolean",
        )

    def _h_Normalize(self, node: exp.Expr) -> exp.Expr:
        form = node.args.get("form")
        name = form.name.upper() if isinstance(form, exp.Var | exp.Column) else "NFC" if not form else ""
        if name not in ("NFC", "NFD", "NFKC", "NFKD"):
            raise self.refuse("NORMALIZE with that form", node, "normalize")
        return self._udf("normalize", [node.this, exp.Literal.string(name)], "string")

    def _h_Localtimestamp(self, node: exp.Expr) -> exp.Expr:
        # localtimestamp -> timestamp(3) in the session zone (UTC): current_timestamp's wall clock.
        if node.this is not None:
            raise self.refuse("LOCALTIMESTAMP with a precision", node, "localtimestamp")
        return self._typed(_sp("DATE_TRUNC('MILLISECOND', CURRENT_TIMESTAMP())"), "timestamp")

    def _h_Shuffle(self, node: exp.Expr) -> exp.Expr:
        return self._typed(exp.Anonymous(this="SHUFFLE", expressions=[node.this]), "array")

    def _f_xxhash64(self, node: exp.Anonymous, args: list) -> exp.Expr:
        x = self._arity(node, args, 1)[0]
        self._binary(node, x)
        return self._udf(node.name.lower(), [x], "binary")

    _f_murmur3 = _f_xxhash64

    def _wilson(self, node: exp.Anonymous, args: list) -> exp.Expr:
        successes, trials, z = self._arity(node, args, 3)
        if not (
            self.type_of(successes) in _INTEGRAL and self.type_of(trials) in _INTEGRAL and _numeric(self.type_of(z))
        ):
            raise self.refuse(f"{node.name.upper()} of values that are not numbers", node, node.name)
        cast = [_sp(f"CAST(A AS {t})", A=a) for a, t in ((successes, "BIGINT"), (trials, "BIGINT"), (z, "DOUBLE"))]
        return self._udf(node.name.lower(), cast, "double")

    _f_wilson_interval_lower = _f_wilson_interval_upper = _wilson

    def _f_bit_count(self, node: exp.Anonymous, args: list) -> exp.Expr:
        x, bits = self._arity(node, args, 2)
        if self.type_of(x) not in _INTEGRAL or self.type_of(bits) not in _INTEGRAL:
            raise self.refuse("BIT_COUNT of values that are not integers", node, "bit_count")
        return self._udf("bit_count", [_sp("CAST(A AS BIGINT)", A=x), _sp("CAST(A AS BIGINT)", A=bits)], "bigint")

    def _shift(self, node: exp.Anonymous, args: list) -> exp.Expr:
        """bitwise_*shift(value, shift) -> the value's type (bitwise.md, Trino's BitwiseFunctions:
        Java shifts on longs, narrower types masked and sign-extended)."""
        value, shift = self._arity(node, args, 2)
        kind = self.type_of(value)
        if kind not in _INTEGRAL or self.type_of(shift) not in ("tinyint", "smallint", "int"):
            raise self.refuse(f"{node.name.upper()} of values whose types Shoal cannot tell", node, node.name)
        how = {"bitwise_left_shift": "left", "bitwise_right_shift": "right"}.get(node.name.lower(), "arithmetic")
        call = self._udf(
            "bitwise_shift",
            [_sp("CAST(A AS BIGINT)", A=value), shift, exp.Literal.string(kind), exp.Literal.string(how)],
            "bigint",
        )
        return self._typed(_sp(f"CAST(A AS {kind.upper()})", A=call), kind)

    _f_bitwise_left_shift = _f_bitwise_right_shift = _f_bitwise_right_shift_arithmetic = _shift

    # -- aggregate.md (issue 44) -------------------------------------------------------------------------
    def _no_window(self, node: exp.Expr) -> None:
        if isinstance(node.parent, exp.Window):
            name = _func_name(node)
            raise self.refuse(f"{name} with OVER", node, name)

    def _h_Skewness(self, node: exp.Expr) -> exp.Expr:
        # Trino: NULL below 3 values, NaN when all are equal (0 / 0); Spark gives NULL for both.
        self._no_window(node)
        self._numbers(node, node.this)
        return self._typed(
            self._aggregate(
                node,
                "CASE WHEN COUNT(X) F < 3 THEN NULL WHEN VAR_POP(X) F = 0 THEN CAST('NaN' AS DOUBLE) "
                "ELSE SKEWNESS(X) F END",
                X=node.this,
            ),
            "double",
        )

    def _h_Kurtosis(self, node: exp.Expr) -> exp.Expr:
        """Trino's excess kurtosis with the sample correction (CentralMomentsAggregation):
        (n-1)n(n+1)/((n-2)(n-3)) m4/m2^2 - 3(n-1)^2/((n-2)(n-3)) from Spark's n m4/m2^2 - 3."""
        self._no_window(node)
        self._numbers(node, node.this)
        return self._typed(
            self._aggregate(
                node,
                "CASE WHEN COUNT(X) F < 4 THEN NULL WHEN VAR_POP(X) F = 0 THEN CAST('NaN' AS DOUBLE) ELSE "
                "(COUNT(X) F - 1) * (COUNT(X) F + 1) / ((COUNT(X) F - 2) * (COUNT(X) F - 3)) * (KURTOSIS(X) F + 3) "
                "- 3 * (COUNT(X) F - 1) * (COUNT(X) F - 1) / ((COUNT(X) F - 2) * (COUNT(X) F - 3)) END",
                X=node.this,
            ),
            "double",
        )

    def _regr(self, node: exp.Expr) -> exp.Expr:
        # regr_slope/regr_intercept(y, x) over the rows where both are non-null: Spark's agree.
        self._numbers(node, node.this, node.expression)
        return self._typed(node, "double")

    _h_RegrSlope = _h_RegrIntercept = _regr

    def _f_histogram(self, node: exp.Anonymous, args: list) -> exp.Expr:
        """histogram(x) -> map(K, bigint) (aggregate.md): each non-null value's count; NULL for no
        values. One pass over the distinct values per value: meant for few distinct values."""
        x = self._arity(node, args, 1)[0]
        self._no_window(node)
        return self._typed(
            self._aggregate(
                node,
                "CASE WHEN COUNT(X) F = 0 THEN NULL ELSE MAP_FROM_ARRAYS(ARRAY_DISTINCT(COLLECT_LIST(X) F), "
                "TRANSFORM(ARRAY_DISTINCT(COLLECT_LIST(X) F), shoal_k -> CAST(SIZE(FILTER(COLLECT_LIST(X) F, "
                "shoal_e -> shoal_e = shoal_k)) AS BIGINT))) END",
                X=x,
            ),
            "map",
        )

    def _f_map_union(self, node: exp.Anonymous, args: list) -> exp.Expr:
        """map_union(m) (aggregate.md): the union of the maps; a key in several takes its value
        from one of them (Trino: an arbitrary one; here the first met)."""
        m = self._arity(node, args, 1)[0]
        self._no_window(node)
        entries = "FLATTEN(COLLECT_LIST(MAP_ENTRIES(M)) F)"
        return self._typed(
            self._aggregate(
                node,
                f"CASE WHEN COUNT(M) F = 0 THEN NULL ELSE MAP_FROM_ARRAYS(ARRAY_DISTINCT(TRANSFORM({entries}, "
                f"shoal_e -> shoal_e.key)), TRANSFORM(ARRAY_DISTINCT(TRANSFORM({entries}, shoal_e -> shoal_e.key)), "
                f"shoal_k -> ELEMENT_AT(FILTER({entries}, shoal_e -> shoal_e.key = shoal_k), 1).value)) END",
                M=m,
            ),
            "map",
        )

    def _bitwise_agg(self, node: exp.Expr) -> exp.Expr:
        # bitwise_and_agg/bitwise_or_agg(x) -> bigint (aggregate.md); NULLs left out, NULL for none.
        self._no_window(node)
        if self.type_of(node.this) not in _INTEGRAL:
            raise self.refuse(f"{_func_name(node)} of a value that is not an integer", node, _func_name(node))
        fn = "BIT_AND" if isinstance(node, exp.BitwiseAndAgg) else "BIT_OR"
        return self._typed(_sp(f"CAST({fn}(CAST(X AS BIGINT)) AS BIGINT)", X=node.this), "bigint")

    _h_BitwiseAndAgg = _h_BitwiseOrAgg = _bitwise_agg

    # -- array.md (issue 44) --------------------------------------------------------------------------------
    def _h_ArrayFirst(self, node: exp.Expr) -> exp.Expr:
        # array_first/array_last: NULL for an empty array, where a subscript fails.
        if node.args.get("expression") is not None:
            raise self.refuse("ARRAY_FIRST with a function", node, "array_first")
        return _sp("TRY_ELEMENT_AT(A, 1)", A=node.this)

    def _h_ArrayLast(self, node: exp.Expr) -> exp.Expr:
        return _sp("TRY_ELEMENT_AT(A, -1)", A=node.this)

    def _f_array_histogram(self, node: exp.Anonymous, args: list) -> exp.Expr:
        # array_histogram(x) -> map(K, bigint): each non-null element's count; {} for none (array.md).
        a = self._arity(node, args, 1)[0]
        return self._typed(
            _sp(
                "MAP_FROM_ARRAYS(ARRAY_DISTINCT(FILTER(A, shoal_e -> shoal_e IS NOT NULL)), TRANSFORM("
                "ARRAY_DISTINCT(FILTER(A, shoal_e -> shoal_e IS NOT NULL)), shoal_k -> "
                "CAST(SIZE(FILTER(A, shoal_e -> shoal_e = shoal_k)) AS BIGINT)))",
                A=a,
            ),
            "map",
        )

    def _f_trim_array(self, node: exp.Anonymous, args: list) -> exp.Expr:
        a, n = self._arity(node, args, 2)
        return self._typed(
            _sp(
                "CASE WHEN N < 0 OR N > SIZE(A) THEN RAISE_ERROR(CONCAT('size must not exceed array cardinality ', "
                "CAST(SIZE(A) AS STRING), ': ', CAST(N AS STRING))) ELSE SLICE(A, 1, SIZE(A) - N) END",
                A=a,
                N=n,
            ),
            "array",
        )

    def _f_ngrams(self, node: exp.Anonymous, args: list) -> exp.Expr:
        # ngrams(array, n): the runs of n adjacent elements in order; a shorter array is its one n-gram.
        a, n = self._arity(node, args, 2)
        return self._typed(
            _sp(
                "CASE WHEN N <= 0 THEN RAISE_ERROR(CONCAT('N must be positive: ', CAST(N AS STRING))) "
                "ELSE TRANSFORM(SEQUENCE(1, GREATEST(SIZE(A) - N + 1, 1)), shoal_i -> SLICE(A, shoal_i, N)) END",
                A=a,
                N=n,
            ),
            "array",
        )

    def _f_combinations(self, node: exp.Anonymous, args: list) -> exp.Expr:
        # combinations(array, n): Trino's order (see athena_udfs.combination_indexes).
        a, n = self._arity(node, args, 2)
        indexes = self._udf(
            "combination_indexes", [_sp("SIZE(A)", A=a), _sp("CAST(N AS INT)", N=n)], "array<array<int>>"
        )
        return self._typed(
            _sp("TRANSFORM(I, shoal_c -> TRANSFORM(shoal_c, shoal_i -> A[shoal_i]))", I=indexes, A=a), "array"
        )

    # -- math.md (geometric), array.md, conversion.md, aggregate.md: issue 44's last functions --------
    def _f_cosine_similarity(self, node: exp.Anonymous, args: list) -> exp.Expr:
        return self._typed(self._cosine(node, self._arity(node, args, 2), "COSINE_SIMILARITY"), "double")

    def _h_CosineDistance(self, node: exp.Expr) -> exp.Expr:
        # Trino's cosineDistance is 1.0 - cosineSimilarity, the same double operation.
        similarity = self._cosine(node, [node.this, node.expression], "COSINE_DISTANCE")
        return self._typed(_sp("1.0D - C", C=similarity), "double")

    def _cosine(self, node: exp.Expr, args: list, what: str) -> exp.Expr:
        """ArrayVectorFunctions.cosineSimilarity: the three sums in element order (AGGREGATE folds
        left, as Trino's loop does), then dot / sqrt(|a|^2 * |b|^2), so the doubles are Trino's."""
        if all(self._sparse_vector(a) for a in args):
            return self._sparse_cosine(node, args, what)
        if not all(self._numeric_array(a) for a in args):
            raise self.refuse(f"{what} of anything but numeric arrays or MAP(...)s of numbers", node, what.lower())
        return _sp(
            "CASE WHEN A IS NULL OR B IS NULL THEN NULL "
            "WHEN SIZE(A) <> SIZE(B) THEN RAISE_ERROR('The arguments must have the same length') "
            "WHEN EXISTS(A, shoal_v -> shoal_v IS NULL) OR EXISTS(B, shoal_v -> shoal_v IS NULL) "
            f"THEN RAISE_ERROR('not supported in Shoal: {what} of an array with NULL elements') "
            "ELSE AGGREGATE(ZIP_WITH(CAST(A AS ARRAY<DOUBLE>), CAST(B AS ARRAY<DOUBLE>), "
            "(shoal_x, shoal_y) -> NAMED_STRUCT('x', shoal_x, 'y', shoal_y)), "
            "NAMED_STRUCT('a', 0.0D, 'b', 0.0D, 'd', 0.0D), "
            "(shoal_s, shoal_e) -> NAMED_STRUCT('a', shoal_s.a + shoal_e.x * shoal_e.x, "
            "'b', shoal_s.b + shoal_e.y * shoal_e.y, 'd', shoal_s.d + shoal_e.x * shoal_e.y), "
            "shoal_s -> CASE WHEN shoal_s.a = 0 OR shoal_s.b = 0 THEN RAISE_ERROR('Vector magnitude cannot be zero') "
            # Spark's x / 0.0 is NULL where Java's is infinite: a product that underflows is refused
            "WHEN SQRT(shoal_s.a * shoal_s.b) = 0 "
            f"THEN RAISE_ERROR('not supported in Shoal: {what} of vectors this small') "
            "ELSE shoal_s.d / SQRT(shoal_s.a * shoal_s.b) END) END",
            A=args[0],
            B=args[1],
        )

    def _sparse_cosine(self, node: exp.Expr, args: list, what: str) -> exp.Expr:
        """MathFunctions.cosineSimilarity(map(varchar, double)): NULL for a NULL value; each norm
        the root of its squares summed in entry order; the dot product over the first map's
        entries whose keys the second has; dot / (norm1 * norm2). A zero product is refused
        (0/0: NaN in older Trino, an error in newer; Spark's division would give NULL)."""
        return _sp(
            "CASE WHEN A IS NULL OR B IS NULL OR EXISTS(MAP_VALUES(A), shoal_v -> shoal_v IS NULL) "
            "OR EXISTS(MAP_VALUES(B), shoal_v -> shoal_v IS NULL) THEN NULL "
            "WHEN N * M = 0 "
            f"THEN RAISE_ERROR('not supported in Shoal: {what} of a zero (or vanishingly small) vector') "
            "ELSE AGGREGATE(MAP_ENTRIES(X), 0.0D, (shoal_s, shoal_e) -> CASE WHEN MAP_CONTAINS_KEY(Y, shoal_e.key) "
            "THEN shoal_s + shoal_e.value * ELEMENT_AT(Y, shoal_e.key) ELSE shoal_s END) / (N * M) END",
            A=args[0],
            B=args[1],
            X=_sp("CAST(A AS MAP<STRING, DOUBLE>)", A=args[0]),
            Y=_sp("CAST(A AS MAP<STRING, DOUBLE>)", A=args[1]),
            N=_sp(
                "SQRT(AGGREGATE(MAP_VALUES(CAST(A AS MAP<STRING, DOUBLE>)), 0.0D, (shoal_s, shoal_v) -> shoal_s + shoal_v * shoal_v))",
                A=args[0],
            ),
            M=_sp(
                "SQRT(AGGREGATE(MAP_VALUES(CAST(A AS MAP<STRING, DOUBLE>)), 0.0D, (shoal_s, shoal_v) -> shoal_s + shoal_v * shoal_v))",
                A=args[1],
            ),
        )

    def _sparse_vector(self, node: exp.Expr) -> bool:
        """A MAP(keys, values) of text keys and numbers, or a map<string, number> column: maps whose
        entries keep the order they were written in, in Trino as in Spark (the sums' order)."""
        if isinstance(node, exp.Map) and isinstance(node.args.get("keys"), exp.Array):
            keys, values = node.args["keys"].expressions, node.args["values"]
            return (
                isinstance(values, exp.Array)
                and all(self.type_of(k) == "string" for k in keys)
                and all(_numeric(self.type_of(v)) for v in values.expressions)
            )
        t = self.type_of(node) or ""
        return t.startswith("map<string,") and _numeric(t[11:-1])

    def _numeric_array(self, array: exp.Expr) -> bool:
        if isinstance(array, exp.Array):
            return bool(array.expressions) and all(_numeric(self.type_of(e)) for e in array.expressions)
        t = self.type_of(array) or ""
        return t.startswith("array<") and _numeric(t[6:-1])

    def _f_contains_sequence(self, node: exp.Anonymous, args: list) -> exp.Expr:
        # ArrayContainsSequence: some position where every element of B is IDENTICAL (NULLs equal) to A's.
        a, b = self._arity(node, args, 2)
        types = {self._element_type(a), self._element_type(b)} - {None}
        if len(types) > 1 and not all(_numeric(t) for t in types):
            # Trino finds no common type (text and numbers); Spark's <=> would cast one to the other
            raise self.refuse("CONTAINS_SEQUENCE of arrays of different types", node, "contains_sequence")
        return self._typed(
            _sp(
                "CASE WHEN A IS NULL OR B IS NULL THEN NULL WHEN SIZE(B) = 0 THEN TRUE "
                "WHEN SIZE(B) > SIZE(A) THEN FALSE "
                "ELSE EXISTS(SEQUENCE(1, SIZE(A) - SIZE(B) + 1), shoal_i -> "
                "FORALL(SEQUENCE(1, SIZE(B)), shoal_j -> ELEMENT_AT(A, shoal_i + shoal_j - 1) <=> ELEMENT_AT(B, shoal_j))) END",
                A=a,
                B=b,
            ),
            "boolean",
        )

    def _f_parse_data_size(self, node: exp.Anonymous, args: list) -> exp.Expr:
        (text,) = self._arity(node, args, 1)
        return self._udf("parse_data_size", [text], "decimal(38,0)")

    def _f_multimap_agg(self, node: exp.Anonymous, args: list) -> exp.Expr:
        # aggregate.md: each key's values (NULLs kept) in the order the rows come; no rows: NULL.
        if isinstance(node.parent, exp.Window) or len(args) != 2:
            raise self.refuse("MULTIMAP_AGG with OVER", node, "multimap_agg")
        return self._typed(
            self._aggregate(
                node,
                "CASE WHEN COUNT(1) F = 0 THEN NULL "
                "WHEN COUNT(1) F > COUNT(K) F THEN RAISE_ERROR('not supported in Shoal: MULTIMAP_AGG with a NULL key') "
                "ELSE MAP_FROM_ENTRIES(TRANSFORM(ARRAY_DISTINCT(TRANSFORM(COLLECT_LIST(NAMED_STRUCT('k', K, 'v', V)) F, "
                "shoal_e -> shoal_e.k)), shoal_k -> NAMED_STRUCT('k', shoal_k, 'v', TRANSFORM(FILTER("
                "COLLECT_LIST(NAMED_STRUCT('k', K, 'v', V)) F, shoal_e -> shoal_e.k <=> shoal_k), shoal_e -> shoal_e.v)))) END",
                K=args[0],
                V=args[1],
            ),
            "map",
        )

    def _h_Soundex(self, node: exp.Expr) -> exp.Expr:
        """string.md soundex: Trino's American Soundex skips every non-letter (Spark's keeps text
        that does not start with a letter and lets a non-letter separate equal codes), so Spark's
        runs on the letters alone; with those, both code H and W alike. Non-ASCII text (letters
        Trino upper-cases to others, or rejects) is refused when met."""
        if self.type_of(node.this) not in ("string", None) and not isinstance(node.this, exp.Null):
            raise self.refuse("SOUNDEX of a value that is not text", node, "soundex")  # Trino: no such function
        return self._typed(
            _sp(
                "CASE WHEN S RLIKE '[^\\\\x00-\\\\x7F]' "
                "THEN RAISE_ERROR('not supported in Shoal: SOUNDEX of text beyond ASCII') "
                "ELSE SOUNDEX(REGEXP_REPLACE(S, '[^A-Za-z]', '')) END",
                S=node.this,
            ),
            "string",
        )

    def _h_Uuid(self, node: exp.Expr) -> exp.Expr:
        # uuid.md: a random version 4 UUID; Spark's uuid() is one too, shown as text.
        return self._typed(exp.Anonymous(this="UUID", expressions=[]), "string")


# The translated calls whose value is Trino's JSON type (json_extract_scalar's is a VARCHAR).
_JSON_VALUED = {"ATHENA_JSON_PARSE", "ATHENA_JSON_EXTRACT", "ATHENA_JSON_ARRAY_GET"}
_JSON_SCALARS = {
    exp.DataType.Type.TINYINT: "tinyint", exp.DataType.Type.SMALLINT: "smallint", exp.DataType.Type.INT: "integer",
    exp.DataType.Type.BIGINT: "bigint", exp.DataType.Type.DOUBLE: "double", exp.DataType.Type.BOOLEAN: "boolean",
    exp.DataType.Type.VARCHAR: "varchar", exp.DataType.Type.TEXT: "varchar",
}  # fmt: skip


def _json_target(to: exp.DataType) -> Any:
    """The cast's target as athena_udfs.json_cast reads it; None where Shoal does not convert."""
    params = to.expressions
    if to.this in _JSON_SCALARS and (not params or to.this not in (exp.DataType.Type.VARCHAR,)):
        return _JSON_SCALARS[to.this]
    if to.this == exp.DataType.Type.ARRAY and len(params) == 1:
        inner = _json_target(params[0])
        return None if inner is None else ["array", inner]
    if to.this == exp.DataType.Type.MAP and len(params) == 2 and _json_target(params[0]) == "varchar":
        value = _json_target(params[1])
        return None if value is None else ["map", "varchar", value]
    if to.this == exp.DataType.Type.STRUCT and params and all(isinstance(p, exp.ColumnDef) for p in params):
        # Trino's field names are lower case; Spark's from_json matches them as written.
        fields = [[p.name, _json_target(p.args["kind"])] for p in params]
        return None if any(t is None or n != n.lower() for n, t in fields) else ["row", fields]
    return None


_LOCAL_PART = r"^\s*(\d{4}-\d{2}-\d{2}(?:[T ]\d{1,2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)?)?)"
# ISO text with a time of day, then an optional zone (Z, UTC, +hh:mm, GMT-08:30, Area/City).
_ZONED_TEXT = re.compile(
    r"(?P<local>\d{4}-\d{2}-\d{2}(?:[T ]\d{1,2}:\d{2}(?::\d{2}(?:[.,]\d{1,9})?)?)?)\s*"
    r"(?P<zone>(?:Z|UTC|GMT|UT)?\s*(?:[+-]\d{1,2}(?::?\d{2})?)?|[A-Za-z_]+(?:/[A-Za-z_+-]+)+)"
)


def _is_utc(zone: str) -> bool:
    z = re.sub(r"^(Z|UTC|GMT|UT)", "", zone.replace(" ", ""))
    return re.fullmatch(r"([+-]0{1,2}(:?00)?)?", z) is not None


def _precision(to: exp.DataType, default: int) -> int:
    params = to.expressions
    if not params:
        return default
    value = params[0].this if isinstance(params[0], exp.DataTypeParam) else params[0]
    return int(value.name if isinstance(value, exp.Expr) else value)


def _fraction_digits(text: str) -> int | None:
    m = re.search(r"\d:\d{2}:\d{2}[.,](\d+)", text)
    return len(m.group(1)) if m else (0 if re.search(r"\d:\d{2}", text) else None)


def _zoned_use(node: exp.Expr) -> str | None:
    """How the parent reads a TIMESTAMP WITH TIME ZONE: its "wall clock" (fields, formatting,
    CAST to DATE/TIMESTAMP), its "instant" (to_unixtime, AT TIME ZONE, comparisons), or None."""
    parent = node.parent
    while isinstance(parent, exp.Paren):
        parent = parent.parent
    if isinstance(parent, _WALL_CLOCK_READERS) or (
        isinstance(parent, exp.Cast) and parent.to.this in (exp.DataType.Type.DATE, exp.DataType.Type.TIMESTAMP)
    ):
        return "wall clock"
    if isinstance(parent, exp.Anonymous) and parent.name.upper() in {"DATE_FORMAT", "FORMAT_DATETIME"}:
        return "wall clock"
    if isinstance(parent, exp.TimeToUnix | exp.AtTimeZone | exp.Predicate):
        return "instant"
    return None


_WALL_CLOCK_READERS = (
    exp.Year, exp.Quarter, exp.Month, exp.Day, exp.DayOfMonth, exp.Hour, exp.Minute, exp.Second,
    exp.DayOfWeekIso, exp.DayOfYear, exp.WeekOfYear,
)  # fmt: skip

# Whole months from S to E (E >= S), Joda's way: a day of month past the end of E's month counts
# as E's last day.
_MONTHS = (
    "TIMESTAMPDIFF(MONTH, CASE WHEN DAY(E) = DAY(LAST_DAY(E)) AND DAY(S) > DAY(E) "
    "THEN TIMESTAMPADD(DAY, DAY(E) - DAY(S), S) ELSE S END, E)"
)


def _func_name(node: exp.Expr) -> str:
    if isinstance(node, exp.Anonymous):
        return node.name.upper()
    return node.sql_name() if hasattr(node, "sql_name") else type(node).__name__.upper()


def _flush(parts: list[exp.Expr], pattern: str, value: exp.Expr) -> list[exp.Expr]:
    if pattern:
        parts = [
            *parts,
            exp.Anonymous(this="DATE_FORMAT", expressions=[value.copy(), exp.Literal.string(_render(pattern))]),
        ]
    return parts


def _iso_year(value: exp.Expr) -> exp.Expr:
    """The ISO week-numbering year: the year of the Thursday in the value's week."""
    return _sp("YEAR(DATE_ADD(CAST(A AS DATE), 3 - WEEKDAY(A)))", A=value)


def _sp(template: str, **nodes: exp.Expr) -> exp.Expr:
    """A Spark expression from `template`, its one-letter upper-case names replaced by nodes."""
    import sqlglot

    tree = sqlglot.parse_one(template, read="spark")
    for column in list(tree.find_all(exp.Column)):
        if not column.table and column.name in nodes and not column.this.quoted:
            column.replace(nodes[column.name].copy())
    return tree


# ---- JSON paths and values as Athena reads and prints them ---------------------------------------
_PATH_TOKEN = re.compile(
    r"""\.([A-Za-z_][A-Za-z0-9_]*)|\[(\d+)\]|\[\s*"((?:[^"\\]|\\.)*)"\s*\]|\[\s*'((?:[^'\\]|\\.)*)'\s*\]"""
)


def parse_json_path(path: str) -> list[str | int]:
    """The steps of an Athena JSON path ($.a.b[0]["c"]); ValueError for what Athena rejects."""
    if not path.startswith("$"):
        raise ValueError("a JSON path starts with $")
    steps: list[str | int] = []
    i = 1
    while i < len(path):
        m = _PATH_TOKEN.match(path, i)
        if not m:
            raise ValueError(f"invalid JSON path at {path[i:]!r}")
        name, index, dq, sq = m.groups()
        steps.append(int(index) if index is not None else (name or dq or sq or ""))
        i = m.end()
    return steps


def _dump(value: Any) -> str:
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, decimal.Decimal | int):
        return str(value)
    if isinstance(value, list):
        return "[" + ",".join(_dump(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ",".join(f"{json.dumps(k, ensure_ascii=False)}:{_dump(v)}" for k, v in value.items()) + "}"
    return json.dumps(value)


_MISSING = object()


def _load(text: str | None) -> Any:
    if text is None:
        return _MISSING
    return json.loads(text, parse_float=decimal.Decimal)


def _walk(text: str | None, path: str | None) -> Any:
    if text is None or path is None:
        return _MISSING
    try:
        value = _load(text)
    except ValueError:
        return _MISSING  # Athena's json_extract gives NULL for invalid JSON text
    for step in parse_json_path(path):
        if isinstance(step, int) and isinstance(value, list) and step < len(value):
            value = value[step]
        elif isinstance(step, str) and isinstance(value, dict) and step in value:
            value = value.get(step)
        else:
            return _MISSING
    return value


def json_extract(text: str | None, path: str | None) -> str | None:
    value = _walk(text, path)
    return None if value is _MISSING else _dump(value)


def json_extract_scalar(text: str | None, path: str | None) -> str | None:
    value = _walk(text, path)
    if value is _MISSING or value is None or isinstance(value, list | dict):
        return None
    return value if isinstance(value, str) else _dump(value)


def json_size(text: str | None, path: str | None) -> int | None:
    value = _walk(text, path)
    if value is _MISSING:
        return None
    return len(value) if isinstance(value, list | dict) else 0


def json_array_length(text: str | None) -> int | None:
    value = _walk(text, "$")
    return len(value) if isinstance(value, list) else None


def json_array_get(text: str | None, index: int | None) -> str | None:
    value = _walk(text, "$")
    if not isinstance(value, list) or index is None or not -len(value) <= index < len(value):
        return None
    return _dump(value[index])


def json_array_contains(text: str | None, wrapped: str | None) -> bool | None:
    value = _walk(text, "$")
    if not isinstance(value, list) or wrapped is None:
        return None
    needle = _load(wrapped)[0]
    return any(type(v) is type(needle) and v == needle for v in value) or any(
        isinstance(v, decimal.Decimal | int)
        and isinstance(needle, decimal.Decimal | int | float)
        and v == needle
        and not isinstance(v, bool)
        for v in value
    )


def is_json_scalar(text: str | None) -> bool | None:
    if text is None:
        return None
    value = _load(text)  # invalid JSON: an error, as in Athena
    return not isinstance(value, list | dict)


def json_parse(text: str | None) -> str | None:
    if text is None:
        return None
    try:
        return _dump(_load(text))
    except ValueError as exc:
        raise ValueError(f"Cannot convert value to JSON: {text[:80]!r}") from exc


_UDFS: dict[str, tuple[Callable[..., Any], str]] = {
    "athena_json_extract": (json_extract, "string"),
    "athena_json_extract_scalar": (json_extract_scalar, "string"),
    "athena_json_size": (json_size, "bigint"),
    "athena_json_array_length": (json_array_length, "bigint"),
    "athena_json_array_get": (json_array_get, "string"),
    "athena_json_array_contains": (json_array_contains, "boolean"),
    "athena_is_json_scalar": (is_json_scalar, "boolean"),
    "athena_json_parse": (json_parse, "string"),
    "athena_hamming_distance": (udfs.hamming_distance, "bigint"),
    "athena_strpos_instance": (udfs.strpos_instance, "bigint"),
    "athena_truncate_double": (udfs.truncate_double, "double"),
    "athena_json_cast": (udfs.json_cast, "string"),
    "athena_format_number": (udfs.format_number, "string"),
    "athena_url_encode": (udfs.url_encode, "string"),
    "athena_url_decode": (udfs.url_decode, "string"),
    "athena_url_extract_parameter": (udfs.url_extract_parameter, "string"),
    **{f"athena_{name}": (getattr(udfs, name), returns) for name, returns in _BINARY_UDFS.items()},
    "athena_chr": (udfs.chr_, "string"),
    **{
        f"athena_{name}": (getattr(udfs, name), returns)
        for name, returns in {
            "to_base64": "string",
            "from_base64": "binary",
            "from_hex": "binary",
            "from_utf8": "string",
            "hmac_md5": "binary",
            "hmac_sha1": "binary",
            "hmac_sha256": "binary",
            "hmac_sha512": "binary",
            "to_base": "string",
            "from_base": "bigint",
            "combination_indexes": "array<array<int>>",
            "split_to_map": "map<string,string>",
            "split_to_multimap": "map<string,array<string>>",
            "xxhash64": "binary",
            "murmur3": "binary",
            "wilson_interval_lower": "double",
            "wilson_interval_upper": "double",
            "normalize": "string",
            "bit_count": "bigint",
            "bitwise_shift": "bigint",
            "parse_data_size": "decimal(38,0)",
        }.items()
    },  # fmt: skip
    **{
        f"athena_url_extract_{p}": (getattr(udfs, f"url_extract_{p}"), "bigint" if p == "port" else "string")
        for p in ("protocol", "host", "port", "path", "query", "fragment")
    },
}

# ---- the session Athena SQL runs in --------------------------------------------------------------
_ready: set[int] = set()
_ready_lock = threading.Lock()


def athena_session(spark: SparkSession) -> SparkSession:
    """`spark`, with Athena's JSON functions registered (once per session).

    The same session, not a new one: a second session would open the Iceberg catalog a second
    time, and two JDBC catalogs on one SQLite file conflict (SQLITE_BUSY_SNAPSHOT). Athena's
    errors (bad casts, overflow, subscripts) are written into the translated SQL instead of
    relying on `spark.sql.ansi.enabled`."""
    with _ready_lock:
        if id(spark) not in _ready:
            for name, (fn, returns) in _UDFS.items():
                spark.udf.register(name, fn, returns)
            _ready.add(id(spark))
    return spark
