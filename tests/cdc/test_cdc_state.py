"""CDC state that stays small, on real Spark + Iceberg: compacted ledger, rewritten files, tombstone pruning."""

from __future__ import annotations

import pytest

from shoal import storage
from shoal.cdc import apply as apply_module
from shoal.cdc import ledger
from shoal.lake import TableName, current_snapshot
from tests.support.helpers import apply, rows, write_csv

T1, T2, T3, T4 = "2022-03-01 10:00:00", "2022-03-02 11:34:01", "2022-03-02 11:35:00", "2022-03-03 09:00:00"


def state(spark, table: str) -> list[tuple]:
    return rows(spark, f"SELECT product_id, name, quantity FROM {table} ORDER BY product_id")


def test_a_rewritten_file_is_reported_and_skipped_and_taken_with_reapply(spark, settings, source, table_name) -> None:
    write_csv(source, "LOAD00000001.csv", [[None, 1, "tools", "hammer", 10, T1], [None, 2, "tools", "saw", 5, T1]])
    write_csv(source, "20220302-1134010000.csv", [["U", 1, "tools", "hammer", 9, T2]])
    first = apply(settings, source, table_name)
    assert first.files_rewritten == [] and first.files_reapplied == []
    # The change file is rewritten under the same name with other rows.
    write_csv(source, "20220302-1134010000.csv", [["U", 1, "tools", "hammer", 8, T2], ["U", 2, "tools", "saw", 4, T2]])
    skipped = apply(settings, source, table_name)
    assert skipped.files_applied == [] and skipped.files_rewritten == ["20220302-1134010000.csv"]
    assert not skipped.committed and skipped.snapshot_id == first.snapshot_id
    assert any("20220302-1134010000.csv was rewritten" in w and "--reapply" in w for w in skipped.warnings)
    assert state(spark, table_name) == [(1, "hammer", 9), (2, "saw", 5)]
    # Reported again (never silently dropped) until taken.
    assert apply(settings, source, table_name).files_rewritten == ["20220302-1134010000.csv"]
    taken = apply(settings, source, table_name, reapply=True)
    assert taken.files_applied == taken.files_reapplied == ["20220302-1134010000.csv"]
    assert taken.committed and taken.warnings == []
    assert state(spark, table_name) == [(1, "hammer", 8), (2, "saw", 4)]
    again = apply(settings, source, table_name)
    assert again.files_applied == [] and again.files_rewritten == [] and not again.committed
    size = (source / "20220302-1134010000.csv").stat().st_size
    assert ledger.load(spark, TableName.parse(table_name))["20220302-1134010000.csv"]["size"] == size


def test_exactly_once_across_crashes_while_the_ledger_compacts(
    spark, settings, source, table_name, monkeypatch
) -> None:
    """With a tail of 1 and segments of 2 every batch folds and rewrites segments: a crash
    before the commit, or half-way through writing the ledger, still applies nothing."""
    monkeypatch.setattr(ledger, "TAIL_MAX", 1)
    monkeypatch.setattr(ledger, "SEG_MAX", 2)
    write_csv(source, "LOAD00000001.csv", [[None, k, "tools", f"item{k}", 1, T1] for k in range(1, 5)])
    write_csv(source, "20220302-1134010000.csv", [["U", 1, "tools", "item1", 2, T2]])
    write_csv(source, "20220302-1135000000.csv", [["U", 2, "tools", "item2", 2, T3]])
    apply(settings, source, table_name)
    table = TableName.parse(table_name)
    assert len(ledger.current(spark, table).segments) == 2
    before = current_snapshot(spark, table)[0]

    # A late file named inside the applied range, plus a new one above it.
    write_csv(source, "20220301-1200000000.csv", [["U", 3, "tools", "item3", 5, T2], ["D", 4, "tools", "x", 1, T2]])
    write_csv(source, "20220303-0900000000.csv", [["U", 1, "tools", "item1", 7, T4]])
    original_merge, original_write = apply_module._Batch._merge, storage.write_bytes

    def crash_merge(*_a, **_k):
        raise RuntimeError("simulated crash before the commit")

    monkeypatch.setattr(apply_module._Batch, "_merge", crash_merge)
    with pytest.raises(RuntimeError, match="simulated crash"):
        apply(settings, source, table_name)
    monkeypatch.setattr(apply_module._Batch, "_merge", original_merge)

    def crash_on_head(uri: str, data: bytes) -> None:
        if "/ledger-" in uri:  # the segments are written, the head is not
            raise RuntimeError("simulated crash while writing the ledger")
        original_write(uri, data)

    monkeypatch.setattr(storage, "write_bytes", crash_on_head)
    with pytest.raises(RuntimeError, match="while writing the ledger"):
        apply(settings, source, table_name)
    monkeypatch.setattr(storage, "write_bytes", original_write)
    assert current_snapshot(spark, table)[0] == before
    assert state(spark, table_name) == [(1, "item1", 2), (2, "item2", 2), (3, "item3", 1), (4, "item4", 1)]

    r = apply(settings, source, table_name)
    assert r.files_applied == ["20220301-1200000000.csv", "20220303-0900000000.csv"]
    assert (r.updated, r.deleted) == (2, 1)
    assert state(spark, table_name) == [(1, "item1", 7), (2, "item2", 2), (3, "item3", 5)]
    assert apply(settings, source, table_name).files_applied == []
    assert sorted(ledger.load(spark, table)) == sorted(p.name for p in source.iterdir())


def test_tombstones_past_the_horizon_are_pruned_and_those_within_are_kept(spark, settings, source, table_name) -> None:
    assert settings.cdc.tombstone_retention == "30d"
    write_csv(source, "LOAD00000001.csv", [[None, k, "tools", f"item{k}", 1, T1] for k in (1, 2, 3)])
    write_csv(source, "20220303-0900000000.csv", [["D", 1, "tools", "item1", 1, T4], ["D", 2, "tools", "item2", 1, T4]])
    first = apply(settings, source, table_name)  # deletes of keys the new table does not hold yet
    assert first.deletes_of_missing_keys == 2 and first.tombstones_pruned == 0
    tomb = f"{table_name}__cdc_tombstones"
    # Key 1's delete was applied 40 days ago, key 2's 10 days ago.
    spark.sql(f"UPDATE {tomb} SET recorded_at = current_timestamp() - INTERVAL 40 DAYS WHERE product_id = 1")
    spark.sql(f"UPDATE {tomb} SET recorded_at = current_timestamp() - INTERVAL 10 DAYS WHERE product_id = 2")
    write_csv(source, "20220303-1000000000.csv", [["U", 3, "tools", "item3", 2, "2022-03-03 10:00:00"]])
    second = apply(settings, source, table_name)
    assert second.tombstones_pruned == 1
    assert rows(spark, f"SELECT product_id FROM {tomb} ORDER BY 1") == [(2,)]
    # The documented price: an event older than a pruned delete brings its key back; within
    # the horizon it stays deleted.
    write_csv(source, "20220302-0000000000.csv", [["U", 1, "tools", "old1", 1, T2], ["U", 2, "tools", "old2", 1, T2]])
    late = apply(settings, source, table_name)
    assert (late.inserted, late.ignored_stale, late.tombstones_pruned) == (1, 1, 0)
    assert state(spark, table_name) == [(1, "old1", 1), (3, "item3", 2)]
