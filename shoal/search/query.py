"""Hybrid search: vector (HNSW, or exact over a filtered subset) and keyword (BM25 over a
sparse term-by-chunk matrix; FTS5 until that exists) ranks fused by reciprocal rank; one hit per object (its best chunk); only objects the
principal may read, decided by governed SQL over `shoal.object_index`."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from shoal.config import Settings
from shoal.search.chunks import fold_whitespace
from shoal.search.index import SearchIndex, open_index

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from shoal.governance import Principal

RRF_K = 60
_HEX = re.compile(r"^[0-9a-f]{32}$")
_WORD = re.compile(r"\w+", re.UNICODE)


@dataclass
class Hit:
    object_id: str
    raw_path: str | None
    source_path: str | None
    part: str | None
    snippet: str
    score: float
    vector_rank: int | None
    keyword_rank: int | None
    media_type: str | None
    languages: list[str]
    # Every (source, path) holding this content: {source_name, source_path, first_seen, last_seen}.
    paths: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _filters(media_type: str | None, lang: str | None, tags: dict[str, str] | None) -> tuple[str, list[Any]]:
    where, args = [], []
    if media_type:
        if "/" in media_type:
            where.append("media_type LIKE ?")
            args.append(media_type.replace("*", "%"))
        else:
            where.append("(media_type = ? OR media_type LIKE ?)")
            args += [media_type, f"%/{media_type}"]
    if lang:
        where.append("EXISTS (SELECT 1 FROM json_each(chunks.languages) WHERE value = ?)")
        args.append(lang)
    for key, value in (tags or {}).items():
        if not re.fullmatch(r"[\w.-]+", key):
            raise ValueError(f"invalid tag key {key!r}")
        where.append("json_extract(chunks.tags, ?) = ?")
        args += [f'$."{key}"', value]
    return (" AND ".join(where), args)


def search(
    settings: Settings,
    query: str,
    *,
    k: int = 10,
    media_type: str | None = None,
    lang: str | None = None,
    tags: dict[str, str] | None = None,
    principal: Principal | None = None,
    spark: SparkSession | None = None,
    mode: str = "hybrid",
    model: str | None = None,
) -> list[Hit]:
    from shoal.search import embed

    if mode not in ("hybrid", "vector", "keyword"):
        raise ValueError("mode is hybrid, vector or keyword")
    index = open_index(settings)
    where, args = _filters(media_type, lang, tags)
    depth = max(k * 10, 100)
    vector_ranks: dict[int, int] = {}
    keyword_ranks: dict[int, int] = {}
    if mode in ("hybrid", "vector"):
        q = embed.for_settings(settings, model).encode([query])[0]
        if where:
            ids, vectors = index.vectors("WHERE " + where, tuple(args))
            order: Any = np.argsort(-(vectors @ q))[:depth] if len(ids) else []
            vector_ranks = {int(ids[i]): r for r, i in enumerate(order)}
        else:
            # Breadth of the graph walk: measured recall@10 vs exact 0.89 at 100, see benchmarks/search.py.
            found = index.ann_search(q, depth, max(settings.search.ef_search, depth))
            vector_ranks = {cid: r for r, cid in enumerate(found)}
    keywords = index.keywords() if mode in ("hybrid", "keyword") else None
    if keywords is not None:
        allowed = None
        if where:
            conn = index.reader()
            allowed = np.fromiter(
                (r[0] for r in conn.execute(f"SELECT chunk_id FROM chunks WHERE {where}", args)), np.int64
            )
        keyword_ranks = {cid: r for r, cid in enumerate(keywords.top(query, depth, allowed))}
    elif mode in ("hybrid", "keyword"):
        terms = keyword_terms(query)
        if terms:
            match = " OR ".join('"' + t.replace('"', "") + '"' for t in terms)
            sql = "SELECT chunks.chunk_id FROM chunks_fts JOIN chunks ON chunks.chunk_id = chunks_fts.rowid WHERE chunks_fts MATCH ?"
            if where:
                sql += " AND " + where
            sql += " ORDER BY bm25(chunks_fts) LIMIT ?"
            keyword_ranks = {r[0]: i for i, r in enumerate(index.reader().execute(sql, (match, *args, depth)))}
    candidates = set(vector_ranks) | set(keyword_ranks)
    if not candidates:
        return []
    rows: dict[int, tuple] = {}
    governed = principal is not None and not principal.is_admin
    if governed:
        assert principal is not None  # governed says so
        rows = _rows(index, candidates)
        # Only text the principal may read takes part at all: ranking over the rest would
        # answer "does this document contain W" without a grant. A chunk counts when the
        # object is listed for the principal and the chunk appears in its governed text.
        readable_ids = _readable(settings, spark, principal, {r[1] for r in rows.values()})
        texts = _readable_text(settings, spark, principal, readable_ids)
        rows = {  # chunk text is stored whitespace-folded (chunks.chunk_text)
            cid: r
            for cid, r in rows.items()
            if r[1] in readable_ids and (r[5] or "\0") in texts.get((r[1], r[4] or ""), "")
        }
        vector_ranks = _rerank(vector_ranks, rows)
        keyword_ranks = _rerank(keyword_ranks, rows)
    fused: dict[int, float] = {}
    for ranks in (vector_ranks, keyword_ranks):
        for cid, rank in ranks.items():
            fused[cid] = fused.get(cid, 0.0) + 1.0 / (RRF_K + rank + 1)
    ordered = sorted(fused, key=lambda c: -fused[c])
    hits: list[Hit] = []
    seen: set[str] = set()
    batch = max(3 * k, 30)
    for n, cid in enumerate(ordered):
        if not governed and n % batch == 0:
            # Rows are read in fused order, a batch at a time: most queries fill k hits from
            # the first batch, so the other candidates' rows (random pages) are never read.
            rows.update(_rows(index, ordered[n : n + batch]))
        row = rows.get(cid)
        if row is None or row[1] in seen:
            continue
        seen.add(row[1])
        hits.append(
            Hit(
                object_id=row[1],
                raw_path=row[2],
                source_path=row[3],
                part=row[4],
                snippet=snippet(row[5], query),
                score=round(fused[cid] * (RRF_K + 1), 4),
                vector_rank=vector_ranks.get(cid),
                keyword_rank=keyword_ranks.get(cid),
                media_type=row[6],
                languages=json.loads(row[7] or "[]"),
            )
        )
        if len(hits) == k:
            break
    if hits:
        hit_ids = {h.object_id for h in hits}
        if spark is not None:
            from shoal.catalog import object_paths

            # Governed for a principal: no grant on shoal.object_sources, no paths.
            paths = object_paths(spark, sorted(hit_ids), principal=principal, settings=settings)
        else:
            paths = index.paths(hit_ids)  # the operator, without Spark: the index's copy
        for h in hits:
            h.paths = paths.get(h.object_id, [])
    return hits


def _rows(index: SearchIndex, chunk_ids: Iterable[int]) -> dict[int, tuple]:
    ids = sorted(chunk_ids)
    return {
        r[0]: r
        for r in index.reader().execute(
            "SELECT chunk_id, object_id, raw_path, source_path, part, text, media_type, languages FROM chunks "
            f"WHERE chunk_id IN ({','.join('?' * len(ids))})",
            ids,
        )
    }


def _rerank(ranks: dict[int, int], kept: dict[int, Any]) -> dict[int, int]:
    """Ranks among the kept chunks only, in the same order."""
    return {cid: r for r, cid in enumerate(c for c in sorted(ranks, key=ranks.__getitem__) if c in kept)}


def _governed_rows(
    settings: Settings, spark: SparkSession | None, principal: Principal, select: str, object_ids: set[str]
) -> list[tuple]:
    """`select` (ending in `WHERE object_id IN ({ids})`) run as the principal: its grants, row
    filters and masks apply; no grant gives no rows (the refusal is audited)."""
    from shoal.governance import AccessDenied, GovernedSql

    ids = sorted(o for o in object_ids if _HEX.match(o))  # our own ids: hex only, safe to inline
    if not ids:
        return []
    if spark is None:  # the principal's grants, row filters and masks are applied by Spark SQL
        raise ValueError("a search as a principal needs a SparkSession (spark=...)")
    try:
        return GovernedSql(spark, settings, principal).execute(select.format(ids=", ".join(f"'{o}'" for o in ids))).rows
    except AccessDenied:
        return []


def _readable_text(
    settings: Settings, spark: SparkSession | None, principal: Principal, object_ids: set[str]
) -> dict[tuple[str, str], str]:
    """(object id, part) -> text as the principal reads it, whitespace folded as chunks are."""
    from shoal.lake import metadata

    rows = _governed_rows(
        settings,
        spark,
        principal,
        f"SELECT object_id, part, text FROM {metadata.table('text')} WHERE object_id IN ({{ids}}) "
        "ORDER BY object_id, part, part_index",
        object_ids,
    )
    texts: dict[tuple[str, str], list[str]] = {}
    for oid, part, body in rows:
        if isinstance(body, str):
            texts.setdefault((oid, part or ""), []).append(body)
    return {key: fold_whitespace(" ".join(parts)) for key, parts in texts.items()}


def _readable(settings: Settings, spark: SparkSession | None, principal: Principal, object_ids: set[str]) -> set[str]:
    """Objects listed for the principal in shoal.object_index."""
    from shoal.lake import metadata

    select = f"SELECT object_id FROM {metadata.table('object_index')} WHERE object_id IN ({{ids}})"
    return {r[0] for r in _governed_rows(settings, spark, principal, select, object_ids)}


def keyword_terms(query: str) -> list[str]:
    """Query words worth matching: stop words would match nearly every chunk."""
    from spacy.lang.en.stop_words import STOP_WORDS

    return list(dict.fromkeys(t for t in _WORD.findall(query.lower()) if len(t) > 1 and t not in STOP_WORDS))


def snippet(text: str, query: str, width: int = 240) -> str:
    terms = [t for t in _WORD.findall(query.lower()) if len(t) > 2]
    low = text.lower()
    pos = min((low.find(t) for t in terms if t in low), default=0)
    start = max(0, pos - width // 3)
    out = text[start : start + width].strip()
    return ("…" if start else "") + out + ("…" if start + width < len(text) else "")
