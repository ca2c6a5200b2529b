"""The driver-side commit of an extraction run (PyIceberg, issue 47): the same rows as the Spark
path, Spark's reads see its commits, and a crash between its commits redoes the objects once."""

from __future__ import annotations

import io
import uuid
import zipfile
from datetime import UTC, datetime

import pyarrow as pa
import pytest

from shoal import storage
from shoal.config import ExtractSettings
from shoal.extract import commit, job, run_extract
from shoal.ingest import ingest
from shoal.lake import metadata

ROUTES = {"application/zip": ["archive"], "text/csv": ["delimited"], "text/plain": ["text"]}
# The children too: a child registered before a crash is planned in its own right on the rerun.
ONLY = list(ROUTES)
CHECKED = (*metadata.RESULT_TABLES, "extractions", "object_index", "objects")


def _zips(folder, token: str) -> None:
    """Two archives sharing one CSV (one content-addressed child under two parents) and a note."""
    shared = f"sku,count\nBOLT-{token},7\nNUT-{token},3\n"
    for n, members in enumerate(
        [{"count.csv": shared, "note.txt": f"Stock note {token}: the night train is late. Zoë."}, {"count.csv": shared}]
    ):
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w") as z:
            for name, text in members.items():
                z.writestr(name, text)
        (folder / f"box-{token}-{n}.zip").write_bytes(buf.getvalue())


@pytest.fixture
def lake(spark, settings, tmp_path):
    """Settings with document-only routes, and two new archives ingested under a fresh source."""
    token = uuid.uuid4().hex[:8]
    folder = tmp_path / "zips"
    folder.mkdir()
    _zips(folder, token)
    ingest(spark, settings, str(folder), source_name=f"fast-{token}")
    return settings.model_copy(update={"extract": ExtractSettings(routes=ROUTES)}), token


def _snapshot(spark, ids: list[str]) -> dict[str, list[tuple]]:
    """Every checked table's rows of these objects, in a stable order."""
    out = {}
    for table in CHECKED:
        frame = metadata.for_ids(spark, spark.table(metadata.table(table).sql), ids)
        out[table] = sorted((tuple(r) for r in frame.collect()), key=repr)
    return out


def test_value_conversion_refuses_what_from_json_would_change():
    ts = pa.timestamp("us", tz="UTC")
    assert commit._value("2026-01-02T03:04:05.000006+01:00", ts) == datetime(2026, 1, 2, 2, 4, 5, 6, tzinfo=UTC)
    assert commit._value(3, pa.float64()) == 3.0
    assert commit._value({"a": "b"}, pa.map_(pa.string(), pa.string())) == [("a", "b")]
    assert commit._value([{"word": "x"}], pa.list_(pa.struct([("word", pa.string()), ("p", pa.float64())]))) == [
        {"word": "x", "p": None}
    ]
    for value, typ in [
        (True, pa.int32()),  # Spark gives null
        (1.0, pa.int32()),
        (2**31, pa.int32()),  # overflow: null
        (7, pa.string()),  # Spark gives the text "7"
        ({"a": 1}, pa.string()),
        (1, pa.bool_()),
        (True, pa.float64()),
        ("2026-01-02 03:04:05", ts),  # not the pattern the rows are parsed with
        ("2026-01-02T03:04:05.000006", ts),  # no offset
        ({"a": 1}, pa.map_(pa.string(), pa.string())),
    ]:
        with pytest.raises(commit.NotFast):
            commit._value(value, typ)


