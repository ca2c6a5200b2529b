"""Driver side of `shoal extract`: plan the pending objects, run them on Spark, commit the rows.

Exactly once, without cross-table transactions: the run's object ids go into a journal
before any table is written, and `shoal.extractions` (the record of completed work) is
written last. A run that finds a journal left by a crash first deletes whatever rows that
run had written for its objects, then does them again; an object re-extracted because its
extractor version changed (or --force) has its old rows deleted the same way.
"""

from __future__ import annotations

import hashlib
import json
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cache
from typing import TYPE_CHECKING, Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from shoal import storage
from shoal.config import ExtractSettings, Settings
from shoal.lake import metadata, tasks
from shoal.lake.locks import table_lock
from shoal.progress import spark_tasks

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator

    from pyspark.sql import Row

    from shoal.extract.router import Router

OBJECT_COLUMNS = (
    "object_id",
    "raw_path",
    "media_type",
    "file_name",
    "size_bytes",
    "depth",
    "source_name",
    "source_path",
    "tags",
    "parent_object_id",
)


@dataclass
class ExtractResult:
    run_id: str
    objects: int = 0
    children: int = 0
    rounds: int = 0
    pages: int = 0
    seconds: float = 0.0
    statuses: dict[str, dict[str, int]] = field(default_factory=dict)  # extractor -> status -> count
    problems: list[dict[str, Any]] = field(default_factory=list)  # error/timeout steps
    recovered: int = 0  # objects redone after an interrupted run
    warnings: list[str] = field(default_factory=list)  # missing models and the like

    @property
    def nothing_to_do(self) -> bool:
        return self.objects == 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "objects": self.objects,
            "child_objects": self.children,
            "rounds": self.rounds,
            "pages": self.pages,
            "seconds": round(self.seconds, 2),
            "objects_per_s": round(self.objects / self.seconds, 2) if self.seconds else None,
            "recovered_from_interrupted_run": self.recovered,
            "statuses": self.statuses,
            "problems": self.problems,
            "warnings": self.warnings,
        }


def journal_path(settings: Settings) -> str:
    return storage.join(settings.warehouse_uri, "_shoal", "extract-journal.json")


@cache
def _router(settings_json: str) -> Router:
    from shoal.extract.router import Router

    return Router(ExtractSettings.model_validate_json(settings_json))


def _partition(
    settings_json: str, warehouse: str, run_id: str
) -> Callable[[Iterable[Row]], Iterator[tuple[str, str, str, str]]]:
    def run(rows: Iterable[Row]) -> Iterator[tuple[str, str, str, str]]:
        from shoal.extract.runner import process_tree, warm

        router = _router(settings_json)
        items = [(obj, router.chain(obj["media_type"])) for obj in (r.asDict() for r in rows)]
        warm(router, [chain for _o, chain in items])
        seen: set[str] = set()
        for obj, chain in items:
            yield from process_tree(obj, chain, router, warehouse, run_id, seen)

    return run


def mark_path(settings: Settings) -> str:
    return storage.join(settings.warehouse_uri, "_shoal", "extract-mark.json")


@dataclass(frozen=True)
class Mark:
    """How far extraction is known complete: every object in `shoal.objects` up to snapshot
    `objects` has rows in `shoal.extractions` (as of its snapshot `done`, taken when the mark
    was written) for its whole chain under the routes and extractor versions `routes`; any
    extraction row of a later object was appended after `extractions` (the extractions
    snapshot when that run started). Written after a run over all media types completes; a
    run with `--only` reads it but never moves it."""

    objects: int | None
    extractions: int | None
    routes: str
    done: int | None = None

    @classmethod
    def read(cls, settings: Settings) -> Mark | None:
        path = mark_path(settings)
        if not storage.exists(path):
            return None
        try:
            d = json.loads(storage.read_bytes(path))
            snaps = [None if d[k] is None else int(d[k]) for k in ("objects", "extractions", "done")]
            return cls(snaps[0], snaps[1], str(d["routes"]), snaps[2])
        except (ValueError, KeyError, TypeError):
            return None  # unreadable, or written before `done` was: plan in full, which rewrites it

    def holds(self, routes: str, objects: list[int], extractions: list[int]) -> bool:
        """Whether the mark still stands over these histories (snapshot ids, current first):
        same routes and versions, and none of its snapshots rolled back or expired (the rows
        it counts on as done included)."""
        return (
            self.routes == routes
            and (self.objects is None or self.objects in objects)
            and all(s is None or s in extractions for s in (self.extractions, self.done))
        )

    def write(self, settings: Settings) -> None:
        storage.write_bytes(mark_path(settings), json.dumps(self.__dict__).encode())


