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
