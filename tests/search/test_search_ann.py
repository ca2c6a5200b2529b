"""The HNSW graph grows with each indexing run instead of being rebuilt: new chunks added,
removed ones marked deleted and never returned, a rebuild past the deleted threshold or on
demand, and a crash mid-write that leaves the previous graph whole. The store is filled
directly (as an indexing run does after embedding), so no Spark is needed."""

from __future__ import annotations

import faiss
import numpy as np
import pytest

from shoal.config import load_settings
from shoal.search import index as index_module
from shoal.search.index import SearchIndex

DIM = 384


def _vectors(rng: np.random.Generator, n: int) -> np.ndarray:
    """Clustered unit vectors, as sentence embeddings are (topics, not uniform noise)."""
    centres = rng.normal(size=(12, DIM))
    v = centres[rng.integers(0, 12, n)] + rng.normal(0, 0.6, (n, DIM))
    return (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32)


def _store(index: SearchIndex, ids: np.ndarray, vectors: np.ndarray) -> None:
    with index.connect() as conn:
        conn.executemany(
            "INSERT INTO chunks (chunk_id, object_id, text, vector) VALUES (?, ?, ?, ?)",
            [(int(i), f"{int(i):032x}", f"chunk {int(i)}", v.tobytes()) for i, v in zip(ids, vectors, strict=True)],
        )


def _remove(index: SearchIndex, ids: np.ndarray) -> None:
    with index.connect() as conn:
        conn.executemany("DELETE FROM chunks WHERE chunk_id = ?", [(int(i),) for i in ids])


def _index(tmp_path, name: str, **search) -> SearchIndex:
    settings = load_settings(workspace=tmp_path / name)
    for key, value in search.items():
        setattr(settings.search, key, value)
    return SearchIndex(settings)


def test_grown_graph_answers_as_a_rebuilt_one(tmp_path):
    rng = np.random.default_rng(3)
    vectors = _vectors(rng, 700)
    ids = np.arange(1, 701, dtype=np.int64)
    grown = _index(tmp_path, "grown")
    _store(grown, ids[:300], vectors[:300])
    first = grown.sync_ann()
    assert first.rebuilt and first.added == 300  # no graph yet: built
    _store(grown, ids[300:550], vectors[300:550])
    second = grown.sync_ann()
    assert (second.added, second.removed, second.rebuilt) == (250, 0, False)
    removed = ids[rng.choice(550, 70, replace=False)]
    _remove(grown, removed)
    _store(grown, ids[550:], vectors[550:])
    third = grown.sync_ann()
    assert (third.added, third.removed, third.rebuilt) == (150, 70, False)
    assert third.deleted_fraction == pytest.approx(70 / 700)

    live = np.setdiff1d(ids, removed)
    labels = faiss.vector_to_array(grown.ann().id_map)
    assert sorted(labels[labels >= 0]) == live.tolist() and (labels < 0).sum() == 70

    rebuilt = _index(tmp_path, "rebuilt")
    _store(rebuilt, live, vectors[live - 1])
    rebuilt.rebuild_ann()
    queries = np.vstack([vectors[removed[:20] - 1], _vectors(rng, 30)])
    for q in queries:
        top = grown.ann_search(q, 10, 256)
        assert top == rebuilt.ann_search(q, 10, 256)
        exact = live[np.argsort(-(vectors[live - 1] @ q))[:10]]
        assert top == exact.tolist()
        # A removed chunk never comes back, not even for its own vector.
        assert not set(grown.ann_search(q, 100, 256)) & set(removed.tolist())


def test_rebuilt_past_the_deleted_threshold_and_on_demand(tmp_path):
    rng = np.random.default_rng(5)
    index = _index(tmp_path, "ws", rebuild_deleted_fraction=0.25)
    ids = np.arange(1, 201, dtype=np.int64)
    _store(index, ids, _vectors(rng, 200))
    index.sync_ann()
    _remove(index, ids[:40])  # 20%: marked deleted
    assert (index.sync_ann().rebuilt, index.ann().ntotal) == (False, 200)
    _remove(index, ids[40:60])  # 30% now: past the threshold
    sync = index.sync_ann()
    assert sync.rebuilt and sync.deleted_fraction == 0 and index.ann().ntotal == 140
    assert faiss.vector_to_array(index.ann().id_map).tolist() == ids[60:].tolist()
    before = index.faiss_path.stat().st_ino
    assert index.sync_ann() == index_module.AnnSync()  # nothing changed: the file is not rewritten
    assert index.faiss_path.stat().st_ino == before
    assert index.sync_ann(rebuild=True).rebuilt and index.faiss_path.stat().st_ino != before


def test_a_crash_while_writing_leaves_the_previous_graph(tmp_path, monkeypatch):
    rng = np.random.default_rng(9)
    index = _index(tmp_path, "ws")
    _store(index, np.arange(1, 101), _vectors(rng, 100))
    index.sync_ann()
    saved = index.faiss_path.read_bytes()
    _store(index, np.arange(101, 131), _vectors(rng, 30))

    write = faiss.write_index

    def torn(graph, path):  # half a file written, then the process dies
        write(graph, path)
        with open(path, "r+b") as fh:
            fh.truncate(1000)
        raise KeyboardInterrupt

    monkeypatch.setattr(faiss, "write_index", torn)
    with pytest.raises(KeyboardInterrupt):
        index.sync_ann()
    monkeypatch.undo()
    assert index.faiss_path.read_bytes() == saved and not list(index.root.glob(".vectors-*"))
    assert index.ann().ntotal == 100  # readers still have the whole previous graph
    caught_up = index.sync_ann()  # the next run finds the same difference
    assert (caught_up.added, caught_up.rebuilt, index.ann().ntotal) == (30, False, 130)


def test_a_graph_written_by_an_earlier_release_is_grown(tmp_path):
    rng = np.random.default_rng(11)
    index = _index(tmp_path, "ws")
    vectors = _vectors(rng, 60)
    _store(index, np.arange(1, 51), vectors[:50])
    old = faiss.IndexIDMap2(faiss.IndexHNSWFlat(DIM, 32, faiss.METRIC_INNER_PRODUCT))  # the former layout
    old.add_with_ids(vectors[:50], np.arange(1, 51))
    faiss.write_index(old, str(index.faiss_path))
    _remove(index, np.array([7]))
    _store(index, np.arange(51, 61), vectors[50:])
    sync = index.sync_ann()
    assert (sync.added, sync.removed, sync.rebuilt) == (10, 1, False)
    assert 7 not in index.ann_search(vectors[6], 60, 256) and index.ann_search(vectors[55], 1, 256) == [56]
