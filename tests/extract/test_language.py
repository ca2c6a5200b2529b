"""Issue 33: language detection names no language for non-prose text (a CSV of numbers, codes,
source code) or below `[extract] language_min_score`; prose keeps its language. No Spark."""

from __future__ import annotations

from shoal.config import ExtractSettings
from shoal.extract import nlp
from shoal.extract.base import Context, ObjectInfo, TextPart
from shoal.samples import corpus

NUMBERS_CSV = "id,amount,qty\n1,14.50,120\n2,289.00,3\n3,2.75,450\n4,1830.00,2\n" * 3
ORDER_CSV = "sku,quantity\nGR-200,2\nCUP-6,6\n"  # the demo e-mail's attachment (was "da")
CODE = 'def f(x):\n    return {"a": x[0] + 1}  # ok\nfor i in range(10):\n    print(f(i))\n'
NAMES_CSV = "name,city\nRotterdam Beans BV,Rotterdam\nOslo Roasters,Oslo\n"  # words, but an unsure guess


def ctx_for(parts: list[str], **settings) -> Context:
    obj = ObjectInfo("3" * 32, "/dev/null", "text/plain", "x.txt", 1)
    return Context(obj, b"", ExtractSettings(**settings), text=[TextPart(f"part {i}", t) for i, t in enumerate(parts)])


def test_no_language_for_non_prose_or_unsure_and_prose_keeps_its_language() -> None:
    s = ExtractSettings()
    for text in (NUMBERS_CSV, ORDER_CSV, CODE, "12 34 56.7 -8", "--- | --- | ---"):
        found = nlp.detect(text, s)
        assert found.language is None and found.reason and found.reason.startswith("not prose"), (text, found)
    unsure = nlp.detect(NAMES_CSV, s)
    assert unsure.language is None and unsure.reason and unsure.reason.startswith("unsure"), unsure
    # The threshold is a setting: at 0 the model's guess stands.
    assert nlp.detect(NAMES_CSV, ExtractSettings(language_min_score=0)).language is not None
    expected = {
        corpus.POSITIVE_REVIEW: "en",
        corpus.FRENCH_REVIEW: "fr",
        corpus.EMAIL_BODY: "en",
        "Die Lieferung kam zu spät und die Verpackung war beschädigt, aber der Kundendienst half sofort.": "de",
        "El pedido llegó tarde y la caja estaba dañada, pero el servicio al cliente fue muy amable.": "es",
    }
    for text, lang in expected.items():
        found = nlp.detect(text, s)
        assert found.language == lang and found.score >= s.language_min_score and found.words > 0.8, (text, found)

    # The extractor: a CSV object has no language (NULL in shoal.objects), its short parts inherit None,
    # and a document mixing a French paragraph with a number table keeps French.
    csv = nlp.Language().run(ctx_for([ORDER_CSV]))
    assert csv.properties["language"] is None and csv.properties["languages"] == []
    assert csv.details["whole"]["reason"].startswith("not prose")
    mixed = nlp.Language().run(ctx_for([corpus.FRENCH_REVIEW * 2, NUMBERS_CSV]))
    assert mixed.properties["languages"] == ["fr"] and mixed.properties["part_languages"]["1"] is None


def run_nlp(ctx: Context) -> dict:
    out = {}
    for cls in (nlp.Language, nlp.Entities, nlp.Sentiment, nlp.Pii):
        x = cls().run(ctx)
        ctx.properties.update(x.properties)
        out[cls.name] = x
    return out


