"""The sentence encoder on ONNX Runtime: same vectors as the NumPy forward pass (fp32), close
ones (int8), a graph built once and cached, and NumPy when ONNX Runtime is missing."""

from __future__ import annotations

import random
import sys

import numpy as np
import pytest

from shoal.search import embed, evaluation, onnx_minilm

WORDS = [
    "invoice",
    "payment",
    "lease",
    "river",
    "flood",
    "server",
    "disk",
    "outage",
    "vaccine",
    "clinic",
    "chess",
    "club",
    "coffee",
    "solar",
    "panel",
]


def _texts() -> list[str]:
    # Mixed lengths (padding inside a batch), one empty text and one past the 256-token limit.
    rng = random.Random(3)
    texts = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 120))) for _ in range(40)]
    return [*texts, "", " ".join(WORDS * 40), *evaluation.DOCUMENTS.values()]


@pytest.fixture(scope="module")
def reference() -> np.ndarray:
    return embed.load(backend="numpy").encode(_texts())


def _cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


def test_onnx_fp32_gives_the_numpy_vectors(tmp_path, reference):
    model = embed.load(backend="onnx", cache_dir=tmp_path)
    assert model.backend == "onnx"
    vectors = model.encode(_texts())
    assert vectors.shape == reference.shape and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert (1.0 - _cosines(vectors, reference)).max() < 1e-4
    # Same weights, same vectors: one fingerprint, so an index need not re-embed.
    assert model.fingerprint == embed.load(backend="numpy").fingerprint
    # Batching (and its padding) does not change an embedding.
    singles = np.vstack([model.encode([t]) for t in _texts()[:8]])
    assert np.abs(singles - vectors[:8]).max() < 1e-5


def test_onnx_int8_is_close_and_ranks_alike(tmp_path, reference, caplog):
    caplog.set_level("WARNING")
    model = embed.load(backend="onnx-int8", cache_dir=tmp_path)
    model.encode(["the graph is built on first use"])
    # Building the int8 graph says nothing to the user (the demo printed ONNX Runtime's advice).
    assert not [r for r in caplog.records if "pre-processing" in r.getMessage()]
    assert model.backend == "onnx-int8"
    vectors = model.encode(_texts())
    assert _cosines(vectors, reference).min() > 0.97
    assert model.fingerprint.endswith("-int8") and model.fingerprint != embed.load(backend="numpy").fingerprint
    # The evaluation queries find their documents as with the exact vectors.
    docs = list(evaluation.DOCUMENTS)
    queries = [q for q, _, _ in evaluation.QUERIES]
    exact_model = embed.load(backend="numpy")
    exact = exact_model.encode(queries) @ exact_model.encode(list(evaluation.DOCUMENTS.values())).T
    quant = model.encode(queries) @ model.encode(list(evaluation.DOCUMENTS.values())).T
    top_exact = [docs[i] for i in exact.argmax(1)]
    top_quant = [docs[i] for i in quant.argmax(1)]
    agree = sum(a == b for a, b in zip(top_exact, top_quant, strict=True)) / len(queries)
    assert agree >= 0.95


def test_graph_is_built_once_and_rebuilt_when_damaged(tmp_path):
    model = embed.load(backend="numpy")
    path = onnx_minilm.model_file(model, "fp32", tmp_path)
    assert path.is_file() and path.parent == tmp_path
    mtime = path.stat().st_mtime_ns
    assert onnx_minilm.model_file(model, "fp32", tmp_path) == path
    assert path.stat().st_mtime_ns == mtime  # reused, not rebuilt
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary files left
    path.write_bytes(b"not a model")
    encoder = onnx_minilm.OnnxEncoder(model, "fp32", root=tmp_path)
    ids = np.array([[101, 7592, 102]], dtype=np.int64)
    mask = np.ones_like(ids, dtype=np.float32)
    assert np.allclose(encoder.forward(ids, mask), model._forward(ids, mask), atol=1e-5)


def test_numpy_fallback_without_onnx_runtime(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # import fails as if not installed
    model = embed.MiniLM(embed.model_dir(embed.DEFAULT_MODEL), backend="onnx-int8", cache_dir=tmp_path)
    assert model.backend == "numpy" and not model.fingerprint.endswith("-int8")
    assert model.encode(["a test"]).shape == (1, 384)


def test_unknown_backend_is_refused():
    with pytest.raises(ValueError, match="onnx-int8, onnx, numpy"):
        embed.load(backend="torch")


def test_thread_count_changes_speed_not_vectors(tmp_path):
    pooled = embed.load(backend="onnx-int8", cache_dir=tmp_path)
    single = embed.load(backend="onnx-int8", cache_dir=tmp_path, threads=1)
    assert single is not pooled  # one encoder per thread count
    assert single._onnx is not None and single._onnx.session.get_session_options().intra_op_num_threads == 1
    assert pooled._onnx is not None and pooled._onnx.session.get_session_options().intra_op_num_threads == 0
    texts = _texts()[:12]
    assert (1.0 - _cosines(single.encode(texts), pooled.encode(texts))).max() < 1e-5
    with pytest.raises(ValueError, match="threads"):
        embed.load(backend="onnx-int8", threads=-1)


def test_spark_task_encoder_uses_the_task_cores(spark, tmp_path):
    """search-index's task function loads its encoder with the task's cores (1 here), as
    Spark runs one Python worker per core."""
    from shoal.search.index import _embed_partition

    cache = str(tmp_path)
    task = _embed_partition(embed.DEFAULT_MODEL, 800, 150, "onnx-int8", cache)
    row = {"object_id": "o1", "part": "text", "part_index": 0, "text": "Solar panels on the clinic roof."}
    row |= {"media_type": "text/plain", "languages": [], "tags": {}, "raw_path": "", "source_path": ""}

    def run(rows):
        chunks = list(task(rows))
        loaded = [k[3] for k in embed._cache if k[1] == "onnx-int8" and k[2] == cache]
        yield (len(chunks), loaded)

    [(chunks, loaded)] = spark.sparkContext.parallelize([row], 1).mapPartitions(run).collect()
    assert chunks == 1 and loaded == [1]