def routes_fingerprint(router: Router) -> str:
    """Routes plus every extractor's version: what decides whether an object needs work."""
    data = {"routes": router.routes, "versions": {n: e.version for n, e in sorted(router.extractors.items())}}
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()


def _current_ancestors(spark: SparkSession, name: str, settings: Settings | None = None) -> list[int]:
    """Snapshot ids on the table's current history, newest first; a rolled-back or expired
    snapshot is not there. Read from the table's metadata through PyIceberg when `settings`
    are given and it can (no Spark job); otherwise through SQL (the `history` metadata table),
    so a name resolves as in every other statement, the warm engine's per-command sessions
    included."""
    found = None if settings is None else _iceberg_ancestors(settings, name)
    if found is not None:
        return found
    history = metadata.table(name).metadata("history")
    rows = spark.sql(
        f"SELECT snapshot_id FROM {history} WHERE is_current_ancestor ORDER BY made_current_at DESC"
    ).collect()
    return list(dict.fromkeys(int(r.snapshot_id) for r in rows))  # a rolled-back-to snapshot is listed twice


def _iceberg_ancestors(settings: Settings, name: str) -> list[int] | None:
    """What `history ... WHERE is_current_ancestor` lists (the current snapshot's ancestors
    that are in the snapshot log), read by PyIceberg from the catalog Spark uses; None when it
    cannot say (PyIceberg not installed, a catalog it cannot open): Spark reads it then."""
    try:
        from pyiceberg.table.snapshots import ancestors_of

        table = _iceberg_catalog(settings).load_table((metadata.NAMESPACE, name))
    except Exception:  # noqa: BLE001 - any failure only means Spark answers instead
        return None
    meta = table.metadata
    logged = {e.snapshot_id for e in meta.snapshot_log}
    return [s.snapshot_id for s in ancestors_of(meta.current_snapshot(), meta) if s.snapshot_id in logged]


def _iceberg_catalog(settings: Settings) -> Any:
    from shoal.pyiceberg_catalog import cached_catalog

    return cached_catalog(settings)


def current_snapshot(spark: SparkSession, name: str, settings: Settings | None = None) -> int | None:
    """The metadata table's current snapshot id (table metadata only, no data scan)."""
    found = _current_ancestors(spark, name, settings)
    return found[0] if found else None


@dataclass
class Scope:
    """What a run plans against: snapshots pinned at its start and, when the mark allows,
    only what was appended since the mark."""

    objects: int | None  # shoal.objects snapshot at the start of the run
    extractions: int | None  # shoal.extractions snapshot at the start of the run
    since: Mark | None  # incremental: objects and extraction rows appended after this mark

    @property
    def nothing_appended(self) -> bool:
        """No object since the mark: nothing can be pending (`only` and `ids` narrow that)."""
        return self.since is not None and self.since.objects is not None and self.since.objects == self.objects

    def objects_frame(self, spark: SparkSession) -> DataFrame:
        name = str(metadata.table("objects"))
        if self.objects is None:
            return spark.createDataFrame([], metadata.schema("objects"))
        if self.since is None or self.since.objects is None:  # no mark, or the table was empty at it
            return spark.read.option("snapshot-id", self.objects).table(name)
        if self.since.objects == self.objects:
            return spark.createDataFrame([], metadata.schema("objects"))
        # An incremental append scan: only the data files of append snapshots in between.
        reader = spark.read.option("start-snapshot-id", self.since.objects).option("end-snapshot-id", self.objects)
        return reader.table(name)

    def done_frame(self, spark: SparkSession) -> DataFrame:
        """Extraction rows that can count as done for the planned objects."""
        name = str(metadata.table("extractions"))
        if self.since is None or self.extractions is None:
            return spark.table(name)
        start = self.since.extractions
        if start == self.extractions:
            return spark.createDataFrame([], metadata.schema("extractions"))
        if start is None:  # the table was empty at the mark: all its rows came since
            return spark.read.option("snapshot-id", self.extractions).table(name)
        reader = spark.read.option("start-snapshot-id", start).option("end-snapshot-id", self.extractions)
        return reader.table(name)


