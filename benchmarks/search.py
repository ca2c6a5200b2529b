"""Search benchmark, all figures from one run.

1. Indexing throughput: chunks of about 1,000 characters embedded per second by each
   encoder backend on the same texts in this process, on 2 cores: NumPy (the baseline),
   ONNX Runtime fp32 and ONNX Runtime int8, with the cosine of each backend's vectors to
   NumPy's. Then the int8 encoder as `search-index` runs it: its Spark task function on
   local[2], one task per core, one thread per task. Target: 150 chunks/s.
2. Query latency at 100k chunks: 2,000 real chunk embeddings are mixed into 100,000
   realistic vectors (convex combinations of two real ones plus noise, normalised), stored
   in a real Shoal index (SQLite + FTS5 + HNSW). Compared on the same 200 queries:
   exact search (NumPy brute force: the baseline), a raw faiss HNSW index, and Shoal's
   `search` end to end (query embedding, ANN, SQLite fetch, one hit per object), vector
   and hybrid. Recall@10 is measured against exact. Target: p50 under 20 ms, recall@10
   of at least 0.95 against exact. Keyword ranking alone is compared too: FTS5's bm25
   over every match (the former path) against the precomputed BM25 matrix.
3. Growing the index (what `search-index` does after a small increment): 100 new chunks and
   100 removed ones applied to the HNSW graph and the keyword segments in place, against
   the full builds of step 2 (the baseline: before, every run rebuilt both).
4. The evaluation set's recall@10 and MRR are in tests/search/test_search_eval.py.

    python benchmarks/search.py [--chunks 100000] [--queries 200] [--numpy-texts 60] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from shoal.config import load_settings
from shoal.search import embed, evaluation
from shoal.search.index import open_index
from shoal.search.query import keyword_terms, search

WORDS = [
    "invoice",
    "payment",
    "contract",
    "lease",
    "renewal",
    "customer",
    "order",
    "shipment",
    "delivery",
    "port",
    "container",
    "storage",
    "database",
    "cluster",
    "outage",
    "server",
    "disk",
    "engineer",
    "policy",
    "employee",
    "leave",
    "holiday",
    "vacation",
    "training",
    "mentor",
    "laptop",
    "badge",
    "security",
    "phishing",
    "email",
    "bank",
    "password",
    "login",
    "account",
    "revenue",
    "quarter",
    "growth",
    "market",
    "subscription",
    "tax",
    "return",
    "deadline",
    "authority",
    "merger",
    "board",
    "retailer",
    "competitor",
    "river",
    "flood",
    "rain",
    "archive",
    "smoke",
    "fire",
    "air",
    "quality",
    "event",
    "train",
    "strike",
    "rail",
    "commuter",
    "chess",
    "club",
    "coffee",
    "machine",
    "kitchen",
    "printer",
    "paper",
    "roller",
    "solar",
    "panel",
    "roof",
    "electricity",
    "vaccine",
    "clinic",
    "appointment",
]


def text(rng: random.Random, words: int) -> str:
    sentences = []
    while sum(len(s.split()) for s in sentences) < words:
        sentences.append(" ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 16))).capitalize() + ".")
    return " ".join(sentences)


def spark_embedding(texts: list[str], n: int) -> dict[str, float]:
    """The same texts embedded as `search-index` embeds them: its Spark task function on
    local[2], one task per core, each task's encoder on one ONNX Runtime thread (int8).
    One chunk per text (chunk size above the text length), so the figure compares with the
    in-process ones. A warm-up job first: the workers load the model once per process."""
    from shoal.search.index import _embed_partition
    from shoal.spark import get_spark

    with tempfile.TemporaryDirectory(prefix="shoal-bench-embed-") as tmp:
        settings = load_settings(workspace=Path(tmp) / "ws")
        spark = get_spark(settings)
        cores = spark.sparkContext.defaultParallelism
        rows = [
            {"object_id": f"o{i}", "part": "text", "part_index": 0, "text": texts[i % len(texts)]} | _EMPTY
            for i in range(n)
        ]
        task = _embed_partition(settings.search.model, 4000, 0, "onnx-int8", settings.extract.media.model_cache)
        spark.sparkContext.parallelize(rows[: 4 * cores], cores).mapPartitions(task).count()
        started = time.perf_counter()
        chunks = spark.sparkContext.parallelize(rows, cores).mapPartitions(task).count()
        seconds = time.perf_counter() - started
        spark.stop()
    return {"embed_spark_chunks_per_s": round(chunks / seconds, 1), "embed_spark_tasks": cores}


_EMPTY = {"media_type": "text/plain", "languages": [], "tags": {}, "raw_path": "", "source_path": ""}


def pct(values: list[float], p: float) -> float:
    return round(float(np.percentile(np.array(values) * 1000, p)), 2)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--chunks", type=int, default=100_000)
    ap.add_argument("--real", type=int, default=2000)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--numpy-texts", type=int, default=60, help="texts for the (slow) NumPy baseline")
    ap.add_argument(
        "--spark-texts", type=int, default=1200, help="texts embedded through Spark as search-index does (0: skip)"
    )
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    rng = random.Random(7)
    report: dict = {"chunks": args.chunks, "load_avg_1min_start": round(os.getloadavg()[0], 1)}

    texts = [text(rng, 130) for _ in range(300)]
    exact_vectors = None
    for backend in ("numpy", "onnx", "onnx-int8"):
        encoder = embed.load(backend=backend)
        encoder.encode(texts[:4])  # warm-up (and, first time, the ONNX graph is built and cached)
        sample = texts if backend != "numpy" else texts[: args.numpy_texts]
        started = time.perf_counter()
        vectors = encoder.encode(sample)
        key = backend.replace("-", "_")
        report[f"embed_{key}_chunks_per_s"] = round(len(sample) / (time.perf_counter() - started), 1)
        if exact_vectors is None:
            exact_vectors = vectors
        else:
            n = len(exact_vectors)
            report[f"embed_{key}_min_cosine_to_numpy"] = round(float((vectors[:n] * exact_vectors).sum(1).min()), 5)
    report["embed_chunks_per_s"] = report["embed_onnx_int8_chunks_per_s"]
    report["embed_onnx_int8_over_numpy"] = round(report["embed_chunks_per_s"] / report["embed_numpy_chunks_per_s"], 1)
    if args.spark_texts:
        report.update(spark_embedding(texts, args.spark_texts))
    report["chunk_chars_avg"] = int(np.mean([len(t) for t in texts]))
    model = embed.load()

    real_texts = list(evaluation.DOCUMENTS.values()) + [
        text(rng, 60) for _ in range(args.real - len(evaluation.DOCUMENTS))
    ]
    real = model.encode(real_texts)
    nprng = np.random.default_rng(7)
    i, j = nprng.integers(0, len(real), args.chunks), nprng.integers(0, len(real), args.chunks)
    w = nprng.uniform(0.5, 1.0, (args.chunks, 1)).astype(np.float32)
    vectors = w * real[i] + (1 - w) * real[j] + nprng.normal(0, 0.02, (args.chunks, real.shape[1])).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)

    with tempfile.TemporaryDirectory(prefix="shoal-bench-search-") as tmp:
        settings = load_settings(workspace=Path(tmp) / "ws")
        index = open_index(settings)
        started = time.perf_counter()
        with index.connect() as conn:
            conn.executemany(
                "INSERT INTO chunks (object_id, part, part_index, chunk_index, start, end, text, media_type, languages, tags, raw_path, source_path, vector) "
                "VALUES (?, 'page 1', 0, 0, 0, 0, ?, 'text/plain', '[\"en\"]', '{}', ?, ?, ?)",
                (
                    (f"{n:032x}", real_texts[i[n]][:400], f"/raw/doc{n}.txt", f"doc{n}.txt", vectors[n].tobytes())
                    for n in range(args.chunks)
                ),
            )
        report["store_s"] = round(time.perf_counter() - started, 1)
        started = time.perf_counter()
        index.rebuild_ann()
        report["hnsw_build_s"] = round(time.perf_counter() - started, 1)
        started = time.perf_counter()
        index.rebuild_keywords()
        report["keyword_index_build_s"] = round(time.perf_counter() - started, 1)
        ann = index.ann()

        query_texts = [q for q, _, _ in evaluation.QUERIES]
        query_texts += [text(rng, 10) for _ in range(max(0, args.queries - len(query_texts)))]
        query_vecs = model.encode(query_texts[: args.queries])

        import faiss

        exact_t, hnsw_t, recalls = [], [], []
        faiss.downcast_index(ann.index).hnsw.efSearch = settings.search.ef_search
        for q in query_vecs:
            t = time.perf_counter()
            scores = vectors @ q
            exact = np.argpartition(-scores, 10)[:10]
            exact_t.append(time.perf_counter() - t)
            t = time.perf_counter()
            _, found = ann.search(q[None, :], 10)
            hnsw_t.append(time.perf_counter() - t)
            recalls.append(len(set(exact.tolist()) & {int(x) - 1 for x in found[0]}) / 10)  # chunk ids start at 1
        keywords = index.keywords()
        fts_t, bm25_t, overlap = [], [], []
        with index.connect() as conn:
            for qt in query_texts[: args.queries]:
                terms = keyword_terms(qt)
                if not terms:
                    continue
                t = time.perf_counter()
                fts = conn.execute(
                    "SELECT rowid FROM chunks_fts WHERE chunks_fts MATCH ? ORDER BY bm25(chunks_fts) LIMIT 100",
                    (" OR ".join(f'"{w}"' for w in terms),),
                ).fetchall()
                fts_t.append(time.perf_counter() - t)
                t = time.perf_counter()
                top = keywords.top(qt, 100)
                bm25_t.append(time.perf_counter() - t)
                overlap.append(len({r[0] for r in fts[:10]} & set(top[:10])) / max(1, min(10, len(fts))))
        report.update(
            keyword_fts5_p50_ms=pct(fts_t, 50),
            keyword_bm25_matrix_p50_ms=pct(bm25_t, 50),
            keyword_top10_overlap_with_fts5=round(float(np.mean(overlap)), 3),
        )
        shoal_v, shoal_h, shoal_recalls = [], [], []
        for qt in query_texts[: args.queries]:
            t = time.perf_counter()
            hits = search(settings, qt, k=10, mode="vector")
            shoal_v.append(time.perf_counter() - t)
            exact = np.argpartition(-(vectors @ model.encode([qt])[0]), 10)[:10]
            shoal_recalls.append(len({f"{int(x):032x}" for x in exact} & {h.object_id for h in hits}) / 10)
            t = time.perf_counter()
            search(settings, qt, k=10, mode="hybrid")
            shoal_h.append(time.perf_counter() - t)
        report.update(
            exact_p50_ms=pct(exact_t, 50),
            exact_p95_ms=pct(exact_t, 95),
            hnsw_p50_ms=pct(hnsw_t, 50),
            hnsw_p95_ms=pct(hnsw_t, 95),
            hnsw_recall_at_10=round(float(np.mean(recalls)), 3),
            shoal_vector_p50_ms=pct(shoal_v, 50),
            shoal_vector_p95_ms=pct(shoal_v, 95),
            shoal_vector_recall_at_10=round(float(np.mean(shoal_recalls)), 3),
            shoal_hybrid_p50_ms=pct(shoal_h, 50),
            shoal_hybrid_p95_ms=pct(shoal_h, 95),
        )
        report["exact_over_shoal_vector_p50"] = round(report["exact_p50_ms"] / report["shoal_vector_p50_ms"], 2)
        # A small increment: 100 chunks of new objects in, 100 of removed objects out.
        with index.connect() as conn:
            conn.executemany(
                "INSERT INTO chunks (object_id, part, text, vector) VALUES (?, 'page 1', ?, ?)",
                ((f"new{n:029x}", text(rng, 60), vectors[n].tobytes()) for n in range(100)),
            )
            conn.execute("DELETE FROM chunks WHERE chunk_id <= 100")
        started = time.perf_counter()
        grown = index.sync_ann()
        report["hnsw_grow_100_s"] = round(time.perf_counter() - started, 2)
        started = time.perf_counter()
        index.sync_keywords()
        report["keyword_grow_100_s"] = round(time.perf_counter() - started, 2)
        assert not grown.rebuilt and (grown.added, grown.removed) == (100, 100)
        report["rebuild_over_grow"] = round(
            (report["hnsw_build_s"] + report["keyword_index_build_s"])
            / max(report["hnsw_grow_100_s"] + report["keyword_grow_100_s"], 1e-3),
            1,
        )
    report["load_avg_1min_end"] = round(os.getloadavg()[0], 1)
    if args.json:
        json.dump(report, sys.stdout, indent=2)
        print()
        return
    print(
        f"embedding ({report['chunk_chars_avg']} chars/chunk): numpy {report['embed_numpy_chunks_per_s']}/s, "
        f"onnx fp32 {report['embed_onnx_chunks_per_s']}/s (min cos {report['embed_onnx_min_cosine_to_numpy']}), "
        f"onnx int8 {report['embed_onnx_int8_chunks_per_s']}/s (min cos {report['embed_onnx_int8_min_cosine_to_numpy']}): "
        f"{report['embed_onnx_int8_over_numpy']}x numpy"
    )
    if "embed_spark_chunks_per_s" in report:
        print(
            f"embedding through Spark as search-index runs it (int8, {report['embed_spark_tasks']} tasks, "
            f"one thread each): {report['embed_spark_chunks_per_s']}/s (target 150)"
        )
    print(
        f"keywords: FTS5 bm25 p50 {report['keyword_fts5_p50_ms']} ms, BM25 matrix p50 {report['keyword_bm25_matrix_p50_ms']} ms, "
        f"top-10 overlap {report['keyword_top10_overlap_with_fts5']}"
    )
    print(f"{args.chunks} chunks: stored in {report['store_s']} s, HNSW built in {report['hnsw_build_s']} s")
    print(
        f"increment of 100 chunks in and 100 out: HNSW grown in {report['hnsw_grow_100_s']} s, keywords in "
        f"{report['keyword_grow_100_s']} s; full builds {report['hnsw_build_s']} s + {report['keyword_index_build_s']} s "
        f"({report['rebuild_over_grow']}x the increment)"
    )
    print(f"exact (baseline)   p50 {report['exact_p50_ms']} ms  p95 {report['exact_p95_ms']} ms")
    print(
        f"faiss HNSW raw     p50 {report['hnsw_p50_ms']} ms  p95 {report['hnsw_p95_ms']} ms  recall@10 vs exact {report['hnsw_recall_at_10']}"
    )
    print(
        f"shoal search vec   p50 {report['shoal_vector_p50_ms']} ms  p95 {report['shoal_vector_p95_ms']} ms (incl. query embedding)  recall@10 vs exact {report['shoal_vector_recall_at_10']}"
    )
    print(f"shoal search hyb   p50 {report['shoal_hybrid_p50_ms']} ms  p95 {report['shoal_hybrid_p95_ms']} ms")
    print(f"load average (1 min) at start {report['load_avg_1min_start']}, at end {report['load_avg_1min_end']}")


if __name__ == "__main__":
    main()
