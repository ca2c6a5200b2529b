"""Turning one batch of change events into the actions a MERGE applies.

Two pure DataFrame steps, tested against a pure-Python reference model:
- `latest_events`: each key collapses to its last event, ordered by
  (sequence value, file order, line number).
- `classify`: each surviving event is compared with the row the table holds now:
  insert, update, delete, stale (older than the table's row, or than the delete that
  removed the key: ignored) or missing_delete (D for a key the table does not have).
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from shoal.cdc.schema import quote
from shoal.cdc.source import LINE_COL, OP_COL, ORDER_COL

ACTION_COL = "_action"
TARGET_SEQ_COL = "_target_seq"
TARGET_PRESENT_COL = "_target_present"
TOMB_SEQ_COL = "_tombstone_seq"
TARGET_PREFIX = "_target__"
ACTIONS = ("insert", "update", "delete", "stale", "missing_delete")
APPLIED_ACTIONS = ("insert", "update", "delete")
# The comparison may build its hash table from the batch (one row per key) and stream the
# table's rows through it (a shuffled hash join), so the table's rows are not sorted; a
# sort-merge join sorts every table row by key after the shuffle. Spark's hash join does
# not spill, so the caller asks for it only for batches of known, bounded size.
# Off: measured on a quiet machine (1M rows, 200k changes) it gained nothing over Spark's own
# choice (comparison 3.72 s against 3.58 s without it), so Spark chooses. True: always.
HASH_JOIN_ON_BATCH = False


def latest_events(events: DataFrame, keys: list[str], sequence: str) -> DataFrame:
    """Keep, per key, the event with the greatest (sequence, file order, line)."""
    order = Window.partitionBy(*[F.col(quote(k)) for k in keys]).orderBy(
        F.col(quote(sequence)).desc(), F.col(ORDER_COL).desc(), F.col(LINE_COL).desc()
    )
    return events.withColumn("_rank", F.row_number().over(order)).where("_rank = 1").drop("_rank")


def _left_join_seq(
    left: DataFrame,
    right: DataFrame,
    keys: list[str],
    sequence: str,
    seq_col: str,
    flag_col: str,
    carry: Sequence[str] = (),
    hash_join: bool = False,
) -> DataFrame:
    """Left-join `right`'s sequence value (as seq_col), a presence flag and the `carry`
    columns (as TARGET_PREFIX + name) onto `left` by key."""
    r = right.select(
        *[F.col(quote(k)).alias(f"_r_{i}") for i, k in enumerate(keys)],
        F.col(quote(sequence)).alias(seq_col),
        F.lit(True).alias(flag_col),
        *[F.col(quote(c)).alias(TARGET_PREFIX + c) for c in carry],
    )
    cond = [F.col(quote(k)) == F.col(f"_r_{i}") for i, k in enumerate(keys)]
    if hash_join and HASH_JOIN_ON_BATCH:
        left = left.hint("shuffle_hash")
    return left.join(r, on=cond, how="left").drop(*[f"_r_{i}" for i in range(len(keys))])


def classify(
    latest: DataFrame,
    target: DataFrame | None,
    keys: list[str],
    sequence: str,
    tombstones: DataFrame | None = None,
    carry: Sequence[str] = (),
    hash_join: bool = False,
) -> DataFrame:
    """Attach ACTION_COL to each latest event by comparing it with the table's current row.

    `target` is the table (None when it is new); `tombstones` holds, per deleted key, the
    sequence value of its delete, so that an older event arriving after the delete stays
    deleted instead of bringing the row back. The target's `carry` columns (such as its
    row position, `_file`/`_pos`) come along as TARGET_PREFIX + name, null without a match.
    `hash_join`: build the joins' hash tables from `latest` (see HASH_JOIN_ON_BATCH).
    """
    joined = latest
    for df, seq_col, flag_col in ((target, TARGET_SEQ_COL, TARGET_PRESENT_COL), (tombstones, TOMB_SEQ_COL, None)):
        if df is None:
            joined = joined.withColumn(seq_col, F.lit(None))
            if flag_col:
                joined = joined.withColumn(flag_col, F.lit(False))
                for c in carry:
                    joined = joined.withColumn(TARGET_PREFIX + c, F.lit(None))
        else:
            extra = carry if df is target else ()
            joined = _left_join_seq(joined, df, keys, sequence, seq_col, flag_col or "_tomb_present", extra, hash_join)
    present = F.coalesce(F.col(TARGET_PRESENT_COL), F.lit(False))
    seq, tseq, dseq, op = F.col(quote(sequence)), F.col(TARGET_SEQ_COL), F.col(TOMB_SEQ_COL), F.col(OP_COL)
    action = (
        F.when(~present & dseq.isNotNull() & (seq < dseq), "stale")
        .when(~present & (op == "D"), "missing_delete")
        .when(~present, "insert")
        # A table row without a sequence value (written outside CDC) is overwritten.
        .when(tseq.isNotNull() & (seq < tseq), "stale")
        .when(op == "D", "delete")
        .otherwise("update")
    )
    drop = [TARGET_SEQ_COL, TARGET_PRESENT_COL, TOMB_SEQ_COL, "_tomb_present"]
    return joined.withColumn(ACTION_COL, action).drop(*[c for c in drop if c in joined.columns])