def _scope(spark: SparkSession, settings: Settings, router: Router, *, full: bool) -> tuple[Scope, str]:
    routes = routes_fingerprint(router)
    objects, extractions = (_current_ancestors(spark, n, settings) for n in ("objects", "extractions"))
    mark = None if full else Mark.read(settings)
    if mark is not None and not mark.holds(routes, objects, extractions):
        mark = None  # routes or versions changed, or history rewritten: plan everything
    if mark is not None and not (
        _only_appends(spark, settings, "objects", objects, mark.objects)
        and _only_appends(spark, settings, "extractions", extractions, mark.extractions)
    ):
        mark = None  # rows deleted or rewritten since the mark: only a full plan sees that
    scope = Scope(objects[0] if objects else None, extractions[0] if extractions else None, mark)
    return scope, routes


def _only_appends(spark: SparkSession, settings: Settings, name: str, ancestors: list[int], since: int | None) -> bool:
    """Whether every snapshot after `since` on this history (newest first) only appended rows.
    Planning after the mark reads the files those snapshots added and none of their delete
    files: a row deleted and written again since the mark would be read twice (one object
    extracted twice, its index MERGE failing on the two rows), a deleted one as still there."""
    if since is None:
        return True  # the table was empty at the mark: the plan reads a whole snapshot, deletes applied
    newer = ancestors[: ancestors.index(since)]
    if not newer:
        return True
    operations = _iceberg_operations(settings, name)
    if operations is None:
        snapshots = metadata.table(name).metadata("snapshots")
        operations = {int(r.snapshot_id): r.operation for r in spark.sql(f"SELECT * FROM {snapshots}").collect()}
    return all(operations.get(s) == "append" for s in newer)


def _iceberg_operations(settings: Settings, name: str) -> dict[int, str] | None:
    """Each snapshot's operation (append, overwrite, delete, replace) from the table's metadata
    through PyIceberg; None when it cannot say (Spark reads the snapshots table then)."""
    try:
        table = _iceberg_catalog(settings).load_table((metadata.NAMESPACE, name))
    except Exception:  # noqa: BLE001 - any failure only means Spark answers instead
        return None
    return {s.snapshot_id: s.summary.operation.value for s in table.metadata.snapshots if s.summary is not None}


def _up_to_date(spark: SparkSession, settings: Settings, router: Router) -> bool:
    """Whether the mark alone shows nothing to do, as the plan over `_scope` would find: same
    routes and versions, no object since the mark, the mark's extractions snapshot still on
    the table's history, and no journal (no run in flight, nothing to recover). Read from
    table metadata only: no lock, no table touched, no Spark job where PyIceberg is installed.
    A run in flight shows its journal before it writes any table; one that has not written
    yet is a run after this one."""
    mark = Mark.read(settings)
    if mark is None or mark.objects is None:
        return False
    try:
        objects = _current_ancestors(spark, "objects", settings)
        extractions = _current_ancestors(spark, "extractions", settings)
    except Exception:  # noqa: BLE001 - a table missing or unreadable: the full path decides
        return False
    if not objects or objects[0] != mark.objects or not mark.holds(routes_fingerprint(router), objects, extractions):
        return False
    return not storage.exists(journal_path(settings))


