"""A no-op `extract` is decided from the mark and table metadata alone, and only when the
plan would find nothing (issue 47).

Each test works in a lake of its own (its own catalog database and warehouse under tmp_path,
registered in the session as a catalog of its own), so rolling a table back touches no other
test's rows.
"""

from __future__ import annotations

import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from shoal import storage
from shoal.config import Settings, load_settings
from shoal.extract import Router, job, run_extract
from shoal.ingest import ingest

ROUTES = {"text/plain": ["text"]}  # the text extractor only: no model files needed


@pytest.fixture
def lake(spark, tmp_path: Path) -> Iterator[Settings]:
    from shoal.private import private_dir
    from shoal.spark import catalog_conf, renew_catalog_connections

    settings = load_settings(
        workspace=tmp_path / "lake",
        catalog={"name": f"plan_{uuid.uuid4().hex[:8]}"},
        spark={"shuffle_partitions": 2, "master": "local[2]"},
        extract={"routes": ROUTES},
    )
    private_dir(settings.workspace_dir)
    private_dir(Path(settings.warehouse_uri))
    previous = spark.catalog.currentCatalog()
    for key, value in catalog_conf(settings).items():
        spark.conf.set(key, value)
    spark.catalog.setCurrentCatalog(settings.catalog.name)
    renew_catalog_connections(spark, settings)
    try:
        yield settings
    finally:
        spark.catalog.setCurrentCatalog(previous)


def add_notes(spark, settings: Settings, folder: Path, n: int) -> set[str]:
    folder.mkdir(parents=True)
    for i in range(n):
        (folder / f"note-{i}.txt").write_text(f"Harbour note {i} {uuid.uuid4().hex}: the ferry leaves at nine.")
    return set(ingest(spark, settings, str(folder), source_name=f"s-{uuid.uuid4().hex[:6]}").new_object_ids)


def spark_jobs(spark, fn):
    """fn's result and the ids of the Spark jobs it ran (in this thread's job group)."""
    sc = spark.sparkContext
    group = f"plan-shortcut-{uuid.uuid4().hex}"
    sc.setJobGroup(group, "counting jobs")
    try:
        out = fn()
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)
    return out, list(sc.statusTracker().getJobIdsForGroup(group))


def planned_ids(spark, settings: Settings, *, full: bool, only: list[str] | None = None) -> set[str]:
    router = Router(settings.extract)
    scope, _routes = job._scope(spark, settings, router, full=full)
    frame = job.plan(spark, router, force=False, only=only, scope=scope)
    return set() if frame is None else {r.object_id for r in frame.collect()}


def test_a_noop_runs_no_spark_job_and_a_new_object_ends_it(spark, lake, tmp_path):
    first = add_notes(spark, lake, tmp_path / "a", 2)
    assert run_extract(spark, lake).objects == len(first)
    router = Router(lake.extract)
    assert job._up_to_date(spark, lake, router)
    again, jobs = spark_jobs(spark, lambda: run_extract(spark, lake))
    assert again.nothing_to_do and jobs == []
    added = add_notes(spark, lake, tmp_path / "b", 1)
    assert not job._up_to_date(spark, lake, router)
    # The incremental plan finds exactly what the full plan finds.
    assert planned_ids(spark, lake, full=False) == planned_ids(spark, lake, full=True) == added
    assert planned_ids(spark, lake, full=False, only=["text/plain"]) == added
    assert run_extract(spark, lake).objects == 1
    assert job._up_to_date(spark, lake, router)


def test_the_shortcut_declines_on_other_routes_a_journal_or_no_mark(spark, lake, tmp_path):
    add_notes(spark, lake, tmp_path / "a", 1)
    run_extract(spark, lake)
    assert job._up_to_date(spark, lake, Router(lake.extract))
    other = lake.model_copy(
        update={"extract": lake.extract.model_copy(update={"routes": {**ROUTES, "text/markdown": ["text"]}})}
    )
    assert not job._up_to_date(spark, other, Router(other.extract))
    storage.write_bytes(job.journal_path(lake), b'{"object_ids": []}')
    assert not job._up_to_date(spark, lake, Router(lake.extract))
    storage.delete(job.journal_path(lake))
    storage.delete(job.mark_path(lake))
    assert not job._up_to_date(spark, lake, Router(lake.extract))
    assert run_extract(spark, lake).nothing_to_do  # the full plan finds nothing and writes the mark again
    assert job._up_to_date(spark, lake, Router(lake.extract))


def test_rolled_back_extractions_are_planned_again(spark, lake, tmp_path):
    add_notes(spark, lake, tmp_path / "a", 1)
    run_extract(spark, lake)
    kept = job.current_snapshot(spark, "extractions", lake)  # the first run's rows
    second = add_notes(spark, lake, tmp_path / "b", 1)
    run_extract(spark, lake)  # its mark: the snapshot it started from (kept) and the one it committed
    spark.sql(f"CALL {lake.catalog.name}.system.rollback_to_snapshot('shoal.extractions', {kept})")
    # PyIceberg reads the history Spark's `history` table shows, rollback included.
    for name in ("objects", "extractions"):
        assert job._current_ancestors(spark, name, lake) == job._current_ancestors(spark, name)
    # The second run's rows are gone: its object is pending again, though the snapshot the
    # run started from is still current.
    assert not job._up_to_date(spark, lake, Router(lake.extract))
    assert planned_ids(spark, lake, full=False) == planned_ids(spark, lake, full=True) == second
    assert run_extract(spark, lake).objects == 1
    assert run_extract(spark, lake).nothing_to_do


def test_without_pyiceberg_spark_reads_the_history(spark, lake, tmp_path, monkeypatch):
    add_notes(spark, lake, tmp_path / "a", 1)
    run_extract(spark, lake)
    with_pyiceberg = [job._current_ancestors(spark, n, lake) for n in ("objects", "extractions")]
    monkeypatch.setitem(sys.modules, "pyiceberg.table.snapshots", None)  # `import` raises
    assert job._iceberg_ancestors(lake, "objects") is None
    assert [job._current_ancestors(spark, n, lake) for n in ("objects", "extractions")] == with_pyiceberg
    assert job._up_to_date(spark, lake, Router(lake.extract))
    added = add_notes(spark, lake, tmp_path / "b", 1)
    assert not job._up_to_date(spark, lake, Router(lake.extract))
    assert planned_ids(spark, lake, full=False) == added
