"""Ingest: copy files into the raw zone of the warehouse and record them in `shoal.objects`.

Raw layout (prefix-per-source, so access can be granted per source and day):
    <warehouse>/raw/<source-name>/<yyyy>/<mm>/<dd>/<relative path>

An object's id is its content hash. Re-ingesting an unchanged file stores nothing new (only
its path's last_seen in `shoal.object_sources` moves); a changed
file at the same path becomes a new version (a new object). Raw files are never overwritten:
a name already taken by other content gets the new content's hash in its name.

Every path seen is recorded in `shoal.object_sources` (object id, source, path, first and
last seen), so content stored once under many paths stays findable by each of them.
"""

from __future__ import annotations

import hashlib
import os
import posixpath
import re
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any

from pyspark.sql import SparkSession

from shoal import storage
from shoal.config import Settings
from shoal.exceptions import ShoalError, SourceError
from shoal.ingest.sniff import SNIFF_BYTES, detect_media_type
from shoal.lake import metadata
from shoal.lake.locks import table_lock
from shoal.progress import count

_SOURCE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_TAG_KEY = re.compile(r"^[A-Za-z0-9_.:-]{1,64}$")


def object_id_for(sha256_hex: str) -> str:
    """Objects are named by content: the first 128 bits of the SHA-256."""
    return sha256_hex[:32]


def raw_zone(settings: Settings) -> str:
    return storage.join(settings.warehouse_uri, "raw")


@dataclass
class IngestedFile:
    source_path: str
    status: str  # new | new_version | unchanged | duplicate | error | skipped
    object_id: str | None = None
    raw_path: str | None = None
    media_type: str | None = None
    size_bytes: int | None = None
    error: str | None = None


@dataclass
class IngestResult:
    source_name: str
    files: list[IngestedFile] = field(default_factory=list)

    def count(self, status: str) -> int:
        return sum(1 for f in self.files if f.status == status)

    @property
    def new_object_ids(self) -> list[str]:
        return [f.object_id for f in self.files if f.status in ("new", "new_version") and f.object_id]

    def to_dict(self) -> dict[str, Any]:
        return {
            "source_name": self.source_name,
            "files_seen": len(self.files),
            "new": self.count("new"),
            "new_versions": self.count("new_version"),
            "unchanged": self.count("unchanged"),
            "duplicates": self.count("duplicate"),
            "errors": self.count("error"),
            "skipped": self.count("skipped"),
            "bytes_ingested": sum(f.size_bytes or 0 for f in self.files if f.status in ("new", "new_version")),
            "files": [asdict(f) for f in self.files],
        }


def parse_tags(values: list[str]) -> dict[str, str]:
    tags: dict[str, str] = {}
    for item in values:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not _TAG_KEY.match(key):
            raise ShoalError(f"invalid tag {item!r}", hint="write tags as key=value, e.g. --tag team=finance")
        tags[key] = value.strip()
    return tags


def default_source_name(source: str) -> str:
    if "://" not in source:  # `shoal ingest .` names the source after the folder itself
        source = os.path.abspath(os.path.expanduser(source))
    base = posixpath.basename(source.rstrip("/")) or "source"
    name = re.sub(r"[^A-Za-z0-9_.-]+", "-", base).strip("-.") or "source"
    return name[:64]


