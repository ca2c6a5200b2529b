"""Statements a migrant runs in Athena, with Athena's meaning, on a lake (Iceberg) table."""

from __future__ import annotations

import datetime as dt
import uuid

import pytest

from shoal.exceptions import SqlError
from shoal.sql.external import SqlRunner


@pytest.fixture(scope="module")
def db(spark) -> str:
    name = f"ath_{uuid.uuid4().hex[:8]}"
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {name}")
    spark.sql(
        f"CREATE TABLE {name}.sales (id int, category string, amount double, ts timestamp) "
        "USING iceberg PARTITIONED BY (category)"
    )
    spark.sql(
        f"INSERT INTO {name}.sales VALUES (1, 'a', 10.0, TIMESTAMP '2024-01-15 10:00:00'), "
        "(2, 'b', 20.0, TIMESTAMP '2024-01-16 11:00:00')"
    )
    spark.sql(f"INSERT INTO {name}.sales VALUES (3, 'a', 5.0, TIMESTAMP '2024-01-17 12:00:00')")
    return name


@pytest.fixture
def athena(spark, settings, db) -> SqlRunner:
    return SqlRunner(spark, settings, dialect="athena", database_name=db)


def rows(runner: SqlRunner, sql: str) -> list[tuple]:
    return runner.execute(sql)[0].rows


def test_show_columns_describe_and_partitions(athena, db):
    result, _ = athena.execute("SHOW COLUMNS IN sales")
    assert result.columns == ["field"] and [r[0] for r in result.rows] == ["id", "category", "amount", "ts"]
    assert rows(athena, f"SHOW COLUMNS FROM sales IN {db}") == result.rows
    described = rows(athena, "DESCRIBE sales")
    assert ("id", "int", None) in [tuple(r) for r in described]
    assert rows(athena, "SHOW PARTITIONS sales") == [("category=a",), ("category=b",)]


def test_metadata_tables(athena, db):
    assert rows(athena, 'SELECT count(*) FROM "sales$snapshots"') == [(2,)]
    assert rows(athena, 'SELECT count(*) FROM "sales$history" WHERE is_current_ancestor') == [(2,)]
    assert rows(athena, f'SELECT sum(record_count) FROM {db}."sales$files"') == [(3,)]
    parts = athena.execute(
        'SELECT partition.category, record_count, file_count, total_size FROM "sales$partitions" ORDER BY 1'
    )[0]
    assert [r[:3] for r in parts.rows] == [("a", 2, 2), ("b", 1, 1)]
    assert rows(athena, 'SELECT count(*) > 0 FROM "sales$manifests"') == [(True,)]
    assert rows(athena, 'SELECT operation FROM "sales$snapshots" ORDER BY committed_at LIMIT 1') == [("append",)]
    with pytest.raises(SqlError, match=r"not supported in Shoal: metadata table 'sales\$nope'"):
        athena.execute('SELECT * FROM "sales$nope"')


def test_show_create_table_is_athena_ddl_that_shoal_reads_back(athena, db, spark):
    ddl = rows(athena, "SHOW CREATE TABLE sales")[0][0]
    assert ddl.startswith(f"CREATE TABLE {db}.sales (") and "PARTITIONED BY (category)" in ddl
    assert "'table_type'='iceberg'" in ddl
    # The DDL runs as it is (at a new location): same columns, same partitioning.
    copy = "\n".join(line for line in ddl.split("\n") if not line.startswith("LOCATION"))
    athena.execute(copy.replace(f"{db}.sales (", f"{db}.sales_copy ("))
    assert spark.table(f"{db}.sales_copy").schema == spark.table(f"{db}.sales").schema
    assert "PARTITIONED BY (category)" in rows(athena, "SHOW CREATE TABLE sales_copy")[0][0]


def test_optimize_and_vacuum(athena, db):
    before = rows(athena, "SELECT id, amount FROM sales ORDER BY id")
    result, _ = athena.execute("OPTIMIZE sales REWRITE DATA USING BIN_PACK WHERE category = 'a'")
    assert result.columns[0] == "rewritten_data_files_count" and result.rows[0][0] == 2
    assert rows(athena, "SELECT count(*) FROM \"sales$files\" WHERE partition.category = 'a'") == [(1,)]
    assert rows(athena, "SELECT id, amount FROM sales ORDER BY id") == before
    vacuumed = athena.execute("VACUUM sales")[0]
    assert vacuumed.columns == ["table", "expired_files", "orphan_files_removed"]
    assert vacuumed.rows[0][0] == f"{db}.sales"
    assert rows(athena, "SELECT id, amount FROM sales ORDER BY id") == before  # recent snapshots are kept
    with pytest.raises(SqlError, match="not supported in Shoal: OPTIMIZE"):
        athena.execute("OPTIMIZE sales REWRITE DATA USING SORT")


