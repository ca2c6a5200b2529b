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
