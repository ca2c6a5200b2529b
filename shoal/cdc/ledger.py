"""The record of change files already applied to a table (exactly-once bookkeeping).

Each batch writes a new immutable ledger *head* next to the warehouse, then commits its data
with the head's location in the snapshot summary (`shoal.state.cdc-ledger`). The table's
current snapshot therefore always names the head that matches its data: a batch that crashed
before its commit left only unreferenced files behind, and its files count as not applied.

The head stays small however many files were applied (a compacted ledger):
- a *tail* of the most recent entries (at most TAIL_MAX), inline;
- *segments*: immutable files of at most SEG_MAX entries each, covering consecutive ranges of
  the application order (full loads first, then by name). The head keeps, per segment, its
  key range (the last segment's end is the watermark) and two fingerprints: of its entries, and of the last listing of its range that
  was checked and found fully applied and unchanged.

Checking a listing reads only the head: files in the tail are looked up there, files outside
every segment's key range (above the watermark, say) are new; the files in each segment's range are fingerprinted and, when that matches, known applied without reading
the segment. A segment is read only when its range holds something new (a late file), a
rewritten file or a file that vanished since the last check, so the cost follows what is new,
not everything ever applied. When the tail outgrows TAIL_MAX it is folded into the segments
it falls in (only those are rewritten, as new files).

Each entry records the file's size and modification time (what the store reports per file),
so a file rewritten under a name already applied is detected instead of silently skipped.
"""

from __future__ import annotations

import bisect
import hashlib
import json
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from pyspark.sql import SparkSession

from shoal import storage
from shoal.cdc.source import ChangeFile, is_full_load
from shoal.config import Settings
from shoal.lake.tables import STATE_PREFIX, TableName, all_states, latest_state

STATE_KEY = "cdc-ledger"
SUMMARY_KEY = STATE_PREFIX + STATE_KEY
FORMAT = 2
# Inline entries in the head before they are folded into segments, and entries per segment:
# a batch reads at most TAIL_MAX entries plus one segment per range that changed.
TAIL_MAX = 256
SEG_MAX = 2048

Meta = dict[str, Any]  # {size, mtime, batch_id, applied_at}


def order_key(name: str) -> str:
    """A file's place in application order as one comparable string (ChangeFile.sort_key)."""
    return f"{0 if is_full_load(name) else 1}/{name}"


def entry_meta(file: ChangeFile, batch_id: str, applied_at: str) -> Meta:
    return {"size": file.size, "mtime": file.mtime, "batch_id": batch_id, "applied_at": applied_at}


def changed(meta: Meta, file: ChangeFile) -> bool:
    """Whether `file` differs from what was applied under its name (size, or mtime where known)."""
    if int(meta.get("size", -1)) != file.size:
        return True
    recorded = meta.get("mtime")
    return recorded is not None and file.mtime is not None and float(recorded) != file.mtime


def _fingerprint(items: Iterable[tuple[str, int, float | None]]) -> str:
    h = hashlib.sha256()
    for name, size, mtime in sorted(items):
        h.update(f"{name}\t{size}\t{'' if mtime is None else repr(float(mtime))}\n".encode())
    return h.hexdigest()


def _entries_fingerprint(entries: dict[str, Meta]) -> str:
    return _fingerprint((n, int(m["size"]), m.get("mtime")) for n, m in entries.items())


def _files_fingerprint(files: Iterable[ChangeFile]) -> str:
    return _fingerprint((f.name, f.size, f.mtime) for f in files)


@dataclass
class Segment:
    uri: str
    lo: str  # order_key of its first entry
    hi: str  # order_key of its last entry
    count: int
    digest: str  # fingerprint of its entries
    verified: str | None = None  # fingerprint of the last listing of its range found applied

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in ("uri", "lo", "hi", "count", "digest", "verified")}


@dataclass
class Rewritten:
    """A file whose name was applied but whose content changed since."""

    file: ChangeFile
    applied: Meta

    def message(self) -> str:
        was, now = self.applied, self.file
        what = (
            f"size {was['size']} -> {now.size} bytes"
            if int(was["size"]) != now.size
            else f"same size, modified {_when(was.get('mtime'))} -> {_when(now.mtime)}"
        )
        return (
            f"change file {self.file.name} was rewritten after it was applied "
            f"(batch {was.get('batch_id')}, {was.get('applied_at')}; {what}): skipped; "
            "give --reapply to apply its rows as new changes"
        )


