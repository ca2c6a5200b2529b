"""Ingest: copy files into the raw zone of the warehouse and record them in `shoal.objects`.

Raw layout (prefix-per-source, so access can be granted per source and day):
    <warehouse>/raw/<source-name>/<yyyy>/<mm>/<dd>/<relative path>

An object's id is its content hash. Re-ingesting an unchanged file stores nothing new (only
its path's last_seen in `shoal.object_sources` moves); a changed
file at the same path becomes a new version (a new object). Raw files are never overwritten:
a name already taken by other content gets the new content's hash in its name.

Every path seen is recorded in `shoal.object_sources` (object id, source, path, first and
last seen), so content stored once under many paths stays findable by each of them.

The per-file work (listing below the top levels, hashing, type sniffing, copying) runs in
Spark tasks, so an object-store prefix scales with the executors; the driver lists the top
levels, decides new/unchanged/duplicate with joins, and commits each table once per run.
"""

from __future__ import annotations

import hashlib
import json
import os
import posixpath
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any

from pyspark import TaskContext
from pyspark.sql import DataFrame, Row, SparkSession, Window
from pyspark.sql import functions as F

from shoal import storage
from shoal.config import Settings
from shoal.exceptions import ShoalError
from shoal.ingest.sniff import SNIFF_BYTES, detect_media_type
from shoal.lake import metadata
from shoal.lake.locks import table_lock
from shoal.progress import count

_SOURCE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_TAG_KEY = re.compile(r"^[A-Za-z0-9_.:-]{1,64}$")


def raw_zone(settings: Settings) -> str:
    return storage.join(settings.warehouse_uri, "raw")


@dataclass
class IngestedFile:
    source_path: str
    status: str  # new | new_version | unchanged | duplicate | error | skipped
    object_id: str | None = None
    raw_path: str | None = None
    media_type: str | None = None
    size_bytes: int | None = None
    error: str | None = None


@dataclass
class IngestResult:
    source_name: str
    files: list[IngestedFile] = field(default_factory=list)
    # Spark tasks that listed and hashed the files (0: all done on the driver).
    hash_tasks: int = 0

    def count(self, status: str) -> int:
        return sum(1 for f in self.files if f.status == status)

    @property
    def new_object_ids(self) -> list[str]:
        return [f.object_id for f in self.files if f.status in ("new", "new_version") and f.object_id]

    def to_dict(self) -> dict[str, Any]:
        return {
            "source_name": self.source_name,
            "files_seen": len(self.files),
            "new": self.count("new"),
            "new_versions": self.count("new_version"),
            "unchanged": self.count("unchanged"),
            "duplicates": self.count("duplicate"),
            "errors": self.count("error"),
            "skipped": self.count("skipped"),
            "bytes_ingested": sum(f.size_bytes or 0 for f in self.files if f.status in ("new", "new_version")),
            "files": [asdict(f) for f in self.files],
            "hash_tasks": self.hash_tasks,
        }


def parse_tags(values: list[str]) -> dict[str, str]:
    tags: dict[str, str] = {}
    for item in values:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not _TAG_KEY.match(key):
            raise ShoalError(f"invalid tag {item!r}", hint="write tags as key=value, e.g. --tag team=finance")
        tags[key] = value.strip()
    return tags


def default_source_name(source: str) -> str:
    if "://" not in source:  # `shoal ingest .` names the source after the folder itself
        source = os.path.abspath(os.path.expanduser(source))
    base = posixpath.basename(source.rstrip("/")) or "source"
    name = re.sub(r"[^A-Za-z0-9_.-]+", "-", base).strip("-.") or "source"
    return name[:64]


# What a listing-and-hashing task hands back per file (status: NULL when hashed, else
# 'error' or 'skipped'; task: the Spark task attempt that hashed it, NULL on the driver).
_HASHED = "source_path STRING, uri STRING, size_bytes BIGINT, sha256 STRING, status STRING, error STRING, task BIGINT"
# One row per file seen, as reported in IngestResult.files (plus what the objects row needs).
_FILES = (
    "source_path STRING, status STRING, object_id STRING, raw_path STRING, media_type STRING, "
    "size_bytes BIGINT, error STRING, sha256 STRING, version INT, task BIGINT"
)
_FILE_COLUMNS = tuple(c.split()[0] for c in _FILES.split(", "))
_FILE_FIELDS = ("source_path", "status", "object_id", "raw_path", "media_type", "size_bytes", "error")
# Folders listed on the driver before the rest is handed to tasks: enough to spread the work,
# bounded so the driver never walks a deep tree (a worker lists each folder's whole subtree).
_PLAN_DEPTH = 2