def plan(
    spark: SparkSession,
    router: Router,
    *,
    force: bool,
    only: list[str] | None,
    ids: list[str] | None = None,
    retry_errors: bool = False,
    scope: Scope | None = None,
) -> DataFrame | None:
    """The objects that need work, as a DataFrame of OBJECT_COLUMNS (None when there are none):
    any extractor of their chain missing or at another version (or, with `retry_errors`,
    ended in error or timeout). Nothing is collected but the distinct media types."""
    if ids is not None:
        objects = metadata.for_ids(spark, spark.table(metadata.table("objects").sql), ids)
        done = metadata.for_ids(spark, spark.table(metadata.table("extractions").sql), ids)
    else:
        scope = scope or Scope(current_snapshot(spark, "objects"), current_snapshot(spark, "extractions"), None)
        if scope.objects is None or scope.nothing_appended:
            return None  # no object, or none since a mark that covers every earlier one
        objects, done = scope.objects_frame(spark), scope.done_frame(spark)
    objects = objects.select(*OBJECT_COLUMNS)
    media_types = [r.media_type for r in objects.select("media_type").distinct().collect()]
    selected = [mt for mt in media_types if not only or router.matches(mt, only)]
    if not selected:
        return None
    routes = [(mt, n, v) for mt in selected for n, v, _stage in router.versions(router.chain(mt))]
    expected = objects.join(
        F.broadcast(spark.createDataFrame(routes, "media_type STRING, extractor STRING, extractor_version STRING")),
        "media_type",
    )
    if force:
        todo = expected.select("object_id").distinct()
    else:
        if retry_errors:
            done = done.where(~F.col("status").isin("error", "timeout"))
        done = done.select("object_id", "extractor", "extractor_version")
        todo = expected.join(done, ["object_id", "extractor", "extractor_version"], "left_anti").select("object_id")
    return objects.join(todo.distinct(), "object_id", "left_semi")


def run_extract(
    spark: SparkSession,
    settings: Settings,
    *,
    force: bool = False,
    only: list[str] | None = None,
    retry_errors: bool = False,
    say: Callable[[str], None] = lambda _m: None,
) -> ExtractResult:
    from shoal.extract.router import Router

    started = time.monotonic()
    router = Router(settings.extract)  # validates routes before any work
    if only:
        router.check_selectors(only)
    if not (force or retry_errors) and _up_to_date(spark, settings, router):
        say("planning")
        return ExtractResult(run_id=uuid.uuid4().hex[:16], seconds=time.monotonic() - started)
    metadata.ensure_tables(spark, add_columns=True)
    result = ExtractResult(run_id=uuid.uuid4().hex[:16])
    with table_lock(settings, "shoal.extract"):
        interrupted = _read_journal(settings)
        # Without a crash to recover, --force or --retry-errors, planning reads only what was
        # appended since the mark: a run with nothing new opens no data file.
        scope, routes = _scope(spark, settings, router, full=bool(force or retry_errors or interrupted))
        say("planning")
        frame = plan(spark, router, force=force, only=only, retry_errors=retry_errors, scope=scope)
        work = None if frame is None else frame.persist()
        try:
            listed = (
                [] if work is None else work.select("object_id", "media_type", "source_path", "size_bytes").collect()
            )
            _warn(router, {r.media_type for r in listed}, result, say)
            if interrupted:
                # Journaled objects with their extractions committed were finished (that commit
                # comes last); only the others left partial rows behind.
                planned = {r.object_id for r in listed}
                interrupted = [i for i in interrupted if i in planned]
                result.recovered = len(interrupted)
            if work is not None and listed:
                result.rounds = 1  # children are extracted inline: one Spark round per run
                children = _run_round(spark, settings, work, listed, scope.done_frame(spark), result, interrupted, say)
                _warn(router, {r.media_type for r in children}, result, say)
        finally:
            if work is not None:
                work.unpersist()
        if storage.exists(journal_path(settings)):
            storage.delete(journal_path(settings))  # every journaled object is now recorded
        if not only and scope.objects is not None:
            mark = Mark(scope.objects, scope.extractions, routes, current_snapshot(spark, "extractions", settings))
            if mark != scope.since:
                mark.write(settings)
    result.seconds = time.monotonic() - started
    return result


