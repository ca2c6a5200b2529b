"""What clients see, as PostgreSQL shows it, without Spark: result column names, type I/O
function names, numeric in binary, COPY's text and CSV lines (issue 42)."""

from __future__ import annotations

from types import SimpleNamespace

import sqlglot

from shoal.bi import pgcatalog
from shoal.bi.pgsql import PgSession


def _session() -> PgSession:
    principal = SimpleNamespace(name="ann", is_admin=False)
    return PgSession(principal, pid=7, server_version="15.0 (Shoal)", startup={},
                     snapshot=lambda: pgcatalog.Snapshot([], ["public"]))  # fmt: skip


def test_result_columns_are_named_as_postgresql_names_them() -> None:
    spark_sql = _session().translate(
        "SELECT count(*), max(id), sum(x), avg(x)::numeric(10,2), id, t.id, id + 1, lower(n) AS l, 'a'::text,"
        " '1'::integer, CASE WHEN id > 1 THEN 1 END, (SELECT max(y) FROM u), coalesce(id, 0),"
        " date_trunc('month', d) FROM t"
    )
    names = [e.alias_or_name for e in sqlglot.parse_one(spark_sql, read="spark").expressions]
    assert names == ["count", "max", "sum", "avg", "id", "id", "?column?", "l", "text", "int4", "case", "max",
                     "coalesce", "date_trunc"]  # fmt: skip
    # Only the result's own columns: an INSERT's SELECT and a * are left as they are.
    assert "AS" not in _session().translate("INSERT INTO t SELECT max(x) FROM u").upper()
    assert _session().translate("SELECT * FROM t") == "SELECT * FROM t"


def test_numeric_typmod() -> None:
    from shoal.bi.pg.codec import pg_typmod

    assert pg_typmod("decimal(12,2)") == (12 << 16 | 2) + 4
    assert pg_typmod("decimal(38,0)") == (38 << 16) + 4
    assert pg_typmod("int") == pg_typmod("string") == -1
    assert pgcatalog.format_type(pgcatalog.NUMERIC, pg_typmod("decimal(12,2)")) == "numeric(12,2)"


def test_type_io_function_names_are_postgresql_s() -> None:
    answer = _session().answer(
        "SELECT typname, typinput, typoutput, typreceive, typsend FROM pg_catalog.pg_type"
        " WHERE typname IN ('timestamptz', 'timestamp', 'date', 'numeric', 'int4', 'text', 'uuid', '_int4', 'any')"
        " ORDER BY typname"
    )
    assert answer is not None
    assert answer[2] == [  # as PostgreSQL 15's pg_type has them
        ("_int4", "array_in", "array_out", "array_recv", "array_send"),
        ("any", "any_in", "any_out", "-", "-"),
        ("date", "date_in", "date_out", "date_recv", "date_send"),
        ("int4", "int4in", "int4out", "int4recv", "int4send"),
        ("numeric", "numeric_in", "numeric_out", "numeric_recv", "numeric_send"),
        ("text", "textin", "textout", "textrecv", "textsend"),
        ("timestamp", "timestamp_in", "timestamp_out", "timestamp_recv", "timestamp_send"),
        ("timestamptz", "timestamptz_in", "timestamptz_out", "timestamptz_recv", "timestamptz_send"),
        ("uuid", "uuid_in", "uuid_out", "uuid_recv", "uuid_send"),
    ]


def test_numeric_in_binary_as_postgresql_sends_it() -> None:
    import decimal
    import struct

    from shoal.bi.pg.codec import NUMERIC, _numeric_from_binary, binary_value

    def parts(text: str) -> tuple:
        data = binary_value(decimal.Decimal(text), NUMERIC)
        n = struct.unpack("!h", data[:2])[0]
        return struct.unpack(f"!hhHH{n}H", data)

    # (ndigits, weight, sign, dscale, base-10000 digits...), as numeric_send writes them.
    assert parts("12.34") == (2, 0, 0, 2, 12, 3400)
    assert parts("-12345678.9") == (3, 1, 0x4000, 1, 1234, 5678, 9000)
    assert parts("0.001") == (1, -1, 0, 3, 10)
    assert parts("10000") == (1, 1, 0, 0, 1)
    assert parts("0.00") == (0, 0, 0, 2)
    assert parts("NaN") == (0, 0, 0xC000, 0)
    for text in ("12.34", "-0.000123", "98765432109876543210.0123456789", "1E+5", "7", "-0.5"):
        value = decimal.Decimal(text)
        assert _numeric_from_binary(binary_value(value, NUMERIC)) == value, text