def ingest(
    spark: SparkSession,
    settings: Settings,
    source: str,
    *,
    source_name: str | None = None,
    tags: dict[str, str] | None = None,
    say: Callable[[str], None] = lambda _m: None,
) -> IngestResult:
    """Copy every file below `source` into the raw zone and register the new objects.

    Listing, hashing, type sniffing and copying run in Spark tasks: the driver lists the
    top levels of the source only and hands each folder (and the files found there) to a
    task, so an object-store prefix of millions of keys is spread over the executors. Which
    files are new is decided by joins against `shoal.objects`, and each metadata table gets
    one commit per run. A local folder on a cluster (the executors cannot see it) is
    processed by the same functions on the driver."""
    name = source_name or default_source_name(source)
    if not _SOURCE_NAME.match(name):
        raise ShoalError(
            f"invalid source name {name!r}",
            hint="use letters, digits, '.', '_' or '-' (at most 64), starting with a letter or digit",
        )
    remote = storage.is_remote(source)
    sc = spark.sparkContext
    on_driver = not remote and not (sc.master or "").startswith("local")
    if remote:
        _storage_to_workers(spark, settings)
    files, folders, links = _plan_listing(source, target=sc.defaultParallelism * 2)
    metadata.ensure_tables(spark, ("objects", "object_index"))
    result = IngestResult(name)
    objects = metadata.table("objects")
    now = datetime.now(UTC)
    day = now.strftime("%Y/%m/%d")
    units: list[tuple] = [("file", f.relative, f.uri, f.size) for f in files]
    units += [("folder", d, None, None) for d in folders]
    new_ids: list[str] = []
    with table_lock(settings, str(objects)):
        ensure_object_sources(spark)  # under the lock: a first backfill runs once
        slices = max(1, min(len(units), sc.defaultParallelism * 4))
        where = "on the driver" if on_driver else f"in {slices} Spark tasks"
        say(f"reading {len(files)} files and {len(folders)} folders {where}")
        hash_task = _list_and_hash(source)
        if on_driver:
            hashed = spark.createDataFrame(list(hash_task(iter(units))), _HASHED)
        else:
            hashed = spark.createDataFrame(sc.parallelize(units, slices).mapPartitions(hash_task), _HASHED)
        # Files are hashed and copied inside tasks: the driver reports each phase's start and end.
        first = files[0].relative if files else None
        count(say, "hashing", 0, None if folders else len(files), unit="files", item=first)
        hashed = _keep(hashed)
        n_hashed = hashed.count()
        count(say, "hashing", n_hashed, n_hashed, unit="files")
        decided = _classify(spark, hashed, name)  # read before anything is written: checkpointed below
        copy_task = _copy_new(raw_zone(settings), name, day, settings.extract.max_file_mb << 20)
        say("copying new content into the raw zone")
        if on_driver:
            copied = spark.createDataFrame(list(copy_task(decided.toLocalIterator())), _FILES)
        else:
            copied = spark.createDataFrame(decided.rdd.mapPartitions(copy_task), _FILES)
        count(say, "copying", 0, n_hashed, unit="files", item=first)
        copied = _keep(copied)
        count(say, "copying", n_hashed, n_hashed, unit="files")
        report = _report(hashed, copied)  # from checkpoints only: cheap to reuse
        # The run's report is its output (IngestResult.files): the one per-file collect.
        rows = report.orderBy("source_path").collect()
        result.files.extend(IngestedFile(*(r[k] for k in _FILE_FIELDS)) for r in rows)
        result.hash_tasks = len({r.task for r in rows if r.task is not None})
        new_ids = [r.object_id for r in rows if r.status in ("new", "new_version")]
        if new_ids:
            say(f"recording {len(new_ids)} new objects")
            append_objects(
                spark, _object_rows(report.where(F.col("status").isin("new", "new_version")), name, now, tags or {})
            )
        if any(r.status in _SEEN for r in rows):
            say("recording the paths seen")
            seen = report.where(F.col("status").isin(*_SEEN))
            record_paths(spark, seen.select("object_id", F.lit(name).alias("source_name"), "source_path"), now)
    result.files.extend(IngestedFile(rel, "skipped", error=reason) for rel, reason in links)
    result.files.sort(key=lambda f: f.source_path)
    if new_ids:
        from shoal.lake.object_index import refresh_index

        refresh_index(spark, new_ids)
    return result


