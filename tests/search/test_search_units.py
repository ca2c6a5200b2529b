"""Semantic search building blocks: the chunker and the MiniLM encoder (NumPy and ONNX Runtime)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shoal.exceptions import DependencyError
from shoal.search import embed
from shoal.search.chunks import chunk_text


def test_chunks_respect_size_keep_sentences_and_overlap():
    sentences = [f"Sentence number {i} talks about topic {i % 7} in some detail." for i in range(60)]
    text = " ".join(sentences)
    chunks = chunk_text(text, size=300, overlap=80)
    assert len(chunks) > 5
    assert all(len(c.text) <= 300 for c in chunks)
    assert all(c.text.endswith(".") for c in chunks)  # whole sentences
    for a, b in zip(chunks, chunks[1:], strict=False):
        assert b.start < a.end  # overlap: the next chunk starts inside the previous one
        assert b.start > a.start  # and always moves forward
    covered = set()
    for c in chunks:
        covered.update(range(c.start, c.end))
    assert all(i in covered for i, ch in enumerate(text) if not ch.isspace())  # nothing lost


def test_long_sentence_is_cut_at_words_and_empty_text_has_no_chunks():
    text = "word " * 500
    chunks = chunk_text(text, size=200, overlap=0)
    assert all(len(c.text) <= 200 for c in chunks) and all(not c.text.endswith("wor") for c in chunks)
    assert chunk_text("   \n ") == []
    with pytest.raises(ValueError):
        chunk_text("x", size=10, overlap=10)


@settings(max_examples=60, deadline=None)
@given(st.text(min_size=0, max_size=3000), st.integers(50, 600), st.integers(0, 40))
def test_chunker_properties(text, size, overlap):
    chunks = chunk_text(text, size=size, overlap=overlap)
    assert all(0 <= c.start < c.end <= len(text) for c in chunks)
    assert all(c.end - c.start <= size for c in chunks)
    assert [c.start for c in chunks] == sorted({c.start for c in chunks})
    content = {i for i, ch in enumerate(text) if not ch.isspace()}
    assert content <= {i for c in chunks for i in range(c.start, c.end)}


@pytest.mark.parametrize(("backend", "tolerance"), [("numpy", 0.002), ("onnx", 0.002), ("onnx-int8", 0.02)])
def test_minilm_matches_the_reference_model(backend, tolerance):
    model = embed.load(backend=backend)
    assert model.backend == backend
    sentences = [
        "A man is eating food.",
        "A man is eating a piece of bread.",
        "A man is riding a horse.",
        "A woman is playing violin.",
    ]
    e = model.encode(sentences)
    assert e.shape == (4, 384) and np.allclose(np.linalg.norm(e, axis=1), 1.0, atol=1e-5)
    # Cosine of the first pair with sentence-transformers' all-MiniLM-L6-v2 is 0.7553.
    # int8 weights move it by about 0.01.
    assert float(e[0] @ e[1]) == pytest.approx(0.7553, abs=tolerance)
    assert float(e[0] @ e[3]) < 0.1
    # Batching (and its padding) does not change an embedding.
    singles = np.vstack([model.encode([s]) for s in sentences])
    assert np.abs(singles - e).max() < 1e-5


def test_missing_model_is_a_clear_error(tmp_path):
    with pytest.raises(DependencyError, match="pip install no-such-model"):
        embed.model_dir("no_such_model")
    (tmp_path / "config.json").write_text('{"model_type": "bert"}')
    with pytest.raises(DependencyError, match="missing"):
        embed.MiniLM(tmp_path)