def test_entities_sentiment_and_pii_follow_each_parts_language() -> None:
    fr = corpus.FRENCH_REVIEW + " Écrivez à Jean Dupont à Lyon : jean.dupont@example.fr."
    es = "El pedido de María García llegó roto a Madrid y el servicio fue terrible. Escriba a maria@example.es."
    de = "Die Lieferung an Thomas Müller kam zu spät und die Verpackung war beschädigt. Mail: t.mueller@example.de"
    ctx = ctx_for([fr, es, de])
    out = run_nlp(ctx)
    assert ctx.properties["part_languages"] == {"0": "fr", "1": "es", "2": "de"}
    ents = {(e["part"], e["entity"], e["label"]) for e in out["entities"].rows["entities"]}
    assert ("part 0", "Lyon", "LOC") in ents and any(p == "part 0" and "Jean Dupont" in e for p, e, _l in ents)
    assert {("part 1", "María García", "PERSON"), ("part 1", "Madrid", "LOC")} <= ents
    assert not any(p == "part 2" for p, _e, _l in ents)  # no German pipeline ships: none, not wrong ones
    assert out["entities"].details["no_pipeline"] == {"de": ["part 2"]}
    assert out["entities"].details["model"] == "es_core_news_sm, fr_core_news_sm"
    senti = {r["part"]: r["sentiment"] for r in out["sentiment"].rows["sentiment"]}
    assert senti["part 0"] == "positive" and senti["part 1"] == "negative" and senti["part 2"] == "negative", senti
    pii = {(r["part"], r["pii_type"]) for r in out["pii"].rows["pii"]}
    assert {("part 0", "EMAIL_ADDRESS"), ("part 1", "EMAIL_ADDRESS"), ("part 2", "EMAIL_ADDRESS")} <= pii
    assert ("part 1", "PERSON") in pii

    # The French review alone (the demo's moulin-fr.txt) has a sentiment, not NULL.
    review = run_nlp(ctx_for([corpus.FRENCH_REVIEW]))
    assert review["sentiment"].properties["sentiment"] == "positive"


def test_weakly_heard_names_in_a_transcript_are_dropped() -> None:
    said = "Please call the Roger Damware House before Friday. Maria Garcia will answer."
    heard = [("Please", 0.99), ("call", 0.98), ("the", 0.97), ("Roger", 0.31), ("Damware", 0.12), ("House", 0.41)]
    heard += [("before", 0.99), ("Friday.", 0.97), ("Maria", 0.95), ("Garcia", 0.88), ("will", 0.99), ("answer.", 0.98)]
    for min_p, kept in ((0.6, False), (0.0, True)):
        ctx = Context(
            ObjectInfo("5" * 32, "/dev/null", "audio/wav", "a.wav", 1),
            b"",
            ExtractSettings(entity_min_word_probability=min_p),
            text=[TextPart("transcript", said)],
            properties={"part_languages": {"0": "en"}},
        )
        ctx.shared["transcript_words"] = heard
        x = nlp.Entities().run(ctx)
        names = {e["entity"] for e in x.rows["entities"]}
        assert "Maria Garcia" in names, names
        assert any("Damware" in n for n in names) is kept, (min_p, names)
        if not kept:
            assert x.details["dropped_weakly_heard"][0]["word_probability"] == 0.248  # (0.31*0.12*0.41)^(1/3)
    # Whisper base's own probabilities for the demo (WAV heard right, the low-bitrate MP4 misheard).
    for said, heard, name, kept in (
        ("sent to Maria Garcia in Berlin.", [("sent", 0.98), ("to", 0.97), ("Maria", 0.96), ("Garcia", 0.47),
            ("in", 0.87), ("Berlin.", 0.87)], "Maria Garcia", True),
        ("Please call the Roger Damware House before Friday.", [("Please", 0.99), ("call", 0.98), ("the", 0.97),
            ("Roger", 0.43), ("Damware", 0.42), ("House", 0.84), ("before", 0.97), ("Friday.", 0.99)], "Damware", False),
    ):  # fmt: skip
        ctx = Context(
            ObjectInfo("6" * 32, "/dev/null", "audio/wav", "a.wav", 1),
            b"",
            ExtractSettings(),
            text=[TextPart("transcript", said)],
            properties={"part_languages": {"0": "en"}},
        )
        ctx.shared["transcript_words"] = heard
        names = {e["entity"] for e in nlp.Entities().run(ctx).rows["entities"]}
        assert any(name in n for n in names) is kept, (said, names)