def _keep(df: DataFrame) -> DataFrame:
    """Computed once, here: the tasks behind `df` read and copy files, which must not happen
    twice, and the decisions must not be redone once shoal.objects has the new rows (a write
    to a table re-computes cached frames that read it; a checkpoint cuts that lineage)."""
    return df.localCheckpoint(eager=True)  # freed by Spark's cleaner once unreferenced


def _storage_to_workers(spark: SparkSession, settings: Settings) -> None:
    """Python workers build their object-store client from SHOAL_STORAGE__* variables
    (storage.py); a session started before these settings were known gets them for the
    workers it starts from now on. The keys travel as worker environment, never in a task."""
    env = storage.configure(settings.storage)
    spark.sparkContext.environment.update(env)


def _plan_listing(source: str, *, target: int) -> tuple[list[storage.FileEntry], list[str], list[tuple[str, str]]]:
    """List the top levels of `source` on the driver: the files there, the folders whose
    whole subtrees the tasks list, and the links left out. Folders are opened one level
    further while there are fewer than `target` of them (at most _PLAN_DEPTH levels)."""
    files, folders, skipped = storage.list_level(source)
    depth = 1
    while folders and len(folders) < target and depth < _PLAN_DEPTH:
        deeper: list[str] = []
        for folder in folders:
            f, d, s = storage.list_level(source, folder)
            files += f
            deeper += d
            skipped += s
        folders, depth = deeper, depth + 1
    return files, folders, skipped


def _list_and_hash(root: str) -> Callable[[Iterable[tuple]], Iterator[tuple]]:
    """The task that lists its folders and hashes its files (rows shaped as _HASHED)."""

    def run(units: Iterable[tuple]) -> Iterator[tuple]:
        ctx = TaskContext.get()
        task = ctx.taskAttemptId() if ctx is not None else None
        for kind, rel, uri, size in units:
            if kind == "file":
                yield _hash_row(storage.FileEntry(uri, rel, size), task)
                continue
            skipped: list[tuple[str, str]] = []
            try:
                for entry in storage.iter_files(root, rel, skipped=skipped):
                    yield _hash_row(entry, task)
            except Exception as exc:  # noqa: BLE001 - one unlistable folder must not stop the others
                yield (rel, None, None, None, "error", f"cannot list {storage.join(root, rel)}: {exc}", task)
            for path, reason in skipped:
                yield (path, None, None, None, "skipped", reason, task)

    return run


def _hash_row(entry: storage.FileEntry, task: int | None) -> tuple:
    try:
        sha, _head = _hash(entry.uri)
    except Exception as exc:  # noqa: BLE001 - one unreadable file must not stop the others
        return (entry.relative, entry.uri, entry.size, None, "error", f"cannot read {entry.uri}: {exc}", task)
    return (entry.relative, entry.uri, entry.size, sha, None, None, task)


def _classify(spark: SparkSession, hashed: DataFrame, source_name: str) -> DataFrame:
    """Decide per hashed file, in Spark: unchanged (this path already holds this content),
    duplicate (the content is stored, or another path of this run brings it first), or
    new / new_version (the first version of this path, or a later one)."""
    objects = spark.table(metadata.table("objects").sql)
    h = hashed.where(F.col("status").isNull()).withColumn("object_id", F.substring("sha256", 1, 32))
    known = objects.where((F.col("source_name") == source_name) & F.col("parent_object_id").isNull()).select(
        "source_path", "sha256", F.coalesce("version", F.lit(1)).alias("version"), "raw_path"
    )  # rows from before versions were numbered count as version 1
    latest = known.groupBy("source_path").agg(F.max("version").alias("latest_version"))
    same = known.groupBy("source_path", "sha256").agg(F.max_by("raw_path", "version").alias("known_raw_path"))
    stored = objects.select("object_id").join(h.select("object_id"), "object_id", "left_semi").distinct()
    d = (
        h.join(same, ["source_path", "sha256"], "left")
        .join(stored.withColumn("is_stored", F.lit(True)), "object_id", "left")
        .join(latest, "source_path", "left")
        .withColumn("fresh", F.col("known_raw_path").isNull() & F.col("is_stored").isNull())
    )
    first = F.row_number().over(Window.partitionBy("object_id", "fresh").orderBy("source_path")) == 1
    status = (
        F.when(F.col("known_raw_path").isNotNull(), "unchanged")
        .when(~F.col("fresh") | ~first, "duplicate")
        .when(F.col("latest_version").isNotNull(), "new_version")
        .otherwise("new")
    )
    return d.select(
        "source_path",
        status.alias("status"),
        "object_id",
        F.col("known_raw_path").alias("raw_path"),
        F.lit(None).cast("string").alias("media_type"),
        "size_bytes",
        F.lit(None).cast("string").alias("error"),
        "sha256",
        (F.coalesce("latest_version", F.lit(0)) + 1).cast("int").alias("version"),
        "task",
        "uri",
    )


