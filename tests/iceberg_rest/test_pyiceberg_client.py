"""PyIceberg against `shoal serve --iceberg-rest` (local-file warehouse): lists exactly what a
principal may read, reads the rows Shoal reads, appends and evolves schemas with the grants,
time-travels to the snapshot Spark's FOR VERSION AS OF returns, and loses a commit race with
a 409 like Iceberg's own catalogs. One server and one lake for the test session."""

from __future__ import annotations

import pyarrow as pa
import pytest

from shoal.governance import AuditLog


def _rows(table) -> list[tuple]:
    return sorted(tuple(r.values()) for r in table.to_pylist())


def _spark_rows(spark, sql: str) -> list[tuple]:
    return sorted(tuple(r) for r in spark.sql(sql).collect())


def test_lists_only_readable_namespaces_and_tables(lake, connect):
    analyst = connect(lake.tokens["analyst"])
    assert analyst.list_namespaces() == [(lake.db,)]  # the other database holds nothing analyst may read
    assert analyst.list_tables(lake.db) == [(lake.db, "sales")]
    reader = connect(lake.tokens["reader"])  # SELECT through a group
    assert reader.list_tables(lake.db) == [(lake.db, "sales")]
    dbadmin = connect(lake.tokens["dbadmin"])  # a database grant reaches every table in it
    assert {(lake.db, t) for t in ("sales", "hr", "opps")} <= set(dbadmin.list_tables(lake.db))
    admin = connect(lake.admin_token)
    assert {(lake.db,), (lake.hidden_db,)} <= set(admin.list_namespaces())
    assert analyst.table_exists(lake.sales) and not analyst.table_exists(lake.hr)


def test_scan_reads_the_rows_shoal_reads(lake, connect, spark):
    table = connect(lake.tokens["reader"]).load_table(lake.sales)
    assert _rows(table.scan().to_arrow()) == _spark_rows(spark, f"SELECT * FROM {lake.sales}")


def test_time_travel_matches_for_version_as_of(lake, connect, spark):
    table = connect(lake.tokens["analyst"]).load_table(lake.sales)
    first = min(table.snapshots(), key=lambda s: s.sequence_number).snapshot_id
    old = _rows(table.scan(snapshot_id=first).to_arrow())
    assert old == _spark_rows(spark, f"SELECT * FROM {lake.sales} FOR VERSION AS OF {first}")
    assert len(old) == 3  # before the second INSERT


def test_append_and_commit_race(lake, connect, spark, settings):
    analyst = connect(lake.tokens["analyst"])
    table = analyst.load_table(lake.sales)
    stale = analyst.load_table(lake.sales)  # a second writer that loaded the same version
    before = spark.sql(f"SELECT count(*) FROM {lake.sales}").first()[0]
    table.append(pa.table({"id": pa.array([5], pa.int32()), "region": ["EU"], "amount": [50.0]}))
    assert spark.sql(f"SELECT count(*) FROM {lake.sales}").first()[0] == before + 1
    assert spark.sql(f"SELECT amount FROM {lake.sales} WHERE id = 5").first()[0] == 50.0

    # Optimistic concurrency: the stale writer's requirement (main at its snapshot) fails with
    # a 409; PyIceberg then refreshes and retries its append, as Iceberg's clients do.
    stale.append(pa.table({"id": pa.array([6], pa.int32()), "region": ["US"], "amount": [60.0]}))
    assert spark.sql(f"SELECT count(*) FROM {lake.sales} WHERE id IN (5, 6)").first()[0] == 2
    conflicts = [
        r
        for r in AuditLog(settings).list(principal=lake.names["analyst"], limit=50)
        if "conflict" in (r["reason"] or "")
    ]
    assert conflicts and conflicts[0]["action"] == "iceberg.commit"

    actions = {(r["action"], r["decision"]) for r in AuditLog(settings).list(principal=lake.names["analyst"], limit=50)}
    assert {("iceberg.load", "allow"), ("iceberg.commit", "allow")} <= actions


def test_create_table_and_evolve_schema(lake, connect, spark):
    from pyiceberg.exceptions import ForbiddenError
    from pyiceberg.schema import Schema
    from pyiceberg.types import LongType, NestedField

    schema = Schema(NestedField(1, "id", LongType(), required=False))
    with pytest.raises(ForbiddenError, match="needs ALL on database"):
        connect(lake.tokens["analyst"]).create_table(f"{lake.db}.made_by_analyst", schema)
    made = connect(lake.tokens["dbadmin"]).create_table(f"{lake.db}.made", schema)
    made.append(pa.table({"id": pa.array([7], pa.int64())}))
    assert _spark_rows(spark, f"SELECT * FROM {lake.db}.made") == [(7,)]
    from pyiceberg.types import StringType

    with made.update_schema() as update:  # schema evolution: ALTER (here from ALL on the database)
        update.add_column("note", StringType())
    assert spark.table(f"{lake.db}.made").columns == ["id", "note"]
    assert not spark.catalog.tableExists(f"{lake.db}.made_by_analyst")
