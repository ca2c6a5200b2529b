"""SQL steps in the serverless query engines' dialect: external tables, MSCK REPAIR, CTAS, DROP."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid

import pandas as pd
import pytest

from shoal.exceptions import SqlError
from shoal.sql.external import Registry, SqlRunner


@pytest.fixture
def db() -> str:
    return f"ext_{uuid.uuid4().hex[:8]}"


@pytest.fixture
def parquet_folder(spark, tmp_path):
    df = spark.createDataFrame(
        pd.DataFrame(
            {
                "id": [1, 2, 3, 4],
                "amount": [10.0, 20.0, 5.0, 1.5],
                "year": ["2024", "2024", "2025", "2025"],
                "month": ["1", "2", "1", "1"],
            }
        )
    )
    folder = tmp_path / "orders"
    df.write.partitionBy("year", "month").parquet(str(folder))
    return folder


def test_external_table_lifecycle(spark, settings, db, parquet_folder, tmp_path):
    runner = SqlRunner(spark, settings, dialect="athena", database_name=db)
    ddl = (
        f"CREATE EXTERNAL TABLE IF NOT EXISTS {db}.orders (id bigint, amount double) "
        "PARTITIONED BY (year string, month string) "
        "ROW FORMAT SERDE 'org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe' "
        f"STORED AS PARQUET LOCATION '{parquet_folder}/' TBLPROPERTIES ('parquet.compression'='SNAPPY')"
    )
    result, n = runner.execute(f"DROP TABLE IF EXISTS {db}.orders; {ddl}")
    assert n == 2 and "created external table" in result.rows[0][0]
    # Before MSCK REPAIR the partitions are unknown, as in the query engines.
    assert runner.execute(f"SELECT count(*) FROM {db}.orders")[0].rows == [(0,)]
    repaired, _ = runner.execute(f"MSCK REPAIR TABLE {db}.orders")
    assert repaired.rows == [(f"{db}.orders", 3)]
    # Unqualified names use the query's database; Trino functions are translated.
    rows = runner.execute(
        "SELECT year, count(*) AS n, date_format(from_iso8601_date('2024-05-06'), '%Y') AS y FROM orders GROUP BY year ORDER BY year"
    )[0].rows
    assert rows == [("2024", 2, "2024"), ("2025", 2, "2024")]
    assert Registry(settings).get(f"{db}.orders").repaired is True
    # Re-creating without IF NOT EXISTS is refused with a clear message.
    with pytest.raises(SqlError, match="already exists"):
        runner.execute(ddl.replace(" IF NOT EXISTS", ""))
    dropped, _ = runner.execute(f"DROP TABLE {db}.orders")
    assert "files at" in dropped.rows[0][0]
    assert Registry(settings).get(f"{db}.orders") is None
    assert list(parquet_folder.rglob("*.parquet"))  # data stays


def test_definitions_survive_the_process(spark, settings, db, parquet_folder, cli_env):
    runner = SqlRunner(spark, settings)
    runner.execute(
        f"CREATE EXTERNAL TABLE {db}.orders (id bigint, amount double) PARTITIONED BY (year string, month string) "
        f"STORED AS PARQUET LOCATION '{parquet_folder}'; MSCK REPAIR TABLE {db}.orders"
    )
    env = {**os.environ}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "shoal.cli.console",
            "sql",
            f"SELECT sum(amount) AS total FROM {db}.orders WHERE year = '2025'",
            "--format",
            "csv",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["total", "6.5"]


def test_ctas_into_the_lake_and_as_external_files(spark, settings, db, parquet_folder, tmp_path):
    runner = SqlRunner(spark, settings, database_name=db)
    runner.execute(
        f"CREATE EXTERNAL TABLE {db}.orders (id bigint, amount double) PARTITIONED BY (year string, month string) "
        f"STORED AS PARQUET LOCATION '{parquet_folder}'; MSCK REPAIR TABLE {db}.orders"
    )
    runner.execute(f"CREATE TABLE {db}.totals AS SELECT year, sum(amount) AS total FROM {db}.orders GROUP BY year")
    assert spark.sql(f"SELECT * FROM {db}.totals ORDER BY year").collect()[1].total == 6.5
    assert (
        spark.sql(f"DESCRIBE TABLE EXTENDED {db}.totals").where("col_name = 'Provider'").first().data_type == "iceberg"
    )
    target = tmp_path / "by_month"
    runner.execute(
        f"CREATE TABLE {db}.by_month WITH (format = 'PARQUET', external_location = '{target}', partitioned_by = ARRAY['year']) "
        f"AS SELECT month, amount, year FROM {db}.orders"
    )
    assert sorted(p.name for p in target.iterdir() if p.is_dir()) == ["year=2024", "year=2025"]
    assert runner.execute(f"SELECT count(*) FROM {db}.by_month WHERE year = '2025'")[0].rows == [(2,)]
    with pytest.raises(SqlError, match="already exists"):
        runner.execute(f"CREATE TABLE {db}.totals AS SELECT 1 AS x")


def test_errors_name_the_statement(spark, settings, db):
    runner = SqlRunner(spark, settings)
    with pytest.raises(SqlError, match="statement 2 of 2"):
        runner.execute(f"CREATE DATABASE IF NOT EXISTS {db}; SELECT * FROM {db}.missing_table")
    with pytest.raises(SqlError, match="LOCATION is required"):
        runner.execute(f"CREATE EXTERNAL TABLE {db}.x (a int) STORED AS PARQUET")
    msg = runner.execute(f"MSCK REPAIR TABLE {db}.not_external")[0].rows[0][0]
    assert "not an external table" in msg


def test_athena_iceberg_ddl_makes_a_partitioned_lake_table_cdc_applies_to(spark, settings, db, tmp_path):
    """The reference architecture's DDL, unedited but for the bucket path (issue 19)."""
    from shoal.cdc import ApplyOptions, apply_changes
    from tests.support.helpers import write_csv

    location = tmp_path / "iceberg_output"
    runner = SqlRunner(spark, settings, dialect="athena")
    ddl = (
        f"CREATE TABLE {db}.iceberg_output (product_id bigint, category string, product_name string, "
        "quantity_available bigint, last_update_time timestamp) "
        "PARTITIONED BY (category, bucket(16,product_id)) "
        f"LOCATION '{location}' TBLPROPERTIES ('table_type'='ICEBERG')"
    )
    result, _ = runner.execute(ddl)
    assert "created Iceberg table" in result.rows[0][0]
    assert Registry(settings).get(f"{db}.iceberg_output") is None  # a lake table, not an external one
    spec = spark.sql(f"SHOW CREATE TABLE {db}.iceberg_output").collect()[0][0]
    assert "PARTITIONED BY (category)" in spec and "CLUSTERED BY (product_id)" in spec and "INTO 16 BUCKETS" in spec
    assert str(location) in spec
    source = tmp_path / "changes"
    source.mkdir()
    header = ["op", "product_id", "category", "product_name", "quantity_available", "last_update_time"]
    write_csv(source, "LOAD00000001.csv", [[None, 1, "tools", "saw", 5, "2022-03-01 10:00:00"]], header)
    opts = ApplyOptions(table=f"{db}.iceberg_output", keys=["product_id"], sequence="last_update_time")
    first = apply_changes(spark, settings, str(source), opts)
    write_csv(source, "20220302-1134010000.csv", [["U", 1, "tools", "saw", 3, "2022-03-02 11:34:01"]], header)
    apply_changes(spark, settings, str(source), opts)
    assert runner.execute(f"SELECT quantity_available FROM {db}.iceberg_output")[0].rows == [(3,)]
    back = runner.execute(f"SELECT quantity_available FROM {db}.iceberg_output FOR VERSION AS OF {first.snapshot_id}")
    assert back[0].rows == [(5,)]
    assert list(location.rglob("*.parquet"))  # the data lives where LOCATION said


