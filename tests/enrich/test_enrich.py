"""Enrichment jobs: PII-redacted copies, normalised entities, document classes, linked and queryable."""

from __future__ import annotations

import json
import uuid

import pytest
import yaml

from shoal import storage
from shoal.enrich import EnrichError, classify, load_job, redact, run_job
from shoal.extract import run_extract
from shoal.ingest import ingest

DOCS = {
    "invoice.txt": "INVOICE 2291. Bill to: Rotterdam Beans BV. Subtotal 100 EUR, VAT 21 EUR. Amount due: 121 EUR. "
    "Payment terms: 30 days.",
    "ticket.txt": "Hello customer service, my grinder is not working since Monday. Please help, I want a refund. "
    "Write to me at jonas.berg@example.org. Ticket 4411. Jonas Berg",
    "cv.txt": "Curriculum vitae of Ada Lovelace. Work experience: analyst at Acme Corp. Education: mathematics. "
    "Skills: Python, SQL. References on request.",
}


def test_redact_and_classify_units():
    assert redact("mail ana@x.org now", [(5, 14, "EMAIL_ADDRESS")]) == ("mail <EMAIL_ADDRESS> now", 1)
    assert redact("abcdef", [(0, 3, "A"), (2, 5, "B")]) == ("<A><B>f", 2)
    assert classify("nothing to see", {"invoice": ["invoice"]}, 2)[0] == "other"
    assert classify("Invoice: amount due now", {"invoice": ["invoice", "amount due"]}, 2)[:2] == ("invoice", 2.0)


@pytest.fixture(scope="module")
def enriched(spark, settings, tmp_path_factory):
    folder = tmp_path_factory.mktemp("to-enrich")
    source = f"enrich-{uuid.uuid4().hex[:6]}"
    for name, text in DOCS.items():
        (folder / name).write_text(text)
    ingest(spark, settings, str(folder), source_name=source)
    run_extract(spark, settings, only=["text/plain"])
    ns = f"ref_{uuid.uuid4().hex[:6]}"
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {ns}")
    spark.sql(f"CREATE TABLE {ns}.companies (alias STRING, canonical STRING) USING iceberg")
    spark.sql(
        f"INSERT INTO {ns}.companies VALUES ('acme corp', 'ACME Corporation'), ('rotterdam beans bv', 'Rotterdam Beans B.V.')"
    )
    job_file = folder.parent / f"{source}.yaml"
    job_file.write_text(
        yaml.safe_dump(
            {
                "name": "standard",
                "steps": [
                    {"type": "redact_pii"},
                    {"type": "normalize_entities", "reference": f"{ns}.companies"},
                    {"type": "classify"},
                ],
            }
        )
    )
    job = load_job(job_file)
    first = run_job(spark, settings, job)
    ids = {
        r.source_path: r.object_id
        for r in spark.sql(
            "SELECT source_path, object_id FROM shoal.objects WHERE source_name = :s", args={"s": source}
        ).collect()
    }
    return job, first, ids


def test_pii_redacted_copy(spark, enriched):
    _job, first, ids = enriched
    assert first.objects >= 3 and first.rows["redacted_text"] >= 3
    text = spark.sql(
        "SELECT text, redactions FROM shoal.redacted_text WHERE object_id = :o AND job = 'standard'",
        args={"o": ids["ticket.txt"]},
    ).first()
    assert "jonas.berg@example.org" not in text.text and "<EMAIL_ADDRESS>" in text.text
    assert "Jonas Berg" not in text.text and text.redactions >= 2


def test_entities_normalised_against_the_reference(spark, enriched):
    _job, _first, ids = enriched
    rows = spark.sql(
        "SELECT entity, canonical, matched FROM shoal.normalized_entities WHERE object_id = :o",
        args={"o": ids["cv.txt"]},
    ).collect()
    assert ("ACME Corporation", True) in [(r.canonical, r.matched) for r in rows if r.entity.startswith("Acme Corp")]
    assert any(not r.matched and r.canonical == r.entity for r in rows)


def test_documents_classified(spark, enriched):
    _job, first, ids = enriched
    got = {
        r.object_id: r["class"]
        for r in spark.sql("SELECT object_id, class FROM shoal.classifications WHERE job = 'standard'").collect()
    }
    assert got[ids["invoice.txt"]] == "invoice"
    assert got[ids["ticket.txt"]] == "support_email"
    assert got[ids["cv.txt"]] == "resume"
    assert first.classes.get("invoice", 0) >= 1


def test_outputs_linked_in_the_metadata_layer_and_reruns_are_idempotent(spark, settings, enriched):
    job, _first, ids = enriched
    oid = ids["invoice.txt"]
    paths = spark.sql("SELECT enriched_paths FROM shoal.object_index WHERE object_id = :o", args={"o": oid}).first()[0]
    names = sorted(p.rsplit("/", 1)[1] for p in paths if "/enriched/" in p)
    assert names == ["standard.classify.json", "standard.normalize_entities.json", "standard.redact_pii.json"]
    doc = json.loads(storage.read_bytes([p for p in paths if p.endswith("standard.classify.json")][0]))
    assert doc["result"]["class"] == "invoice"
    assert run_job(spark, settings, job).objects == 0  # nothing new
    again = run_job(spark, settings, job, force=True)
    assert again.objects >= 3
    count = spark.sql("SELECT count(*) FROM shoal.classifications WHERE object_id = :o", args={"o": oid}).first()[0]
    assert count == 1  # replaced, not duplicated
    paths = spark.sql("SELECT enriched_paths FROM shoal.object_index WHERE object_id = :o", args={"o": oid}).first()[0]
    assert len([p for p in paths if "/enriched/" in p]) == 3


def test_bad_jobs_are_clear_errors(spark, settings, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({"name": "x", "steps": [{"type": "translate"}]}))
    with pytest.raises(EnrichError, match="invalid enrichment job"):
        load_job(bad)
    noref = tmp_path / "noref.yaml"
    noref.write_text(yaml.safe_dump({"name": "y", "steps": [{"type": "normalize_entities", "reference": "ref.none"}]}))
    with pytest.raises(EnrichError, match="does not exist"):
        run_job(spark, settings, load_job(noref))