def _warn(router: Router, media_types: set[str], result: ExtractResult, say: Callable[[str], None]) -> None:
    """Record (once) the missing model files the chains of these media types need."""
    for problem in router.model_problems([router.chain(mt) for mt in media_types]):
        if problem not in result.warnings:
            result.warnings.append(problem)
            say(f"warning: {problem}")


def _read_journal(settings: Settings) -> list[str]:
    path = journal_path(settings)
    if not storage.exists(path):
        return []
    try:
        return list(json.loads(storage.read_bytes(path))["object_ids"])
    except (ValueError, KeyError):
        return []


def _keep_one_extraction(
    spark: SparkSession, out: DataFrame, tally: list, new_ids: list[str]
) -> tuple[DataFrame, dict[str, int]]:
    """The rows to commit when children were extracted inline: every planned object's own
    rows, and for each child new to the lake the rows of one inline extraction (the one under
    the smallest planned id among those that extracted it; a child known before keeps the rows
    it has). Returns them with their count per table.

    One small job over the inline rows of new children (child, planned object, table) decides;
    the choice goes back as a literal map (child -> planned object), so the rows are filtered in
    place, without a join or a second cache, and do not depend on shoal.objects (which the
    caller appends to before the rows are read)."""
    inline = (F.col("object_id") != F.col("via")) & (F.col("table") != "objects")
    found = metadata.for_ids(spark, out.where(inline), new_ids).groupBy("object_id", "via", "table").count().collect()
    winner: dict[str, str] = {}
    for r in found:
        if r["table"] == "extractions" and (r.object_id not in winner or r.via < winner[r.object_id]):
            winner[r.object_id] = r.via
    counts = {r["table"]: r["count"] for r in tally if not r["inline"]}
    for r in found:
        if winner.get(r.object_id) == r.via:
            counts[r["table"]] = counts.get(r["table"], 0) + r["count"]
    if not winner:
        return out.where(F.col("object_id") == F.col("via")), counts
    chosen = F.create_map(*[F.lit(x) for kv in sorted(winner.items()) for x in kv])
    keep = (F.col("object_id") == F.col("via")) | (
        inline & (F.try_element_at(chosen, F.col("object_id")) == F.col("via"))
    )
    return out.where(keep), counts


# Planning cost of one object on top of its bytes: opening, sniffing and NLP start-up make a
# thousand 1 KiB notes cost more than one 1 MiB PDF.
OBJECT_COST_BYTES = 256 << 10


def plan_tasks(sizes: list[tuple[str, int | None]], cores: int) -> tuple[dict[str, int], int]:
    """Objects to Spark tasks, balanced by size (shoal.lake.tasks.balance): random
    repartitioning put 242 objects in 8 tasks and the run waited on the one holding the big PDFs."""
    return tasks.balance(sizes, cores, OBJECT_COST_BYTES)


def _write_journal(settings: Settings, result: ExtractResult, ids: set[str]) -> None:
    storage.write_bytes(
        journal_path(settings),
        json.dumps(
            {"run_id": result.run_id, "started_at": datetime.now(UTC).isoformat(), "object_ids": sorted(ids)}
        ).encode(),
    )