def test_stored_as_inputformat_text_and_the_default_database(spark, settings, tmp_path):
    """Hive's INPUTFORMAT class names pick the format; unqualified names live in `default`."""
    folder = tmp_path / "sales"
    folder.mkdir()
    (folder / "part-0.csv").write_text("date,amount\n2024-01-02,10.5\n2024-01-03,4.5\n")
    name = f"sales_{uuid.uuid4().hex[:8]}"
    runner = SqlRunner(spark, settings, dialect="athena")
    runner.execute(
        f"CREATE EXTERNAL TABLE {name} (`date` string, amount double) "
        "ROW FORMAT DELIMITED FIELDS TERMINATED BY ',' "
        "STORED AS INPUTFORMAT 'org.apache.hadoop.mapred.TextInputFormat' "
        "OUTPUTFORMAT 'org.apache.hadoop.hive.ql.io.HiveIgnoreKeyTextOutputFormat' "
        f"LOCATION '{folder}/' TBLPROPERTIES ('skip.header.line.count'='1')"
    )
    assert Registry(settings).get(f"default.{name}").format == "csv"
    assert runner.execute(f"SELECT sum(amount) FROM {name}")[0].rows == [(15.0,)]
    assert runner.execute(f"SELECT count(*) FROM default.{name}")[0].rows == [(2,)]
    # Ctrl-A is Hive's field separator for text tables that name none.
    pipe = tmp_path / "ctrl-a"
    pipe.mkdir()
    (pipe / "x.txt").write_text("a\x011\nb\x012\n")
    runner.execute(f"CREATE EXTERNAL TABLE {name}_a (k string, v int) STORED AS TEXTFILE LOCATION '{pipe}'")
    assert runner.execute(f"SELECT k, v FROM {name}_a ORDER BY k")[0].rows == [("a", 1), ("b", 2)]
    with pytest.raises(SqlError, match="unknown INPUTFORMAT"):
        runner.execute(
            f"CREATE EXTERNAL TABLE {name}_b (a string) STORED AS INPUTFORMAT 'com.example.Nope' "
            f"OUTPUTFORMAT 'x' LOCATION '{pipe}'"
        )
