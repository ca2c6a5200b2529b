"""The BERT sentence encoder as an ONNX graph, run by ONNX Runtime.

The model package ships safetensors weights only, so the graph is written here with the
`onnx` helper API from the same weights the NumPy encoder uses (embeddings, N encoder
layers, mean pooling over real tokens, L2 normalisation) and cached on disk, keyed by the
weights' digest and this file's graph version. Standard ONNX (opset 17) plus ONNX
Runtime's `com.microsoft.Gelu` (exact erf GELU, as the model's).

Precision "fp32" gives the NumPy encoder's vectors (tests: cosine within 1e-4). "int8"
quantizes the matrix weights (ONNX Runtime's dynamic quantization: int8 weights, uint8
activations scaled per batch, one weight scale per output column): about twice as fast
as fp32 on CPUs with AVX512-VNNI, vectors at cosine about 0.99 to the fp32 ones (tested;
measured in benchmarks/search.py).
"""

from __future__ import annotations

import logging
import os
import tempfile
from pathlib import Path
from typing import Any, Literal, Protocol

import numpy as np

from shoal.exceptions import DependencyError

# Bump when the graph below changes: cached files of older versions are not reused.
GRAPH_VERSION = 2
Precision = Literal["fp32", "int8"]


class Weights(Protocol):
    """What a graph is built from: the BERT weights `shoal.search.embed.MiniLM` loads (a protocol,
    so that this module needs nothing from the one that uses it)."""

    name: str
    fingerprint: str
    w: dict[str, np.ndarray]
    dim: int
    heads: int
    eps: float
    layers: int


def default_cache() -> Path:
    """As `[media] model_cache` defaults: ~/.cache/shoal/models."""
    return Path.home() / ".cache" / "shoal" / "models"


def model_file(model: Weights, precision: Precision, root: Path | None = None) -> Path:
    """The cached ONNX file for these weights and precision, built on first use."""
    root = root or default_cache()
    root.mkdir(parents=True, exist_ok=True)
    target = root / f"{model.name}-{model.fingerprint}-g{GRAPH_VERSION}-{precision}.onnx"
    if target.is_file():
        return target
    try:
        import onnx
    except ImportError:
        raise DependencyError(
            "the onnx package is needed to build the embedding graph", hint="pip install 'shoal[search]'"
        ) from None
    # Built in a private file, then renamed: concurrent workers never read half a model.
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.stem}-", suffix=".onnx", dir=root)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        fp32 = _graph(model)
        if precision == "fp32":
            onnx.save_model(fp32, str(tmp))
        else:
            from onnxruntime.quantization import QuantType, quantize_dynamic

            src = tmp.with_suffix(".fp32.onnx")
            onnx.save_model(fp32, str(src))
            # ONNX Runtime's advice to pre-process (shape inference, graph fusion) does not apply:
            # the graph is built here already fused, and its shape inference stops at Gelu.
            quiet = _DropMessage("consider to run pre-processing before quantization")
            logging.getLogger().addFilter(quiet)
            try:
                quantize_dynamic(
                    str(src),
                    str(tmp),
                    weight_type=QuantType.QInt8,
                    op_types_to_quantize=["MatMul"],
                    # One scale per output column: cosine to fp32 0.99 (one per tensor: 0.93).
                    per_channel=True,
                    # Shape inference stops at the contrib Gelu op: its outputs are float.
                    extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},
                )
            finally:
                logging.getLogger().removeFilter(quiet)
                src.unlink(missing_ok=True)
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    return target


class _DropMessage(logging.Filter):
    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text

    def filter(self, record: logging.LogRecord) -> bool:
        return self.text not in record.getMessage()


