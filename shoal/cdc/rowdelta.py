"""Commit a CDC batch as one Iceberg row-delta without joining the table a second time.

The classification pass already knows, for every update and delete, where the table's
current row lives (the `_file`/`_pos` metadata columns). A MERGE would find those rows
again with a second join over the whole table; here they become position-delete files
directly, and the new row versions become data files, committed together:

1. new rows are appended by Spark's Iceberg writer to a private branch (so Iceberg writes
   the data files, partitioning, field ids and metrics), then taken off it;
2. position deletes are written by Spark as Parquet with Iceberg's reserved field ids,
   one file per data file they refer to (file-scoped, as Iceberg's own writer does);
3. one `RowDelta` on main adds both, validated against the snapshot the classification
   read, and carries the batch's summary properties; then the branch is dropped.

Only for format-version 2 tables in merge-on-read mode: copy-on-write tables keep the
MERGE (their users asked for rewritten files), and v3 tables need deletion vectors.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from shoal.exceptions import ShoalError
from shoal.lake import TableName

BRANCH_PREFIX = "shoal_cdc_"
# Iceberg's reserved field ids of a position-delete file's columns (MetadataColumns).
DELETE_FILE_PATH_ID = 2147483546
DELETE_POS_ID = 2147483545
_FID = "_shoal_fid"


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
    say: Callable[[str], None] = lambda _msg: None,
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
        delete_files, referenced = _write_position_deletes(spark, jtable, base_snapshot, deletes, batch_id)
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
    spark: SparkSession, jtable: Any, base_snapshot: int, deletes: DataFrame, batch_id: str
) -> tuple[list[Any], list[str]]:
    """Write one position-delete file per data file named in `deletes` (file_path, pos)."""
    counts = {r.file_path: int(r["count"]) for r in deletes.groupBy("file_path").count().collect()}
    if not counts:
        return [], []
    paths = sorted(counts)
    ids = spark.createDataFrame(list(enumerate(paths)), f"{_FID} int, file_path string")
    out = str(jtable.locationProvider().newDataLocation(f"shoal-cdc-deletes-{batch_id}"))
    (
        deletes.join(F.broadcast(ids), "file_path")
        .repartition(_FID)
        .sortWithinPartitions(_FID, "pos")
        .select(
            F.col("file_path").alias("file_path", metadata={"parquet.field.id": DELETE_FILE_PATH_ID}),
            F.col("pos").cast("bigint").alias("pos", metadata={"parquet.field.id": DELETE_POS_ID}),
            _FID,
        )
        .write.option("maxRecordsPerFile", 0)
        .partitionBy(_FID)
        .mode("errorifexists")
        .parquet(out)
    )
    written = _list_parquet(spark, out)
    by_fid: dict[int, tuple[str, int]] = {}
    for path, size in written:
        fid = int(path.rsplit(f"/{_FID}=", 1)[1].split("/", 1)[0])
        if fid in by_fid:
            raise ShoalError(f"internal: two position-delete files for one data file under {out}")
        by_fid[fid] = (path, size)
    if len(by_fid) != len(paths):
        raise ShoalError(f"internal: expected {len(paths)} position-delete files under {out}, found {len(by_fid)}")

    data_files = _data_files(jtable, base_snapshot, set(paths))
    missing = [p for p in paths if p not in data_files]
    if missing:
        raise ShoalError(f"internal: rows to delete point at files outside the read snapshot: {missing[:3]}")
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    builder_of, parquet = jvm.org.apache.iceberg.FileMetadata, jvm.org.apache.iceberg.FileFormat.PARQUET
    local = "://" not in str(jtable.location()) and not str(jtable.location()).startswith("file:")
    files = []
    for fid, (path, size) in sorted(by_fid.items()):
        data_file = data_files[paths[fid]]
        location = path.removeprefix("file:") if local else path  # spelled like the table's data files
        files.append(
            builder_of.deleteFileBuilder(jtable.specs().get(data_file.specId()))
            .ofPositionDeletes()
            .withPath(location)
            .withFormat(parquet)
            .withFileSizeInBytes(size)
            .withRecordCount(counts[paths[fid]])
            .withPartition(data_file.partition())
            .withReferencedDataFile(data_file.location())
            .build()
        )
    return files, paths


def _list_parquet(spark: SparkSession, folder: str) -> list[tuple[str, int]]:
    """(path, size) of the Parquet files under `folder`; Spark's _SUCCESS marker is removed."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    root = jvm.org.apache.hadoop.fs.Path(folder)
    fs = root.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
    fs.delete(jvm.org.apache.hadoop.fs.Path(root, "_SUCCESS"), False)
    found = []
    listing = fs.listFiles(root, True)
    while listing.hasNext():
        status = listing.next()
        path = str(status.getPath().toString())
        if path.endswith(".parquet"):
            found.append((path, int(status.getLen())))
    return found


def _data_files(jtable: Any, snapshot: int, wanted: set[str]) -> dict[str, Any]:
    """The DataFile objects (spec, partition) of the wanted paths in `snapshot`."""
    found: dict[str, Any] = {}
    tasks = jtable.newScan().useSnapshot(snapshot).ignoreResiduals().planFiles()
    try:
        it = tasks.iterator()
        while it.hasNext():
            data_file = it.next().file()
            path = str(data_file.location())
            if path in wanted:
                found[path] = data_file
    finally:
        tasks.close()
    return found
