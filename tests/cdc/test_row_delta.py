"""The row-delta commit path: updates and deletes become position deletes of the rows the
classification found (`_file`/`_pos`), committed with the new rows in one snapshot."""

from __future__ import annotations

import uuid

import pytest

from shoal.cdc import apply as apply_module
from shoal.cdc import rowdelta
from shoal.lake import TableName, maintain
from tests.support.helpers import apply, product_state, rows, write_csv, write_full_load

T1, T2, T3 = "2022-03-01 10:00:00", "2022-03-02 11:34:01", "2022-03-02 11:35:00"


def full_load(source, table: str, settings, **kw) -> int:
    write_full_load(source)
    result = apply(settings, source, table, partition_by="category, bucket(16, product_id)", **kw)
    assert result.snapshot_id is not None
    return result.snapshot_id


def refs(spark, table: str) -> list[str]:
    return sorted(r[0] for r in rows(spark, f"SELECT name FROM {table}.refs"))


def test_updates_and_deletes_are_one_row_delta_that_compaction_folds(spark, settings, source, table_name) -> None:
    first = full_load(source, table_name, settings)
    # 102 moves partition (tools -> garden), 103 is deleted, 104 is new.
    write_csv(
        source,
        "20220302-1134010000.csv",
        [["U", 102, "garden", "saw", 4, T2], ["D", 103, "garden", "rake", 7, T2], ["I", 104, "tools", "drill", 1, T2]],
    )
    r = apply(settings, source, table_name)
    assert (r.inserted, r.updated, r.deleted) == (1, 1, 1)
    want = [(101, "tools", "hammer", 10), (102, "garden", "saw", 4), (104, "tools", "drill", 1)]
    assert product_state(spark, table_name) == want

    (summary,) = rows(spark, f"SELECT summary FROM {table_name}.snapshots WHERE snapshot_id = {r.snapshot_id}")
    summary = summary[0]
    assert summary["added-position-deletes"] == "2" and summary["added-records"] == "2"
    assert summary.get("deleted-data-files", "0") == "0"  # nothing rewritten
    assert summary["shoal.cdc.files"] == '["20220302-1134010000.csv"]'
    assert refs(spark, table_name) == ["main"]  # the staging branch is gone
    # Each delete file refers to one data file, in that file's partition.
    deletes = rows(spark, f"SELECT partition.category, record_count FROM {table_name}.delete_files ORDER BY 1")
    assert deletes == [("garden", 1), ("tools", 1)]
    old = rows(spark, f"SELECT product_id FROM {table_name} VERSION AS OF {first} ORDER BY 1")
    assert old == [(101,), (102,), (103,)]

    result = maintain(
        spark,
        TableName.parse(table_name),
        catalog=settings.catalog.name,
        retention_hours=0,
        retain_last=1,
        orphan_min_age_hours=24,
        target_file_size_mb=128,
    )
    assert result["data_files_rewritten"] >= 1
    assert rows(spark, f"SELECT count(*) FROM {table_name}.delete_files") == [(0,)]
    assert product_state(spark, table_name) == want


def test_a_branch_left_by_a_killed_batch_is_dropped_and_its_rows_never_appear(
    spark, settings, source, table_name
) -> None:
    full_load(source, table_name, settings)
    spark.sql(f"ALTER TABLE {table_name} CREATE BRANCH {rowdelta.BRANCH_PREFIX}killed")
    spark.sql(
        f"INSERT INTO {table_name}.branch_{rowdelta.BRANCH_PREFIX}killed "
        "VALUES (999, 'tools', 'ghost', 1, TIMESTAMP '2022-03-02 00:00:00')"
    )
    write_csv(source, "20220302-1134010000.csv", [["U", 101, "tools", "hammer", 9, T2]])
    apply(settings, source, table_name)
    assert refs(spark, table_name) == ["main"]
    assert product_state(spark, table_name) == [
        (101, "tools", "hammer", 9),
        (102, "tools", "saw", 5),
        (103, "garden", "rake", 7),
    ]


