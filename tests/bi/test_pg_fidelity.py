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