def ingest(
    spark: SparkSession,
    settings: Settings,
    source: str,
    *,
    source_name: str | None = None,
    tags: dict[str, str] | None = None,
    say: Callable[[str], None] = lambda _m: None,
) -> IngestResult:
    """Copy every file below `source` into the raw zone and register the new objects."""
    name = source_name or default_source_name(source)
    if not _SOURCE_NAME.match(name):
        raise ShoalError(
            f"invalid source name {name!r}",
            hint="use letters, digits, '.', '_' or '-' (at most 64), starting with a letter or digit",
        )
    links: list[tuple[str, str]] = []
    entries = storage.list_files(source, skipped=links)
    metadata.ensure_tables(spark, ("objects", "object_index"))
    result = IngestResult(name)
    result.files.extend(IngestedFile(rel, "skipped", error=reason) for rel, reason in links)
    objects = metadata.table("objects")
    now = datetime.now(UTC)
    day = now.strftime("%Y/%m/%d")
    with table_lock(settings, str(objects)):
        ensure_object_sources(spark)  # under the lock: a first backfill runs once
        known = _known_versions(spark, name)
        # Pass 1: hash everything, so content already stored (an earlier run, another path or
        # source) is known to be a duplicate before anything is copied.
        hashed: list[tuple[storage.FileEntry, str, bytes] | IngestedFile] = []
        for i, entry in enumerate(entries):
            count(say, "hashing", i, len(entries), unit="files", item=entry.relative)
            try:
                hashed.append((entry, *_hash(entry.uri)))
            except (OSError, SourceError) as exc:
                hashed.append(IngestedFile(entry.relative, "error", error=f"cannot read {entry.uri}: {exc}"))
        count(say, "hashing", len(entries), len(entries), unit="files")
        candidates = [object_id_for(h[1]) for h in hashed if isinstance(h, tuple)]
        known_ids = metadata.existing_ids(spark, "objects", candidates) if candidates else set()
        # Pass 2: copy new content into the raw zone.
        rows: list[dict[str, Any]] = []
        for i, item in enumerate(hashed):
            if isinstance(item, IngestedFile):
                result.files.append(item)
                continue
            entry, sha, head = item
            count(say, "copying", i, len(hashed), unit="files", item=entry.relative)
            try:
                f = _ingest_one(settings, entry, sha, head, name, day, known, known_ids, rows, now, tags or {})
            except (OSError, SourceError) as exc:
                f = IngestedFile(entry.relative, "error", error=f"cannot copy {entry.uri}: {exc}")
            result.files.append(f)
        count(say, "copying", len(hashed), len(hashed), unit="files")
        if rows:
            say(f"recording {len(rows)} new objects")
            append_objects(spark, rows)
        seen = [(f.object_id, name, f.source_path) for f in result.files if f.object_id and f.status in _SEEN]
        if seen:
            say(f"recording {len(seen)} paths")
            record_paths(spark, seen, now)
    if rows:
        from shoal.lake.object_index import refresh_index

        refresh_index(spark, [r["object_id"] for r in rows])
    return result


def append_objects(spark: SparkSession, rows: list[dict[str, Any]]) -> None:
    cols = metadata.columns("objects")
    df = spark.createDataFrame([tuple(r.get(c) for c in cols) for r in rows], metadata.schema("objects"))
    df.writeTo(metadata.table("objects").sql).append()


# Statuses whose file is stored (now or before) under its object id: its path is recorded.
_SEEN = ("new", "new_version", "unchanged", "duplicate")


def ensure_object_sources(spark: SparkSession) -> None:
    """Create `shoal.object_sources` where missing (filled from shoal.objects on creation)."""
    metadata.ensure_tables(spark, ("objects", "object_sources"))


def record_paths(spark: SparkSession, seen: list[tuple[str, str, str]], now: datetime) -> None:
    """Upsert (object id, source, path) rows: a known path gets last_seen = now and, if its
    content changed, the new object id; a new path is inserted with first_seen = now."""
    unique = {(src, path): oid for oid, src, path in seen}  # one row per path (a run lists each once)
    df = spark.createDataFrame(
        [(oid, src, path, now, now) for (src, path), oid in sorted(unique.items())],
        metadata.schema("object_sources"),
    )
    df.createOrReplaceTempView("shoal_ingest_seen")
    spark.sql(
        f"MERGE INTO {metadata.table('object_sources').sql} t USING shoal_ingest_seen s "
        "ON t.source_name = s.source_name AND t.source_path = s.source_path "
        "WHEN MATCHED THEN UPDATE SET t.object_id = s.object_id, t.last_seen = s.last_seen "
        "WHEN NOT MATCHED THEN INSERT *"
    )


def object_paths(spark: SparkSession, object_ids: list[str]) -> dict[str, list[dict[str, Any]]]:
    """object id -> every path holding its content, oldest first (the operator's view: ungoverned)."""
    if not object_ids:
        return {}
    ensure_object_sources(spark)
    rows = (
        spark.table(metadata.table("object_sources").sql)
        .join(metadata.id_frame(spark, sorted(set(object_ids))), "object_id", "left_semi")
        .collect()
    )
    return paths_by_object([r.asDict() for r in rows])