def test_files_rewritten_after_classification_fail_the_commit_and_rerun_applies(
    spark, settings, source, table_name, monkeypatch
) -> None:
    full_load(source, table_name, settings)
    before = product_state(spark, table_name)
    write_csv(
        source, "20220302-1134010000.csv", [["U", 101, "tools", "hammer", 9, T2], ["D", 103, "garden", "rake", 7, T2]]
    )
    original = rowdelta._write_position_deletes

    def compact_first(*args, **kwargs):
        # Another writer rewrites every data file between the classification and the commit.
        spark.sql(
            f"CALL {settings.catalog.name}.system.rewrite_data_files(table => '{table_name}', "
            "options => map('rewrite-all', 'true'))"
        ).collect()
        return original(*args, **kwargs)

    monkeypatch.setattr(rowdelta, "_write_position_deletes", compact_first)
    with pytest.raises(Exception, match="(?i)missing required files|cannot commit|validat"):
        apply(settings, source, table_name)
    monkeypatch.setattr(rowdelta, "_write_position_deletes", original)
    assert product_state(spark, table_name) == before and refs(spark, table_name) == ["main"]

    again = apply(settings, source, table_name)
    assert (again.updated, again.deleted) == (1, 1)
    assert product_state(spark, table_name) == [(101, "tools", "hammer", 9), (102, "tools", "saw", 5)]


def test_copy_on_write_tables_keep_the_merge(spark, settings, source, table_name) -> None:
    full_load(source, table_name, settings, write_mode="copy-on-write")
    write_csv(
        source, "20220302-1134010000.csv", [["U", 101, "tools", "hammer", 9, T2], ["D", 103, "garden", "rake", 7, T2]]
    )
    r = apply(settings, source, table_name)
    assert (r.updated, r.deleted) == (1, 1)
    assert rows(spark, f"SELECT count(*) FROM {table_name}.delete_files") == [(0,)]
    assert product_state(spark, table_name) == [(101, "tools", "hammer", 9), (102, "tools", "saw", 5)]


NARROWING_BATCHES = [
    [["U", 102, "garden", "saw", 4, T2], ["D", 103, "garden", "rake", 7, T2], ["I", 104, "tools", "drill", 1, T2]],
    # 103's late, older update is stale against its tombstone; 999's delete finds no row.
    [["U", 103, "garden", "rake", 8, T1], ["U", 101, "tools", "hammer", 2, T3], ["D", 999, "tools", "x", 0, T3]],
]
Outcome = tuple[int, int, int, int, int]


def _apply_batches(settings, source, table: str) -> list[Outcome]:
    outcomes = []
    for i, batch in enumerate(NARROWING_BATCHES):
        write_csv(source, f"20220302-113{i}010000.csv", batch)
        r = apply(settings, source, table)
        outcomes.append((r.inserted, r.updated, r.deleted, r.ignored_stale, r.deletes_of_missing_keys))
    return outcomes


@pytest.fixture(scope="module")
def narrowed_run(spark, settings, tmp_path_factory) -> tuple[list[Outcome], list[tuple]]:
    """The same load and batches applied with narrowing (ratio 0: these tiny tables narrow):
    what each whole-table run below must match. Built once, not once per case."""
    source = tmp_path_factory.mktemp("narrowed-changes")
    table = f"t{uuid.uuid4().hex[:8]}.narrowed"
    full_load(source, table, settings)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(apply_module, "NARROW_MIN_RATIO", 0)
        outcomes = _apply_batches(settings, source, table)
    return outcomes, product_state(spark, table)