def _copy_new(
    raw_base: str, source_name: str, day: str, max_zip_bytes: int
) -> Callable[[Iterable[Row]], Iterator[tuple]]:
    """The task that copies new content into the raw zone and sniffs its type (rows: _FILES;
    files whose content is stored already pass through)."""

    def run(rows: Iterable[Row]) -> Iterator[tuple]:
        for r in rows:
            if r.status not in ("new", "new_version"):
                yield tuple(r[c] for c in _FILE_COLUMNS)
                continue
            try:
                raw_path = _free_raw_path(raw_base, source_name, day, r.source_path, r.sha256)
                if not storage.exists(raw_path):
                    storage.copy(r.uri, raw_path, follow_links=False, sha256=r.sha256)
                # Sniffed from the stored copy, whose content is known to match the hash.
                with storage.open_input(raw_path) as f:
                    head = f.read(SNIFF_BYTES)
                # ZIP containers need their directory to tell a DOCX from an EPUB.
                data = storage.read_bytes(raw_path) if head[:2] == b"PK" and r.size_bytes <= max_zip_bytes else None
                media_type = detect_media_type(head, r.source_path, data)
            except Exception as exc:  # noqa: BLE001 - one failed copy must not stop the others
                error = f"cannot copy {r.uri}: {exc}"
                yield (
                    r.source_path,
                    "error",
                    r.object_id,
                    None,
                    None,
                    r.size_bytes,
                    error,
                    r.sha256,
                    r.version,
                    r.task,
                )
                continue
            yield (
                r.source_path,
                r.status,
                r.object_id,
                raw_path,
                media_type,
                r.size_bytes,
                None,
                r.sha256,
                r.version,
                r.task,
            )

    return run


def _report(hashed: DataFrame, copied: DataFrame) -> DataFrame:
    """Every file of the run with its final status (rows: _FILES). A duplicate of content
    whose copy failed in this run is an error too: nothing stores its content."""
    failed = copied.where((F.col("status") == "error") & F.col("object_id").isNotNull()).select("object_id")
    orphan = F.col("status").isin("duplicate") & F.col("orphan").isNotNull()
    fixed = copied.join(failed.distinct().withColumn("orphan", F.lit(True)), "object_id", "left").select(
        "source_path",
        F.when(orphan, "error").otherwise(F.col("status")).alias("status"),
        F.when(orphan | (F.col("status") == "error"), None).otherwise(F.col("object_id")).alias("object_id"),
        "raw_path",
        "media_type",
        "size_bytes",
        F.when(orphan, F.lit("not stored: the copy of the same content from another path failed"))
        .otherwise(F.col("error"))
        .alias("error"),
        "sha256",
        "version",
        "task",
    )
    unhashed = hashed.where(F.col("status").isNotNull()).select(
        "source_path",
        "status",
        F.lit(None).cast("string").alias("object_id"),
        F.lit(None).cast("string").alias("raw_path"),
        F.lit(None).cast("string").alias("media_type"),
        "size_bytes",
        "error",
        F.lit(None).cast("string").alias("sha256"),
        F.lit(None).cast("int").alias("version"),
        "task",
    )
    return fixed.unionByName(unhashed)


def _object_rows(new: DataFrame, source_name: str, now: datetime, tags: dict[str, str]) -> DataFrame:
    """`shoal.objects` rows for the new content of this run."""
    values = {
        "source_name": F.lit(source_name),
        "ingested_at": F.lit(now).cast("timestamp"),
        "tags": F.from_json(F.lit(json.dumps(tags)), "map<string,string>"),
        "parent_object_id": F.lit(None).cast("string"),
        "file_name": F.element_at(F.split("source_path", "/"), -1),
        "depth": F.lit(0),
    }
    return new.select(*(values[c].alias(c) if c in values else F.col(c) for c in metadata.columns("objects")))