def paths_by_object(rows: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Group object_sources rows by object id, oldest path first, then by source and path."""
    out: dict[str, list[dict[str, Any]]] = {}
    for r in sorted(
        rows, key=lambda r: (str(r.get("first_seen") or ""), r.get("source_name") or "", r.get("source_path") or "")
    ):
        out.setdefault(r["object_id"], []).append(
            {k: r.get(k) for k in ("source_name", "source_path", "first_seen", "last_seen")}
        )
    return out


def _known_versions(spark: SparkSession, source_name: str) -> dict[str, list[tuple[str, int, str]]]:
    """source_path -> [(sha256, version, raw_path)] for the top-level objects of one source."""
    rows = spark.sql(
        f"SELECT source_path, sha256, version, raw_path FROM {metadata.table('objects').sql} "
        "WHERE source_name = :name AND parent_object_id IS NULL",
        args={"name": source_name},
    ).collect()
    out: dict[str, list[tuple[str, int, str]]] = {}
    for r in rows:
        out.setdefault(r.source_path, []).append((r.sha256, r.version or 1, r.raw_path))
    return out


def _hash(uri: str) -> tuple[str, bytes]:
    digest = hashlib.sha256()
    head = b""
    with storage.open_input(uri, follow_links=False) as f:
        while block := f.read(8 << 20):
            if len(head) < SNIFF_BYTES:
                head += block[: SNIFF_BYTES - len(head)]
            digest.update(block)
    return digest.hexdigest(), head


def _ingest_one(
    settings: Settings,
    entry: storage.FileEntry,
    sha: str,
    head: bytes,
    source_name: str,
    day: str,
    known: dict[str, list[tuple[str, int, str]]],
    known_ids: set[str],
    rows: list[dict[str, Any]],
    now: datetime,
    tags: dict[str, str],
) -> IngestedFile:
    oid = object_id_for(sha)
    versions = known.get(entry.relative, [])
    if any(v[0] == sha for v in versions):
        return IngestedFile(entry.relative, "unchanged", oid, next(v[2] for v in versions if v[0] == sha))
    if oid in known_ids:
        return IngestedFile(entry.relative, "duplicate", oid)
    # ZIP containers need their directory to tell a DOCX from an EPUB; other types need the head only.
    data = None
    if head[:2] == b"PK" and entry.size <= settings.extract.max_file_mb << 20:
        data = storage.read_bytes(entry.uri)
    media_type = detect_media_type(head, entry.relative, data)
    raw_path = _free_raw_path(settings, source_name, day, entry.relative, sha)
    if not storage.exists(raw_path):
        storage.copy(entry.uri, raw_path, follow_links=False)
    version = max((v[1] for v in versions), default=0) + 1
    rows.append(
        {
            "object_id": oid,
            "raw_path": raw_path,
            "source_path": entry.relative,
            "source_name": source_name,
            "media_type": media_type,
            "size_bytes": entry.size,
            "sha256": sha,
            "ingested_at": now,
            "tags": dict(tags),
            "parent_object_id": None,
            "file_name": posixpath.basename(entry.relative),
            "version": version,
            "depth": 0,
        }
    )
    known_ids.add(oid)
    known.setdefault(entry.relative, []).append((sha, version, raw_path))
    return IngestedFile(entry.relative, "new_version" if versions else "new", oid, raw_path, media_type, entry.size)


def _free_raw_path(settings: Settings, source_name: str, day: str, relative: str, sha: str) -> str:
    """The raw-zone path for this content: the natural one, unless other content holds it."""
    path = storage.join(raw_zone(settings), source_name, day, relative)
    if not storage.exists(path) or _sha_of(path) == sha:
        return path
    stem, ext = posixpath.splitext(relative)
    return storage.join(raw_zone(settings), source_name, day, f"{stem}~{sha[:12]}{ext}")


def _sha_of(uri: str) -> str:
    return _hash(uri)[0]