def _run_round(
    spark: SparkSession,
    settings: Settings,
    work: DataFrame,
    listed: list,
    done: DataFrame,
    result: ExtractResult,
    interrupted: list[str],
    say: Callable[[str], None],
) -> list:
    """Extract the planned objects (`work`, flowing from the plan to the workers as a
    DataFrame; `listed`: their ids, media types and paths, for the journal and the report)
    and, inline, the child objects they contain. Returns the new children (object_id,
    media_type, source_path)."""
    work_ids = [r.object_id for r in listed]
    journaled = set(work_ids) | set(interrupted)
    _write_journal(settings, result, journaled)
    # Objects extracted before (version change, --force) get their old rows replaced. Earlier
    # rows can only be where the plan looked for completed work (`done`).
    earlier = {r.object_id for r in metadata.for_ids(spark, done.select("object_id"), work_ids).distinct().collect()}
    _purge(spark, sorted(earlier | set(interrupted)))
    say("purged earlier rows")
    sc = spark.sparkContext
    object_task, slices = plan_tasks([(r.object_id, r.size_bytes) for r in listed], sc.defaultParallelism)
    say(f"extracting {len(work_ids)} objects in {slices} tasks")
    task_of = sc.broadcast(object_task)
    rdd = (
        work.rdd.map(lambda r: (task_of.value[r.object_id], r))
        .partitionBy(slices, lambda task: task)
        .values()
        .mapPartitions(_partition(settings.extract.model_dump_json(), settings.warehouse_uri, result.run_id))
    )
    with spark_tasks(spark, say, "extracting"):
        out = spark.createDataFrame(rdd, "table STRING, row STRING, object_id STRING, via STRING").persist()
        tally = _tally(out)
    say("extracted")
    try:
        committed = None
        committer = _fast_committer(settings, tally)
        if committer is not None:
            committed = _commit_fast(spark, settings, committer, out, work_ids, journaled, result, say)
        if committed is None:
            committed = _commit_spark(spark, settings, out, tally, work_ids, journaled, result, say)
    finally:
        out.unpersist()
    new_children, summary, problems, pages = committed
    result.objects += len(work_ids)
    result.children += len(new_children)
    result.pages += pages
    for (extractor, status), n in sorted(summary.items()):
        by_status = result.statuses.setdefault(extractor, {})
        by_status[status] = by_status.get(status, 0) + n
    paths = {r.object_id: r.source_path for r in (*listed, *new_children)}
    result.problems.extend(
        {
            "object_id": p["object_id"],
            "source_path": paths.get(p["object_id"]),
            "extractor": p["extractor"],
            "status": p["status"],
            "error": p["error"],
        }
        for p in problems
    )
    return new_children


def _tally(out: DataFrame) -> list:
    """Rows and JSON bytes per table, the planned objects' own apart from inline children's."""
    inline = (F.col("object_id") != F.col("via")).alias("inline")
    return (
        out.groupBy("table", inline)
        .agg(F.count(F.lit(1)).alias("count"), F.sum(F.length("row")).alias("bytes"))
        .collect()
    )


# What a commit path hands back: the new children (object_id, media_type, source_path), the
# steps per (extractor, status), the failed steps, the pages extracted.
Committed = tuple[list, dict[tuple[str, str], int], list[dict[str, Any]], int]


def _fast_committer(settings: Settings, tally: list) -> Any | None:
    """PyIceberg's committer when it is installed and the run's rows fit the driver."""
    from shoal.extract import commit

    if sum(r["count"] for r in tally) > commit.MAX_ROWS or sum(r["bytes"] or 0 for r in tally) > commit.MAX_BYTES:
        return None
    catalog = commit.open_lake_catalog(settings)
    return None if catalog is None else commit.Committer(catalog)


