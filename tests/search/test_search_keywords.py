"""The keyword index: BM25 from a precomputed sparse matrix (bm25s), checked against BM25
computed here from its definition, plus filters, empty corpora and the atomic swap."""

from __future__ import annotations

import math

import numpy as np
import pytest

from shoal.config import load_settings
from shoal.search.index import KeywordIndex, SearchIndex, build_keywords, query_terms

TEXTS = [
    "The invoice for the steel pipes is due.",
    "Payment of the invoice was late; another invoice followed.",
    "River flood in the archive.",
    "The flood damaged the archive and the river bank.",
    "Coffee machine descaled.",
]


def _bm25(texts: list[str], query: str, k1: float = 1.5, b: float = 0.75) -> np.ndarray:
    """Lucene's BM25 (bm25s' default), term by term."""
    docs = [query_terms(t) for t in texts]
    avg = sum(len(d) for d in docs) / len(docs)
    scores = np.zeros(len(docs))
    for term in set(query_terms(query)):
        df = sum(term in d for d in docs)
        if not df:
            continue
        idf = math.log(1 + (len(docs) - df + 0.5) / (df + 0.5))
        for i, d in enumerate(docs):
            tf = d.count(term)
            scores[i] += idf * tf / (tf + k1 * (1 - b + b * len(d) / avg)) if tf else 0.0
    return scores


@pytest.fixture()
def index(tmp_path) -> KeywordIndex:
    build_keywords(TEXTS, np.arange(101, 101 + len(TEXTS)), tmp_path / "kw")
    return KeywordIndex.load(tmp_path / "kw")


@pytest.mark.parametrize("query", ["invoice payment", "river flooding archives", "the steel invoice", "coffee"])
def test_scores_are_bm25(index, query):
    expected = _bm25(TEXTS, query)
    want = [101 + i for i in sorted(np.flatnonzero(expected > 0), key=lambda i: (-expected[i], i))]
    assert index.top(query, 10) == want


def test_depth_filter_and_no_match(index):
    assert index.top("invoice payment", 1) == [102]  # twice "invoice" and "payment"
    assert index.top("invoice", 10, allowed=np.array([101, 105])) == [101]
    assert index.top("invoice", 10, allowed=np.array([], dtype=np.int64)) == []
    assert index.top("zebra", 10) == [] and index.top("the of", 10) == []  # unknown and stop words


def test_empty_corpus(tmp_path):
    build_keywords([], np.zeros(0, dtype=np.int64), tmp_path / "kw")
    assert KeywordIndex.load(tmp_path / "kw").top("anything", 10) == []


def test_rebuild_swaps_the_live_folder(tmp_path):
    search_index = SearchIndex(load_settings(workspace=tmp_path / "ws"))
    assert search_index.keywords() is None  # nothing built yet: queries use FTS5
    with search_index.connect() as conn:
        conn.execute("INSERT INTO chunks (chunk_id, object_id, text, vector) VALUES (7, 'a', 'river flood', x'00')")
    search_index.rebuild_keywords()
    first = search_index.keywords()
    assert first is not None and first.top("flood", 5) == [7]
    with search_index.connect() as conn:
        conn.execute("INSERT INTO chunks (chunk_id, object_id, text, vector) VALUES (9, 'b', 'flood flood', x'00')")
    search_index.rebuild_keywords()
    assert search_index.keywords().top("flood", 5) == [9, 7]
    live = [p.name for p in search_index.root.glob("keywords-*")]
    assert live == [search_index.keywords_pointer.read_text()]  # the old folder is gone
    assert not list(search_index.root.glob(".keywords-*"))


def test_reader_follows_a_replaced_database(tmp_path):
    search_index = SearchIndex(load_settings(workspace=tmp_path / "ws"))
    with search_index.connect() as conn:
        conn.execute("INSERT INTO chunks (chunk_id, object_id, text, vector) VALUES (1, 'a', 'old', x'00')")
    assert search_index.reader().execute("SELECT text FROM chunks").fetchall() == [("old",)]
    with search_index.connect() as conn:  # a later write is seen through the same connection
        conn.execute("INSERT INTO chunks (chunk_id, object_id, text, vector) VALUES (2, 'b', 'new', x'00')")
    assert search_index.reader().execute("SELECT count(*) FROM chunks").fetchone() == (2,)
    for f in search_index.root.glob("chunks.db*"):  # a workspace reset removes the files
        f.unlink()
    assert search_index.reader().execute("SELECT count(*) FROM chunks").fetchone() == (0,)


def _add(search_index: SearchIndex, rows: list[tuple[int, str]]) -> None:
    with search_index.connect() as conn:
        conn.executemany("INSERT INTO chunks (chunk_id, object_id, text, vector) VALUES (?, 'o', ?, x'00')", rows)


def test_segments_grown_over_runs_rank_as_a_rebuild(tmp_path):
    import random

    rng = random.Random(4)
    words = [
        "invoice",
        "payment",
        "river",
        "flood",
        "archive",
        "coffee",
        "machine",
        "steel",
        "pipes",
        "bank",
        "late",
        "due",
    ]
    texts = {i: " ".join(rng.choice(words) for _ in range(rng.randint(3, 12))) for i in range(1, 161)}
    grown = SearchIndex(load_settings(workspace=tmp_path / "grown"))
    _add(grown, [(i, texts[i]) for i in range(1, 81)])
    assert grown.sync_keywords()
    _add(grown, [(i, texts[i]) for i in range(81, 121)])
    assert grown.sync_keywords()
    removed = [3, 17, 85, 90]
    with grown.connect() as conn:
        conn.executemany("DELETE FROM chunks WHERE chunk_id = ?", [(i,) for i in removed])
    _add(grown, [(i, texts[i]) for i in range(121, 161)])
    assert grown.sync_keywords() and not grown.sync_keywords()  # in line: nothing to write
    assert len(grown.keywords_pointer.read_text().split()) == 3  # three segments, none rebuilt
    live = [i for i in texts if i not in removed]
    rebuilt = SearchIndex(load_settings(workspace=tmp_path / "rebuilt"))
    _add(rebuilt, [(i, texts[i]) for i in live])
    rebuilt.rebuild_keywords()
    for query in ["invoice", "river flood", "late payment due", "coffee machine steel", "bank archive pipes"]:
        top = grown.keywords().top(query, 50)
        assert top == rebuilt.keywords().top(query, 50) and top
        assert not set(top) & set(removed)
    assert grown.keywords().top("flood", 200, allowed=np.array([5, 85, 150])) == [
        i for i in rebuilt.keywords().top("flood", 200) if i in (5, 150)
    ]


def test_segments_are_merged_and_rebuilt_past_their_limits(tmp_path):
    search_index = SearchIndex(load_settings(workspace=tmp_path / "ws"))
    for run in range(10):
        _add(search_index, [(run * 10 + i, f"river flood report {run}") for i in range(1, 11)])
        search_index.sync_keywords()
    folders = search_index.keywords_pointer.read_text().split()
    assert 2 <= len(folders) <= 9  # the newer segments merged
    assert sorted(search_index.keywords().top("flood", 500)) == list(range(1, 101))
    assert sorted(p.name for p in search_index.root.glob("keywords-*")) == sorted(folders)
    with search_index.connect() as conn:
        conn.execute("DELETE FROM chunks WHERE chunk_id <= 30")  # 30% deleted: past 20%
    search_index.sync_keywords()
    assert len(search_index.keywords_pointer.read_text().split()) == 1
    assert sorted(search_index.keywords().top("flood", 500)) == list(range(31, 101))
