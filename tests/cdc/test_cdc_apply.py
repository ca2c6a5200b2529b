"""CDC semantics on real Spark + Iceberg (SQLite JDBC catalog)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from shoal.cdc import apply as apply_module
from shoal.exceptions import BadChangeRowError, ShoalError, SourceError
from shoal.lake import TableName, current_snapshot, history, maintain
from shoal.sql import run as run_sql
from tests.support.helpers import apply, product_state, rows, write_csv, write_full_load

T1, T2, T3, T4 = "2022-03-01 10:00:00", "2022-03-02 11:34:01", "2022-03-02 11:35:00", "2022-03-03 09:00:00"


def maintain_now(spark, settings, table: TableName, *, orphan_min_age_hours: float = 24) -> dict:
    """Maintenance that expires every snapshot but the current one."""
    return maintain(
        spark,
        table,
        catalog=settings.catalog.name,
        retention_hours=0,
        retain_last=1,
        orphan_min_age_hours=orphan_min_age_hours,
        target_file_size_mb=128,
    )


def test_full_load_then_changes_and_time_travel(spark, settings, source, table_name) -> None:
    write_full_load(source)
    first = apply(settings, source, table_name, partition_by="category, bucket(16, product_id)")
    assert first.table_created and first.inserted == 3 and first.files_applied == ["LOAD00000001.csv"]
    write_csv(source, "20220302-1134010000.csv", [["U", 102, "tools", "saw", 4, T2]])
    write_csv(
        source, "20220302-1135000000.csv", [["U", 102, "tools", "saw", 3, T3], ["D", 103, "garden", "rake", 7, T3]]
    )
    second = apply(settings, source, table_name)
    assert (second.inserted, second.updated, second.deleted, second.duplicates_collapsed) == (0, 1, 1, 1)
    assert second.files_applied == ["20220302-1134010000.csv", "20220302-1135000000.csv"]
    assert product_state(spark, table_name) == [(101, "tools", "hammer", 10), (102, "tools", "saw", 3)]

    types = dict((f.name, f.dataType.simpleString()) for f in spark.table(table_name).schema.fields)
    assert types == {
        "product_id": "bigint",
        "category": "string",
        "name": "string",
        "quantity": "bigint",
        "updated_at": "timestamp",
    }
    expected_first = [(101, "tools", "hammer", 10), (102, "tools", "saw", 5), (103, "garden", "rake", 7)]
    for clause in (f"VERSION AS OF {first.snapshot_id}", f"FOR VERSION AS OF {first.snapshot_id}"):
        res = run_sql(spark, f"SELECT product_id, category, name, quantity FROM {table_name} {clause} ORDER BY 1")
        assert res.rows == expected_first
    between = next(h for h in history(spark, TableName.parse(table_name)) if h["snapshot_id"] == first.snapshot_id)
    at = dt.datetime.fromisoformat(between["committed_at"]) + dt.timedelta(milliseconds=1)
    stamp = at.strftime("%Y-%m-%d %H:%M:%S.%f")
    for clause in (f"FOR TIMESTAMP AS OF '{stamp}'", f"FOR SYSTEM_TIME AS OF TIMESTAMP '{stamp}'"):
        res = run_sql(spark, f"SELECT product_id, category, name, quantity FROM {table_name} {clause} ORDER BY 1")
        assert res.rows == expected_first


def test_last_event_per_key_wins_by_sequence_then_file_then_line(spark, settings, source, table_name) -> None:
    write_csv(
        source, "20220301-0000000000.csv", [["I", 1, "a", "from-first-file", 1, T2], ["U", 2, "a", "newest", 1, T3]]
    )
    write_csv(
        source,
        "20220301-0000000001.csv",
        [
            ["U", 1, "a", "later-file-same-seq", 1, T2],
            ["U", 1, "a", "later-line-same-seq", 2, T2],
            ["U", 2, "a", "older", 9, T2],
        ],
    )
    r = apply(settings, source, table_name)
    assert r.inserted == 2 and r.duplicates_collapsed == 3
    assert rows(spark, f"SELECT product_id, name, quantity FROM {table_name} ORDER BY 1") == [
        (1, "later-line-same-seq", 2),
        (2, "newest", 1),
    ]


def test_operation_semantics(spark, settings, source, table_name) -> None:
    write_full_load(source)
    apply(settings, source, table_name)
    write_csv(
        source,
        "20220302-1134010000.csv",
        [
            ["U", 200, "new", "upsert-of-missing", 1, T2],  # U for a missing key inserts
            ["D", 300, "new", "gone", 1, T2],  # D for a missing key does nothing
            ["I", 101, "tools", "hammer-v2", 11, T2],  # I for an existing key updates
            ["D", 102, "tools", "saw", 5, T2],  # D then I of one key leaves it present
            ["I", 102, "tools", "saw-reborn", 1, T3],
        ],
    )
    r = apply(settings, source, table_name)
    assert (r.inserted, r.updated, r.deleted, r.deletes_of_missing_keys) == (1, 2, 0, 1)
    assert product_state(spark, table_name) == [
        (101, "tools", "hammer-v2", 11),
        (102, "tools", "saw-reborn", 1),
        (103, "garden", "rake", 7),
        (200, "new", "upsert-of-missing", 1),
    ]


def test_late_arriving_file_never_overwrites_newer_data(spark, settings, source, table_name) -> None:
    write_csv(source, "20220303-0900000000.csv", [["I", 1, "a", "current", 5, T4], ["I", 2, "a", "keep", 5, T4]])
    apply(settings, source, table_name)
    before = current_snapshot(spark, TableName.parse(table_name))[0]
    # Named earlier (arrived late), carrying older events.
    write_csv(source, "20220302-0000000000.csv", [["U", 1, "a", "stale", 1, T2], ["D", 2, "a", "keep", 5, T2]])
    r = apply(settings, source, table_name)
    assert r.ignored_stale == 2 and r.updated == 0 and r.deleted == 0
    assert rows(spark, f"SELECT product_id, name FROM {table_name} ORDER BY 1") == [(1, "current"), (2, "keep")]
    # The files still count as applied: recorded in a snapshot of their own.
    assert r.committed and r.snapshot_id != before
    again = apply(settings, source, table_name)
    assert again.files_applied == [] and again.snapshot_id == r.snapshot_id


def test_partition_change_moves_the_row_without_duplicates(spark, settings, source, table_name) -> None:
    write_full_load(source)
    apply(settings, source, table_name, partition_by="category, bucket(4, product_id)")
    write_csv(source, "20220302-1134010000.csv", [["U", 103, "tools", "rake", 7, T2]])
    same_spec = apply(settings, source, table_name, partition_by="category, bucket(4, product_id)")
    assert same_spec.warnings == []  # re-running the same command is not worth a warning
    write_csv(source, "20220302-1134010001.csv", [["U", 101, "tools", "hammer", 1, T2]])
    other = apply(settings, source, table_name, partition_by="days(updated_at)")
    assert "--partition-by is ignored" in other.warnings[0] and "bucket(4, product_id)" in other.warnings[0]
    assert rows(spark, f"SELECT category, count(*) FROM {table_name} WHERE product_id = 103 GROUP BY 1") == [
        ("tools", 1)
    ]
    # The old partition holds no live row any more (merge-on-read marks it deleted).
    assert rows(spark, f"SELECT count(*) FROM {table_name} WHERE category = 'garden'") == [(0,)]
    assert rows(
        spark,
        f"SELECT sum(position_delete_record_count) FROM {table_name}.partitions WHERE partition.category = 'garden'",
    ) == [(1,)]
    assert rows(spark, f"SELECT count(*) FROM {table_name}") == [(3,)]


def test_new_columns_are_added_and_nothing_is_dropped(spark, settings, source, table_name) -> None:
    write_full_load(source)
    apply(settings, source, table_name)
    header = ["op", "product_id", "category", "name", "quantity", "updated_at", "price"]
    write_csv(source, "20220302-1134010000.csv", [["U", 101, "tools", "hammer", 9, T2, "12.5"]], header=header)
    r = apply(settings, source, table_name)
    assert r.columns_added == ["price"]
    assert rows(spark, f"SELECT product_id, price FROM {table_name} ORDER BY 1") == [
        (101, 12.5),
        (102, None),
        (103, None),
    ]
    # A later file without 'quantity': the column stays.
    write_csv(
        source,
        "20220302-1135000000.csv",
        [["U", 102, "tools", "saw", T3, "3.0"]],
        header=["op", "product_id", "category", "name", "updated_at", "price"],
    )
    apply(settings, source, table_name)
    assert "quantity" in spark.table(table_name).columns
    assert rows(spark, f"SELECT quantity, price FROM {table_name} WHERE product_id = 102") == [(5, 3.0)]


def test_nothing_new_writes_no_snapshot(spark, settings, source, table_name) -> None:
    write_full_load(source)
    first = apply(settings, source, table_name)
    n = len(history(spark, TableName.parse(table_name)))
    again = apply(settings, source, table_name)
    assert again.files_applied == [] and not again.committed and again.snapshot_id == first.snapshot_id
    assert len(history(spark, TableName.parse(table_name))) == n


@pytest.mark.parametrize(
    ("row", "reason"),
    [
        (["X", 104, "tools", "drill", 1, T2], "unknown operation 'X'"),
        (["U", "abc", "tools", "drill", 1, T2], "column 'product_id': value [\"abc\"] is not a valid bigint"),
        (["U", 104, "tools", "drill", 1, "yesterday"], "column 'updated_at'"),
        (["U", 104, "tools", "drill", 1], "wrong column count"),
        (["U", None, "tools", "drill", 1, T2], "key column 'product_id' is empty"),
    ],
)
def test_bad_row_fails_the_batch_naming_file_and_line(spark, settings, source, table_name, row, reason) -> None:
    write_full_load(source)
    first = apply(settings, source, table_name)
    write_csv(source, "20220302-1134010000.csv", [["U", 101, "tools", "hammer", 1, T2], row])
    with pytest.raises(BadChangeRowError) as err:
        apply(settings, source, table_name)
    assert err.value.file == "20220302-1134010000.csv" and err.value.line == 3
    assert reason in err.value.reason and "nothing was applied" in str(err.value)
    # Neither the table nor the record of applied files changed.
    assert current_snapshot(spark, TableName.parse(table_name))[0] == first.snapshot_id
    assert product_state(spark, table_name)[0] == (101, "tools", "hammer", 10)


def test_quarantine_diverts_bad_rows_and_applies_good_ones(spark, settings, source, table_name) -> None:
    write_full_load(source)
    apply(settings, source, table_name)
    write_csv(
        source,
        "20220302-1134010000.csv",
        [["U", 101, "tools", "hammer", 1, T2], ["Q", 102, "x", "y", 1, T2], ["U", 103, "garden", "rake", "many", T2]],
    )
    r = apply(settings, source, table_name, on_error="quarantine")
    assert (r.updated, r.rejected) == (1, 2)
    rejects = rows(spark, f"SELECT file, line, raw_row, reason FROM {table_name}__rejects ORDER BY line")
    assert [(f, n, raw) for f, n, raw, _ in rejects] == [
        ("20220302-1134010000.csv", 3, f"Q,102,x,y,1,{T2}"),
        ("20220302-1134010000.csv", 4, f"U,103,garden,rake,many,{T2}"),
    ]
    assert "unknown operation" in rejects[0][3] and "quantity" in rejects[1][3]
    assert product_state(spark, table_name)[0] == (101, "tools", "hammer", 1)


def test_crash_at_any_step_then_rerun_equals_one_uninterrupted_run(
    spark, settings, source, table_name, monkeypatch
) -> None:
    write_full_load(source)
    apply(settings, source, table_name)
    write_csv(
        source,
        "20220302-1134010000.csv",
        [
            ["U", 101, "tools", "hammer", 1, T2],
            ["Q", 1, "x", "y", 1, T2],
            ["D", 103, "garden", "rake", 7, T2],
            ["I", 104, "new", "drill", 3, T2],
        ],
    )
    snapshot_before = current_snapshot(spark, TableName.parse(table_name))[0]
    original_merge = apply_module._Batch._merge

    def crash(*_a, **_k):
        raise RuntimeError("simulated crash after rejects and ledger were written, before the commit")

    monkeypatch.setattr(apply_module._Batch, "_merge", crash)
    with pytest.raises(RuntimeError, match="simulated crash"):
        apply(settings, source, table_name, on_error="quarantine")
    assert current_snapshot(spark, TableName.parse(table_name))[0] == snapshot_before
    monkeypatch.setattr(apply_module._Batch, "_merge", original_merge)
    r = apply(settings, source, table_name, on_error="quarantine")
    assert (r.updated, r.deleted, r.inserted, r.files_applied) == (1, 1, 1, ["20220302-1134010000.csv"])
    assert product_state(spark, table_name) == [
        (101, "tools", "hammer", 1),
        (102, "tools", "saw", 5),
        (104, "new", "drill", 3),
    ]
    # The crashed attempt's rejects are not duplicated by the re-run.
    assert rows(spark, f"SELECT count(*) FROM {table_name}__rejects") == [(1,)]
    assert apply(settings, source, table_name, on_error="quarantine").files_applied == []


def test_headerless_files_with_columns(spark, settings, source, table_name) -> None:
    write_csv(source, "LOAD00000001.csv", [[1, "a", T1]], header=None)
    write_csv(source, "20220302-1134010000.csv", [["U", 1, "b", T2], ["I", 2, "c", T2]], header=None)
    r = apply(settings, source, table_name, keys=["id"], sequence="ts", header=False, columns=["id", "name", "ts"])
    assert r.inserted == 2
    assert rows(spark, f"SELECT id, name FROM {table_name} ORDER BY id") == [(1, "b"), (2, "c")]


def test_missing_key_column_and_missing_source_are_clear_errors(settings, source, table_name, tmp_path) -> None:
    write_full_load(source)
    with pytest.raises(SourceError, match="keys column 'sku' is not in the change files"):
        apply(settings, source, table_name, keys=["sku"])
    with pytest.raises(SourceError, match="does not exist"):
        apply(settings, tmp_path / "nowhere", table_name)
    with pytest.raises(ShoalError, match="invalid table name"):
        apply(settings, source, "no-namespace")


def test_history_and_maintenance_keep_data_and_the_ledger(spark, settings, source, table_name) -> None:
    write_full_load(source)
    apply(settings, source, table_name)
    for i, qty in enumerate([4, 3, 2]):
        write_csv(source, f"20220302-113401000{i}.csv", [["U", 102, "tools", "saw", qty, f"2022-03-02 11:3{i}:00"]])
        apply(settings, source, table_name)
    table = TableName.parse(table_name)
    hist = history(spark, table)
    assert [h["files"] for h in hist] == [
        ["LOAD00000001.csv"],
        ["20220302-1134010000.csv"],
        ["20220302-1134010001.csv"],
        ["20220302-1134010002.csv"],
    ]
    before = product_state(spark, table_name)
    result = maintain_now(spark, settings, table, orphan_min_age_hours=24)
    assert result["snapshots_expired"] >= 3 and result["data_files_rewritten"] >= 1
    assert product_state(spark, table_name) == before
    assert len(history(spark, table)) == 1
    with pytest.raises(ShoalError, match="at least 24 hours"):
        maintain_now(spark, settings, table, orphan_min_age_hours=1)
    # The record of applied files survives snapshot expiry: nothing is applied twice.
    again = apply(settings, source, table_name)
    assert again.files_applied == [] and product_state(spark, table_name) == before


def test_late_event_after_a_delete_does_not_bring_the_row_back(spark, settings, source, table_name) -> None:
    write_full_load(source)
    apply(settings, source, table_name)
    write_csv(
        source,
        "20220303-0900000000.csv",
        [["D", 103, "garden", "rake", 7, T4], ["D", 555, "x", "never-existed", 1, T4]],
    )
    r = apply(settings, source, table_name)
    assert (r.deleted, r.deletes_of_missing_keys) == (1, 1)
    # Late file: older events for the deleted key and for the never-existing deleted key.
    write_csv(
        source,
        "20220302-0000000000.csv",
        [["U", 103, "garden", "rake", 99, T2], ["I", 555, "x", "old", 1, T2], ["I", 600, "x", "new-key", 1, T2]],
    )
    r = apply(settings, source, table_name)
    assert (r.ignored_stale, r.inserted) == (2, 1)
    assert [k for k, *_ in product_state(spark, table_name)] == [101, 102, 600]
    # An event newer than the delete does bring the key back.
    write_csv(source, "20220304-0000000000.csv", [["I", 103, "garden", "rake", 1, "2022-03-04 00:00:00"]])
    assert apply(settings, source, table_name).inserted == 1
    assert rows(spark, f"SELECT {'product_id'}, {'quantity'} FROM {table_name} WHERE product_id = 103") == [(103, 1)]
    assert rows(spark, f"SELECT product_id FROM {table_name}__cdc_tombstones ORDER BY 1") == [(103,), (555,)]


def test_empty_change_files_are_recorded_not_fatal(spark, settings, source, table_name) -> None:
    (source / "LOAD00000001.csv").write_text("")
    with pytest.raises(SourceError, match="are empty"):
        apply(settings, source, table_name)
    write_full_load(source / ".." / "changes")  # overwrite the empty load with rows
    first = apply(settings, source, table_name)
    (source / "20220302-1134010000.csv").write_text("")
    r = apply(settings, source, table_name)
    assert r.files_applied == ["20220302-1134010000.csv"] and r.committed and r.snapshot_id != first.snapshot_id
    assert apply(settings, source, table_name).files_applied == []


def test_ledgers_nothing_refers_to_are_pruned(spark, settings, source, table_name) -> None:
    import os
    import time as _time

    from shoal.cdc import ledger

    write_full_load(source)
    apply(settings, source, table_name)
    write_csv(source, "20220302-1134010000.csv", [["U", 101, "tools", "hammer", 1, T2]])
    apply(settings, source, table_name)
    table = TableName.parse(table_name)
    folder = Path(settings.warehouse_uri) / "_shoal" / "cdc-ledgers" / table.namespace / table.name
    orphan = folder / "ledger-crashed-batch.json"  # what a batch killed before its commit leaves
    orphan.write_text("{}")
    assert len(list(folder.iterdir())) == 3
    maintain_now(spark, settings, table, orphan_min_age_hours=24)
    assert ledger.prune(spark, settings, table, min_age_hours=24) == 0  # all younger than a day
    old = _time.time() - 2 * 86400
    for f in folder.iterdir():
        os.utime(f, (old, old))
    assert ledger.prune(spark, settings, table, min_age_hours=24) == 2  # the first batch's and the orphan
    assert [f.name for f in folder.iterdir()] == [Path(ledger.latest_state_uri(spark, table)).name]
    assert apply(settings, source, table_name).files_applied == []


def test_unreadable_file_fails_naming_it_and_quarantines_with_the_rest_applied(
    spark, settings, source, table_name
) -> None:
    write_full_load(source)
    apply(settings, source, table_name)
    (source / "20220302-1134010000.csv").write_bytes(
        b"op,product_id,category,name,quantity,updated_at\nU,101,tools,\xff\xfe,1,2022-03-02 11:34:01\n"
        b"U,103,garden,rake,2,2022-03-02 11:34:01\n"
    )
    write_csv(source, "20220302-1135000000.csv", [["U", 102, "tools", "saw", 1, T3]])
    with pytest.raises(BadChangeRowError) as err:
        apply(settings, source, table_name)
    assert err.value.file == "20220302-1134010000.csv" and err.value.line == 2
    assert "not valid UTF-8" in err.value.reason
    r = apply(settings, source, table_name, on_error="quarantine")
    assert (r.updated, r.rejected) == (2, 1)  # the good line after the bad one applies too
    assert rows(spark, f"SELECT file, line FROM {table_name}__rejects") == [("20220302-1134010000.csv", 2)]
    assert product_state(spark, table_name)[1:] == [(102, "tools", "saw", 1), (103, "garden", "rake", 2)]
