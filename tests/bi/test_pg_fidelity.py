"""What psycopg sees from the endpoint, as PostgreSQL shows it (issue 42): result column names,
numeric precision and scale, numeric in binary, COPY (query) TO STDOUT."""

from __future__ import annotations

import psycopg
import pytest

from tests.bi.conftest import PASSWORD


@pytest.fixture
def pg(server, lake):
    """A psycopg connection in the default (PostgreSQL) dialect."""
    host, port = server.address
    conn = psycopg.connect(host=host, port=port, user=lake.analyst, password=PASSWORD, dbname="lake",
                           autocommit=True, connect_timeout=20, sslmode="require")  # fmt: skip
    yield conn
    conn.close()


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
