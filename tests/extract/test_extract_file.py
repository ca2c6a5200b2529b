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
