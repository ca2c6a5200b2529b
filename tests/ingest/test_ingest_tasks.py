"""Ingest spreads its per-file work over Spark tasks (issue 24): listing below the top levels,
hashing, type sniffing and copying run in executors, for a local folder and for an S3 prefix
on a real S3-compatible server (SeaweedFS on loopback). The rows in shoal.objects are the
same as a one-by-one ingest would write, a re-run changes nothing, and a file that cannot be
read is reported by name while the others land."""

from __future__ import annotations

import hashlib
import os
import re
import uuid
from pathlib import Path

import pytest
from pydantic import SecretStr

from shoal import storage
from shoal.config import StorageSettings
from shoal.ingest import ingest
from shoal.lake import metadata
from shoal.samples import corpus as samples

pytestmark = pytest.mark.slow  # Spark jobs and a SeaweedFS server: over a minute on 2 shared cores

U = uuid.uuid4().hex[:8]
CANARY = f"canary {U}: this file lies outside the source"


def tree(tag: str) -> dict[str, bytes]:
    """A small source: files at the top, in folders and sub-folders, one content twice.
    Content differs per `tag`, so no test's files are duplicates of another's."""
    memo = f"Memo {tag}: the Lisbon shipment leaves on Friday.\n".encode()
    return {
        "memo.txt": memo,
        "gone.txt": f"Soon unreadable {tag}.\n".encode(),
        "invoices/invoice-1001.pdf": samples.invoice_pdf() + f"\n% {tag}\n".encode(),
        "invoices/2024/notes.md": f"# Notes {tag}\n\nPaid in full.\n".encode(),
        "notes/deep/memo-copy.txt": memo,
        "copies/data.csv": f"id,name\n1,{tag}\n".encode(),
    }


EXPECTED_TYPES = {
    "memo.txt": "text/plain",
    "invoices/invoice-1001.pdf": "application/pdf",
    "invoices/2024/notes.md": "text/markdown",
    "copies/data.csv": "text/csv",
}


def object_rows(spark, source_name: str) -> dict[str, dict]:
    rows = spark.sql(
        f"SELECT * FROM {metadata.table('objects').sql} WHERE source_name = :s", args={"s": source_name}
    ).collect()
    return {r.source_path: r.asDict() for r in rows}


def snapshot_ids(spark, name: str) -> int:
    return spark.sql(f"SELECT count(*) FROM {metadata.table(name).sql}.snapshots").collect()[0][0]


def check_first_run(spark, result, files: dict[str, bytes], source_name: str) -> None:
    status = {f.source_path: f.status for f in result.files}
    assert status == {
        "memo.txt": "new",
        "invoices/invoice-1001.pdf": "new",
        "invoices/2024/notes.md": "new",
        "copies/data.csv": "new",
        "notes/deep/memo-copy.txt": "duplicate",  # same content as memo.txt, which sorts first
        "gone.txt": "error",
    }
    gone = next(f for f in result.files if f.source_path == "gone.txt")
    assert "cannot read" in gone.error and "gone.txt" in gone.error and gone.object_id is None
    # Listing and hashing ran inside Spark tasks (each row names the TaskContext it was
    # hashed in), spread over several of them rather than one file after another on the driver.
    assert result.hash_tasks >= 2
    rows = object_rows(spark, source_name)
    assert set(rows) == set(EXPECTED_TYPES)
    for path, media_type in EXPECTED_TYPES.items():
        sha = hashlib.sha256(files[path]).hexdigest()
        r = rows[path]
        assert (r["object_id"], r["sha256"], r["size_bytes"], r["media_type"]) == (
            sha[:32],
            sha,
            len(files[path]),
            media_type,
        )
        assert (r["version"], r["depth"], r["parent_object_id"], r["tags"]) == (1, 0, None, {"run": U})
        assert r["file_name"] == path.rsplit("/", 1)[-1]
        assert re.search(rf"/raw/{source_name}/\d{{4}}/\d{{2}}/\d{{2}}/{re.escape(path)}$", r["raw_path"])
        assert storage.read_bytes(r["raw_path"]) == files[path]
    paths = spark.sql(
        f"SELECT source_path FROM {metadata.table('object_sources').sql} WHERE source_name = :s AND object_id = :o",
        args={"s": source_name, "o": rows["memo.txt"]["object_id"]},
    ).collect()
    assert sorted(p.source_path for p in paths) == ["memo.txt", "notes/deep/memo-copy.txt"]


