"""Tombstones (`NS.TABLE__cdc_tombstones`): per deleted key, the sequence value of its delete.

They let an older event arriving after a delete stay deleted. Each row carries `recorded_at`,
when the batch that applied the delete ran; rows older than `[cdc] tombstone_retention` are
pruned by the next batch that commits, so the table holds the deletes of one horizon, not of
all time. The price, documented in docs/cdc.md: an event older than a pruned delete, arriving
after that horizon, inserts its key again.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from pyspark.sql import SparkSession

from shoal.lake import set_properties, table_exists
from shoal.lake.tables import TableName, table_properties

RECORDED_COL = "recorded_at"


def add_recorded_at(spark: SparkSession, tomb: TableName) -> None:
    """Give a tombstone table written before `recorded_at` existed that column.

    Its rows get the time of the upgrade: they are kept one full horizon from now.
    """
    if RECORDED_COL in spark.table(tomb.sql).columns:
        return
    spark.sql(f"ALTER TABLE {tomb.sql} ADD COLUMNS ({RECORDED_COL} timestamp)")
    spark.sql(f"UPDATE {tomb.sql} SET {RECORDED_COL} = current_timestamp() WHERE {RECORDED_COL} IS NULL")


def prune(spark: SparkSession, tomb: TableName, retention: timedelta | None, now: datetime | None = None) -> int:
    """Delete tombstones recorded more than `retention` ago (None: keep all); returns how many."""
    if retention is None or not table_exists(spark, tomb):
        return 0
    add_recorded_at(spark, tomb)
    cutoff = (now or datetime.now(UTC)) - retention
    stamp = f"TIMESTAMP '{cutoff.astimezone(UTC):%Y-%m-%d %H:%M:%S.%f}+00:00'"
    # The data files' column bounds answer "anything to prune?" from metadata, without reading
    # the tombstones themselves: a batch with nothing past the horizon pays no scan.
    due = spark.sql(
        f"""SELECT count(*) AS n FROM {tomb.metadata("files")}
            WHERE content = 0 AND readable_metrics.{RECORDED_COL}.lower_bound < {stamp}"""
    ).first()
    if due is None or not due["n"]:
        return 0
    # Only the files holding old tombstones are read (their bounds select them); rows a newer
    # delete of the same key replaced are not counted.
    n = spark.sql(f"SELECT count(*) AS n FROM {tomb.sql} WHERE {RECORDED_COL} < {stamp}").first()
    if n is None or not n["n"]:
        return 0
    if table_properties(spark, tomb).get("write.delete.mode") != "copy-on-write":
        # Rewrite the few files holding old tombstones rather than pile delete files on them.
        set_properties(spark, tomb, {"write.delete.mode": "copy-on-write"})
    spark.sql(f"DELETE FROM {tomb.sql} WHERE {RECORDED_COL} < {stamp}")
    return int(n["n"])
