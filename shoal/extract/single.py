"""One file in, its extraction out: the extractor chains of `shoal extract`, without a lake or Spark.

The file's media type is sniffed as `shoal ingest` sniffs it, routed to the same chain the Spark job
would run, and run in the same sandbox (a forked child under the time limit and memory cap of
`[extract]`). The result carries the same typed elements the Spark extractors produce.
`extract_files` runs many files through one sandbox child. Nothing here imports pyspark.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from shoal.config import ExtractSettings
from shoal.exceptions import ShoalError
from shoal.extract.base import Child, ExtractedTable, FormField, Link, ObjectInfo, TextPart
from shoal.extract.router import NLP, Router
from shoal.extract.sandbox import StepResult, close_isolated, run_isolated, safe_context
from shoal.ingest.sniff import SNIFF_BYTES, detect_media_type


@dataclass
class Step:
    """One extractor of the chain and how it ended: ok, error, skipped or timeout."""

    extractor: str
    status: str
    error: str | None = None
    duration_ms: int = 0


@dataclass
class FileExtraction:
    """What the chain found in one file, gathered from every step that ended ok."""

    path: str
    media_type: str
    object_id: str  # from the SHA-256 of the content, as `shoal ingest` names objects
    steps: list[Step] = field(default_factory=list)
    text: list[TextPart] = field(default_factory=list)
    tables: list[ExtractedTable] = field(default_factory=list)
    form_fields: list[FormField] = field(default_factory=list)
    links: list[Link] = field(default_factory=list)
    children: list[Child] = field(default_factory=list)
    properties: dict[str, Any] = field(default_factory=dict)
    # Enrichers' rows by table (language, entities, key_phrases, sentiment, pii, ...).
    rows: dict[str, list[dict[str, Any]]] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """True when no step ended in error or timeout (skipped steps are not failures)."""
        return all(s.status in ("ok", "skipped") for s in self.steps)

    @property
    def full_text(self) -> str:
        return "\n\n".join(p.text for p in self.text)

    def problems(self) -> list[str]:
        return [f"{s.extractor} {s.status}: {s.error}" for s in self.steps if s.status in ("error", "timeout")]


def extract_file(
    path: str | Path,
    *,
    enrich: bool = True,
    settings: ExtractSettings | None = None,
    media_type: str | None = None,
) -> FileExtraction:
    """Extract one local file the way `shoal extract` extracts an object.

    `enrich=False` runs the document/media extractor only (no language, entities, key phrases,
    sentiment or PII); `media_type` overrides the sniffed type; `settings` are `[extract]`'s
    (defaults when None). Raises ShoalError when the file cannot be read.
    """
    file = _local_file(path)
    router = Router(settings or ExtractSettings())
    try:
        return _extract(file, router, enrich, media_type)
    finally:
        close_isolated(router)  # one router per call: its sandbox child must not outlive it


def extract_files(
    paths: Iterable[str | Path],
    *,
    enrich: bool = True,
    settings: ExtractSettings | None = None,
) -> Iterator[FileExtraction]:
    """Extract many local files, one `FileExtraction` per path in order, as `extract_file` would.

    One sandbox child serves them all (it is replaced only after a failure), so the models and
    parsers it loads are loaded once, not once per file. Every path is checked before the first
    is extracted (ShoalError names the ones that are not files); the child stops when the
    iterator is exhausted or closed (`with contextlib.closing(...)` to stop it early).
    """
    files = [Path(p).expanduser() for p in paths]
    missing = [str(f) for f in files if not f.is_file()]
    if missing:
        shown = ", ".join(missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
        raise ShoalError(f"not files: {shown}", hint="give the paths of local files")
    return _extract_all(files, Router(settings or ExtractSettings()), enrich)


def _extract_all(files: list[Path], router: Router, enrich: bool) -> Iterator[FileExtraction]:
    try:
        for file in files:
            yield _extract(file, router, enrich, None)
    finally:
        close_isolated(router)


def _local_file(path: str | Path) -> Path:
    file = Path(path).expanduser()
    if not file.is_file():
        raise ShoalError(f"{file} is not a file", hint="give the path of one local file")
    return file


def _extract(file: Path, router: Router, enrich: bool, media_type: str | None) -> FileExtraction:
    """One file through `router`'s sandbox child (started on first use, kept for the next file)."""
    limit = router.settings.max_file_mb << 20
    try:
        size = file.stat().st_size
        if size > limit:
            return _oversized(file, router, size, media_type)
        data = file.read_bytes()
    except OSError as exc:
        raise ShoalError(f"cannot read {file}: {exc.strerror or exc}") from exc
    mt = media_type or detect_media_type(data[:SNIFF_BYTES], file.name, data)
    chain = router.chain(mt)
    if not enrich:
        chain = [n for n in chain if n not in NLP] or chain
    info = ObjectInfo(
        object_id=hashlib.sha256(data).hexdigest()[:32],
        raw_path=str(file),
        media_type=mt,
        file_name=file.name,
        size_bytes=len(data),
    )
    # The caller's process may run threads (a web server, a JVM gateway, a model runtime):
    # then the child starts from a forkserver, not a copy of this process.
    steps = run_isolated(info, data, chain, router, safe_context())
    return _gather(FileExtraction(path=str(file), media_type=mt, object_id=info.object_id), steps)


def _oversized(file: Path, router: Router, size: int, media_type: str | None) -> FileExtraction:
    """Refused before it is read whole or sniffed (sniffing unpacks ZIP members): the type comes
    from its first bytes, the id from a streamed hash."""
    digest = hashlib.sha256()
    with file.open("rb") as f:
        head = f.read(SNIFF_BYTES)
        digest.update(head)
        while block := f.read(1 << 20):
            digest.update(block)
    mt = media_type or detect_media_type(head, file.name, head)
    result = FileExtraction(path=str(file), media_type=mt, object_id=digest.hexdigest()[:32])
    reason = f"oversized: {size >> 20} MiB exceeds the {router.settings.max_file_mb} MiB limit"
    result.steps = [Step(n, "skipped", reason) for n in router.chain(mt)]
    return result


def _gather(result: FileExtraction, steps: list[StepResult]) -> FileExtraction:
    """The steps' outcomes, and the elements of those that ended ok."""
    for step in steps:
        result.steps.append(Step(step.extractor, step.status, step.error, step.duration_ms))
        x = step.extraction
        if step.status != "ok" or x is None:
            continue
        result.text.extend(x.text)
        result.tables.extend(x.tables)
        result.form_fields.extend(x.form_fields)
        result.links.extend(x.links)
        result.children.extend(x.children)
        result.properties.update(x.properties)
        for table, rows in x.rows.items():
            result.rows.setdefault(table, []).extend(rows)
    return result
