"""What psycopg sees from the endpoint, as PostgreSQL shows it (issue 42): result column names,
numeric precision and scale, numeric in binary, COPY (query) TO STDOUT."""

from __future__ import annotations

import os
import shutil
import subprocess

import psycopg
import pytest

from tests.bi.conftest import PASSWORD


def test_result_column_names(pg, lake):
    cur = pg.execute(f"SELECT count(*), max(id), sum(revenue), min(id) + 1, region FROM {lake.opps} GROUP BY region")
    assert [d.name for d in cur.description] == ["count", "max", "sum", "?column?", "region"]
    assert cur.fetchall() == [(2, 3, 40.0, 2, "EU")]


def test_numeric_precision_and_scale_in_the_row_description(pg, lake):
    cur = pg.execute(f"SELECT CAST(revenue AS DECIMAL(12,2)) AS r, id FROM {lake.opps} ORDER BY id")
    assert [(d.name, d.precision, d.scale) for d in cur.description] == [("r", 12, 2), ("id", None, None)]
    assert str(cur.fetchone()[0]) == "10.00"


def test_numeric_in_binary_results(pg, lake):
    import datetime as dt
    import decimal

    cur = pg.cursor(binary=True)
    cur.execute(
        "SELECT CAST(revenue AS DECIMAL(12,2)) AS r, CAST(-0.5 AS DECIMAL(3,1)) AS n, CAST(NULL AS DECIMAL(5,2)) AS z,"
        f" DATE '2024-02-29' AS d FROM {lake.opps} WHERE id = 1"
    )
    assert cur.fetchone() == (decimal.Decimal("10.00"), decimal.Decimal("-0.5"), None, dt.date(2024, 2, 29))


def test_adbc_reads_dates_timestamps_and_numerics(server, lake):
    import datetime as dt

    dbapi = pytest.importorskip("adbc_driver_postgresql.dbapi")
    host, port = server.address
    uri = f"postgresql://{lake.analyst}:{lake.token}@{host}:{port}/lake?sslmode=require"
    with dbapi.connect(uri) as conn, conn.cursor() as cur:
        cur.adbc_statement.set_options(**{"adbc.postgresql.use_copy": "false"})
        cur.execute("SELECT DATE '2024-02-29' AS d, TIMESTAMP '2024-01-02 03:04:05' AS ts, 12.34::numeric(6,2) AS n")
        d, ts, n = cur.fetchone()
    assert d == dt.date(2024, 2, 29)  # not the opaque bytes of an unknown receive function
    assert isinstance(ts, dt.datetime) and ts.replace(tzinfo=None) == dt.datetime(2024, 1, 2, 3, 4, 5)
    assert str(n) == "12.34"


def test_copy_query_to_stdout_text_and_csv(pg, lake, settings):
    from shoal.governance.masks import mask_hash

    hashes = [mask_hash(settings, e) for e in ("ann@eu.example", "cy@eu.example")]
    query = f"SELECT id, region, email, CAST(NULL AS STRING) AS z FROM {lake.opps} ORDER BY id"
    with pg.cursor() as cur:
        with cur.copy(f"COPY ({query}) TO STDOUT (FORMAT csv, HEADER)") as copy:
            csv = b"".join(bytes(b) for b in copy).decode()
        with cur.copy(f"COPY ({query}) TO STDOUT") as copy:
            text = b"".join(bytes(b) for b in copy).decode()
        with cur.copy(f"COPY {lake.opps} TO STDOUT WITH CSV") as copy:  # a table: its governed SELECT *
            table = b"".join(bytes(b) for b in copy).decode()
    assert csv.splitlines() == ["id,region,email,z", f"1,EU,{hashes[0]},", f"3,EU,{hashes[1]},"]
    assert text.splitlines() == [f"1\tEU\t{hashes[0]}\t\\N", f"3\tEU\t{hashes[1]}\t\\N"]
    assert sorted(table.splitlines()) == [f"1,EU,10,{hashes[0]}", f"3,EU,30,{hashes[1]}"]  # float8 10 prints as 10
    # Governed as the query itself: a refused column is refused before any data is sent.
    cur = pg.cursor()
    with (
        pytest.raises(psycopg.errors.InsufficientPrivilege),
        cur.copy(f"COPY (SELECT notes FROM {lake.opps}) TO STDOUT"),
    ):
        pass
    assert pg.execute("SELECT 1").fetchone() == (1,)


@pytest.mark.skipif(shutil.which("psql") is None, reason="psql (postgresql-client) is not installed")
def test_psql_copy_writes_the_file(server, lake, tmp_path):
    host, port = server.address
    out = tmp_path / "opps.csv"
    env = {**os.environ, "PGPASSWORD": PASSWORD, "PGCONNECT_TIMEOUT": "20"}
    dsn = f"host={host} port={port} user={lake.analyst} dbname=lake sslmode=require"
    command = f"\\copy (SELECT id, region FROM {lake.opps} ORDER BY id) to '{out}' csv header"
    done = subprocess.run(["psql", "-X", dsn, "-c", command], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert out.read_text().splitlines() == ["id,region", "1,EU", "3,EU"]


def test_numeric_without_precision_keeps_its_fraction(pg):
    import decimal

    assert pg.execute("SELECT round(1.25::numeric, 1) AS r, 1.25::numeric AS n").fetchone() == (
        decimal.Decimal("1.3"),
        decimal.Decimal("1.250000000000000000"),
    )


def test_string_agg_and_ordered_array_agg(pg, lake):
    row = pg.execute(
        "SELECT string_agg(region, ',' ORDER BY id DESC) AS r, string_agg(CAST(id AS text), '-') IS NOT NULL AS s,"
        f" array_agg(id ORDER BY id DESC) AS a FROM {lake.opps}"
    ).fetchone()
    assert row[:2] == ("EU,EU", True) and row[2] in ("[3,1]", "[3, 1]")  # arrays arrive as JSON text
