"""Turning one batch of change events into the actions a MERGE applies.

Two pure DataFrame steps, tested against a pure-Python reference model:
- `latest_events`: each key collapses to its last event, ordered by
  (sequence value, file order, line number).
- `classify`: each surviving event is compared with the row the table holds now:
  insert, update, delete, stale (older than the table's row: ignored) or
  missing_delete (D for a key the table does not have: nothing to do).
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from shoal.cdc.schema import quote
from shoal.cdc.source import LINE_COL, OP_COL, ORDER_COL

ACTION_COL = "_action"
TARGET_SEQ_COL = "_target_seq"
TARGET_PRESENT_COL = "_target_present"
ACTIONS = ("insert", "update", "delete", "stale", "missing_delete")
APPLIED_ACTIONS = ("insert", "update", "delete")


def latest_events(events: DataFrame, keys: list[str], sequence: str) -> DataFrame:
    """Keep, per key, the event with the greatest (sequence, file order, line)."""
    order = Window.partitionBy(*[F.col(quote(k)) for k in keys]).orderBy(
        F.col(quote(sequence)).desc(), F.col(ORDER_COL).desc(), F.col(LINE_COL).desc()
    )
    return events.withColumn("_rank", F.row_number().over(order)).where("_rank = 1").drop("_rank")


def classify(latest: DataFrame, target: DataFrame | None, keys: list[str], sequence: str) -> DataFrame:
    """Attach ACTION_COL to each latest event by comparing it with the table's current row.

    `target` is the table projected to keys + sequence (None when the table is new).
    """
    if target is None:
        joined = latest.withColumn(TARGET_SEQ_COL, F.lit(None)).withColumn(TARGET_PRESENT_COL, F.lit(False))
    else:
        t = target.select(
            *[F.col(quote(k)).alias(f"_t_{i}") for i, k in enumerate(keys)],
            F.col(quote(sequence)).alias(TARGET_SEQ_COL),
            F.lit(True).alias(TARGET_PRESENT_COL),
        )
        cond = [F.col(quote(k)) == F.col(f"_t_{i}") for i, k in enumerate(keys)]
        joined = latest.join(t, on=cond, how="left").drop(*[f"_t_{i}" for i in range(len(keys))])
    present = F.coalesce(F.col(TARGET_PRESENT_COL), F.lit(False))
    seq, tseq, op = F.col(quote(sequence)), F.col(TARGET_SEQ_COL), F.col(OP_COL)
    action = (
        F.when(~present & (op == "D"), "missing_delete")
        .when(~present, "insert")
        # A table row without a sequence value (written outside CDC) is overwritten.
        .when(tseq.isNotNull() & (seq < tseq), "stale")
        .when(op == "D", "delete")
        .otherwise("update")
    )
    return joined.withColumn(ACTION_COL, action).drop(TARGET_SEQ_COL, TARGET_PRESENT_COL)
