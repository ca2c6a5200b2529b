"""Routing, declared as data: media type -> extractor chain, like a state machine's Choice state.

Built-in extractors are registered here; plugins add their own through the entry-point
group `shoal.extractors` (each entry point names an `Extractor` subclass; an optional class
attribute `media_types` routes those types to it, followed by the NLP enrichers).
`[extract] routes` in shoal.toml overrides any route (keys may be globs such as "text/*").
"""

from __future__ import annotations

import fnmatch
import logging
from functools import cache
from importlib.metadata import entry_points

from shoal.config import ExtractSettings
from shoal.exceptions import ConfigError
from shoal.extract.base import Context, Extraction, ExtractionSkipped, Extractor
from shoal.extract.documents.archive import Archive
from shoal.extract.documents.ebook import Epub, Rtf
from shoal.extract.documents.email import Eml, OutlookMsg
from shoal.extract.documents.html import Html
from shoal.extract.documents.legacy_office import Doc, Ppt, Xls
from shoal.extract.documents.office import Docx, Odt, Pptx, Xlsx
from shoal.extract.documents.pdf import Pdf
from shoal.extract.documents.structured import Delimited, Json, NdJson, Xml
from shoal.extract.documents.text import Markdown, Org, PlainText, ReStructuredText
from shoal.extract.media import EXTRACTORS as MEDIA_EXTRACTORS
from shoal.extract.media import ROUTES as MEDIA_ROUTES
from shoal.extract.nlp import Entities, KeyPhrases, Language, Pii, Sentiment

log = logging.getLogger(__name__)
ENTRY_POINT_GROUP = "shoal.extractors"
NLP = ["language", "entities", "key_phrases", "sentiment", "pii"]


class Unsupported(Extractor):
    """Records why an object gets no extraction, so it is not planned again."""

    name = "unsupported"
    version = "1"

    def run(self, ctx: Context) -> Extraction:
        if ctx.obj.size_bytes == 0 or ctx.obj.media_type == "application/x-empty":
            raise ExtractionSkipped("empty file")
        if ctx.obj.media_type == "application/encrypted":
            raise ExtractionSkipped("encrypted document: a password is required")
        raise ExtractionSkipped(f"no extractor for media type {ctx.obj.media_type}")


BUILTIN: tuple[type[Extractor], ...] = (
    PlainText,
    Markdown,
    ReStructuredText,
    Org,
    Html,
    Eml,
    OutlookMsg,
    Pdf,
    Docx,
    Pptx,
    Xlsx,
    Odt,
    Doc,
    Xls,
    Ppt,
    Rtf,
    Epub,
    Delimited,
    Json,
    NdJson,
    Xml,
    Archive,
    *MEDIA_EXTRACTORS,
    Unsupported,
    Language,
    Entities,
    KeyPhrases,
    Sentiment,
    Pii,
)

_DOCUMENT_ROUTES: dict[str, str] = {
    "text/plain": "text",
    "text/markdown": "markdown",
    "text/x-rst": "rst",
    "text/org": "org",
    "text/html": "html",
    "message/rfc822": "email",
    "application/vnd.ms-outlook": "outlook",
    "application/pdf": "pdf",
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document": "docx",
    "application/vnd.openxmlformats-officedocument.presentationml.presentation": "pptx",
    "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet": "xlsx",
    "application/vnd.oasis.opendocument.text": "odt",
    "text/rtf": "rtf",
    "application/rtf": "rtf",
    "application/epub+zip": "epub",
    "text/csv": "delimited",
    "text/tab-separated-values": "delimited",
    "application/json": "json",
    "application/x-ndjson": "ndjson",
    "application/xml": "xml",
    "application/msword": "doc",
    "application/vnd.ms-excel": "xls",
    "application/vnd.ms-powerpoint": "ppt",
    # Every other text type (source code, logs, text/x-*): after the exact routes above.
    "text/*": "text",
}
_ARCHIVES = ("application/zip", "application/x-tar", "application/gzip", "application/x-gzip")


