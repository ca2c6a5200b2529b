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


def test_copy_statements_are_read_as_postgresql_writes_them() -> None:
    import pytest

    from shoal.bi.pg.codec import PgError
    from shoal.bi.pgsql import copy_spec

    psql = copy_spec("COPY ( SELECT a, (b) FROM t ) TO STDOUT with csv header")  # what psql's \copy sends
    assert (psql.query, psql.format, psql.header, psql.delimiter, psql.null) == (
        "SELECT a, (b) FROM t",
        "csv",
        True,
        ",",
        "",
    )
    new = copy_spec("COPY (SELECT 1) TO STDOUT (FORMAT csv, HEADER true, DELIMITER ';', FORCE_QUOTE (a, b))")
    assert (new.delimiter, new.force_quote) == (";", {"a", "b"})
    text = copy_spec("COPY hr.t (a, b) TO STDOUT")
    assert (text.query, text.format, text.delimiter, text.null) == ("SELECT a, b FROM hr.t", "text", "\t", "\\N")
    assert copy_spec("COPY (SELECT 1) TO STDOUT (FORMAT binary)").format == "binary"
    for bad, code in (("COPY t FROM STDIN", "0A000"), ("COPY t TO '/etc/passwd'", "0A000"),
                      ("COPY (SELECT 1) TO STDOUT (FORMAT xml)", "22023"), ("COPY (SELECT 1) TO STDOUT (FREEZE)", "0A000")):  # fmt: skip
        with pytest.raises(PgError) as err:
            copy_spec(bad)
        assert err.value.code == code, bad


def test_copy_lines_in_text_and_csv() -> None:
    import datetime as dt
    import decimal

    from shoal.bi.pg import codec
    from shoal.bi.pgsql import copy_spec

    oids = [codec.INT4, codec.TEXT, codec.NUMERIC, codec.DATE, codec.TEXT]
    row = (7, 'a\tb\\c\n"q",', decimal.Decimal("1.50"), dt.date(2024, 2, 29), None)
    text = copy_spec("COPY (SELECT 1) TO STDOUT")
    assert codec.copy_line(row, oids, text) == b'7\ta\\tb\\\\c\\n"q",\t1.50\t2024-02-29\t\\N\n'
    csv = copy_spec("COPY (SELECT 1) TO STDOUT WITH CSV")
    assert codec.copy_line(row, oids, csv) == b'7,"a\tb\\c\n""q"",",1.50,2024-02-29,\n'
    assert codec.copy_line(("",), [codec.TEXT], csv) == b'""\n'  # an empty string is not NULL
    forced = copy_spec("COPY (SELECT 1) TO STDOUT (FORMAT csv, FORCE_QUOTE *)")
    assert codec.copy_line((1, "x"), [codec.INT4, codec.TEXT], forced, ["n", "s"]) == b'"1","x"\n'
    assert codec.copy_line(("n", "s"), [codec.TEXT] * 2, forced, header=True) == b"n,s\n"
    binary = copy_spec("COPY (SELECT 1) TO STDOUT (FORMAT binary)")
    assert (
        codec.copy_line((7, None), [codec.INT4, codec.TEXT], binary)
        == b"\x00\x02\x00\x00\x00\x04\x00\x00\x00\x07\xff\xff\xff\xff"
    )


def test_timestamps_are_printed_as_postgresql_prints_them() -> None:
    import datetime as dt

    from shoal.bi.pg import codec

    def text(value: dt.datetime, oid: int) -> str:
        return codec.text_value(value, oid).decode()

    assert text(dt.datetime(2024, 1, 2, 3, 4, 5, 123400), codec.TIMESTAMP) == "2024-01-02 03:04:05.1234"
    assert (
        text(dt.datetime(2024, 1, 2, 3, 4, 5, 500000, tzinfo=dt.UTC), codec.TIMESTAMPTZ) == "2024-01-02 03:04:05.5+00"
    )
    assert text(dt.datetime(2024, 1, 2, 3, 4, 5), codec.TIMESTAMP) == "2024-01-02 03:04:05"
    assert text(dt.datetime(2024, 1, 2, 3, 4, 5, 1), codec.TIMESTAMP) == "2024-01-02 03:04:05.000001"


def test_dt_without_a_pattern_follows_the_search_path() -> None:
    cols = [pgcatalog.CatalogColumn("id", pgcatalog.INT4)]
    tables = [pgcatalog.CatalogTable("hr", "salaries", cols), pgcatalog.CatalogTable("public", "notes", cols)]
    principal = SimpleNamespace(name="ann", is_admin=False)
    session = PgSession(principal, pid=7, server_version="15.0 (Shoal)", startup={},
                        snapshot=lambda: pgcatalog.Snapshot(tables, ["hr", "public"]))  # fmt: skip
    dt = (  # what psql 15 sends for \dt
        'SELECT n.nspname as "Schema", c.relname as "Name", CASE c.relkind WHEN \'r\' THEN \'table\' END as "Type",'
        ' pg_catalog.pg_get_userbyid(c.relowner) as "Owner" FROM pg_catalog.pg_class c'
        " LEFT JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace LEFT JOIN pg_catalog.pg_am am ON am.oid = c.relam"
        " WHERE c.relkind IN ('r','p','') AND n.nspname <> 'pg_catalog' AND n.nspname !~ '^pg_toast'"
        " AND n.nspname <> 'information_schema' AND pg_catalog.pg_table_is_visible(c.oid) ORDER BY 1,2"
    )

    def listed() -> list:
        answer = session.answer(dt)
        assert answer is not None
        return [row[:2] for row in answer[2]]

    assert listed() == [("public", "notes")]  # search_path "$user", public: as PostgreSQL
    session.answer("SET search_path TO hr")
    assert listed() == [("hr", "salaries")]
    session.answer("SET search_path TO hr, public")
    assert listed() == [("hr", "salaries"), ("public", "notes")]


def test_floats_are_printed_as_postgresql_prints_them() -> None:
    from shoal.bi.pg import codec

    def text(value: float, oid: int = codec.FLOAT8) -> str:
        return codec.text_value(value, oid).decode()

    assert [text(v) for v in (10.0, 0.1, -2.5, 1e20, 1e-05, 123456.789)] == [
        "10",
        "0.1",
        "-2.5",
        "1e+20",
        "1e-05",
        "123456.789",
    ]
    assert text(3.0, codec.FLOAT4) == "3" and text(float("nan")) == "NaN"


def test_numeric_without_precision_keeps_its_fraction() -> None:
    spark_sql = _session().translate("SELECT 1.25::numeric AS a, CAST(x AS decimal) AS b, y::numeric(5,2) AS c FROM t")
    assert spark_sql == (
        "SELECT CAST(1.25 AS DECIMAL(38, 18)) AS a, CAST(x AS DECIMAL(38, 18)) AS b, CAST(y AS DECIMAL(5, 2)) AS c FROM t"
    )


def test_string_agg_and_ordered_array_agg_become_spark_3_5() -> None:
    session = _session()
    assert session.translate("SELECT string_agg(region, ',' ORDER BY id) FROM t") == (
        "SELECT ARRAY_JOIN((ARRAY_SORT(COLLECT_LIST(STRUCT(id AS k0, region AS v)))).v, ',') AS `string_agg` FROM t"
    )
    assert "REVERSE(ARRAY_SORT(" in session.translate("SELECT array_agg(x ORDER BY y DESC) FROM t")
    assert "LISTAGG" not in session.translate("SELECT string_agg(r, ', ') FROM t")