def _commit_fast(
    spark: SparkSession,
    settings: Settings,
    committer: Any,
    out: DataFrame,
    work_ids: list[str],
    journaled: set[str],
    result: ExtractResult,
    say: Callable[[str], None],
) -> Committed | None:
    """Commit the run's rows through PyIceberg from the driver, in the Spark path's order and
    with its rows; None (nothing written) where a row cannot be converted exactly."""
    from pyspark.sql import Row

    from shoal.extract.commit import NotFast, index_objects
    from shoal.extract.runner import TIMESTAMP_FORMAT
    from shoal.lake.object_index import FACTS_SCHEMA, refresh_index

    records = out.collect()
    # Every child this run's extractions named, with one registration row each (the one under
    # the smallest planned id); those not in shoal.objects yet are new.
    registrations: dict[str, tuple[str, str]] = {}
    for r in records:
        if r.table == "objects" and (r.object_id not in registrations or (r.via, r.row) < registrations[r.object_id]):
            registrations[r.object_id] = (r.via, r.row)
    produced = sorted(registrations)
    known = committer.known_objects(produced)
    if known is None:  # more ids than one scan filter should carry, or a layout PyIceberg cannot read
        objects = spark.table(metadata.table("objects").sql).select("object_id")
        known = {r.object_id for r in metadata.for_ids(spark, objects, produced).collect()}
    new_ids = {i for i in produced if i not in known}
    # A new child keeps the rows of one inline extraction: the one under the smallest planned id.
    winner: dict[str, str] = {}
    for r in records:
        if r.table == "extractions" and r.object_id != r.via and r.object_id in new_ids:
            winner[r.object_id] = min(winner.get(r.object_id, r.via), r.via)
    by_table: dict[str, list[str]] = {}
    for r in records:
        if r.table != "objects" and (r.object_id == r.via or winner.get(r.object_id) == r.via):
            by_table.setdefault(r.table, []).append(r.row)
    try:  # every table converted before the first commit
        committer.prepare("objects", [registrations[i][1] for i in sorted(new_ids)])
        for table in (*metadata.RESULT_TABLES, "extractions"):
            committer.prepare(table, by_table.get(table, []))
    except NotFast as exc:
        say(f"committing through Spark ({exc})")
        return None
    new_children = [Row(object_id=i, media_type=m, source_path=p) for i, m, p in _registered(committer)]
    if new_children:
        # Journaled before any table gains their rows: a crash from here redoes them too.
        _write_journal(settings, result, journaled | new_ids)
        committer.append("objects")
    if produced:
        say(f"registered {len(new_children)} new child objects")
    pages = _pages(committer)
    for table in metadata.RESULT_TABLES:
        committer.append(table)
    say("result tables committed")
    say(f"updating the metadata layer for {len(work_ids) + len(new_ids)} objects")
    touched = work_ids + sorted(new_ids)
    if not index_objects(committer, touched, by_table.get("index_facts", []), produced):
        facts = spark.createDataFrame([(row,) for row in by_table.get("index_facts", [])], "row STRING").select(
            F.from_json("row", FACTS_SCHEMA, {"timestampFormat": TIMESTAMP_FORMAT}).alias("r")
        )
        refresh_index(spark, touched, facts=facts.select("r.*"), child_ids=produced)
    say("metadata layer updated")
    steps = committer.ready["extractions"].select(["object_id", "extractor", "status", "error"]).to_pylist()
    # Last: the record of completed work. A crash before this commit redoes the objects.
    committer.append("extractions")
    say("extractions committed")
    summary: dict[tuple[str, str], int] = {}
    for s in steps:
        summary[s["extractor"], s["status"]] = summary.get((s["extractor"], s["status"]), 0) + 1
    return new_children, summary, [s for s in steps if s["status"] in ("error", "timeout")], pages


def _registered(committer: Any) -> list[tuple[str, str, str]]:
    new = committer.ready.get("objects")
    if new is None:
        return []
    return list(zip(*(new.column(c).to_pylist() for c in ("object_id", "media_type", "source_path")), strict=True))


def _pages(committer: Any) -> int:
    props = committer.ready.get("document_properties")
    if props is None:
        return 0
    return int(sum(n or 0 for n in props.column("page_count").to_pylist()))


