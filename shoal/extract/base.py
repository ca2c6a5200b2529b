"""The Extractor interface and what an extraction produces.

An extractor reads one raw object (bytes plus facts about it) and returns an `Extraction`.
Document extractors (stage "extract") turn bytes into text parts, tables, form fields,
links and child objects; enrichers (stage "enrich") read the text parts gathered so far in
the object's chain and add rows to their own tables (entities, PII, ...).
Everything here runs inside a sandboxed child process; nothing may touch Spark.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from shoal.config import ExtractSettings


class ExtractionSkipped(Exception):  # reads as a status, like StopIteration
    """The object is not for this extractor (encrypted, empty, unsupported variant): status skipped."""


class ExtractionRefused(Exception):
    """The object is refused for safety (decompression bomb, too many members): status error."""


@dataclass
class TextPart:
    part: str  # "page 3", "body", "sheet Orders", "slide 2", "document"
    text: str


class Sections:
    """Text split into parts at headings: lines accumulate under the current heading."""

    def __init__(self, first: str = "document") -> None:
        self.heading = first
        self.lines: list[str] = []
        self.parts: list[TextPart] = []

    def start(self, heading: str) -> None:
        self._flush()
        self.heading = heading

    def add(self, line: str) -> None:
        self.lines.append(line)

    def _flush(self) -> None:
        if any(line.strip() for line in self.lines):
            self.parts.append(TextPart(self.heading, "\n".join(self.lines).strip()))
        self.lines = []

    def done(self) -> list[TextPart]:
        self._flush()
        return self.parts


@dataclass
class ExtractedTable:
    part: str
    rows: list[list[str]]


@dataclass
class FormField:
    part: str
    name: str
    field_type: str
    value: str | None


@dataclass
class Link:
    part: str
    url: str
    text: str | None = None


@dataclass
class Child:
    """An embedded file (attachment, archive member) that becomes an object of its own."""

    name: str
    data: bytes


@dataclass
class Extraction:
    text: list[TextPart] = field(default_factory=list)
    tables: list[ExtractedTable] = field(default_factory=list)
    form_fields: list[FormField] = field(default_factory=list)
    links: list[Link] = field(default_factory=list)
    children: list[Child] = field(default_factory=list)
    # Document facts (title, author, page_count, encoding, headers...): JSON-serialisable.
    properties: dict[str, Any] = field(default_factory=dict)
    # Enrichers: table name -> rows (dicts keyed by that table's columns, object_id added later).
    rows: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    # Free-form result for the JSON output only.
    details: dict[str, Any] = field(default_factory=dict)


@dataclass
class ObjectInfo:
    object_id: str
    raw_path: str
    media_type: str
    file_name: str
    size_bytes: int
    depth: int = 0


@dataclass
class Context:
    """What an extractor may use: the object, its bytes, settings, and text from earlier in the chain."""

    obj: ObjectInfo
    data: bytes
    settings: ExtractSettings
    text: list[TextPart] = field(default_factory=list)
    properties: dict[str, Any] = field(default_factory=dict)
    # Decoded pictures (image pages, video keyframes) for the image analysers after the
    # decoder: media.frames.Frame objects, never serialised.
    frames: list[Any] = field(default_factory=list)
    # Work later steps of the same chain reuse (one spaCy parse shared by entities and PII);
    # lives only as long as the chain, never serialised.
    shared: dict[str, Any] = field(default_factory=dict)


class Extractor(ABC):
    """One kind of extraction. Subclasses set `name`, `version` and `stage`.

    Bump `version` when the output changes: objects extracted by an older version are
    extracted again on the next `shoal extract`.
    """

    name: ClassVar[str]
    version: ClassVar[str] = "1"
    stage: ClassVar[Literal["extract", "enrich"]] = "extract"
    # Modules imported once per worker before forking: an import inside the forked child
    # would be paid again for every object.
    preload: ClassVar[tuple[str, ...]] = ()
    # An optional analyser's failure leaves the object "partial" and blocks nothing after it;
    # a failed non-optional extract step means there is nothing for later steps to read.
    optional: ClassVar[bool] = False

    def time_limit(self, settings: ExtractSettings) -> float:
        """Seconds an object's whole chain may take when this extractor is in it."""
        return settings.timeout_s

    def warm(self, settings: ExtractSettings) -> None:
        """Load libraries and models once per worker process, before objects are forked off."""
        import importlib

        for module in self.preload:
            importlib.import_module(module)

    @abstractmethod
    def run(self, ctx: Context) -> Extraction: ...
