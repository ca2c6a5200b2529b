"""Extraction cost follows new work, not the size of the lake (issue 24).

Structural checks, not timings: data files outside what a step may read are moved away while
it runs, so a scan that is not pruned fails with a missing file; snapshot summaries count the
files a refresh wrote.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from shoal.extract import Router, run_extract
from shoal.extract.job import Mark, Scope, current_snapshot, plan, routes_fingerprint
from shoal.ingest import append_objects, ingest
from shoal.lake import metadata
from shoal.lake.object_index import refresh_index


def _local(path: str) -> str:
    return path.removeprefix("file:")


def data_files(spark, name: str, where: str = "true") -> list[str]:
    rows = spark.sql(f"SELECT file_path FROM shoal.`{name}`.files WHERE content = 0 AND ({where})").collect()
    return [_local(r.file_path) for r in rows]


@contextlib.contextmanager
def hidden(paths: list[str]) -> Iterator[None]:
    """Move these data files away while the block runs (a scan that opens one fails)."""
    moved = []
    try:
        for p in paths:
            shutil.move(p, p + ".hidden")
            moved.append(p)
        yield
    finally:
        for p in moved:
            shutil.move(p + ".hidden", p)


def bucket_of(spark, object_id: str) -> int:
    # Iceberg's own bucket function (system.bucket), so the test does not re-implement the hash.
    return spark.sql(f"SELECT system.bucket({metadata.BUCKETS}, :o)", args={"o": object_id}).first()[0]


def test_every_metadata_table_is_bucketed_by_object_id(spark):
    metadata.ensure_tables(spark, add_columns=True)
    assert [n for n in metadata.SCHEMAS if not metadata.partitioned(spark, n)] == []


def test_a_table_from_the_previous_release_is_evolved_and_keeps_its_rows(spark):
    metadata.ensure_tables(spark)
    name, backup = metadata.table("faces").sql, "`shoal`.`faces_kept_by_test`"
    spark.sql(f"ALTER TABLE {name} RENAME TO {backup}")
    try:
        # The previous release's layout: unpartitioned.
        spark.sql(
            f"CREATE TABLE {name} ({metadata.schema('faces')}) USING iceberg TBLPROPERTIES ('format-version'='2')"
        )
        spark.sql(f"INSERT INTO {name} VALUES ('old-object', 'page 1', 0.0, 0, 1, 2, 3, 4, 0.9)")
        assert not metadata.partitioned(spark, "faces")
        metadata.ensure_tables(spark, ("faces",), add_columns=True)
        assert metadata.partitioned(spark, "faces")
        spark.sql(f"INSERT INTO {name} VALUES ('new-object', 'page 1', 0.0, 0, 1, 2, 3, 4, 0.8)")
        rows = spark.sql(f"SELECT object_id FROM {name} ORDER BY object_id").collect()
        assert [r.object_id for r in rows] == ["new-object", "old-object"]
        files = spark.sql(f"SELECT partition FROM {name}.files ORDER BY spec_id").collect()
        assert len(files) == 2 and files[0].partition.object_id_bucket is None  # old file, old spec
        assert files[1].partition.object_id_bucket == bucket_of(spark, "new-object")
    finally:
        spark.sql(f"DROP TABLE IF EXISTS {name}")
        spark.sql(f"ALTER TABLE {backup} RENAME TO {name}")


def _synthetic_objects(spark, n: int) -> list[str]:
    tag = uuid.uuid4().hex[:8]
    now = datetime.now(UTC)
    rows = [
        {
            "object_id": uuid.uuid4().hex,
            "raw_path": f"/nowhere/{tag}/{i}.txt",
            "source_path": f"{i}.txt",
            "source_name": f"synthetic-{tag}",
            "media_type": "text/plain",
            "size_bytes": 1,
            "sha256": "0" * 64,
            "ingested_at": now,
            "tags": {},
            "file_name": f"{i}.txt",
            "version": 1,
            "depth": 0,
        }
        for i in range(n)
    ]
    append_objects(spark, rows)
    return [r["object_id"] for r in rows]


def test_refreshing_one_object_reads_and_writes_only_its_bucket(spark):
    ids = _synthetic_objects(spark, 48)  # lands in (nearly) every bucket
    refresh_index(spark, ids)
    one = ids[0]
    b = bucket_of(spark, one)
    others = f"partition.object_id_bucket IS NULL OR partition.object_id_bucket != {b}"
    with hidden(data_files(spark, "objects", others) + data_files(spark, "object_index", others)):
        refresh_index(spark, [one])
    summary = spark.sql("SELECT summary FROM shoal.object_index.snapshots ORDER BY committed_at DESC LIMIT 1").first()[
        0
    ]
    assert summary["changed-partition-count"] == "1", summary
    assert int(summary.get("added-data-files", 0)) <= 1 and int(summary.get("added-delete-files", 0)) <= 1
    row = spark.sql(
        "SELECT status, is_latest, child_count FROM shoal.object_index WHERE object_id = :o", args={"o": one}
    )
    assert [tuple(r) for r in row.collect()] == [("pending", True, 0)]


def test_planning_after_the_mark_reads_only_files_appended_since(spark, settings, tmp_path):
    router = Router(settings.extract)
    metadata.ensure_tables(spark, add_columns=True)
    before = {"objects": data_files(spark, "objects"), "extractions": data_files(spark, "extractions")}
    mark = Mark(current_snapshot(spark, "objects"), current_snapshot(spark, "extractions"), routes_fingerprint(router))
    folder = tmp_path / "new"
    folder.mkdir()
    for i in range(2):
        (folder / f"note-{i}.txt").write_text(f"Fresh note {i} {uuid.uuid4().hex}: the ferry leaves at nine.")
    new_ids = set(ingest(spark, settings, str(folder), source_name=f"incr-{uuid.uuid4().hex[:6]}").new_object_ids)
    scope = Scope(current_snapshot(spark, "objects"), current_snapshot(spark, "extractions"), mark)
    with hidden(before["objects"] + before["extractions"]):
        frame = plan(spark, router, force=False, only=None, scope=scope)
        assert frame is not None and {r.object_id for r in frame.collect()} == new_ids
    # Nothing appended since a mark: no plan and no Spark job at all.
    assert plan(spark, router, force=False, only=None, scope=Scope(mark.objects, mark.extractions, mark)) is None


@pytest.mark.slow
def test_a_noop_extract_opens_no_data_file_and_a_new_object_is_picked_up(spark, settings, tmp_path):
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "a.txt").write_text(f"The lighthouse keeper logged calm seas {uuid.uuid4().hex}.")
    ingest(spark, settings, str(folder), source_name=f"noop-{uuid.uuid4().hex[:6]}")
    run_extract(spark, settings)  # everything pending; leaves the mark
    # A mark taken while shoal.extractions was still empty: every extraction row counts as new.
    objects, extractions = current_snapshot(spark, "objects"), current_snapshot(spark, "extractions")
    empty_then = Scope(objects, extractions, Mark(objects, None, "any"))
    assert empty_then.done_frame(spark).count() == spark.table("shoal.extractions").count() > 0
    every = [f for n in metadata.SCHEMAS for f in data_files(spark, n)]
    with hidden(every):
        again = run_extract(spark, settings)
    assert again.nothing_to_do
    (folder / "b.txt").write_text(f"A second note about the tide tables {uuid.uuid4().hex}.")
    added = ingest(spark, settings, str(folder), source_name=f"noop2-{uuid.uuid4().hex[:6]}").new_object_ids
    result = run_extract(spark, settings, only=["text/plain"])
    assert result.objects == len(added) == 1 and result.problems == []
    assert run_extract(spark, settings).nothing_to_do


def test_files_are_local(settings):
    # The hiding trick above moves files: it needs the local warehouse the test session uses.
    assert os.path.isdir(_local(settings.warehouse_uri))


def _mail(n: int, attachment: bytes) -> bytes:
    from email.message import EmailMessage

    msg = EmailMessage()
    msg["From"] = "clerk@example.com"
    msg["Subject"] = f"Stock count {n}"
    msg.set_content(f"Count number {n} attached.")
    msg.add_attachment(attachment, maintype="text", subtype="csv", filename="count.csv")
    return msg.as_bytes()


@pytest.mark.slow  # the NLP chain on each e-mail, on the shared 2-core machine
def test_children_are_extracted_in_the_same_round_once_each(spark, settings, tmp_path):
    # Three e-mails carrying one attachment (one content-addressed child), each e-mail in its own
    # Spark task: the child is extracted inline in every task, and committed exactly once. Three
    # tasks on the session's two cores are enough for two to race on the child (each e-mail costs
    # the whole NLP chain, so more only lengthen the test).
    token = uuid.uuid4().hex[:8]
    attachment = f"sku,count\nBOLT-{token},7\n".encode()
    folder = tmp_path / "mail"
    folder.mkdir()
    for n in range(3):
        (folder / f"m{n}.eml").write_bytes(_mail(n, attachment))
    ingest(spark, settings, str(folder), source_name=f"kids-{token}")
    result = run_extract(spark, settings, only=["message/rfc822"])
    assert result.rounds == 1 and result.children == 1 and result.problems == []
    child = spark.sql(
        "SELECT object_id, depth FROM shoal.objects WHERE source_path LIKE :p", args={"p": "m%.eml#count.csv"}
    )
    (cid, depth), *others = [tuple(r) for r in child.dropDuplicates(["object_id"]).collect()]
    assert others == [] and depth == 1
    chain = Router(settings.extract).chain("text/csv")
    steps = spark.sql("SELECT extractor FROM shoal.extractions WHERE object_id = :o", args={"o": cid}).collect()
    assert sorted(r.extractor for r in steps) == sorted(chain)
    cells = spark.sql("SELECT value FROM shoal.tables WHERE object_id = :o", args={"o": cid}).collect()
    assert sorted(r.value for r in cells) == sorted(["sku", "count", f"BOLT-{token}", "7"])
    index = spark.sql("SELECT status FROM shoal.object_index WHERE object_id = :o", args={"o": cid}).collect()
    assert [r.status for r in index] == ["ok"]
    # A later e-mail with the same attachment: the known child is not extracted again.
    (folder / "m9.eml").write_bytes(_mail(9, attachment))
    ingest(spark, settings, str(folder), source_name=f"kids2-{token}")
    again = run_extract(spark, settings, only=["message/rfc822"])
    assert again.children == 0
    assert spark.sql("SELECT count(*) FROM shoal.tables WHERE object_id = :o", args={"o": cid}).first()[0] == 4


@pytest.mark.slow  # the NLP chain on the e-mail, on the shared 2-core machine
def test_grandchildren_are_extracted_inline_in_the_same_round(spark, settings, tmp_path):
    # A zip holding an e-mail holding a CSV: the e-mail (depth 1) and its attachment (depth 2)
    # are both extracted in the zip's own task, in one round.
    import io
    import zipfile

    token = uuid.uuid4().hex[:8]
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("inbox/count.eml", _mail(1, f"sku,count\nNUT-{token},3\n".encode()))
    folder = tmp_path / "zips"
    folder.mkdir()
    (folder / f"mail-{token}.zip").write_bytes(buf.getvalue())
    ingest(spark, settings, str(folder), source_name=f"nest-{token}")
    result = run_extract(spark, settings, only=["application/zip"])
    assert result.rounds == 1 and result.children == 2 and result.problems == []
    found = spark.sql(
        "SELECT DISTINCT object_id, depth, media_type FROM shoal.objects WHERE source_path LIKE :p ORDER BY depth",
        args={"p": f"mail-{token}.zip#%"},
    ).collect()
    assert [(r.depth, r.media_type) for r in found] == [(1, "message/rfc822"), (2, "text/csv")]
    grandchild = found[1].object_id
    cells = spark.sql("SELECT value FROM shoal.tables WHERE object_id = :o", args={"o": grandchild}).collect()
    assert sorted(r.value for r in cells) == sorted(["sku", "count", f"NUT-{token}", "3"])
    index = spark.sql(
        "SELECT object_id, status FROM shoal.object_index WHERE object_id IN (:a, :b)",
        args={"a": found[0].object_id, "b": grandchild},
    ).collect()
    assert sorted(r.status for r in index) == ["ok", "ok"]
    assert run_extract(spark, settings, only=["application/zip"]).children == 0