def check_rerun_is_a_noop(spark, settings, source: str, source_name: str) -> None:
    before = {t: snapshot_ids(spark, t) for t in ("objects", "object_index")}
    again = ingest(spark, settings, source, source_name=source_name, tags={"run": U})
    assert {f.status for f in again.files} == {"unchanged", "duplicate"} and again.new_object_ids == []
    assert {t: snapshot_ids(spark, t) for t in ("objects", "object_index")} == before


def test_local_folder_is_hashed_and_copied_in_tasks(spark, settings, tmp_path):
    files = tree(f"local {U}")
    src = tmp_path / "drop"
    for rel, data in files.items():
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / rel).write_bytes(data)
    (tmp_path / "outside.txt").write_text(CANARY)
    name = f"spread{U}"
    heard: list[str] = []

    def say(message: str) -> None:
        heard.append(message)
        if message.startswith("reading "):
            # Between the driver's listing and the tasks' reading, the file becomes a link to
            # a file outside the source: the task refuses to follow it and names the file.
            (src / "gone.txt").unlink()
            os.symlink(tmp_path / "outside.txt", src / "gone.txt")

    result = ingest(spark, settings, str(src), source_name=name, tags={"run": U}, say=say)
    assert any("Spark tasks" in m for m in heard), heard
    check_first_run(spark, result, files, name)
    raw = Path(settings.warehouse_uri) / "raw" / name
    assert not any(CANARY in p.read_text(errors="replace") for p in raw.rglob("*") if p.is_file())
    (src / "gone.txt").unlink()
    check_rerun_is_a_noop(spark, settings, str(src), name)


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    from tests.support.servers import seaweedfs

    with seaweedfs(tmp_path_factory.mktemp("s3")) as server:
        yield server


def test_s3_prefix_is_listed_hashed_and_copied_in_tasks(spark, settings, s3, monkeypatch):
    st = StorageSettings(endpoint=s3.endpoint, access_key=SecretStr(s3.access_key), secret_key=SecretStr(s3.secret_key))
    s3_settings = settings.model_copy(update={"storage": st})
    # The shared session was started without an object store: what ingest hands its workers
    # (and this process) is put back afterwards. The variables are recorded before configure()
    # sets them: recorded after, their S3 values were "put back" and leaked into later modules
    # (a CLI subprocess there then took its local warehouse for S3).
    workers = spark.sparkContext.environment
    for var in storage.S3_ENV.values():
        # setenv/setitem record the value before (or its absence) for the tear-down; delenv of
        # an absent variable records nothing, and a value recorded after configure() is its own.
        monkeypatch.setenv(var, "")
        monkeypatch.delenv(var)
        monkeypatch.setitem(workers, var, "")
        monkeypatch.delitem(workers, var)
    env = storage.configure(st)
    workers.update(env)
    client = s3.client()
    files = tree(f"s3 {U}")
    for rel, data in files.items():
        with client.open_output_stream(f"{s3.bucket}/incoming/{rel}") as f:
            f.write(data)
    name = f"s3spread{U}"

    def say(message: str) -> None:
        if message.startswith("reading "):
            client.delete_file(f"{s3.bucket}/incoming/gone.txt")  # listed, then gone before it is read

    source = f"s3://{s3.bucket}/incoming"
    result = ingest(spark, s3_settings, source, source_name=name, tags={"run": U}, say=say)
    check_first_run(spark, result, files, name)
    assert s3.secret_key not in repr(result.to_dict())
    check_rerun_is_a_noop(spark, s3_settings, source, name)


def test_a_copy_whose_bytes_miss_the_hash_leaves_nothing_behind(tmp_path):
    import hashlib

    import pytest

    from shoal import storage
    from shoal.exceptions import SourceError

    src, dst = tmp_path / "in.txt", tmp_path / "out" / "copy.txt"
    src.write_bytes(b"now")
    with pytest.raises(SourceError, match="changed while"):
        storage.copy(str(src), str(dst), sha256=hashlib.sha256(b"then").hexdigest())
    assert list((tmp_path / "out").iterdir()) == []  # no target, no staged file
    storage.copy(str(src), str(dst), sha256=hashlib.sha256(b"now").hexdigest())
    assert dst.read_bytes() == b"now" and [p.name for p in (tmp_path / "out").iterdir()] == ["copy.txt"]