def _when(mtime: float | None) -> str:
    return datetime.fromtimestamp(float(mtime), UTC).isoformat() if mtime is not None else "unknown"


@dataclass
class Check:
    """What a listing holds compared with the ledger."""

    new: list[ChangeFile]
    rewritten: list[Rewritten]
    # Per segment uri: the listed files of its range, and those of them found rewritten.
    ranges: dict[str, tuple[list[ChangeFile], set[str]]] = field(default_factory=dict)

    def verified(self, taken: set[str]) -> dict[str, str]:
        """Fingerprints to record once the files named in `taken` are applied by this batch.

        A range is recorded as verified only when no rewritten file stays unapplied in it, so
        such a file is reported again by every later batch until it is taken or restored.
        Files taken now go to the tail, which later checks look at first: they are left out.
        """
        return {
            uri: _files_fingerprint(f for f in files if f.name not in taken)
            for uri, (files, rewritten) in self.ranges.items()
            if rewritten <= taken
        }


@dataclass
class Ledger:
    """The applied-files state one head describes (empty for a table without one)."""

    uri: str | None = None
    tail: dict[str, Meta] = field(default_factory=dict)
    segments: list[Segment] = field(default_factory=list)
    # What reading it cost: the structural measure of a check (tests bound it).
    bytes_read: int = 0
    entries_read: int = 0
    segments_read: int = 0
    _loaded: dict[str, dict[str, Meta]] = field(default_factory=dict)
    _los: list[str] = field(default_factory=list)

    def _segment_index(self, key: str) -> int | None:
        if not self.segments:
            return None
        if len(self._los) != len(self.segments):
            self._los = [s.lo for s in self.segments]
        # Segment i covers [lo_i, lo_i+1); the first also covers everything before it.
        return max(bisect.bisect_right(self._los, key) - 1, 0)

    def _segment(self, i: int) -> dict[str, Meta]:
        seg = self.segments[i]
        if seg.uri not in self._loaded:
            data = storage.read_bytes(seg.uri)
            entries = json.loads(data)["entries"]
            self.bytes_read += len(data)
            self.entries_read += len(entries)
            self.segments_read += 1
            self._loaded[seg.uri] = entries
        return self._loaded[seg.uri]

    def all_entries(self) -> dict[str, Meta]:
        """Every applied file (reads every segment: for listings, not for a batch's check)."""
        out: dict[str, Meta] = {}
        for i in range(len(self.segments)):
            out.update(self._segment(i))
        out.update(self.tail)
        return out

    def check(self, files: list[ChangeFile]) -> Check:
        """Classify a listing: new files, rewritten files; the rest is applied and unchanged."""
        new: list[ChangeFile] = []
        rewritten: list[Rewritten] = []
        by_range: dict[int, list[ChangeFile]] = {}
        for f in files:
            meta = self.tail.get(f.name)
            if meta is not None:
                if changed(meta, f):
                    rewritten.append(Rewritten(f, meta))
                continue
            key = order_key(f.name)
            i = self._segment_index(key)
            if i is None or not self.segments[i].lo <= key <= self.segments[i].hi:
                new.append(f)  # outside every segment's keys: above the watermark, or in a gap
            else:
                by_range.setdefault(i, []).append(f)
        ranges: dict[str, tuple[list[ChangeFile], set[str]]] = {}
        for i, listed in by_range.items():
            seg = self.segments[i]
            bad: set[str] = set()
            ranges[seg.uri] = (listed, bad)
            if _files_fingerprint(listed) in (seg.digest, seg.verified):
                continue
            entries = self._segment(i)
            for f in listed:
                meta = entries.get(f.name)
                if meta is None:
                    new.append(f)  # a late file, named inside an applied range
                elif changed(meta, f):
                    rewritten.append(Rewritten(f, meta))
                    bad.add(f.name)
        # Ranges whose files all vanished from the listing: remember that too.
        for seg in self.segments:
            ranges.setdefault(seg.uri, ([], set()))
        new.sort(key=lambda f: f.sort_key)
        return Check(new, rewritten, ranges)


def read(uri: str) -> Ledger:
    data = storage.read_bytes(uri)
    doc = json.loads(data)
    if "files" in doc:  # format 1: every applied file in one document; compacted on the next write
        led = Ledger(uri=uri, tail=dict(doc["files"]))
    else:
        led = Ledger(uri=uri, tail=dict(doc["tail"]), segments=[Segment(**s) for s in doc["segments"]])
    led.bytes_read, led.entries_read = len(data), len(led.tail)
    return led