def append_objects(spark: SparkSession, rows: list[dict[str, Any]] | DataFrame) -> None:
    """Append `shoal.objects` rows (dicts or a DataFrame with the table's columns): one commit."""
    cols = metadata.columns("objects")
    if isinstance(rows, DataFrame):
        df = rows.select(*cols)
    else:
        df = spark.createDataFrame([tuple(r.get(c) for c in cols) for r in rows], metadata.schema("objects"))
    df.writeTo(metadata.table("objects").sql).append()


# Statuses whose file is stored (now or before) under its object id: its path is recorded.
_SEEN = ("new", "new_version", "unchanged", "duplicate")


def ensure_object_sources(spark: SparkSession) -> None:
    """Create `shoal.object_sources` where missing (filled from shoal.objects on creation)."""
    metadata.ensure_tables(spark, ("objects", "object_sources"))


def record_paths(spark: SparkSession, seen: list[tuple[str, str, str]] | DataFrame, now: datetime) -> None:
    """Upsert (object id, source, path) rows: a known path gets last_seen = now and, if its
    content changed, the new object id; a new path is inserted with first_seen = now.

    `seen`: (object_id, source_name, source_path) tuples, or a DataFrame of those columns
    holding each (source, path) once (a listing names each path once)."""
    if isinstance(seen, DataFrame):
        stamp = F.lit(now).cast("timestamp")
        df = seen.select("object_id", "source_name", "source_path", stamp.alias("first_seen"), stamp.alias("last_seen"))
    else:
        unique = {(src, path): oid for oid, src, path in seen}  # one row per path (a run lists each once)
        df = spark.createDataFrame(
            [(oid, src, path, now, now) for (src, path), oid in sorted(unique.items())],
            metadata.schema("object_sources"),
        )
    df.createOrReplaceTempView("shoal_ingest_seen")
    spark.sql(
        f"MERGE INTO {metadata.table('object_sources').sql} t USING shoal_ingest_seen s "
        "ON t.source_name = s.source_name AND t.source_path = s.source_path "
        "WHEN MATCHED THEN UPDATE SET t.object_id = s.object_id, t.last_seen = s.last_seen "
        "WHEN NOT MATCHED THEN INSERT *"
    )


def object_paths(spark: SparkSession, object_ids: list[str]) -> dict[str, list[dict[str, Any]]]:
    """object id -> every path holding its content, oldest first (the operator's view: ungoverned)."""
    if not object_ids:
        return {}
    ensure_object_sources(spark)
    rows = (
        spark.table(metadata.table("object_sources").sql)
        .join(metadata.id_frame(spark, sorted(set(object_ids))), "object_id", "left_semi")
        .collect()
    )
    return paths_by_object([r.asDict() for r in rows])


def paths_by_object(rows: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Group object_sources rows by object id, oldest path first, then by source and path."""
    out: dict[str, list[dict[str, Any]]] = {}
    for r in sorted(
        rows, key=lambda r: (str(r.get("first_seen") or ""), r.get("source_name") or "", r.get("source_path") or "")
    ):
        out.setdefault(r["object_id"], []).append(
            {k: r.get(k) for k in ("source_name", "source_path", "first_seen", "last_seen")}
        )
    return out


def _hash(uri: str) -> tuple[str, bytes]:
    digest = hashlib.sha256()
    head = b""
    with storage.open_input(uri, follow_links=False) as f:
        while block := f.read(8 << 20):
            if len(head) < SNIFF_BYTES:
                head += block[: SNIFF_BYTES - len(head)]
            digest.update(block)
    return digest.hexdigest(), head


def _free_raw_path(raw_base: str, source_name: str, day: str, relative: str, sha: str) -> str:
    """The raw-zone path for this content: the natural one, unless other content holds it."""
    path = storage.join(raw_base, source_name, day, relative)
    if not storage.exists(path) or _sha_of(path) == sha:
        return path
    stem, ext = posixpath.splitext(relative)
    return storage.join(raw_base, source_name, day, f"{stem}~{sha[:12]}{ext}")


def _sha_of(uri: str) -> str:
    return _hash(uri)[0]
