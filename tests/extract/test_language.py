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