def _graph(model: Weights) -> Any:
    from onnx import TensorProto, helper, numpy_helper

    w, dim, heads, eps = model.w, model.dim, model.heads, model.eps
    inits: list = []
    nodes: list = []
    seen: set[str] = set()

    def const(name: str, value: np.ndarray) -> str:
        if name not in seen:  # shared constants (indices, shapes) are stored once
            seen.add(name)
            inits.append(numpy_helper.from_array(np.require(value, requirements="C"), name))
        return name

    def node(op: str, inputs: list[str], out: str, domain: str = "", **attrs: Any) -> str:
        nodes.append(helper.make_node(op, inputs, [out], name=out, domain=domain, **attrs))
        return out

    def layer_norm(x: str, prefix: str, out: str) -> str:
        return node(
            "LayerNormalization",
            [x, const(prefix + ".weight", w[prefix + ".weight"]), const(prefix + ".bias", w[prefix + ".bias"])],
            out,
            axis=-1,
            epsilon=eps,
        )

    def dense(x: str, prefix: str, out: str) -> str:
        mm = node("MatMul", [x, const(prefix + ".weight_t", w[prefix + ".weight"].T)], out + ".mm")
        return node("Add", [mm, const(prefix + ".bias", w[prefix + ".bias"])], out)

    # Embeddings: token type is always 0, so its row folds into the position table.
    words = node("Gather", [const("word_embeddings", w["embeddings.word_embeddings.weight"]), "input_ids"], "words")
    positions = w["embeddings.position_embeddings.weight"] + w["embeddings.token_type_embeddings.weight"][0]
    shape = node("Shape", ["input_ids"], "ids_shape")
    seq_len = node("Slice", [shape, const("one", np.array([1], np.int64)), const("two", np.array([2], np.int64))], "n")
    pos = node("Slice", [const("positions", positions), const("zero", np.array([0], np.int64)), seq_len], "pos")
    x = layer_norm(node("Add", [words, pos], "emb"), "embeddings.LayerNorm", "x0")
    # Additive mask: 0 for real tokens, -10000 for padding (as BERT), shape [B, 1, 1, N].
    maskf = node("Cast", ["attention_mask"], "maskf", to=TensorProto.FLOAT)
    neg = node(
        "Mul",
        [
            node("Sub", [const("one_f", np.array(1.0, np.float32)), maskf], "inv_mask"),
            const("neg_big", np.array(-10000.0, np.float32)),
        ],
        "neg_mask",
    )
    mask_bias = node("Unsqueeze", [neg, const("axes12", np.array([1, 2], np.int64))], "mask_bias")
    head_dim = dim // heads
    split_shape = const("split_shape", np.array([0, 0, 3, heads, head_dim], np.int64))
    merge_shape = const("merge_shape", np.array([0, 0, dim], np.int64))
    scale = const("scale", np.array(1.0 / np.sqrt(head_dim), np.float32))

    def attention(x: str, i: int, p: str) -> str:
        # Q, K and V in one product (quantizable like every dense layer), then the
        # scaled dot products in float: [B, N, 3, H, D] -> three [B, H, N, D].
        qkv = node("MatMul", [x, const(f"{i}.qkv.w", w[f"{i}.qkv.w"])], p + ".qkv.mm")
        qkv = node("Add", [qkv, const(f"{i}.qkv.b", w[f"{i}.qkv.b"])], p + ".qkv")
        qkv = node("Reshape", [qkv, split_shape], p + ".qkv5")
        qkv = node("Transpose", [qkv], p + ".qkvT", perm=[2, 0, 3, 1, 4])
        q, k, v = (
            node("Gather", [qkv, const(f"idx{j}", np.array(j, np.int64))], f"{p}.{n}", axis=0)
            for j, n in enumerate("qkv")
        )
        kt = node("Transpose", [k], p + ".kT", perm=[0, 1, 3, 2])
        scores = node("Mul", [node("MatMul", [q, kt], p + ".qk"), scale], p + ".scaled")
        probs = node("Softmax", [node("Add", [scores, mask_bias], p + ".masked")], p + ".probs", axis=-1)
        ctx = node("Transpose", [node("MatMul", [probs, v], p + ".ctx4")], p + ".ctxT", perm=[0, 2, 1, 3])
        return node("Reshape", [ctx, merge_shape], p + ".ctx")

    for i in range(model.layers):
        p = f"encoder.layer.{i}."
        ctx = attention(x, i, f"l{i}")
        attn_out = dense(ctx, p + "attention.output.dense", f"l{i}.attn")
        x = layer_norm(node("Add", [x, attn_out], f"l{i}.res1"), p + "attention.output.LayerNorm", f"l{i}.h")
        inner = dense(x, p + "intermediate.dense", f"l{i}.inner")
        act = node("Gelu", [inner], f"l{i}.gelu", domain="com.microsoft")
        out = dense(act, p + "output.dense", f"l{i}.out")
        x = layer_norm(node("Add", [x, out], f"l{i}.res2"), p + "output.LayerNorm", f"l{i}.x")
    # Mean over real tokens, then unit length (as sentence-transformers' Pooling + Normalize).
    mask3 = node("Unsqueeze", [maskf, const("axis2", np.array([2], np.int64))], "mask3")
    summed = node(
        "ReduceSum", [node("Mul", [x, mask3], "masked"), const("axis1", np.array([1], np.int64))], "summed", keepdims=0
    )
    count = node("ReduceSum", [maskf, const("axis1b", np.array([1], np.int64))], "count", keepdims=1)
    count = node("Max", [count, const("tiny", np.array(1e-9, np.float32))], "count_safe")
    pooled = node("Div", [summed, count], "pooled")
    node("LpNormalization", [pooled], "embedding", axis=1, p=2)
    graph = helper.make_graph(
        nodes,
        "minilm",
        [
            helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "seq"]),
            helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "seq"]),
        ],
        [helper.make_tensor_value_info("embedding", TensorProto.FLOAT, ["batch", dim])],
        inits,
    )
    onnx_model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)],
        producer_name="shoal",
    )
    onnx_model.ir_version = 8  # readable by every ONNX Runtime Shoal accepts (>= 1.18)
    return onnx_model