@pytest.mark.parametrize(("broadcast_keys", "min_ratio"), [(0, 0), (1, 0), (1000, 10**9)])
def test_the_whole_table_join_when_not_narrowing_gives_the_same_result(
    spark, settings, source, table_name, monkeypatch, narrowed_run, broadcast_keys, min_ratio
) -> None:
    """Batches with more keys than `[cdc] broadcast_keys` (0: always), or against a table
    not much larger than them, skip narrowing the table and its tombstones to the batch's
    keys; the outcome must not change."""
    whole = settings.model_copy(update={"cdc": settings.cdc.model_copy(update={"broadcast_keys": broadcast_keys})})
    narrowed_outcomes, narrowed_state = narrowed_run
    full_load(source, table_name, whole)
    monkeypatch.setattr(apply_module, "NARROW_MIN_RATIO", min_ratio)
    outcomes = _apply_batches(whole, source, table_name)
    assert outcomes == narrowed_outcomes == [(1, 1, 1, 0, 0), (0, 1, 0, 1, 1)]
    want = [(101, "tools", "hammer", 2), (102, "garden", "saw", 4), (104, "tools", "drill", 1)]
    assert product_state(spark, table_name) == narrowed_state == want


def test_carrying_data_file_paths_when_their_hashes_collide_gives_the_same_result(
    spark, settings, source, table_name, monkeypatch, narrowed_run
) -> None:
    """The comparison carries each row's data file as a 64-bit hash of its path; were two of
    the snapshot's paths to share one, the paths themselves are carried (as before issue 45)."""
    assert rowdelta.file_ids(spark, {"a": (0, None), "b": (0, None)}) is not None
    monkeypatch.setattr(rowdelta, "file_ids", lambda *_a, **_k: None)
    full_load(source, table_name, settings)
    assert _apply_batches(settings, source, table_name) == narrowed_run[0]
    assert product_state(spark, table_name) == narrowed_run[1]


def test_file_ids_map_spark_hashes_back_to_paths(spark) -> None:
    paths = [f"file:/lake/t/data/part-{i}.parquet" for i in range(50)]
    ids = rowdelta.file_ids(spark, {p: (0, None) for p in paths})
    assert ids is not None and sorted(ids.values()) == sorted(paths)
    got = spark.sql(f"SELECT xxhash64('{paths[7]}') AS h").first()
    assert got is not None and ids[int(got.h)] == paths[7]
    deletes = spark.createDataFrame([(int(got.h), 3)], f"{rowdelta.FILE_ID_COL} bigint, pos bigint")
    assert [tuple(r) for r in rowdelta.with_paths(spark, deletes, ids).collect()] == [(paths[7], 3)]


def test_delete_files_are_one_per_data_file_across_arrow_batches(tmp_path) -> None:
    """The task-side writer: runs of one data file's positions, split over several Arrow
    batches, end up in one Parquet file carrying Iceberg's reserved field ids."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    def batch(paths: list[str], positions: list[int]) -> pa.RecordBatch:
        return pa.RecordBatch.from_pydict({"file_path": paths, "pos": pa.array(positions, pa.int64())})

    a, b, c = "s3://bucket/t/data/a.parquet", "s3://bucket/t/data/b.parquet", "s3://bucket/t/data/c.parquet"
    batches = [batch([a, a, b], [0, 5, 1]), batch([b, b], [2, 9]), batch([], []), batch([c], [3])]
    out = f"file:{tmp_path}/deletes"
    (written,) = rowdelta.write_delete_files(iter(batches), out=out)
    got = written.to_pylist()
    assert [(w["file_path"], w["records"]) for w in got] == [(a, 2), (b, 3), (c, 1)]
    for w, want in zip(got, ([0, 5], [1, 2, 9], [3]), strict=True):
        assert w["location"].startswith(out + "/")
        local = w["location"].removeprefix("file:")
        table = pq.read_table(local)
        assert table.column("pos").to_pylist() == want and set(table.column("file_path").to_pylist()) == {
            w["file_path"]
        }
        assert w["size"] == (tmp_path / "deletes" / local.rsplit("/", 1)[1]).stat().st_size
        ids = [f.metadata[b"PARQUET:field_id"] for f in pq.read_schema(local)]
        assert ids == [str(rowdelta.DELETE_FILE_PATH_ID).encode(), str(rowdelta.DELETE_POS_ID).encode()]