def test_prepare_execute_survive_the_runner(spark, settings, athena, db):
    athena.execute("PREPARE by_category FROM SELECT count(*) FROM sales WHERE category = ? AND amount > ?")
    assert rows(athena, "EXECUTE by_category USING 'a', 1") == [(2,)]
    later = SqlRunner(spark, settings, dialect="athena", database_name=db)  # the next `shoal sql`
    assert rows(later, "EXECUTE by_category USING 'b', 100") == [(0,)]
    with pytest.raises(SqlError, match="2 parameters, USING gives 1"):
        later.execute("EXECUTE by_category USING 'a'")
    later.execute("DEALLOCATE PREPARE by_category")
    with pytest.raises(SqlError, match="not found"):
        later.execute("EXECUTE by_category USING 'a', 1")


def test_explain_shows_the_plan_of_the_translated_statement(athena):
    result, _ = athena.execute("EXPLAIN SELECT day_of_week(ts) FROM sales")
    assert result.columns == ["Query Plan"] and "weekday" in result.rows[0][0].lower()


def test_views_keep_athena_meaning(athena, db):
    athena.execute("CREATE OR REPLACE VIEW sales_days AS SELECT id, day_of_week(ts) AS dow, 7 / 2 AS half FROM sales")
    assert rows(athena, "SELECT dow, half FROM sales_days WHERE id = 1") == [(1, 3)]
    athena.execute("CREATE OR REPLACE VIEW sales_days AS SELECT id, format_datetime(ts, 'EEEE') AS day FROM sales")
    assert rows(athena, "SELECT day FROM sales_days WHERE id = 1") == [("Monday",)]


def test_ctas_iceberg_with_partitioning_and_buckets(athena, db, spark):
    athena.execute(
        "CREATE TABLE sales_ctas WITH (table_type = 'ICEBERG', format = 'PARQUET', "
        "partitioning = ARRAY['category', 'day(ts)'], bucketed_by = ARRAY['id'], bucket_count = 4) "
        "AS SELECT id, category, ts, date_add('day', 1, ts) AS next_day FROM sales"
    )
    spec = spark.sql(f"DESCRIBE TABLE EXTENDED {db}.sales_ctas").collect()
    transforms = [r[1] for r in spec if (r[0] or "").startswith("Part ")]
    assert transforms == ["category", "days(ts)", "bucket(4, id)"]
    assert rows(athena, "SELECT next_day FROM sales_ctas WHERE id = 1") == [(dt.datetime(2024, 1, 16, 10),)]


def test_unload_writes_files_in_the_format(athena, spark, tmp_path):
    target = tmp_path / "unloaded"
    athena.execute(
        f"UNLOAD (SELECT id, date_format(ts, '%Y-%m-%d') AS day, category FROM sales) TO '{target}' "
        "WITH (format = 'JSON', partitioned_by = ARRAY['category'])"
    )
    back = spark.read.json(str(target)).orderBy("id").collect()
    assert [(r.id, r.day, r.category) for r in back] == [
        (1, "2024-01-15", "a"),
        (2, "2024-01-16", "b"),
        (3, "2024-01-17", "a"),
    ]
    with pytest.raises(SqlError, match="is not empty"):
        athena.execute(f"UNLOAD (SELECT 1 AS x) TO '{target}' WITH (format = 'PARQUET')")


def test_a_spark_ctas_using_iceberg_keeps_the_default_file_format(spark, settings, db):
    """`USING iceberg` names the table type, not a file format (write.format.default)."""
    runner = SqlRunner(spark, settings, dialect="spark")
    runner.execute(f"CREATE TABLE {db}.pair USING iceberg AS SELECT id FROM range(0, 10)")
    assert rows(runner, f"SELECT count(*) FROM {db}.pair") == [(10,)]
    props = dict(spark.sql(f"SHOW TBLPROPERTIES {db}.pair").collect())
    assert props.get("write.format.default", "parquet") == "parquet"


def test_create_table_forms_athena_rejects_are_clear_errors(athena, db, tmp_path, spark):
    """Athena's CTAS takes its location only in WITH (external_location|location = ...), and a
    CREATE TABLE with columns is EXTERNAL or an Iceberg table (table_type = 'ICEBERG'): the other
    forms are errors naming the clause and where it is, and create nothing."""
    location = tmp_path / "ctas_loc"
    with pytest.raises(SqlError, match=r"LOCATION .*AS SELECT.*\(line 1, column 23\)"):
        athena.execute(f"CREATE TABLE ctas_loc LOCATION '{location}' AS SELECT 1 AS x")
    with pytest.raises(SqlError, match=r"CREATE TABLE plain_loc: .*EXTERNAL.*ICEBERG.*\(line 2, column 1\)"):
        athena.execute(f"SELECT 1;\nCREATE TABLE plain_loc (a int) LOCATION '{location}'")
    assert not spark.catalog.tableExists(f"{db}.ctas_loc") and not spark.catalog.tableExists(f"{db}.plain_loc")
    assert not location.exists()
    # The WITH form Athena documents makes the table.
    athena.execute(f"CREATE TABLE ctas_with WITH (table_type = 'ICEBERG', location = '{location}') AS SELECT 1 AS x")
    assert rows(athena, "SELECT x FROM ctas_with") == [(1,)]