class OnnxEncoder:
    """Runs the cached graph on batches the encoder has tokenized and padded."""

    def __init__(
        self, model: Weights, precision: Precision = "int8", *, root: Path | None = None, threads: int = 0
    ) -> None:
        import onnxruntime as ort

        self.precision = precision
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = threads  # 0: one per core, as NumPy's BLAS
        opts.inter_op_num_threads = 1
        # Idle threads sleep instead of spinning: Spark runs one encoder per Python worker, so
        # spinning pools fight over the cores. Measured on 2 busy cores (load ~30, one process,
        # same texts): 8.6-22 chunks/s without spinning against 2.8-3.5 with it.
        opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
        opts.log_severity_level = 3
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        # The fused SkipLayerNormalization kernel was 2.5x slower than Add + LayerNormalization
        # here (ONNX Runtime 1.32 profile, benchmarks/search.py).
        disabled = ["SkipLayerNormFusion"]
        self.path = model_file(model, precision, root)
        try:
            self.session = ort.InferenceSession(
                str(self.path), opts, providers=["CPUExecutionProvider"], disabled_optimizers=disabled
            )
        except Exception as exc:  # noqa: BLE001 - a damaged cache file: build it again, once
            self.path.unlink(missing_ok=True)
            self.path = model_file(model, precision, root)
            try:
                self.session = ort.InferenceSession(
                    str(self.path), opts, providers=["CPUExecutionProvider"], disabled_optimizers=disabled
                )
            except Exception:  # noqa: BLE001 - a second failure, of any kind, means this runtime cannot load it
                raise DependencyError(
                    f"ONNX Runtime cannot load the embedding graph {self.path}: {str(exc).splitlines()[0][:300]}",
                    hint="set [search] backend = 'numpy' to use the NumPy encoder",
                ) from None

    def forward(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        return self.session.run(["embedding"], {"input_ids": ids, "attention_mask": mask.astype(np.int64)})[0]