def latest_state_uri(spark: SparkSession, table: TableName) -> str | None:
    """The ledger head the table's current state refers to."""
    return latest_state(spark, table, STATE_KEY)


def current(spark: SparkSession, table: TableName) -> Ledger:
    """The ledger matching the table's current snapshot (reads its head only)."""
    uri = latest_state_uri(spark, table)
    return read(uri) if uri is not None else Ledger()


def load(spark: SparkSession, table: TableName) -> dict[str, Meta]:
    """Applied files of `table`: name -> {size, mtime, batch_id, applied_at}."""
    return current(spark, table).all_entries()


def _folder(settings: Settings, table: TableName) -> str:
    return storage.join(settings.warehouse_uri, "_shoal", "cdc-ledgers", table.namespace, table.name)


def write(
    settings: Settings,
    table: TableName,
    previous: Ledger,
    added: dict[str, Meta],
    batch_id: str,
    verified: dict[str, str] | None = None,
) -> str:
    """Write the head of `previous` plus `added`; returns its URI for the snapshot summary.

    Nothing written here is visible until a commit names the head: segments are new files,
    never changed in place.
    """
    folder = _folder(settings, table)
    segments = [Segment(**s.to_dict()) for s in previous.segments]
    for seg in segments:
        if verified and seg.uri in verified:
            seg.verified = verified[seg.uri]
    tail = {**previous.tail, **added}
    if len(tail) > TAIL_MAX:
        segments, tail = _fold(previous, segments, tail, folder, batch_id), {}
    uri = storage.join(folder, f"ledger-{batch_id}.json")
    doc = {
        "format": FORMAT,
        "table": str(table),
        "batch_id": batch_id,
        "written_at": datetime.now(UTC).isoformat(),
        "segments": [s.to_dict() for s in segments],
        "tail": tail,
    }
    storage.write_bytes(uri, json.dumps(doc, sort_keys=True).encode())
    return uri


def _fold(
    previous: Ledger, segments: list[Segment], tail: dict[str, Meta], folder: str, batch_id: str
) -> list[Segment]:
    """Merge the tail into the segments its entries fall in; rewrite only those, split when full."""
    groups: dict[int | None, dict[str, Meta]] = {}
    for name, meta in tail.items():
        groups.setdefault(previous._segment_index(order_key(name)), {})[name] = meta
    out: list[Segment] = []
    written = 0

    def emit(entries: dict[str, Meta]) -> None:
        nonlocal written
        names = sorted(entries, key=order_key)
        for start in range(0, len(names), SEG_MAX):
            chunk = {n: entries[n] for n in names[start : start + SEG_MAX]}
            uri = storage.join(folder, f"segment-{batch_id}-{written:04d}.json")
            storage.write_bytes(uri, json.dumps({"entries": chunk}, sort_keys=True).encode())
            keys = [order_key(n) for n in chunk]
            out.append(Segment(uri, min(keys), max(keys), len(chunk), _entries_fingerprint(chunk)))
            written += 1

    if None in groups:  # no segments yet
        emit(groups[None])
    for i, seg in enumerate(segments):
        if i in groups:
            emit({**previous._segment(i), **groups[i]})
        else:
            out.append(seg)
    return sorted(out, key=lambda s: s.lo)


def referenced_files(uri: str) -> set[str]:
    """The head at `uri` and the segments it names."""
    try:
        doc = json.loads(storage.read_bytes(uri))
    except (OSError, ValueError):
        return {uri}
    return {uri, *(s["uri"] for s in doc.get("segments", []))}


def prune(spark: SparkSession, settings: Settings, table: TableName, *, min_age_hours: float) -> int:
    """Delete ledger files no snapshot or table property refers to any more.

    Each batch writes a new head (and, now and then, segments), so old ones pile up; run after
    snapshot expiry. Files younger than `min_age_hours` are kept: one may belong to a batch
    still committing.
    """
    folder = _folder(settings, table)
    if not storage.exists(folder):
        return 0
    referenced: set[str] = set()
    for head in set(all_states(spark, table, STATE_KEY)):
        referenced |= referenced_files(head)
    cutoff = time.time() - min_age_hours * 3600
    removed = 0
    for entry in storage.list_files(folder, (".json",)):
        if entry.uri in referenced or entry.mtime is None or entry.mtime > cutoff:
            continue
        storage.delete(entry.uri)
        removed += 1
    return removed
