"""The statements a JVM class archive is dumped from (`python -m shoal.warmup WORK OUT`).

Run by `shoal.class_archive.build` in a child process: a fresh workspace under WORK, the statements
most commands start with (a CSV read, Iceberg DDL, INSERT, MERGE, time travel, metadata tables, an
Arrow collect), then a JVM exit, which is when `-XX:ArchiveClassesAtExit` writes OUT.
"""

from __future__ import annotations

import sys
from pathlib import Path

from shoal.class_archive import QUIET
from shoal.config import load_settings
from shoal.spark import get_spark


def run(work: Path, out: Path, classpath: str = "") -> None:
    from pyspark import SparkContext

    extra = {"spark.driver.extraClassPath": classpath} if classpath else {}
    settings = load_settings(
        workspace=work / "ws",
        spark={
            "shuffle_partitions": 2,
            "class_archive": "off",
            "conf": {"spark.driver.defaultJavaOptions": f"-XX:ArchiveClassesAtExit={out} {QUIET}", **extra},
        },
    )
    spark = get_spark(settings)
    csv = work / "changes.csv"
    csv.write_text("op,id,name,ts\nI,1,a,2024-01-01 00:00:00\nU,2,b,2024-01-02 00:00:00\n")
    spark.sql("CREATE NAMESPACE IF NOT EXISTS warm")
    spark.sql("CREATE TABLE warm.t (id bigint, name string, ts timestamp) USING iceberg PARTITIONED BY (days(ts))")
    spark.sql("INSERT INTO warm.t VALUES (1, 'x', TIMESTAMP '2024-01-01 00:00:00')")
    changes = spark.read.option("header", True).option("inferSchema", True).csv(str(csv))
    changes.createOrReplaceTempView("changes")
    spark.sql(
        "MERGE INTO warm.t t USING (SELECT id, name, ts FROM changes) c ON t.id = c.id "
        "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *"
    )
    first = spark.sql("SELECT snapshot_id FROM warm.t.snapshots ORDER BY committed_at LIMIT 1").collect()[0][0]
    spark.sql(f"SELECT count(*) FROM warm.t VERSION AS OF {first}").collect()
    spark.sql("SELECT name, count(*) AS n FROM warm.t WHERE id > 0 GROUP BY name ORDER BY n").toPandas()
    spark.sql("SELECT * FROM warm.t.history").collect()
    spark.stop()
    # The archive is written as the JVM exits: end it and wait (it exits when its stdin closes).
    gateway = SparkContext._gateway
    proc = getattr(gateway, "proc", None)
    if gateway is not None:
        gateway.shutdown()
    if proc is not None:
        if proc.stdin is not None:
            proc.stdin.close()
        proc.wait(600)


if __name__ == "__main__":
    run(Path(sys.argv[1]), Path(sys.argv[2]), *sys.argv[3:4])
