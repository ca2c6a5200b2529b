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
