"""Ingest -> extract -> metadata layer on Spark, against the sample corpus's known content."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest

from shoal import storage
from shoal.catalog import list_objects, show_object
from shoal.extract import run_extract
from shoal.ingest import ingest
from shoal.samples import corpus as samples
from tests.support import sample_docs as docs

SOURCE = "corpus"


def snapshots(spark) -> dict[str, int]:
    names = [r.tableName for r in spark.sql("SHOW TABLES IN shoal").collect()]
    return {n: spark.sql(f"SELECT count(*) FROM shoal.`{n}`.snapshots").first()[0] for n in names}


def oid_of(spark, path: str, source: str = SOURCE) -> str:
    rows = spark.sql(
        "SELECT object_id FROM shoal.object_index WHERE source_name = :s AND source_path = :p AND is_latest",
        args={"s": source, "p": path},
    ).collect()
    assert len(rows) == 1, (path, rows)
    return rows[0].object_id


def table_rows(spark, oid: str) -> list[list[str]]:
    cells = spark.sql(
        "SELECT row_index, column_index, value FROM shoal.tables WHERE object_id = :o AND table_index = 0",
        args={"o": oid},
    ).collect()
    grid: dict[int, dict[int, str]] = {}
    for c in cells:
        grid.setdefault(c.row_index, {})[c.column_index] = c.value
    return [[grid[r][c] for c in sorted(grid[r])] for r in sorted(grid)]


def text(spark, oid: str) -> str:
    rows = spark.sql("SELECT text FROM shoal.text WHERE object_id = :o ORDER BY part_index", args={"o": oid}).collect()
    return "\n".join(r.text for r in rows)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("corpus")
    samples.write_corpus(folder)
    return folder


@pytest.fixture(scope="module")
def extracted(spark, settings, corpus):
    ingested = ingest(spark, settings, str(corpus), source_name=SOURCE, tags={"team": "ops"})
    result = run_extract(spark, settings)
    return ingested, result


def test_ingest_copies_into_the_raw_zone_with_sniffed_types(spark, settings, corpus, extracted):
    ingested, _ = extracted
    assert ingested.count("new") == len(samples.EXPECTED) and ingested.count("error") == 0
    rows = {
        r.source_path: r
        for r in spark.sql("SELECT * FROM shoal.objects WHERE source_name = :s", args={"s": SOURCE}).collect()
        if r.parent_object_id is None
    }
    assert set(rows) == set(samples.EXPECTED)
    for path, facts in samples.EXPECTED.items():
        r = rows[path]
        data = (corpus / path).read_bytes()
        assert r.sha256 == hashlib.sha256(data).hexdigest() and r.object_id == r.sha256[:32]
        assert r.media_type == facts["media_type"], path
        assert r.size_bytes == len(data) and r.tags == {"team": "ops"} and r.version == 1
        assert re.search(rf"/raw/{SOURCE}/\d{{4}}/\d{{2}}/\d{{2}}/{re.escape(path)}$", r.raw_path), r.raw_path
        assert storage.read_bytes(r.raw_path) == data


def test_media_type_comes_from_content_not_the_name(spark, settings, tmp_path, extracted):
    folder = tmp_path / "misnamed"
    folder.mkdir()
    (folder / "report.txt").write_bytes(samples.invoice_pdf())
    result = ingest(spark, settings, str(folder), source_name="misnamed")
    assert result.files[0].media_type == "application/pdf"


def test_reingest_unchanged_does_nothing_and_changes_become_versions(spark, settings, corpus, extracted, tmp_path):
    before = snapshots(spark)
    again = ingest(spark, settings, str(corpus), source_name=SOURCE, tags={"team": "ops"})
    assert again.count("unchanged") == len(samples.EXPECTED) and again.new_object_ids == []
    after = snapshots(spark)
    # Only the paths' last_seen moves (one commit to shoal.object_sources); nothing else is written.
    assert after.pop("object_sources") == before.pop("object_sources") + 1
    assert after == before

    folder = tmp_path / "versions"
    (folder / "notes").mkdir(parents=True)
    (folder / "notes" / "a.txt").write_text("first draft of the plan")
    v1 = ingest(spark, settings, str(folder), source_name="versions").files[0]
    (folder / "notes" / "a.txt").write_text("second draft of the plan")
    v2 = ingest(spark, settings, str(folder), source_name="versions").files[0]
    assert (v1.status, v2.status) == ("new", "new_version") and v1.object_id != v2.object_id
    assert v1.raw_path != v2.raw_path  # nothing is overwritten in the raw zone
    assert storage.read_bytes(v1.raw_path) == b"first draft of the plan"
    assert storage.read_bytes(v2.raw_path) == b"second draft of the plan"
    (folder / "notes" / "copy.txt").write_text("second draft of the plan")
    dup = {f.source_path: f for f in ingest(spark, settings, str(folder), source_name="versions").files}
    assert dup["notes/copy.txt"].status == "duplicate" and dup["notes/copy.txt"].object_id == v2.object_id
    assert dup["notes/a.txt"].status == "unchanged"
    assert not storage.exists(v1.raw_path.replace("/a.txt", "/copy.txt"))  # a duplicate is never copied
    index = {
        r.object_id: (r.version, r.is_latest)
        for r in spark.sql(
            "SELECT object_id, version, is_latest FROM shoal.object_index WHERE source_name = 'versions'"
        ).collect()
    }
    assert index == {v1.object_id: (1, False), v2.object_id: (2, True)}


def test_extracted_values_match_the_known_content(spark, settings, extracted):
    _, result = extracted
    assert result.problems == [], result.problems
    inv = oid_of(spark, "invoices/invoice-1001.pdf")
    assert table_rows(spark, inv) == samples.INVOICE_ROWS
    form = oid_of(spark, "forms/membership-form.pdf")
    fields = {
        r.field_name: r.value
        for r in spark.sql(
            "SELECT field_name, value FROM shoal.form_fields WHERE object_id = :o", args={"o": form}
        ).collect()
    }
    assert {k: fields[k] for k in samples.FORM_VALUES} == samples.FORM_VALUES
    scan = oid_of(spark, "scans/audit-letter.pdf")
    assert "quarterly audit found no material" in " ".join(text(spark, scan).split()).lower()
    docx = oid_of(spark, "office/quarterly-report.docx")
    assert samples.REPORT_PARAGRAPH in text(spark, docx) and table_rows(spark, docx) == samples.REPORT_TABLE
    xlsx = oid_of(spark, "office/regional-sales.xlsx")
    assert table_rows(spark, xlsx) == samples.EXPECTED["office/regional-sales.xlsx"]["table"]
    html = oid_of(spark, "web/governed-raw-files.html")
    assert samples.ARTICLE_PARAGRAPH in " ".join(text(spark, html).split())
    for path in ("reviews/grinder-negative.txt", "reviews/moulin-fr.txt"):
        assert text(spark, oid_of(spark, path)) == samples.EXPECTED[path]["text"]


def test_email_attachment_is_a_linked_child_object(spark, extracted):
    mail = oid_of(spark, "mail/order-1001.eml")
    child = spark.sql("SELECT * FROM shoal.objects WHERE parent_object_id = :o", args={"o": mail}).collect()
    assert len(child) == 1 and child[0].file_name == "order-1001.csv" and child[0].media_type == "text/csv"
    assert child[0].source_path == "mail/order-1001.eml#order-1001.csv" and child[0].depth == 1
    assert table_rows(spark, child[0].object_id) == [["sku", "quantity"], ["GR-200", "2"], ["CUP-6", "6"]]
    idx = spark.sql(
        "SELECT child_count, has_pii, pii_types FROM shoal.object_index WHERE object_id = :o", args={"o": mail}
    ).first()
    assert idx.child_count == 1 and idx.has_pii and "EMAIL_ADDRESS" in idx.pii_types


def test_nlp_results_and_the_metadata_layer(spark, settings, extracted):
    idx = {
        r.source_path: r
        for r in spark.sql("SELECT * FROM shoal.object_index WHERE source_name = :s", args={"s": SOURCE}).collect()
    }
    assert idx["reviews/grinder-positive.txt"].sentiment == "positive"
    assert idx["reviews/grinder-negative.txt"].sentiment == "negative"
    assert idx["reviews/moulin-fr.txt"].languages == ["fr"]
    assert "en" in idx["invoices/invoice-1001.pdf"].languages
    assert idx["invoices/invoice-1001.pdf"].page_count == 1 and idx["invoices/invoice-1001.pdf"].table_count == 1
    assert idx["forms/membership-form.pdf"].form_field_count == 4
    assert idx["mail/order-1001.eml"].entity_counts.get("PERSON", 0) >= 1
    assert not idx["reviews/grinder-positive.txt"].has_pii
    for path, r in idx.items():
        if "#" in path:
            continue
        assert r.status == "ok", (path, r.errors)
        assert len(r.extracted_paths) == 1 and len(r.enriched_paths) == 5
        doc = json.loads(storage.read_bytes(r.extracted_paths[0]))
        assert doc["object_id"] == r.object_id
        assert r.extracted_paths[0].endswith(f"/extracted/{r.object_id}/{doc['extractor']}.json")
    # PII values are never copied: the pii table and JSON hold types and offsets only.
    mail = idx["mail/order-1001.eml"]
    pii_doc = storage.read_bytes(next(p for p in mail.enriched_paths if p.endswith("/pii.json"))).decode()
    assert "maria.garcia@example.com" not in pii_doc and "555-0198" not in pii_doc
    cols = [f.name for f in spark.table("shoal.pii").schema.fields]
    assert cols == ["object_id", "part", "pii_type", "start_char", "end_char", "score", "recognizer"]


def test_second_extract_does_no_work_and_writes_no_snapshot(spark, settings, extracted):
    run_extract(spark, settings)  # objects other tests ingested
    before = snapshots(spark)
    again = run_extract(spark, settings)
    assert again.nothing_to_do and snapshots(spark) == before


def test_forced_reextraction_replaces_rows_instead_of_duplicating(spark, settings, extracted):
    oid = oid_of(spark, "invoices/invoice-1001.pdf")

    def counts():
        return {
            t: spark.sql(f"SELECT count(*) FROM shoal.{t} WHERE object_id = :o", args={"o": oid}).first()[0]
            for t in ("text", "tables", "entities", "extractions", "key_phrases", "object_index")
        }

    before = counts()
    result = run_extract(spark, settings, force=True, only=["pdf"])
    assert result.objects >= 3 and result.statuses["pdf"]["ok"] >= 3
    assert counts() == before


def test_bad_files_get_clear_statuses_and_the_run_goes_on(spark, settings, tmp_path, extracted):
    folder = tmp_path / "bad"
    folder.mkdir()
    good = "The warehouse in Lisbon shipped forty crates today."
    files = {
        "good.txt": good.encode(),
        "corrupt.pdf": samples.invoice_pdf()[:400],
        "locked.pdf": docs.encrypted_pdf(samples.invoice_pdf()),
        "empty.txt": b"",
        "bomb.zip": docs.zip_bomb(),
        "program.bin": bytes(range(256)) * 64,
        "bomb.xml": docs.XML_BOMB,
    }
    for name, data in files.items():
        (folder / name).write_bytes(data)
    ingest(spark, settings, str(folder), source_name="bad")
    result = run_extract(spark, settings)
    steps = {
        (r.source_path, r.extractor): (r.status, r.error)
        for r in spark.sql(
            "SELECT o.source_path, e.extractor, e.status, e.error FROM shoal.extractions e "
            "JOIN shoal.objects o USING (object_id) WHERE o.source_name = 'bad'"
        ).collect()
    }
    assert steps[("good.txt", "text")] == ("ok", None)
    assert steps[("corrupt.pdf", "pdf")][0] == "error" and "PDF" in steps[("corrupt.pdf", "pdf")][1]
    assert steps[("locked.pdf", "pdf")][0] == "skipped" and "encrypted" in steps[("locked.pdf", "pdf")][1]
    assert steps[("empty.txt", "unsupported")] == ("skipped", "empty file")
    assert steps[("bomb.zip", "archive")][0] == "error" and "bomb" in steps[("bomb.zip", "archive")][1]
    assert steps[("program.bin", "unsupported")][0] == "skipped"
    assert "no extractor for media type" in steps[("program.bin", "unsupported")][1]
    assert steps[("bomb.xml", "xml")][0] == "error" and "refused" in steps[("bomb.xml", "xml")][1]
    assert steps[("corrupt.pdf", "language")][0] == "skipped"  # nothing to enrich without text
    problems = {(p["source_path"], p["extractor"]) for p in result.problems}
    assert ("corrupt.pdf", "pdf") in problems and ("bomb.zip", "archive") in problems
    idx = {
        r.source_path: r.status
        for r in spark.sql("SELECT source_path, status FROM shoal.object_index WHERE source_name = 'bad'").collect()
    }
    assert idx["good.txt"] == "ok" and idx["corrupt.pdf"] == "error" and idx["locked.pdf"] == "skipped"


def test_catalog_filters_and_show(spark, settings, extracted):
    def paths(**kw):
        return {r["source_path"] for r in list_objects(spark, source_name=SOURCE, **kw)}

    assert paths(media_type="pdf") == {
        "invoices/invoice-1001.pdf",
        "forms/membership-form.pdf",
        "scans/audit-letter.pdf",
    }
    assert paths(media_type="text/*") >= {"reviews/grinder-positive.txt", "notes/meeting-notes.md"}
    assert paths(language="fr") == {"reviews/moulin-fr.txt"}
    assert "mail/order-1001.eml" in paths(has_pii=True)
    assert "reviews/grinder-positive.txt" not in paths(has_pii=True)
    assert paths(text="quarterly AUDIT weaknesses") == {"scans/audit-letter.pdf"}
    assert paths(text="audit nonexistentword") == set()
    assert len(paths(tags={"team": "ops"})) == len(samples.EXPECTED) + 1  # + the e-mail's attachment
    assert paths(tags={"team": "x' OR '1'='1"}) == set()  # values are bound, never spliced into SQL
    oid = oid_of(spark, "invoices/invoice-1001.pdf")
    shown = show_object(spark, oid)
    assert shown["object"]["object_id"] == oid
    by_name = {e["extractor"]: e for e in shown["extractions"]}
    assert by_name["pdf"]["result"]["tables"][0]["rows"] == samples.INVOICE_ROWS
    assert set(by_name) == {"pdf", "language", "entities", "key_phrases", "sentiment", "pii"}
    assert show_object(spark, oid[:10])["object"]["object_id"] == oid  # unique prefixes work
