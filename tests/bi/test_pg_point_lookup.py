"""Point lookups without Spark through the PostgreSQL wire (issue 43): with `[sql] point_lookup`
on and off, the same rows, the same column types and values as psycopg decodes them."""

from __future__ import annotations

import datetime as dt
import uuid
from decimal import Decimal

import psycopg
import pytest

from shoal.governance import Governance, Principals, point_lookup

COLS = "id bigint, k int, s string, amount decimal(10,2), day date, ts timestamp, ntz timestamp_ntz, flag boolean"
ROWS = [
    (1, 10, "eu", Decimal("1.50"), dt.date(2024, 1, 1), dt.datetime(2024, 1, 1, 8, 30), dt.datetime(2024, 1, 1), True),
    (2, None, "us", None, None, None, None, None),
    (3, 30, None, Decimal("-3.25"), dt.date(1969, 12, 31), dt.datetime(1969, 12, 31, 23, 59, 59, 5), dt.datetime(1900, 1, 1), False),
    (4, 40, "apac", Decimal("4.00"), dt.date(2000, 2, 29), dt.datetime(2000, 2, 29), None, True),
]  # fmt: skip
QUERIES = [
    ("SELECT * FROM {t} WHERE id = %s", (1,)),
    ("SELECT * FROM {t} WHERE id = %s", (2,)),
    ("SELECT id, amount, day, ts, ntz FROM {t} WHERE id IN (1, 2, 3, 4)", ()),
    ("SELECT id, s FROM {t} WHERE id >= %s AND id < %s", (1, 4)),
    ("SELECT id AS key, flag FROM {t} WHERE s = %s", ("us",)),
    ("SELECT id FROM {t} WHERE k IS NULL OR k > 35", ()),
]
PASSWORD = "pl-Passw0rd-43"


@pytest.fixture(scope="module")
def table(spark, settings):
    u = uuid.uuid4().hex[:6]
    t = f"pgpl_{u}.items"
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS pgpl_{u}")
    spark.sql(f"CREATE TABLE {t} ({COLS}) USING iceberg")
    spark.createDataFrame(ROWS, COLS).writeTo(t).append()
    who = f"plreader_{u}"
    p = Principals(settings)
    p.add(who, password=PASSWORD)
    cols = [c.split()[0] for c in COLS.split(", ")]
    Governance(settings).grant(
        p.principal("admin"), "SELECT", "TABLE", t, who, row_filter="id <> 4", table_columns=cols
    )
    return t, who


def _ask(server, who: str, sql: str, params: tuple) -> tuple[list, list]:
    host, port = server.address
    with psycopg.connect(host=host, port=port, user=who, password=PASSWORD, dbname="lake", autocommit=True,
                         connect_timeout=20, sslmode="require", options="-c shoal.dialect=spark") as conn:  # fmt: skip
        cur = conn.execute(sql, params or None)
        return [(d.name, d.type_code) for d in cur.description], sorted(cur.fetchall(), key=repr)


def test_wire_answers_match_with_and_without_spark(server, settings, table) -> None:
    t, who = table
    before = point_lookup.answered
    try:
        for sql, params in QUERIES:
            settings.sql.point_lookup = False
            on_spark = _ask(server, who, sql.format(t=t), params)
            settings.sql.point_lookup = True
            fast = point_lookup.answered
            without = _ask(server, who, sql.format(t=t), params)
            assert without == on_spark, sql
            assert point_lookup.answered == fast + 1, f"{sql}: not answered without Spark"
            assert all(r[0] != 4 for r in without[1]), "the row filter hides id 4"
    finally:
        settings.sql.point_lookup = True
    assert point_lookup.answered == before + len(QUERIES)
    explained = _ask(server, who, f"EXPLAIN SELECT id FROM {t} WHERE id = 1", ())
    assert explained[1] == [(f"engine: {point_lookup.ENGINE_ARROW} (point lookup)",)]
