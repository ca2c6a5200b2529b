"""Commit a CDC batch as one Iceberg row-delta without joining the table a second time.

The classification pass already knows, for every update and delete, where the table's
current row lives (the `_file`/`_pos` metadata columns). A MERGE would find those rows
again with a second join over the whole table; here they become position-delete files
directly, and the new row versions become data files, committed together:

1. new rows are appended by Spark's Iceberg writer to a private branch (so Iceberg writes
   the data files, partitioning, field ids and metrics), then taken off it;
2. position deletes are written as Parquet with Iceberg's reserved field ids, by pyarrow
   in Spark tasks, one file per data file they refer to (file-scoped, as Iceberg's own
   writer does);
3. one `RowDelta` on main adds both, validated against the snapshot the classification
   read, and carries the batch's summary properties; then the branch is dropped.

Only for format-version 2 tables in merge-on-read mode: copy-on-write tables keep the
MERGE (their users asked for rewritten files), and v3 tables need deletion vectors.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from functools import partial
from typing import Any
from urllib.parse import urlparse

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyarrow import fs as pafs
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from shoal import storage
from shoal.exceptions import ShoalError
from shoal.lake import TableName
from shoal.progress import Say

BRANCH_PREFIX = "shoal_cdc_"
# The comparison carries a data file as Spark's xxhash64 of its path (see file_ids).
FILE_ID_COL = "_file_id"
# Iceberg's reserved field ids of a position-delete file's columns (MetadataColumns).
DELETE_FILE_PATH_ID = 2147483546
DELETE_POS_ID = 2147483545


def iceberg_table(spark: SparkSession, qualified: str) -> Any:
    jvm = spark.sparkContext._jvm
    assert jvm is not None  # a live SparkContext has its gateway
    return jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(spark._jsparkSession, qualified)


def supported(spark: SparkSession, props: dict[str, str]) -> bool:
    """Whether a table with these properties takes the row-delta path."""
    field_ids = spark.conf.get("spark.sql.parquet.fieldId.write.enabled", "true") == "true"
    return (
        props.get("format-version") == "2"
        and props.get("write.merge.mode", "copy-on-write") == "merge-on-read"
        and field_ids
    )


def drop_stale_branches(jtable: Any) -> None:
    """Branches a batch killed mid-commit left behind (their snapshot's files become orphans)."""
    stale = [name for name in jtable.refs().keySet() if str(name).startswith(BRANCH_PREFIX)]
    for name in stale:
        jtable.manageSnapshots().removeBranch(name).commit()


def commit(
    spark: SparkSession,
    table: TableName,
    catalog: str,
    base_snapshot: int,
    rows: DataFrame | None,
    deletes: DataFrame,
    properties: dict[str, str],
    batch_id: str,
    say: Say = lambda _msg: None,
    data_files: dict[str, tuple[int, Any]] | None = None,
) -> None:
    """Append `rows` and delete the (file_path, pos) rows of `deletes` in one snapshot.

    `deletes` positions must come from reading `base_snapshot`; the commit fails (and
    leaves the table as it was) if any data file they name was removed since.
    """
    jtable = iceberg_table(spark, table.qualified(catalog))
    drop_stale_branches(jtable)
    branch = f"{BRANCH_PREFIX}{batch_id}"
    try:
        if rows is not None:
            say("writing new row versions")
        added = _stage_rows(spark, jtable, table, rows, branch, base_snapshot) if rows is not None else []
        say("writing position deletes")
        delete_files, referenced = _write_position_deletes(spark, jtable, base_snapshot, deletes, batch_id, data_files)
        say("committing one row-delta")
        jvm = spark.sparkContext._jvm
        assert jvm is not None
        delta = jtable.newRowDelta().validateFromSnapshot(base_snapshot)
        for f in added:
            delta = delta.addRows(f)
        for f in delete_files:
            delta = delta.addDeletes(f)
        delta = delta.validateDataFilesExist(jvm.java.util.ArrayList(referenced)).validateDeletedFiles()
        for k, v in properties.items():
            delta = delta.set(k, v)
        delta.commit()
    finally:
        jtable.refresh()
        if jtable.refs().containsKey(branch):
            jtable.manageSnapshots().removeBranch(branch).commit()


def _stage_rows(
    spark: SparkSession, jtable: Any, table: TableName, rows: DataFrame, branch: str, base_snapshot: int
) -> list[Any]:
    """Write `rows` with Spark's Iceberg writer onto a fresh branch; return its data files."""
    jtable.manageSnapshots().createBranch(branch, base_snapshot).commit()
    rows.writeTo(f"{table.sql}.`branch_{branch}`").append()
    jtable.refresh()
    snap = jtable.snapshot(branch)
    if snap is None or snap.snapshotId() == base_snapshot:
        return []
    return list(snap.addedDataFiles(jtable.io()))


def _write_position_deletes(
    spark: SparkSession,
    jtable: Any,
    base_snapshot: int,
    deletes: DataFrame,
    batch_id: str,
    known: dict[str, tuple[int, Any]] | None = None,
) -> tuple[list[Any], list[str]]:
    """Write one position-delete file per data file named in `deletes` (file_path, pos).

    One Spark job: rows are grouped by data file and sorted by position, and each task
    writes its files with pyarrow and returns what it wrote (path, size, rows), so there is
    no counting pass, no listing of the output and no per-file Spark writer (measured: the
    file-per-data-file Spark write, its counting job and listing were most of this step).
    """
    out = str(jtable.locationProvider().newDataLocation(f"shoal-cdc-deletes-{batch_id}"))
    # An explicit partition count: adaptive execution coalesces a column-only repartition of
    # so few bytes (positions compress to ~1 MB per 200k) into one task, and the pyarrow
    # writers then ran one after another on one core (seen: 1 task, 14 s, at 200k changes).
    tasks = max(spark.sparkContext.defaultParallelism, 1)
    written = (
        deletes.select("file_path", F.col("pos").cast("bigint").alias("pos"))
        .repartition(tasks, "file_path")
        .sortWithinPartitions("file_path", "pos")
        .mapInArrow(partial(write_delete_files, out=out), _WRITTEN_SCHEMA)
        .collect()
    )
    if not written:
        return [], []
    by_path = {r.file_path: r for r in written}
    if len(by_path) != len(written):
        raise ShoalError(f"internal: two position-delete files for one data file under {out}")
    paths = sorted(by_path)
    data_files = known if known is not None else data_files_of(jtable, base_snapshot, set(paths))
    missing = [p for p in paths if p not in data_files]
    if missing:
        raise ShoalError(f"internal: rows to delete point at files outside the read snapshot: {missing[:3]}")
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    builder_of, parquet = jvm.org.apache.iceberg.FileMetadata, jvm.org.apache.iceberg.FileFormat.PARQUET
    specs: dict[int, Any] = {}  # few specs, many files: each py4j call is a round trip
    files = []
    for path in paths:
        row, (spec_id, partition) = by_path[path], data_files[path]
        if spec_id not in specs:
            specs[spec_id] = jtable.specs().get(spec_id)
        files.append(
            builder_of.deleteFileBuilder(specs[spec_id])
            .ofPositionDeletes()
            .withPath(row.location)
            .withFormat(parquet)
            .withFileSizeInBytes(row.size)
            .withRecordCount(row.records)
            .withPartition(partition)
            .withReferencedDataFile(path)
            .build()
        )
    return files, paths


_WRITTEN_SCHEMA = "file_path string, location string, size bigint, records bigint"
_WRITTEN_FIELDS: list[tuple[str, pa.DataType]] = [
    ("file_path", pa.string()),
    ("location", pa.string()),
    ("size", pa.int64()),
    ("records", pa.int64()),
]
_WRITTEN_ARROW = pa.schema(_WRITTEN_FIELDS)
_DELETE_FIELDS: list[pa.Field] = [
    pa.field("file_path", pa.string(), nullable=False, metadata={b"PARQUET:field_id": str(DELETE_FILE_PATH_ID)}),
    pa.field("pos", pa.int64(), nullable=False, metadata={b"PARQUET:field_id": str(DELETE_POS_ID)}),
]
_DELETE_SCHEMA = pa.schema(_DELETE_FIELDS)


def _open(location: str) -> tuple[Any, str]:
    """pyarrow filesystem and path of a location spelled as Iceberg spells the table's."""
    if location.startswith("file:"):
        return storage.filesystem(urlparse(location).path)
    return storage.filesystem(location)


def write_delete_files(batches: Iterator[pa.RecordBatch], out: str) -> Iterator[pa.RecordBatch]:
    """mapInArrow body: (file_path, pos) rows grouped by file_path and sorted by pos in;
    one position-delete Parquet file per file_path written under `out`; (file_path,
    location, size, records) of each file out."""
    fs, folder = _open(out)
    if isinstance(fs, pafs.LocalFileSystem):  # object stores have no folders to make
        fs.create_dir(folder, recursive=True)
    done: dict[str, list[Any]] = {name: [] for name in _WRITTEN_ARROW.names}
    current: str | None = None
    sink: Any = None
    writer: pq.ParquetWriter | None = None
    records = 0

    def close() -> None:
        assert writer is not None and sink is not None
        writer.close()
        done["size"].append(sink.tell())
        sink.close()
        done["file_path"].append(current)
        done["records"].append(records)

    for batch in batches:
        if batch.num_rows == 0:
            continue
        table = pa.Table.from_batches([batch]).cast(_DELETE_SCHEMA)
        file_paths = table.column("file_path").combine_chunks()
        changed = pc.not_equal(file_paths.slice(1), file_paths.slice(0, len(file_paths) - 1))
        starts = [0, *(np.flatnonzero(changed.to_numpy(zero_copy_only=False)) + 1).tolist(), len(file_paths)]
        for a, b in zip(starts, starts[1:], strict=False):
            path = file_paths[a].as_py()
            if path != current:
                if writer is not None:
                    close()
                name = f"{uuid.uuid4().hex}-deletes.parquet"
                sink = fs.open_output_stream(f"{folder}/{name}")
                writer = pq.ParquetWriter(sink, _DELETE_SCHEMA)
                current, records = path, 0
                done["location"].append(f"{out}/{name}")
            assert writer is not None
            writer.write_table(table.slice(a, b - a))
            records += b - a
    if writer is not None:
        close()
    if done["file_path"]:
        yield pa.RecordBatch.from_pydict(done, schema=_WRITTEN_ARROW)


def data_files(jtable: Any, snapshot: int) -> dict[str, tuple[int, Any]]:
    """path -> (spec id, partition) of every data file in `snapshot`."""
    return data_files_of(jtable, snapshot, None)


def file_ids(spark: SparkSession, files: dict[str, tuple[int, Any]]) -> dict[int, str] | None:
    """Spark's xxhash64 of each data file's path -> the path; None if two paths share one."""
    if not files:
        return {}
    hashed = (
        spark.createDataFrame([(p,) for p in files], "file_path string")
        .select(F.xxhash64("file_path").alias("id"), "file_path")
        .collect()
    )
    ids = {int(r.id): str(r.file_path) for r in hashed}
    return ids if len(ids) == len(files) else None


# Above this many data files the id -> path map is joined with a shuffle, not broadcast.
BROADCAST_FILES = 200_000


def with_paths(spark: SparkSession, deletes: DataFrame, ids: dict[int, str]) -> DataFrame:
    """(FILE_ID_COL, pos) rows -> (file_path, pos): each hash mapped back to its path."""
    paths = spark.createDataFrame(list(ids.items()), f"{FILE_ID_COL} bigint, file_path string")
    paths = F.broadcast(paths) if len(ids) <= BROADCAST_FILES else paths
    return deletes.join(paths, on=FILE_ID_COL, how="inner").select("file_path", "pos")


def data_files_of(jtable: Any, snapshot: int, wanted: set[str] | None) -> dict[str, tuple[int, Any]]:
    """(spec id, partition) of the wanted data files (None: all) in `snapshot`."""
    found: dict[str, tuple[int, Any]] = {}
    tasks = jtable.newScan().useSnapshot(snapshot).ignoreResiduals().planFiles()
    try:
        it = tasks.iterator()
        while it.hasNext():
            data_file = it.next().file()
            path = str(data_file.location())
            if wanted is None or path in wanted:
                found[path] = (int(data_file.specId()), data_file.partition())
    finally:
        tasks.close()
    return found
