"""Partition specs (`--partition-by`, Athena's `PARTITIONED BY` for Iceberg tables), parsed
with sqlglot and re-rendered as Spark's Iceberg DDL with quoted identifiers."""

from __future__ import annotations

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError

from shoal.exceptions import ShoalError

_TIME_TRANSFORMS = {"years", "months", "days", "hours", "year", "month", "day", "hour"}
_WIDTH_TRANSFORMS = {"bucket", "truncate"}


def quote(name: str) -> str:
    """Spark SQL identifier quoting; names come from files and users, so never trust them."""
    return "`" + name.replace("`", "``") + "`"


def _bad(spec: str, why: str) -> ShoalError:
    return ShoalError(
        f"invalid partition spec {spec!r}: {why}",
        hint='use columns and Iceberg transforms, e.g. "category, bucket(16, product_id), days(updated_at)"',
    )


def partition_sql(spec: str, columns: list[str]) -> str:
    """Validate `spec` against the table's columns and return it as Spark SQL."""
    try:
        statements = sqlglot.parse(f"SELECT {spec}", read="spark")
    except ParseError as exc:
        raise _bad(spec, "not a list of columns and transforms") from exc
    parsed = statements[0] if len(statements) == 1 else None
    if not isinstance(parsed, exp.Select) or {k for k, v in parsed.args.items() if v} != {"expressions"}:
        raise _bad(spec, "not a list of columns and transforms")
    lookup = {c.lower(): c for c in columns}
    rendered = []
    for item in parsed.expressions:
        if isinstance(item, exp.Column) and not item.table:
            rendered.append(quote(_column(spec, item.name, lookup)))
            continue
        if isinstance(item, exp.Trunc):
            name, args = "truncate", [item.this, item.args.get("decimals")]
        elif isinstance(item, exp.Year | exp.Month | exp.Day | exp.Hour):  # Athena: day(ts)
            name, args = type(item).__name__.lower(), [item.this]
        elif isinstance(item, exp.Anonymous):
            name, args = item.name.lower(), list(item.expressions)
        elif isinstance(item, exp.Func):
            raise _bad(spec, f"unknown transform {item.sql()!r}")
        else:
            raise _bad(spec, f"unsupported expression {item.sql()!r}")
        cols = [a for a in args if isinstance(a, exp.Column)]
        ints = [a for a in args if isinstance(a, exp.Literal) and a.is_int]
        if len(cols) != 1 or len(cols) + len(ints) != len(args):
            raise _bad(spec, f"{item.sql()!r} must name exactly one column")
        col = quote(_column(spec, cols[0].name, lookup))
        if name in _WIDTH_TRANSFORMS and len(ints) == 1 and int(ints[0].this) > 0:
            rendered.append(f"{name}({int(ints[0].this)}, {col})")
        elif name in _TIME_TRANSFORMS and not ints:
            rendered.append(f"{name if name.endswith('s') else name + 's'}({col})")
        elif name == "identity" and not ints:
            rendered.append(col)
        else:
            raise _bad(spec, f"unknown transform {item.sql()!r}")
    if not rendered:
        raise _bad(spec, "empty")
    return ", ".join(rendered)


def _column(spec: str, name: str, lookup: dict[str, str]) -> str:
    try:
        return lookup[name.lower()]
    except KeyError:
        raise _bad(spec, f"column {name!r} is not in the data (columns: {', '.join(lookup.values())})") from None
