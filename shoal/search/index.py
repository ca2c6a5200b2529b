"""The search index on the warehouse: chunks, vectors and keyword postings.

Layout under `<warehouse>/search/`:
  chunks.db       SQLite: `chunks` (text, object metadata, vector as float32 BLOB),
                  `chunks_fts` (FTS5, BM25), `objects` (text digest per indexed object) and
                  `paths` (a copy of shoal.object_sources for the indexed objects, refreshed by
                  every run, for the operator's Spark-free search; a principal's search reads
                  object_sources itself, governed)
  vectors.faiss   an HNSW index over the chunk vectors (inner product = cosine), labelled by
                  chunk id. Each indexing run grows it: new chunks are added, removed ones
                  marked deleted (label -1, skipped by searches); it is rebuilt whole on
                  demand or when the deleted share passes `[search] rebuild_deleted_fraction`.
                  Always written to a new file and renamed over the old one.
  keywords-*/     keyword segments: term counts per (term, chunk) as sparse matrices (bm25s
                  tokenizes) and chunk lengths; `keywords.current` names the live ones. A run
                  adds a segment with its new chunks and lists removed ones as deleted;
                  BM25 is scored at query time from the live chunks' statistics, so the
                  ranking equals a fresh build's. A query reads a few sparse rows instead of
                  ranking every FTS5 match (at 100k chunks a common word matches half of
                  them). Missing or unreadable: queries use FTS5.

Indexing is incremental: an object is (re)embedded when its extracted text changed (a
digest of its parts) or the model changed, and objects that left the lake leave the
index. Chunking and embedding run on Spark executors (the model loads once per worker).
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from shoal.config import Settings
from shoal.private import private_dir, private_file
from shoal.progress import spark_tasks

if TYPE_CHECKING:
    pass

SCHEMA = """
CREATE TABLE IF NOT EXISTS chunks (
    chunk_id INTEGER PRIMARY KEY,
    object_id TEXT NOT NULL,
    part TEXT, part_index INTEGER, chunk_index INTEGER, start INTEGER, end INTEGER,
    text TEXT NOT NULL,
    media_type TEXT, languages TEXT, tags TEXT, raw_path TEXT, source_path TEXT,
    vector BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS chunks_object ON chunks(object_id);
CREATE VIRTUAL TABLE IF NOT EXISTS chunks_fts USING fts5(text, content='chunks', content_rowid='chunk_id', tokenize='porter unicode61');
CREATE TRIGGER IF NOT EXISTS chunks_ai AFTER INSERT ON chunks BEGIN
  INSERT INTO chunks_fts(rowid, text) VALUES (new.chunk_id, new.text);
END;
CREATE TRIGGER IF NOT EXISTS chunks_ad AFTER DELETE ON chunks BEGIN
  INSERT INTO chunks_fts(chunks_fts, rowid, text) VALUES ('delete', old.chunk_id, old.text);
END;
CREATE TABLE IF NOT EXISTS objects (object_id TEXT PRIMARY KEY, digest TEXT NOT NULL, model TEXT NOT NULL, chunks INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS paths (
    object_id TEXT NOT NULL, source_name TEXT, source_path TEXT, first_seen TEXT, last_seen TEXT
);
CREATE INDEX IF NOT EXISTS paths_object ON paths(object_id);
CREATE TABLE IF NOT EXISTS state (key TEXT PRIMARY KEY, value TEXT NOT NULL);
"""

# Labels at or above this are never chunk ids; a deleted graph entry carries -1, so a search
# restricted to [0, _LABELS) skips deleted entries while still walking through them.
_LABELS = 2**62


@dataclass
class IndexResult:
    objects_indexed: int = 0
    objects_removed: int = 0
    objects_unchanged: int = 0
    chunks_added: int = 0
    chunks_total: int = 0
    # The HNSW graph: entries added and marked deleted by this run, whether it was rebuilt
    # whole, and the share of its entries now marked deleted.
    ann_added: int = 0
    ann_removed: int = 0
    ann_rebuilt: bool = False
    ann_deleted_fraction: float = 0.0
    seconds: float = 0.0
    embed_seconds: float = 0.0
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


_open: dict[str, SearchIndex] = {}
_open_lock = threading.Lock()


def open_index(settings: Settings) -> SearchIndex:
    """The process's SearchIndex for this warehouse: the HNSW graph loads once, and again only
    when an indexing run has replaced it."""
    key = settings.warehouse_uri
    with _open_lock:
        if key not in _open:
            _open[key] = SearchIndex(settings)
        return _open[key]


def index_root(settings: Settings) -> Path:
    if settings.search.index_dir:
        return Path(settings.search.index_dir).expanduser()
    if "://" in settings.warehouse_uri:
        return settings.workspace_dir / "search"
    return Path(settings.warehouse_uri) / "search"


class SearchIndex:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.root = index_root(settings)
        # The index holds document text: owner only, like the rest of the workspace. SQLite
        # gives its WAL and journal files the database file's mode.
        private_dir(self.root)
        self.db_path = private_file(self.root / "chunks.db")
        self.faiss_path = self.root / "vectors.faiss"
        with self.connect() as conn:
            conn.executescript(SCHEMA)
        self.keywords_pointer = self.root / "keywords.current"
        self._local = threading.local()
        self._faiss: Any = None
        self._faiss_key: list[int] | None = None
        self._faiss_selector: Any = None
        self._keywords: KeywordIndex | None = None
        self._keywords_key: list[str] | None = None

    def reader(self) -> sqlite3.Connection:
        """This thread's connection for queries. It stays open so its page cache and memory map
        stay warm: fetching 200 candidate rows took 18 ms on a fresh connection, 1.7 ms here."""
        try:
            ino = self.db_path.stat().st_ino
        except FileNotFoundError:  # removed (a workspace reset): start it again, as a new index would
            with self.connect() as fresh:
                fresh.executescript(SCHEMA)
            ino = self.db_path.stat().st_ino
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        opened = getattr(self._local, "ino", None)
        if conn is None or opened != ino:  # a replaced file must not be read through an old handle
            if conn is not None:
                conn.close()
            conn = sqlite3.connect(self.db_path, timeout=30)
            conn.execute("PRAGMA mmap_size=1073741824")
            self._local.conn, self._local.ino = conn, ino
        return conn

    def connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.db_path, timeout=30)
        conn.execute("PRAGMA journal_mode=WAL")
        return conn

    # ---- indexing ------------------------------------------------------------------------------
    def update(
        self,
        spark: Any,  # a SparkSession (mapPartitions is typed narrower than the encoder it runs)
        *,
        model: str,
        size: int,
        overlap: int,
        say: Callable[[str], None] = lambda _m: None,
        rebuild: bool = False,
    ) -> IndexResult:
        """Embed new and changed objects, drop removed ones, then bring the HNSW graph and the
        keyword index in line with the stored chunks (`rebuild`: the graph is built afresh)."""
        from pyspark.sql import functions as F

        from shoal.lake import metadata

        started = time.monotonic()
        result = IndexResult()
        metadata.ensure_tables(spark, ("text", "object_index"))
        text = spark.table(str(metadata.table("text")))
        latest = spark.table(str(metadata.table("object_index"))).where("is_latest")
        digests = (
            text.groupBy("object_id")
            .agg(
                F.sha2(
                    F.concat_ws(
                        "\u0001", F.array_sort(F.collect_list(F.concat_ws("\u0002", F.col("part"), F.col("text"))))
                    ),
                    256,
                ).alias("digest")
            )
            .join(latest.select("object_id"), "object_id")
        )
        current = {r.object_id: r.digest for r in digests.collect()}
        with self.connect() as conn:
            known = {r[0]: (r[1], r[2]) for r in conn.execute("SELECT object_id, digest, model FROM objects")}
        backend, cache = self.settings.search.backend, self.settings.extract.media.model_cache
        fingerprint = _model_fingerprint(model, backend, cache)
        todo = [oid for oid, d in current.items() if known.get(oid) != (d, fingerprint)]
        gone = [oid for oid in known if oid not in current]
        result.objects_unchanged = len(current) - len(todo)
        say(f"{len(todo)} object(s) to embed, {len(gone)} to remove, {result.objects_unchanged} unchanged")
        rows: list[dict[str, Any]] = []
        if todo:
            from shoal.lake.metadata import id_frame

            ids = id_frame(spark, todo)
            parts = (
                text.join(ids, "object_id")
                .join(
                    latest.select("object_id", "media_type", "languages", "tags", "raw_path", "source_path"),
                    "object_id",
                )
                .select(
                    "object_id",
                    "part",
                    "part_index",
                    "text",
                    "media_type",
                    "languages",
                    "tags",
                    "raw_path",
                    "source_path",
                )
            )
            # Spread the objects over every core (each task's encoder runs one thread per task
            # core), in tasks of about 200 objects so that a large run does not hold one
            # partition's chunks at once.
            cores = spark.sparkContext.defaultParallelism
            parts = parts.repartition(max(1, min(len(todo), max(cores, len(todo) // 200 + 1))))
            embed_started = time.monotonic()
            with spark_tasks(spark, say, "embedding"):
                rows = parts.rdd.mapPartitions(_embed_partition(model, size, overlap, backend, cache)).collect()
            result.embed_seconds = time.monotonic() - embed_started
        from shoal.catalog import object_paths

        paths = object_paths(spark, list(current))
        with self.connect() as conn:
            # Chunk ids are never reused: the graph tells chunks apart by id alone, so a new
            # chunk must not take the id of one removed in this same run.
            top = conn.execute("SELECT max(chunk_id) FROM chunks").fetchone()[0] or 0
            next_id = max(top + 1, int(_state(conn, "next_chunk_id") or 1))
            for n, r in enumerate(rows):
                r["chunk_id"] = next_id + n
            _set_state(conn, "next_chunk_id", str(next_id + len(rows)))
            for oid in gone + todo:
                conn.execute("DELETE FROM chunks WHERE object_id = ?", (oid,))
                conn.execute("DELETE FROM objects WHERE object_id = ?", (oid,))
            conn.executemany(
                "INSERT INTO chunks (chunk_id, object_id, part, part_index, chunk_index, start, end, text, media_type, languages, tags, raw_path, source_path, vector) "
                "VALUES (:chunk_id, :object_id, :part, :part_index, :chunk_index, :start, :end, :text, :media_type, :languages, :tags, :raw_path, :source_path, :vector)",
                rows,
            )
            per_object: dict[str, int] = {}
            for r in rows:
                per_object[r["object_id"]] = per_object.get(r["object_id"], 0) + 1
            conn.executemany(
                "INSERT INTO objects (object_id, digest, model, chunks) VALUES (?, ?, ?, ?)",
                [(oid, current[oid], fingerprint, per_object.get(oid, 0)) for oid in todo],
            )
            result.chunks_total = conn.execute("SELECT count(*) FROM chunks").fetchone()[0]
            # Paths change without the text changing (a duplicate ingested under a new path):
            # the copy is replaced whole, every run.
            conn.execute("DELETE FROM paths")
            conn.executemany(
                "INSERT INTO paths VALUES (?, ?, ?, ?, ?)",
                [
                    (oid, p["source_name"], p["source_path"], p["first_seen"], p["last_seen"])
                    for oid, ps in paths.items()
                    for p in ps
                ],
            )
        result.objects_indexed, result.objects_removed, result.chunks_added = len(todo), len(gone), len(rows)
        # Driven by the stored chunks, not by this run's changes: a run that crashed after the
        # SQLite commit left the graph behind, and this one catches it up.
        live = self.chunk_ids()
        say(f"updating the vector index over {result.chunks_total} chunks" + (" (rebuild)" if rebuild else ""))
        ann = self.sync_ann(rebuild=rebuild, live=live)
        result.ann_added, result.ann_removed = ann.added, ann.removed
        result.ann_rebuilt, result.ann_deleted_fraction = ann.rebuilt, round(ann.deleted_fraction, 4)
        if self.sync_keywords(rebuild=rebuild, live=live):
            say("keyword index updated")
        result.seconds = time.monotonic() - started
        return result

    def rebuild_ann(self) -> None:
        """Build the HNSW graph afresh from the stored vectors."""
        self.sync_ann(rebuild=True)

    def chunk_ids(self) -> np.ndarray:
        """Every stored chunk id, ascending."""
        with self.connect() as conn:
            rows = conn.execute("SELECT chunk_id FROM chunks ORDER BY chunk_id").fetchall()
        return np.fromiter((r[0] for r in rows), np.int64, len(rows))

    def sync_ann(self, *, rebuild: bool = False, live: np.ndarray | None = None) -> AnnSync:
        """Bring the HNSW graph in line with the stored chunks: ids stored but not in the graph
        are added, ids in the graph but no longer stored are marked deleted. The graph is built
        afresh when asked, when it is missing, unreadable or of another dimension, or when the
        deleted share would pass `[search] rebuild_deleted_fraction`. The new graph is written
        to a new file and renamed over the old one, so a crash leaves the previous graph (the
        next run then finds the same difference again)."""
        import faiss

        with self._write_lock():
            for stale in self.root.glob(".vectors-*.tmp"):  # left by a crashed run
                stale.unlink(missing_ok=True)
            live = self.chunk_ids() if live is None else live
            with self.connect() as conn:
                recorded, dim = _state(conn, "ann"), _vector_dim(conn)
            if not rebuild and recorded is not None:
                signature, fraction = json.loads(recorded)
                if signature == [_ids_signature(live), _file_key(self.faiss_path)]:
                    return AnnSync(deleted_fraction=fraction)  # nothing changed since the last sync
            index = None if rebuild else _read_ann(self.faiss_path, dim)
            sync = AnnSync()
            if index is not None:
                labels = _labels(index)  # a view: edits change the index
                gone = (labels >= 0) & ~np.isin(labels, live)
                add = live[~np.isin(live, labels)]
                labels[gone] = -1
                sync.removed, sync.added = int(gone.sum()), len(add)
                total = index.ntotal + len(add)
                if total and int((labels < 0).sum()) / total > self.settings.search.rebuild_deleted_fraction:
                    index = None
                elif len(add):
                    ids, vectors = self.vectors("WHERE chunk_id >= ?", (int(add.min()),))  # new ids are the highest
                    keep = np.isin(ids, add)
                    index.add_with_ids(vectors[keep], ids[keep])
            if index is None:
                ids, vectors = self.vectors()
                index = _build_ann(ids, vectors, dim)
                sync = AnnSync(added=len(ids), removed=sync.removed, rebuilt=True)
            labels = _labels(index)
            sync.deleted_fraction = float((labels < 0).sum() / len(labels)) if len(labels) else 0.0
            if sync.added or sync.removed or sync.rebuilt or not self.faiss_path.exists():
                _write_atomically(self.faiss_path, lambda path: faiss.write_index(index, str(path)))
            with self.connect() as conn:
                signature = [_ids_signature(live), _file_key(self.faiss_path)]
                _set_state(conn, "ann", json.dumps([signature, sync.deleted_fraction]))
            return sync

    @contextmanager
    def _write_lock(self) -> Iterator[None]:
        # One writer at a time: two runs would each add to their own copy of the graph.
        # The lock dies with its holder, so a killed run never leaves it held.
        with os.fdopen(os.open(self.root / ".write.lock", os.O_WRONLY | os.O_CREAT, 0o600), "w") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def paths(self, object_ids: set[str]) -> dict[str, list[dict[str, Any]]]:
        """object id -> its paths as of the last indexing run (the operator's copy)."""
        out: dict[str, list[dict[str, Any]]] = {}
        if not object_ids:
            return out
        rows = (
            self.reader()  # the query's open connection: a fresh one cost more than the lookup
            .execute(
                f"SELECT object_id, source_name, source_path, first_seen, last_seen FROM paths "
                f"WHERE object_id IN ({','.join('?' * len(object_ids))}) ORDER BY first_seen, source_name, source_path",
                sorted(object_ids),
            )
            .fetchall()
        )
        for oid, name, path, first, last in rows:
            out.setdefault(oid, []).append(
                {"source_name": name, "source_path": path, "first_seen": first, "last_seen": last}
            )
        return out

    def rebuild_keywords(self) -> None:
        """BM25 over every chunk's text, in one new segment that `keywords.current` then names."""
        self.sync_keywords(rebuild=True)

    def sync_keywords(self, *, rebuild: bool = False, live: np.ndarray | None = None) -> bool:
        """Bring the keyword index in line with the stored chunks; whether anything was written.
        Chunks the index lacks go into a new segment; chunks it holds but the store does not
        are listed as deleted (in the newest segment). Built afresh in one segment when asked,
        when missing or unreadable, or past `[search] rebuild_deleted_fraction` deleted; the
        newer segments are merged into one past `_MAX_SEGMENTS`."""
        with self._write_lock():
            for stale in self.root.glob(".keywords-*"):  # left by a crashed run
                shutil.rmtree(stale, ignore_errors=True) if stale.is_dir() else stale.unlink(missing_ok=True)
            live = self.chunk_ids() if live is None else live
            folders = [] if rebuild else self._keyword_folders()
            held = np.zeros(0, np.int64)
            if folders:  # only the ids are read here: the term counts are the readers' business
                try:
                    held, gone = _segment_ids([self.root / f for f in folders])
                except (OSError, ValueError):  # damaged: built afresh
                    folders = []
                else:
                    if np.array_equal(np.sort(held[~np.isin(held, gone)]), live):
                        return False
            if len(folders) > _MAX_SEGMENTS:  # keep the first (largest), merge the rest
                folders = folders[:1]
                held, _ = _segment_ids([self.root / folders[0]])
            deleted, new = held[~np.isin(held, live)], live[~np.isin(live, held)]
            if len(deleted) > self.settings.search.rebuild_deleted_fraction * (len(held) + len(new)):
                folders, deleted, new = [], np.zeros(0, np.int64), live
            rows: list[tuple[int, str]] = []
            if len(new):
                with self.connect() as conn:  # new ids are the highest
                    rows = conn.execute(
                        "SELECT chunk_id, text FROM chunks WHERE chunk_id >= ? ORDER BY chunk_id", (int(new.min()),)
                    ).fetchall()
                rows = [r for r, keep in zip(rows, np.isin([r[0] for r in rows], new), strict=True) if keep]
            name = f"keywords-{uuid.uuid4().hex[:12]}"
            tmp = self.root / f".{name}"
            try:
                ids = np.fromiter((r[0] for r in rows), np.int64, len(rows))
                build_keywords([r[1] for r in rows], ids, tmp, deleted=deleted)
                tmp.rename(self.root / name)
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
            names = [*folders, name]
            _write_atomically(self.keywords_pointer, lambda path: _write_text(path, "\n".join(names)))
            for old in self.root.glob("keywords-*"):
                if old.name not in names:  # readers load a folder whole, then never touch it again
                    shutil.rmtree(old, ignore_errors=True)
            return True

    def _keyword_folders(self) -> list[str]:
        try:
            return self.keywords_pointer.read_text().split()
        except OSError:
            return []

    def keywords(self) -> KeywordIndex | None:
        """The live keyword index (loaded once per change), or None: queries then use FTS5."""
        folders = self._keyword_folders()  # unique names: a change always names a new folder
        if not folders:
            return None
        if folders != self._keywords_key:
            try:
                self._keywords = KeywordIndex.load(*(self.root / f for f in folders))
            except Exception:  # noqa: BLE001 - being replaced or damaged: FTS5 answers meanwhile
                return None
            self._keywords_key = folders
        return self._keywords

    def vectors(self, where: str = "", args: tuple = ()) -> tuple[np.ndarray, np.ndarray]:
        with self.connect() as conn:
            rows = conn.execute(f"SELECT chunk_id, vector FROM chunks {where} ORDER BY chunk_id", args).fetchall()
        if not rows:
            return np.zeros(0, dtype=np.int64), np.zeros((0, 384), dtype=np.float32)
        ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
        return ids, np.vstack([np.frombuffer(r[1], dtype=np.float32) for r in rows])

    def ann(self) -> Any:
        """The live HNSW graph (an IndexIDMap over IndexHNSWFlat; deleted entries have label
        -1), loaded again only when an indexing run has replaced the file; None before any."""
        import faiss

        key = _file_key(self.faiss_path)
        if key != self._faiss_key:
            index = faiss.read_index(str(self.faiss_path)) if key else None
            selector = None
            if index is not None and (_labels(index) < 0).any():  # only then pay for the check
                selector = faiss.IDSelectorRange(0, _LABELS)
            self._faiss, self._faiss_selector, self._faiss_key = index, selector, key
        return self._faiss

    def ann_search(self, query: np.ndarray, depth: int, ef_search: int) -> list[int]:
        """Chunk ids of the `depth` nearest stored vectors, nearest first, deleted entries skipped."""
        import faiss

        index = self.ann()
        selector = self._faiss_selector  # held here: the parameters only point to it
        if index is None or not index.ntotal:
            return []
        params = faiss.SearchParametersHNSW(efSearch=ef_search)  # type: ignore[attr-defined]  # missing from the stubs
        if selector is not None:
            params.sel = selector
        _, found = index.search(query[None, :].astype(np.float32), min(depth, index.ntotal), params=params)
        return [int(i) for i in found[0] if i >= 0]


@dataclass
class AnnSync:
    added: int = 0
    removed: int = 0
    rebuilt: bool = False
    deleted_fraction: float = 0.0


def _labels(index: Any) -> np.ndarray:
    """The graph's labels (chunk ids, -1 for deleted entries) as a view on its own memory."""
    import faiss

    return faiss.rev_swig_ptr(index.id_map.data(), index.id_map.size())


def _state(conn: sqlite3.Connection, key: str) -> str | None:
    row = conn.execute("SELECT value FROM state WHERE key = ?", (key,)).fetchone()
    return None if row is None else row[0]


def _set_state(conn: sqlite3.Connection, key: str, value: str) -> None:
    conn.execute("INSERT OR REPLACE INTO state (key, value) VALUES (?, ?)", (key, value))


def _ids_signature(ids: np.ndarray) -> list[int]:
    # Ids only grow (never reused), so count and maximum change with any addition or removal.
    return [len(ids), int(ids.max()) if len(ids) else 0, int(ids.sum()) if len(ids) else 0]


def _file_key(path: Path) -> list[int] | None:
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    return [st.st_ino, st.st_mtime_ns, st.st_size]


def _vector_dim(conn: sqlite3.Connection) -> int:
    row = conn.execute("SELECT length(vector) FROM chunks LIMIT 1").fetchone()
    return row[0] // 4 if row else 384


def _read_ann(path: Path, dim: int) -> Any:
    """The stored graph, or None when there is none or it cannot serve (damaged, other model)."""
    import faiss

    if not path.exists():
        return None
    try:
        index = faiss.read_index(str(path))
    except RuntimeError:
        return None
    return index if index.d == dim and hasattr(index, "id_map") else None


def _build_ann(ids: np.ndarray, vectors: np.ndarray, dim: int) -> Any:
    import faiss

    hnsw = faiss.IndexHNSWFlat(dim, 32, faiss.METRIC_INNER_PRODUCT)
    hnsw.hnsw.efConstruction = 80
    index = faiss.IndexIDMap(hnsw)
    if len(ids):
        index.add_with_ids(vectors, ids)
    return index


def _write_text(path: Path, text: str) -> None:
    path.write_text(text)


def _write_atomically(path: Path, write: Callable[[Path], None]) -> None:
    """Write a new file beside `path`, flush it to disk, then rename it over `path`: readers and
    a crash see the old file or the new one, never half of one."""
    tmp = path.parent / f".{path.stem}-{uuid.uuid4().hex[:12]}.tmp"
    try:
        write(tmp)
        with open(tmp, "rb") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)  # the rename itself survives a power cut
    finally:
        os.close(dir_fd)


_local = threading.local()


def _stemmer() -> Any:
    # PyStemmer's stemmers are not thread-safe: one per thread (the API serves from a pool).
    if not hasattr(_local, "stemmer"):
        import Stemmer

        _local.stemmer = Stemmer.Stemmer("english")
    return _local.stemmer


def _tokenize(texts: list[str]) -> Any:
    import bm25s

    # Stems as FTS5's porter tokenizer does; English stop words carry no evidence.
    return bm25s.tokenize(texts, stopwords="en", stemmer=_stemmer(), show_progress=False, return_ids=True)


# BM25 as bm25s and Lucene score it.
_K1, _B = 1.5, 0.75
# Keyword segments kept before the newer ones are merged into one.
_MAX_SEGMENTS = 8


def build_keywords(texts: list[str], chunk_ids: np.ndarray, folder: Path, deleted: np.ndarray | None = None) -> None:
    """One keyword segment: term counts per (term, chunk) and chunk lengths, plus the chunk ids
    of earlier segments deleted since. BM25 is scored at query time from the live chunks'
    statistics, so segments added over several runs rank exactly as one built afresh."""
    import scipy.sparse as sp

    folder.mkdir(parents=True)
    np.save(folder / "chunk_ids.npy", np.asarray(chunk_ids, np.int64), allow_pickle=False)
    np.save(folder / "deleted.npy", np.asarray(deleted if deleted is not None else [], np.int64), allow_pickle=False)
    tokens = _tokenize(texts) if texts else None
    lengths = np.array([len(t) for t in tokens.ids] if tokens else [], np.int64)
    vocab = sorted(tokens.vocab, key=tokens.vocab.__getitem__) if tokens else []
    terms = np.fromiter((t for doc in tokens.ids for t in doc), np.int64, int(lengths.sum())) if tokens else lengths
    counts = sp.csr_matrix(
        (np.ones(len(terms), np.float64), (terms, np.repeat(np.arange(len(lengths)), lengths))),
        shape=(len(vocab), len(lengths)),
    )
    counts.sum_duplicates()  # repeated (term, chunk) pairs add up to the term's count
    sp.save_npz(folder / "counts.npz", counts, compressed=False)  # read at every load: no inflating
    np.save(folder / "lengths.npy", lengths, allow_pickle=False)
    (folder / "vocab.json").write_text(json.dumps(vocab))


def _segment_ids(folders: list[Path]) -> tuple[np.ndarray, np.ndarray]:
    """Chunk ids held by these segments, and those the newest lists as deleted."""
    for f in folders:
        if not (f / "counts.npz").is_file():
            raise ValueError(f"{f} is not a keyword segment")
    held = np.concatenate([np.load(f / "chunk_ids.npy", allow_pickle=False) for f in folders])
    return held, np.load(folders[-1] / "deleted.npy", allow_pickle=False)


@dataclass
class _Segment:
    chunk_ids: np.ndarray
    lengths: np.ndarray
    counts: Any  # CSR, terms x chunks
    vocab: dict[str, int]


@dataclass
class KeywordIndex:
    """Keyword segments read as one index: chunk ids in segment order, each segment's chunks at
    its offset; chunks listed as deleted by the newest segment take no part."""

    segments: list[_Segment]
    chunk_ids: np.ndarray
    lengths: np.ndarray
    alive: np.ndarray
    offsets: list[int]
    norms: np.ndarray = field(init=False)  # BM25's length normalisation per chunk

    def __post_init__(self) -> None:
        # Lucene's BM25 scores a term in a chunk idf * tf / (tf + norm), with norm from the chunk's
        # length against the live chunks' average: fixed for this set of segments.
        live = self.lengths[self.alive]
        average = float(live.sum()) / len(live) if len(live) else 1.0
        self.norms = _K1 * (1 - _B + _B * self.lengths / average)

    @classmethod
    def load(cls, *folders: Path) -> KeywordIndex:
        import scipy.sparse as sp

        segments = [
            _Segment(
                np.load(f / "chunk_ids.npy", allow_pickle=False),
                np.load(f / "lengths.npy", allow_pickle=False),
                sp.load_npz(f / "counts.npz").tocsr(),
                {t: i for i, t in enumerate(json.loads((f / "vocab.json").read_text()))},
            )
            for f in folders
        ]
        chunk_ids = np.concatenate([s.chunk_ids for s in segments]) if segments else np.zeros(0, np.int64)
        deleted = np.load(folders[-1] / "deleted.npy", allow_pickle=False) if folders else np.zeros(0, np.int64)
        offsets = np.cumsum([0] + [len(s.chunk_ids) for s in segments]).tolist()
        lengths = np.concatenate([s.lengths for s in segments]) if segments else np.zeros(0, np.int64)
        return cls(segments, chunk_ids, lengths, ~np.isin(chunk_ids, deleted), offsets)

    def top(self, query: str, depth: int, allowed: np.ndarray | None = None) -> list[int]:
        """Chunk ids of the `depth` best BM25 matches (any query term), best first; only among
        `allowed` chunk ids when given."""
        total = int(self.alive.sum())
        if not total:
            return []
        hits, weights = [], []
        for term in sorted(set(query_terms(query))):
            docs, tfs = [], []
            for segment, offset in zip(self.segments, self.offsets, strict=False):
                row = segment.vocab.get(term)
                if row is None:
                    continue
                span = slice(segment.counts.indptr[row], segment.counts.indptr[row + 1])
                docs.append(segment.counts.indices[span] + offset)
                tfs.append(segment.counts.data[span])
            if not docs:
                continue
            doc, tf = np.concatenate(docs), np.concatenate(tfs)
            keep = self.alive[doc]
            doc, tf = doc[keep], tf[keep]
            if not len(doc):
                continue
            idf = np.log(1 + (total - len(doc) + 0.5) / (len(doc) + 0.5))  # from the live chunks holding it
            hits.append(doc)
            weights.append(idf * tf / (tf + self.norms[doc]))
        if not hits:
            return []
        # A chunk's score is the sum over the query's terms (added in term order, as a fresh build would).
        scores = np.bincount(np.concatenate(hits), weights=np.concatenate(weights), minlength=len(self.chunk_ids))
        matched = np.flatnonzero(scores > 0)  # BM25 (Lucene's IDF) is positive wherever a term occurs
        if allowed is not None:
            matched = matched[np.isin(self.chunk_ids[matched], allowed)]
        if len(matched) > depth:
            matched = matched[np.argpartition(-scores[matched], depth - 1)[:depth]]
        # Ties broken by chunk id, so equal scores rank the same way on every run.
        order = matched[np.lexsort((self.chunk_ids[matched], -scores[matched]))]
        return [int(c) for c in self.chunk_ids[order]]


_TOKEN = re.compile(r"(?u)\b\w\w+\b")  # bm25s.tokenize's pattern: queries split as chunks do


@lru_cache(maxsize=1)
def _stop_words() -> frozenset[str]:
    from bm25s.stopwords import STOPWORDS_EN

    return frozenset(STOPWORDS_EN)


def query_terms(text: str) -> list[str]:
    """A query's index terms, made as `_tokenize` makes a chunk's."""
    stop = _stop_words()
    return _stemmer().stemWords([w for w in _TOKEN.findall(text.lower()) if w not in stop])


def _model_fingerprint(model: str, backend: str, cache: str | None) -> str:
    from shoal.search import embed

    return f"{model}:{embed.load(model, backend, cache).fingerprint}"


def _embed_partition(
    model: str, size: int, overlap: int, backend: str, cache: str | None
) -> Callable[[Iterator[Any]], Iterator[dict[str, Any]]]:
    def run(rows: Iterator[Any]) -> Iterator[dict[str, Any]]:
        from pyspark import TaskContext

        from shoal.search import embed
        from shoal.search.chunks import chunk_text

        task = TaskContext.get()
        # The task's own cores (spark.task.cpus, 1 by default): Spark runs a worker per core.
        encoder = embed.load(model, backend, cache, threads=task.cpus() if task is not None else 0)
        pending: list[dict[str, Any]] = []
        for row in rows:
            for chunk in chunk_text(row["text"] or "", size=size, overlap=overlap):
                pending.append(
                    {
                        "object_id": row["object_id"],
                        "part": row["part"],
                        "part_index": row["part_index"],
                        "chunk_index": chunk.index,
                        "start": chunk.start,
                        "end": chunk.end,
                        "text": chunk.text,
                        "media_type": row["media_type"],
                        "languages": json.dumps(list(row["languages"] or [])),
                        "tags": json.dumps(dict(row["tags"] or {})),
                        "raw_path": row["raw_path"],
                        "source_path": row["source_path"],
                    }
                )
        vectors = encoder.encode([p["text"] for p in pending])
        for p, v in zip(pending, vectors, strict=True):
            p["vector"] = v.astype(np.float32).tobytes()
            yield p

    return run
