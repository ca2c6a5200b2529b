"""Driver side of `shoal extract`: plan the pending objects, run them on Spark, commit the rows.

Exactly once, without cross-table transactions: the run's object ids go into a journal
before any table is written, and `shoal.extractions` (the record of completed work) is
written last. A run that finds a journal left by a crash first deletes whatever rows that
run had written for its objects, then does them again; an object re-extracted because its
extractor version changed (or --force) has its old rows deleted the same way.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cache
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from shoal import storage
from shoal.config import ExtractSettings, Settings
from shoal.lake import metadata
from shoal.lake.locks import table_lock
from shoal.progress import spark_tasks

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
def _router(settings_json: str):
    from shoal.extract.router import Router

    return Router(ExtractSettings.model_validate_json(settings_json))


def _partition(settings_json: str, warehouse: str, run_id: str):
    def run(items):
        from shoal.extract.runner import process_object, warm

        router = _router(settings_json)
        items = list(items)
        warm(router, [chain for _o, chain in items])
        for obj, chain in items:
            yield from process_object(obj, chain, router, warehouse, run_id)

    return run


def plan(
    spark: SparkSession,
    router,
    *,
    force: bool,
    only: list[str] | None,
    ids: list[str] | None = None,
    retry_errors: bool = False,
):
    """The objects that need work: any extractor of their chain missing or at another version
    (or, with `retry_errors`, ended in error or timeout)."""
    objects = spark.table(metadata.table("objects").sql).select(*OBJECT_COLUMNS)
    if ids is not None:
        objects = objects.join(metadata.id_frame(spark, ids), "object_id", "left_semi")
    media_types = [r.media_type for r in objects.select("media_type").distinct().collect()]
    selected = [mt for mt in media_types if not only or router.matches(mt, only)]
    if not selected:
        return []
    routes = [(mt, n, v) for mt in selected for n, v, _stage in router.versions(router.chain(mt))]
    expected = objects.join(
        spark.createDataFrame(routes, "media_type STRING, extractor STRING, extractor_version STRING"), "media_type"
    )
    if force:
        todo = expected.select("object_id").distinct()
    else:
        done = spark.table(metadata.table("extractions").sql)
        if retry_errors:
            done = done.where(~F.col("status").isin("error", "timeout"))
        done = done.select("object_id", "extractor", "extractor_version")
        todo = expected.join(done, ["object_id", "extractor", "extractor_version"], "left_anti").select("object_id")
    rows = objects.join(todo.distinct(), "object_id", "left_semi").collect()
    return [(r.asDict(), router.chain(r.media_type)) for r in rows]


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
    metadata.ensure_tables(spark, add_columns=True)
    result = ExtractResult(run_id=uuid.uuid4().hex[:16])
    with table_lock(settings, "shoal.extract"):
        interrupted = _read_journal(settings)
        ids: list[str] | None = None
        while True:
            say("planning" if result.rounds == 0 else f"planning round {result.rounds + 1} (child objects)")
            first = result.rounds == 0
            work = plan(
                spark,
                router,
                force=force and first,
                only=only if first else None,
                ids=ids,
                retry_errors=retry_errors and first,
            )
            for problem in router.model_problems([c for _o, c in work]):
                if problem not in result.warnings:
                    result.warnings.append(problem)
                    say(f"warning: {problem}")
            if interrupted and result.rounds == 0:
                # Journaled objects with their extractions committed were finished (that commit
                # comes last); only the others left partial rows behind.
                planned = {o["object_id"] for o, _c in work}
                interrupted = [i for i in interrupted if i in planned]
                result.recovered = len(interrupted)
            if not work or result.rounds > settings.extract.max_depth:
                break
            result.rounds += 1
            new_children = _run_round(spark, settings, work, result, interrupted, say)
            interrupted = []
            if not new_children:
                break
            ids = new_children
        if storage.exists(journal_path(settings)):
            storage.delete(journal_path(settings))  # every journaled object is now recorded
    result.seconds = time.monotonic() - started
    return result


def _read_journal(settings: Settings) -> list[str]:
    path = journal_path(settings)
    if not storage.exists(path):
        return []
    try:
        return list(json.loads(storage.read_bytes(path))["object_ids"])
    except (ValueError, KeyError):
        return []


def _run_round(spark, settings: Settings, work, result: ExtractResult, interrupted: list[str], say) -> list[str]:
    work_ids = [o["object_id"] for o, _c in work]
    storage.write_bytes(
        journal_path(settings),
        json.dumps(
            {
                "run_id": result.run_id,
                "started_at": datetime.now(UTC).isoformat(),
                "object_ids": sorted(set(work_ids) | set(interrupted)),
            }
        ).encode(),
    )
    # Objects extracted before (version change, --force) get their old rows replaced.
    _purge(spark, sorted(metadata.existing_ids(spark, "extractions", work_ids) | set(interrupted)))
    sc = spark.sparkContext
    slices = max(1, min(len(work), sc.defaultParallelism * 4))
    say(f"extracting {len(work)} objects in {slices} tasks")
    from shoal.extract.runner import TIMESTAMP_FORMAT
    from shoal.lake.object_index import FACTS_SCHEMA, refresh_index

    rdd = sc.parallelize(work, slices).mapPartitions(
        _partition(settings.extract.model_dump_json(), settings.warehouse_uri, result.run_id)
    )
    with spark_tasks(spark, say, "extracting"):
        out = spark.createDataFrame(rdd, "table STRING, row STRING").persist()
        counts = {r["table"]: r["count"] for r in out.groupBy("table").count().collect()}
    try:

        def rows(table: str, schema: str | None = None) -> DataFrame:
            return (
                out.where(F.col("table") == table)
                .select(
                    F.from_json("row", schema or metadata.schema(table), {"timestampFormat": TIMESTAMP_FORMAT}).alias(
                        "r"
                    )
                )
                .select("r.*")
            )

        child_ids: list[str] = []
        if counts.get("objects"):
            children = rows("objects").dropDuplicates(["object_id"])
            existing = spark.table(metadata.table("objects").sql).select("object_id")
            new = children.join(existing, "object_id", "left_anti").persist()
            child_ids = [r.object_id for r in new.select("object_id").collect()]
            if child_ids:
                new.writeTo(metadata.table("objects").sql).append()
            new.unpersist()
        # One table after another: concurrent commits make the SQLite catalog fail with
        # SQLITE_BUSY (a read transaction cannot upgrade while another writer commits).
        for table in metadata.RESULT_TABLES:
            if counts.get(table):
                rows(table).writeTo(metadata.table(table).sql).append()
        pages = (
            rows("document_properties").agg(F.sum(F.coalesce("page_count", F.lit(0)))).collect()[0][0]
            if counts.get("document_properties")
            else 0
        )
        say(f"updating the metadata layer for {len(work) + len(child_ids)} objects")
        refresh_index(spark, work_ids + child_ids, facts=rows("index_facts", FACTS_SCHEMA))
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
    finally:
        out.unpersist()
    result.objects += len(work)
    result.children += len(child_ids)
    result.pages += int(pages or 0)
    for r in summary:
        by_status = result.statuses.setdefault(r.extractor, {})
        by_status[r.status] = by_status.get(r.status, 0) + r["count"]
    paths = {o["object_id"]: o["source_path"] for o, _c in work}
    result.problems.extend(
        {
            "object_id": p.object_id,
            "source_path": paths.get(p.object_id),
            "extractor": p.extractor,
            "status": p.status,
            "error": p.error,
        }
        for p in problems
    )
    return child_ids


def _purge(spark: SparkSession, ids: list[str]) -> None:
    """Delete earlier rows of objects about to be (re-)extracted, so no row is ever duplicated."""
    if not ids:
        return
    metadata.id_frame(spark, ids).createOrReplaceTempView("shoal_purge_ids")
    for table in (*metadata.RESULT_TABLES, "extractions"):
        name = metadata.table(table).sql
        if spark.table(name).join(spark.table("shoal_purge_ids"), "object_id", "left_semi").limit(1).count():
            spark.sql(
                f"MERGE INTO {name} t USING shoal_purge_ids p ON t.object_id = p.object_id WHEN MATCHED THEN DELETE"
            )