def test_the_fast_path_writes_the_rows_the_spark_path_writes(spark, lake, monkeypatch):
    settings, token = lake
    seen: dict = {}
    fast = job._commit_fast

    def spy(spark_, settings_, committer, out, *args):
        seen["records"] = [tuple(r) for r in out.collect()]
        seen["committed"] = committed = fast(spark_, settings_, committer, out, *args)
        return committed

    index_objects = commit.index_objects
    monkeypatch.setattr(job, "_commit_fast", spy)
    monkeypatch.setattr(commit, "index_objects", lambda *a: seen.setdefault("indexed", index_objects(*a)))
    result = run_extract(spark, settings, only=["application/zip"])
    assert seen["committed"] is not None and seen["indexed"] and result.problems == []
    assert result.children == 2  # the shared CSV once, the note
    records = seen["records"]
    ids = sorted({r[2] for r in records})
    children = sorted({r[2] for r in records if r[0] == "objects"})
    before = _snapshot(spark, ids)
    assert all(before[t] for t in ("text", "tables", "document_properties", "extractions", "object_index"))
    wrong_bucket = spark.sql(
        f"SELECT count(*) FROM shoal.text WHERE object_id IN {metadata.ids_sql(ids)} "
        f"AND _partition.object_id_bucket != system.bucket({metadata.BUCKETS}, object_id)"
    ).first()[0]
    assert wrong_bucket == 0
    # Undo the run, then commit the very same worker rows through Spark.
    job._purge(spark, ids)
    spark.sql(f"DELETE FROM {metadata.table('object_index').sql} WHERE object_id IN {metadata.ids_sql(ids)}")
    spark.sql(f"DELETE FROM {metadata.table('objects').sql} WHERE object_id IN {metadata.ids_sql(children)}")
    assert not any(_snapshot(spark, children).values())
    out = spark.createDataFrame(records, "table STRING, row STRING, object_id STRING, via STRING")
    tally = job._tally(out)
    work_ids = sorted({r[3] for r in records})
    again = job._commit_spark(spark, settings, out, tally, work_ids, set(work_ids), job.ExtractResult("x"), print)
    storage.delete(job.journal_path(settings))
    assert _snapshot(spark, ids) == before
    new, summary, problems, pages = seen["committed"]
    assert (sorted(r.object_id for r in again[0]), again[1], again[2], again[3]) == (
        sorted(r.object_id for r in new),
        summary,
        problems,
        pages,
    )


def test_rows_that_cannot_be_converted_exactly_go_through_spark(spark, lake, monkeypatch):
    settings, token = lake
    used: list[str] = []
    monkeypatch.setattr(commit, "to_arrow", lambda *a: (_ for _ in ()).throw(commit.NotFast("test")))
    spark_path = job._commit_spark
    monkeypatch.setattr(job, "_commit_spark", lambda *a: (used.append("spark"), spark_path(*a))[1])
    result = run_extract(spark, settings, only=["application/zip"])
    assert used == ["spark"] and result.children == 2
    found = spark.sql("SELECT value FROM shoal.tables WHERE value = :v", args={"v": f"BOLT-{token}"}).count()
    assert found == 1


@pytest.mark.parametrize("crash_at", ["objects", "tables", "extractions"])
def test_a_crash_between_commits_is_redone_once(spark, lake, monkeypatch, crash_at):
    settings, token = lake
    append = commit.Committer.append

    def crashing(self, name):
        if name == crash_at and name in self.ready:
            raise RuntimeError("killed")
        return append(self, name)

    monkeypatch.setattr(commit.Committer, "append", crashing)
    with pytest.raises(RuntimeError, match="killed"):
        run_extract(spark, settings, only=ONLY)
    assert storage.exists(job.journal_path(settings))
    monkeypatch.setattr(commit.Committer, "append", append)
    rerun = run_extract(spark, settings, only=ONLY)
    assert rerun.recovered >= 2 and rerun.problems == []
    assert not storage.exists(job.journal_path(settings))
    ids = [
        r.object_id
        for r in spark.sql(
            "SELECT object_id FROM shoal.objects WHERE source_path LIKE :p", args={"p": f"box-{token}-%"}
        )
        .distinct()
        .collect()
    ]
    assert len(ids) == 4  # two archives, the shared CSV, the note
    for table in ("objects", "object_index"):
        rows = metadata.for_ids(spark, spark.table(metadata.table(table).sql), ids).count()
        assert rows == 4, table
    cells = spark.sql("SELECT count(*) FROM shoal.tables WHERE value = :v", args={"v": f"BOLT-{token}"}).first()[0]
    assert cells == 1
    steps = metadata.for_ids(spark, spark.table("shoal.extractions"), ids)
    assert steps.count() == steps.dropDuplicates(["object_id", "extractor"]).count() == 4
    assert run_extract(spark, settings, only=ONLY).objects == 0