@cache
def _plugins() -> tuple[type[Extractor], ...]:
    found = []
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        try:
            cls = ep.load()
        except Exception as exc:  # noqa: BLE001 - a broken plugin must not stop the built-ins
            log.warning("extractor plugin %s failed to load: %s", ep.name, exc)
            continue
        if isinstance(cls, type) and issubclass(cls, Extractor):
            found.append(cls)
        else:
            log.warning("extractor plugin %s is not an Extractor subclass", ep.name)
    return tuple(found)


class Router:
    def __init__(self, settings: ExtractSettings, extra: tuple[type[Extractor], ...] = ()) -> None:
        self.settings = settings
        classes = (*BUILTIN, *_plugins(), *extra)
        self.extractors: dict[str, Extractor] = {cls.name: cls() for cls in classes}
        self.routes: dict[str, list[str]] = {mt: [name, *NLP] for mt, name in _DOCUMENT_ROUTES.items()}
        self.routes.update({mt: ["archive"] for mt in _ARCHIVES})
        self.routes.update({mt: [*chain, *NLP] for mt, chain in MEDIA_ROUTES.items()})
        for cls in classes:
            for mt in getattr(cls, "media_types", ()):
                self.routes[mt] = [cls.name, *NLP]
        for mt, chain in settings.routes.items():
            unknown = [n for n in chain if n not in self.extractors]
            if unknown:
                raise ConfigError(
                    f"[extract] routes: {mt!r} names unknown extractor(s) {', '.join(unknown)}",
                    hint="known extractors: " + ", ".join(sorted(self.extractors)),
                )
            self.routes[mt] = list(chain)

    def chain(self, media_type: str | None) -> list[str]:
        mt = media_type or "application/octet-stream"
        if mt in self.routes:
            return self.routes[mt]
        globs = [p for p in self.routes if any(c in p for c in "*?[") and fnmatch.fnmatch(mt, p)]
        if globs:
            # The most specific pattern wins ("text/x-*" over the built-in "text/*").
            return self.routes[max(globs, key=lambda p: len(p.rstrip("*?")))]
        return ["unsupported"]

    def model_problems(self, chains: list[list[str]]) -> list[str]:
        """Verify the model files the planned chains need; each problem names what to install.

        Objects needing a missing model fail one by one (other work goes on); after installing
        it, `shoal extract --retry-errors` redoes them.
        """
        from shoal.exceptions import DependencyError
        from shoal.extract.media import MODEL_STEPS, models

        problems = []
        for step in sorted({n for chain in chains for n in chain} & MODEL_STEPS):
            try:
                models.check(self.settings.media, {step})
            except DependencyError as exc:
                problems.append(f"{step}: {exc}")
        return problems

    def versions(self, chain: list[str]) -> list[tuple[str, str, str]]:
        """(name, version, stage) for each extractor of a chain."""
        return [(n, self.extractors[n].version, self.extractors[n].stage) for n in chain]

    def check_selectors(self, selectors: list[str]) -> None:
        """Refuse `--only` values that can never match: not a media type, glob or extractor name."""
        bad = [s for s in selectors if "/" not in s and s not in self.extractors]
        if bad:
            raise ConfigError(
                f"--only: unknown type or extractor {', '.join(repr(b) for b in bad)}",
                hint="use a media type (application/pdf), a glob (text/*) or an extractor name: "
                + ", ".join(sorted(self.extractors)),
            )

    def matches(self, media_type: str | None, selectors: list[str]) -> bool:
        """`--only`: a media type, a glob ("text/*") or an extractor name ("pdf", "email")."""
        mt = media_type or ""
        chain = self.chain(media_type)
        return any(s == mt or fnmatch.fnmatch(mt, s) or s in chain for s in selectors)