def _commit_spark(
    spark: SparkSession,
    settings: Settings,
    out: DataFrame,
    tally: list,
    work_ids: list[str],
    journaled: set[str],
    result: ExtractResult,
    say: Callable[[str], None],
) -> Committed:
    """Commit the run's rows with one Spark write per table (rows too large for the driver,
    or no PyIceberg)."""
    from shoal.extract.runner import TIMESTAMP_FORMAT
    from shoal.lake.object_index import FACTS_SCHEMA, refresh_index

    counts: dict[str, int] = {}
    for r in tally:
        counts[r["table"]] = counts.get(r["table"], 0) + r["count"]
    results = out  # the rows to commit: the planned objects' own, plus one extraction of each new child

    def rows(table: str, schema: str | None = None, frame: DataFrame | None = None) -> DataFrame:
        return (
            (results if frame is None else frame)
            .where(F.col("table") == table)
            .select(
                F.from_json("row", schema or metadata.schema(table), {"timestampFormat": TIMESTAMP_FORMAT}).alias("r")
            )
            .select("r.*")
        )

    new_children: list = []
    produced: list[str] = []  # every child object this run's extractions named, new or known
    if counts.get("objects"):
        # One registration per child: the row under the smallest planned id (as the fast path).
        first = (
            out.where(F.col("table") == "objects")
            .groupBy("object_id")
            .agg(F.min(F.struct("via", "row")).alias("m"))
            .select(F.lit("objects").alias("table"), F.col("m.row").alias("row"))
        )
        children = rows("objects", frame=first).persist()
        produced = [r.object_id for r in children.select("object_id").collect()]
        existing = metadata.for_ids(spark, spark.table(metadata.table("objects").sql).select("object_id"), produced)
        new = children.join(existing, "object_id", "left_anti").persist()
        new_children = new.select("object_id", "media_type", "source_path").collect()
        # A child known before keeps its rows (it was planned in its own right if pending);
        # a new one keeps the rows of a single inline extraction: the one under the
        # smallest planned id among those that extracted it.
        if any(r["inline"] and r["table"] != "objects" for r in tally):  # known children's rows go too
            results, counts = _keep_one_extraction(spark, out, tally, [r.object_id for r in new_children])
        if new_children:
            # Journaled before any table gains their rows: a crash from here redoes them too.
            _write_journal(settings, result, journaled | {r.object_id for r in new_children})
            new.writeTo(metadata.table("objects").sql).append()
        new.unpersist()
        children.unpersist()
        say(f"registered {len(new_children)} new child objects")
    child_ids = [r.object_id for r in new_children]
    # One table after another: concurrent commits make the SQLite catalog fail with
    # SQLITE_BUSY (a read transaction cannot upgrade while another writer commits).
    for table in metadata.RESULT_TABLES:
        if counts.get(table):
            rows(table).writeTo(metadata.table(table).sql).append()
    say("result tables committed")
    pages = (
        rows("document_properties").agg(F.sum(F.coalesce("page_count", F.lit(0)))).collect()[0][0]
        if counts.get("document_properties")
        else 0
    )
    say(f"updating the metadata layer for {len(work_ids) + len(child_ids)} objects")
    refresh_index(spark, work_ids + child_ids, facts=rows("index_facts", FACTS_SCHEMA), child_ids=produced)
    say("metadata layer updated")
    # Last: the record of completed work. A crash before this commit redoes the objects.
    extractions = rows("extractions").persist()
    summary = extractions.groupBy("extractor", "status").count().collect()
    problems = (
        extractions.where(F.col("status").isin("error", "timeout"))
        .select("object_id", "extractor", "status", "error")
        .collect()
    )
    extractions.writeTo(metadata.table("extractions").sql).append()
    extractions.unpersist()
    say("extractions committed")
    return (
        new_children,
        {(r.extractor, r.status): r["count"] for r in summary},
        [p.asDict() for p in problems],
        int(pages or 0),
    )


def _purge(spark: SparkSession, ids: list[str]) -> None:
    """Delete earlier rows of objects about to be (re-)extracted, so no row is ever duplicated."""
    if not ids:
        return
    metadata.id_frame(spark, ids).createOrReplaceTempView("shoal_purge_ids")
    # An `IN` list on the target is pushed to its scan: only the ids' buckets are read and rewritten.
    scope = f" AND t.object_id IN {metadata.ids_sql(ids)}" if len(ids) <= metadata.IN_LIST_LIMIT else ""
    for table in (*metadata.RESULT_TABLES, "extractions"):
        name = metadata.table(table).sql
        if metadata.for_ids(spark, spark.table(name).select("object_id"), ids).limit(1).count():
            spark.sql(
                f"MERGE INTO {name} t USING shoal_purge_ids p ON t.object_id = p.object_id{scope} "
                "WHEN MATCHED THEN DELETE"
            )
