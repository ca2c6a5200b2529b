"""The fifth attack round on the PostgreSQL endpoint (a review of issue 42's changes): a bound value
in a date-field slot, sign-ins aborted right after they succeed, numbers that expand, and COPY
holding something other than a query. Each case failed before its fix."""

from __future__ import annotations

import socket
import time
from unittest.mock import MagicMock

import psycopg
import pytest

from shoal.bi.pg import PgServer
from shoal.bi.pg.codec import FLOAT8, NUMERIC, PgError, literal
from shoal.bi.pgsql import copy_spec
from shoal.config import load_settings
from shoal.governance import Principals
from tests.bi import rawpg


def inbox_rows(spark, lake) -> list[tuple]:
    return [tuple(r) for r in spark.sql(f"SELECT * FROM {lake.db}.inbox ORDER BY id").collect()]


def test_a_bound_date_field_is_a_field_word_never_sql(pg, lake, spark):
    """date_part($1, ts): Spark writes the field as a bare word, so the value was read as SQL (a
    stacked INSERT ran, another table was read). Now it must be a field name, as PostgreSQL says."""
    template = "SELECT date_part(%s, TIMESTAMP '2024-05-06 07:08:09') AS part"
    assert pg.execute(template, ["year"]).fetchall()[0][0] == 2024
    assert pg.execute(template, ["Month"]).fetchall()[0][0] == 5
    before = inbox_rows(spark, lake)
    attacks = [
        f"YEAR FROM CURRENT_TIMESTAMP()) AS part; INSERT INTO {lake.db}.inbox VALUES (4242, 'pwned'); "
        "SELECT EXTRACT(YEAR",
        f"YEAR FROM CURRENT_TIMESTAMP()) AS part, (SELECT max(email) FROM {lake.db}.inbox) AS o, EXTRACT(YEAR",
        "year'",
    ]
    for value in attacks:
        with pytest.raises(psycopg.Error) as err:
            pg.execute(template, [value])
        assert err.value.sqlstate == "22023", err.value
    assert inbox_rows(spark, lake) == before


def test_copy_runs_queries_only(pg, lake, spark):
    before = inbox_rows(spark, lake)
    for statement, sqlstate in (
        (f"COPY (INSERT INTO {lake.db}.inbox VALUES (9, 'x')) TO STDOUT", "0A000"),
        # The simple query splits at the `;`: "COPY (SELECT 1" is a syntax error, as in PostgreSQL.
        (f"COPY (SELECT 1; INSERT INTO {lake.db}.inbox VALUES (9, 'x')) TO STDOUT", "42601"),
        (f"COPY (WITH c AS (SELECT 1) INSERT INTO {lake.db}.inbox VALUES (9, 'x')) TO STDOUT", "0A000"),
        (f"COPY (DROP TABLE {lake.db}.inbox) TO STDOUT", "0A000"),
    ):
        with pytest.raises(psycopg.Error) as err, pg.cursor() as cur, cur.copy(statement) as out:
            b"".join(bytes(b) for b in out)
        assert err.value.sqlstate == sqlstate, (statement, err.value)
    assert inbox_rows(spark, lake) == before


@pytest.mark.parametrize(
    ("statement", "sqlstate"),
    [
        ('COPY "we(ird" TO STDOUT', "0A000"),  # was cut at the parenthesis into SELECT ird" FROM "we
        ("COPY a, b TO STDOUT", "0A000"),  # was a cross join
        ("COPY (SELECT 1) TO STDOUT (FORMAT csv, DELIMITER '\"')", "22023"),  # delimiter = quote
        ("COPY (SELECT 1) TO STDOUT (DELIMITER '\\')", "22023"),
        ("COPY (SELECT 1) TO STDOUT (DELIMITER 'a')", "22023"),
        ("COPY (SELECT 1) TO STDOUT (FORMAT csv, NULL ',')", "22023"),
    ],
)
def test_copy_statements_postgresql_refuses_are_refused(statement, sqlstate):
    with pytest.raises(PgError) as err:
        copy_spec(statement)
    assert err.value.code == sqlstate, err.value


def test_copy_of_a_plain_table_name_still_reads_it(pg, lake):
    with pg.cursor() as cur, cur.copy(f"COPY {lake.opps} (id, region) TO STDOUT") as out:
        text = b"".join(bytes(b) for b in out).decode()
    assert sorted(text.splitlines()) == ["1\tEU", "3\tEU"]  # governed: the analyst sees EU rows


def test_numbers_are_held_to_postgresqls_bounds_before_any_sql_is_written():
    t0 = time.monotonic()
    for raw, sqlstate in (
        (b"1e100000000", "22003"),
        (b"1e1000000000000000000", "22P02"),  # an exponent past any numeric: invalid input, as PostgreSQL
        (b"0." + b"0" * 20000 + b"1", "22003"),
    ):
        with pytest.raises(PgError) as err:
            literal(raw, NUMERIC, 0)
        assert err.value.code == sqlstate
    with pytest.raises(PgError) as err:
        literal(b"1e400", FLOAT8, 0)
    assert err.value.code == "22003"
    assert time.monotonic() - t0 < 5  # refused up front, not after building the text
    assert literal(b"12345.678", NUMERIC, 0).sql() == "12345.678"
    assert literal(b"1e5", FLOAT8, 0).sql() == "CAST(100000.0 AS DOUBLE)"


def test_a_sign_in_aborted_after_it_succeeded_gives_its_slot_back(tmp_path):
    """A client that resets the socket right after sending its proof used to keep its slot for
    good: two such resets locked the principal out (and more filled the server)."""
    settings = load_settings(
        workspace=tmp_path / "ws",
        server={"pg_max_connections": 4, "pg_max_connections_per_principal": 2, "pg_reserved_admin_connections": 1},
    )
    principals = Principals(settings)
    principals.add("mallory", password="Passw0rd-mallory-1")
    _, token = principals.create_token("mallory")
    srv = PgServer(settings, spark=MagicMock(), host="127.0.0.1", port=0).start()
    try:
        host, port = srv.address
        for _ in range(3):
            rawpg.scram_sign_in(
                socket.create_connection((host, port), timeout=10), "mallory", token, reset_after_proof=True
            )
        deadline = time.monotonic() + 10
        while srv._sessions and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not srv._sessions
        with socket.create_connection((host, port), timeout=10) as s:
            seen = rawpg.scram_sign_in(s, "mallory", token)
        assert seen[-1][0] == b"Z", seen  # signed in: ReadyForQuery
    finally:
        srv.stop()


def test_any_over_an_array_compares_the_column_named_x_with_each_element(pg):
    """sqlglot wrote `x = ANY(ARRAY[...])` as EXISTS(ARRAY(...), x -> x = x): always true, a wrong
    answer (and an application's own filter silently gone)."""
    values = "(VALUES (1), (2), (3)) AS v(x)"
    assert pg.execute(f"SELECT x FROM {values} WHERE x = ANY(ARRAY[1, 3]) ORDER BY x").fetchall() == [(1,), (3,)]
    assert pg.execute(f"SELECT x FROM {values} WHERE x > ANY(ARRAY[2]) ORDER BY x").fetchall() == [(3,)]
    assert pg.execute(f"SELECT x FROM {values} WHERE x = ANY(ARRAY[%s]) ORDER BY x", [2]).fetchall() == [(2,)]
