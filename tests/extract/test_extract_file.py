"""`shoal.extract_file`: one local file through the extractor chain `shoal extract` runs, without a
lake or Spark, returning the typed elements the Spark job writes."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

import shoal
from shoal.exceptions import ShoalError
from shoal.extract import ExtractedTable, TextPart


def test_extract_file_types_routes_and_returns_elements(tmp_path: Path) -> None:
    page = tmp_path / "review.html"
    page.write_text(
        "<html><head><title>Grinder review</title></head><body><h1>Great grinder</h1>"
        "<p>The grinder is quiet and fast. <a href='https://example.org/g'>maker</a></p></body></html>"
    )
    found = shoal.extract_file(page, enrich=False)
    assert found.media_type == "text/html" and found.ok, found.problems()
    assert [s.extractor for s in found.steps] == ["html"]
    assert all(isinstance(p, TextPart) for p in found.text) and "quiet and fast" in found.full_text
    assert found.object_id == hashlib.sha256(page.read_bytes()).hexdigest()[:32]

    sheet = tmp_path / "orders.csv"
    sheet.write_text("order,region\n1,north\n2,south\n")
    rows = shoal.extract_file(sheet, enrich=False)
    assert rows.media_type == "text/csv" and rows.ok
    assert rows.tables and isinstance(rows.tables[0], ExtractedTable)
    assert rows.tables[0].rows[:2] == [["order", "region"], ["1", "north"]]

    # An empty file is skipped with the reason, as `shoal extract` records it.
    empty = tmp_path / "empty.txt"
    empty.write_bytes(b"")
    nothing = shoal.extract_file(empty, enrich=False)
    assert nothing.ok and nothing.steps[0].status == "skipped" and "empty" in (nothing.steps[0].error or "")

    with pytest.raises(ShoalError, match="is not a file"):
        shoal.extract_file(tmp_path / "missing.pdf")


def test_extract_file_refuses_oversized_files_unread_and_leaves_no_child(tmp_path: Path) -> None:
    import multiprocessing
    import zipfile

    from shoal.config import ExtractSettings
    from shoal.ingest.sniff import zip_type

    # A ZIP whose declared type is a bomb (8 MiB of one byte) or an HTML/PDF type is not taken
    # at its word: at most 100 bytes are unpacked and only ZIP-based types are accepted (else: a ZIP).
    for declared, expected in (
        (b"a" * (8 << 20), "application/zip"),
        (b"text/html", "application/zip"),
        (b"application/pdf", "application/zip"),
        (b"application/epub+zip", "application/epub+zip"),
    ):
        box = tmp_path / "box.zip"
        with zipfile.ZipFile(box, "w", compression=zipfile.ZIP_DEFLATED) as zf:
            zf.writestr("mimetype", declared)
            zf.writestr("index.html", "<script>alert(1)</script>")
        assert zip_type(box.read_bytes()) == expected, declared[:20]

    big = tmp_path / "big.txt"
    big.write_bytes(b"hello world\n" * ((1 << 20) // 12 + 10))  # just over 1 MiB
    got = shoal.extract_file(big, settings=ExtractSettings(max_file_mb=1))
    assert got.steps and all(s.status == "skipped" and "oversized" in (s.error or "") for s in got.steps)
    assert got.object_id == hashlib.sha256(big.read_bytes()).hexdigest()[:32] and not got.text

    small = tmp_path / "note.txt"
    small.write_text("A short note about the Lisbon shipment.")
    before = len(multiprocessing.active_children())
    for _ in range(3):
        assert shoal.extract_file(small, enrich=False).text
    assert len(multiprocessing.active_children()) <= before  # each call's sandbox child is gone


def test_extract_file_imports_no_pyspark(tmp_path: Path) -> None:
    # The documented promise: one file, no Spark. A fresh interpreter shows what the call imports.
    import subprocess
    import sys

    note = tmp_path / "note.txt"
    note.write_text("The grinder is quiet and fast.\n")
    code = (
        "import sys, shoal\n"
        f"found = shoal.extract_file({str(note)!r}, enrich=False)\n"
        "assert found.ok and 'quiet' in found.full_text, found.problems()\n"
        "spark = lambda: sorted(m for m in sys.modules if m.split('.')[0] in ('pyspark', 'py4j'))\n"
        "assert not spark(), spark()\n"
        "from shoal.extract import Extractor, Router, TextPart  # what a plugin imports\n"
        "from shoal.ingest import sniff\n"
        "assert not spark(), spark()\n"
        "for found in shoal.extract_files([sys.argv[1]], enrich=False):\n"
        "    assert found.ok, found.problems()\n"
        "assert not spark(), spark()\n"
    )
    done = subprocess.run([sys.executable, "-c", code, str(note)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]


def test_extract_files_reuses_one_sandbox_child(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from shoal.extract import sandbox

    starts: list[int] = []
    start = sandbox.Sandbox._start

    def counted(self: sandbox.Sandbox) -> None:
        start(self)
        starts.append(self.proc.pid if hasattr(self.proc, "pid") else self.proc.popen.pid)

    monkeypatch.setattr(sandbox.Sandbox, "_start", counted)
    before = set(sandbox._sandboxes)  # other modules' routers in this worker keep theirs
    paths = []
    for i, line in enumerate(["order,region\n1,north\n", "The grinder is quiet.\n", "<p>Fast and cheap.</p>"]):
        path = tmp_path / f"f{i}.{('csv', 'txt', 'html')[i]}"
        path.write_text(line)
        paths.append(path)

    found = list(shoal.extract_files(paths, enrich=False))
    assert [f.path for f in found] == [str(p) for p in paths]
    assert [f.media_type for f in found] == ["text/csv", "text/plain", "text/html"]
    assert all(f.ok for f in found) and "quiet" in found[1].full_text and "cheap" in found[2].full_text
    assert found[0].tables[0].rows[1] == ["1", "north"]
    assert len(starts) == 1  # one child for the three files
    assert set(sandbox._sandboxes) <= before  # and it is stopped once the iterator is exhausted

    # One call per file starts one child per file: what the batch form saves.
    for path in paths:
        shoal.extract_file(path, enrich=False)
    assert len(starts) == 4

    with pytest.raises(ShoalError, match="not files: .*missing.pdf"):
        shoal.extract_files([paths[0], tmp_path / "missing.pdf"])
