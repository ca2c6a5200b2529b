"""Issue 35: entities and PII share one spaCy parse per chunk; long parts are parsed in bounded
chunks keeping their offsets; `[extract] nlp_max_chars` bounds what NLP reads. No Spark."""

from __future__ import annotations

import pytest

from shoal.config import ExtractSettings
from shoal.extract import nlp
from shoal.extract.base import Context, ObjectInfo, TextPart

TEXT = (
    "Alice Johnson met Bob Smith at the Rotterdam office of Acme Corp on March 3, 2024. "
    "Call Alice at 212-555-0147 or write to alice.johnson@example.com.\n\n"
    "Maria Garcia paid invoice 4111 1111 1111 1111 from IBAN DE89370400440532013000 in Berlin.\n\n"
)


def ctx_for(parts: list[str], **settings) -> Context:
    s = ExtractSettings(**settings)
    obj = ObjectInfo("7" * 32, "/dev/null", "text/plain", "x.txt", 1)
    return Context(obj, b"", s, text=[TextPart(f"page {i + 1}", t) for i, t in enumerate(parts)])


@pytest.fixture(scope="module")
def analyzer():
    return nlp.pii_analyzer(ExtractSettings())


def test_pii_on_the_shared_parse_equals_presidio_alone(analyzer, monkeypatch: pytest.MonkeyPatch) -> None:
    ctx = ctx_for([TEXT * 3, "Nothing personal here."])
    entities = nlp.Entities().run(ctx).rows["entities"]
    assert {"Alice Johnson", "Bob Smith"} <= {e["entity"] for e in entities if e["label"] == "PERSON"}

    def no_second_parse(*args, **kwargs):
        raise AssertionError("PII ran the spaCy pipeline again")

    monkeypatch.setattr(analyzer.nlp_engine, "process_text", no_second_parse)
    rows = nlp.Pii().run(ctx).rows["pii"]
    monkeypatch.undo()
    # The same findings presidio makes when it parses each part itself (the earlier way).
    s = ctx.settings
    alone = [
        (p.part, r.entity_type, r.start, r.end, round(float(r.score), 4))
        for p in ctx.text
        for r in analyzer.analyze(text=p.text, language="en", score_threshold=s.pii_min_score)
        if r.entity_type not in s.pii_ignore
    ]
    shared = [(r["part"], r["pii_type"], r["start_char"], r["end_char"], r["score"]) for r in rows]
    assert sorted(shared) == sorted(alone)
    assert {"PERSON", "PHONE_NUMBER", "EMAIL_ADDRESS", "CREDIT_CARD", "IBAN_CODE"} <= {r[1] for r in shared}


def test_long_part_in_chunks_keeps_offsets(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(nlp, "NLP_CHUNK_CHARS", 500)
    part = TEXT * 12  # ~3,000 characters: six or more chunks
    ctx = ctx_for([part])
    pieces = nlp.parsed(ctx)
    assert len(pieces) >= 6 and all(len(p.doc.text) <= 500 for p in pieces)
    assert "".join(p.doc.text for p in pieces) == part  # nothing lost or repeated at the cuts
    rows = nlp.Entities().run(ctx).rows["entities"]
    assert sum(r["entity"] == "Alice Johnson" for r in rows) == 12
    assert all(part[r["start_char"] : r["end_char"]] == r["entity"] for r in rows)
    pii = nlp.Pii().run(ctx).rows["pii"]
    assert sum(r["pii_type"] == "EMAIL_ADDRESS" for r in pii) == 12
    assert all(
        part[r["start_char"] : r["end_char"]] == "alice.johnson@example.com"
        for r in pii
        if r["pii_type"] == "EMAIL_ADDRESS"
    )


def test_chunks_cut_at_breaks_and_cover_the_text() -> None:
    text = "word " * 300 + "\n\n" + "x" * 2000
    pieces = nlp.chunks(text, 1000)
    assert "".join(c for _, c in pieces) == text
    assert all(len(c) <= 1000 for _, c in pieces)
    assert [off for off, _ in pieces] == [sum(len(c) for _, c in pieces[:i]) for i in range(len(pieces))]
    assert pieces[1][1].endswith("\n\n")  # the paragraph break, not the middle of a word run


def test_nlp_budget_bounds_what_nlp_reads() -> None:
    ctx = ctx_for([TEXT, TEXT, TEXT], nlp_max_chars=len(TEXT) + 40)
    result = nlp.Entities().run(ctx)
    assert {r["part"] for r in result.rows["entities"]} == {"page 1", "page 2"}
    assert result.properties == {"nlp_budget_reached": True}
    assert [len(p.doc.text) for p in nlp.parsed(ctx)] == [len(TEXT), 40]
    unbounded = nlp.Entities().run(ctx_for([TEXT, TEXT, TEXT], nlp_max_chars=0))
    assert {r["part"] for r in unbounded.rows["entities"]} == {"page 1", "page 2", "page 3"}
    assert unbounded.properties == {}
