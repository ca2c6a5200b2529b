"""MobileNetV2 on ONNX Runtime: the graph written from the folded weights gives the NumPy
pass's logits, and NumPy answers when ONNX Runtime is missing."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from shoal.config import MediaSettings
from shoal.extract.media import mobilenet, models

SKIMAGE = Path(importlib.util.find_spec("skimage").submodule_search_locations[0]) / "data"


@pytest.fixture(scope="module")
def net() -> mobilenet.MobileNetV2:
    # MobileNetV2 by name: the default label model is EfficientNet-Lite0 since issue 20.
    return mobilenet.MobileNetV2(
        models.label_weights(MediaSettings(label_model="mobilenet_v2")), models.imagenet_labels()
    )


@pytest.mark.parametrize("photo", ["coffee.png", "chelsea.png", "astronaut.png"])
def test_onnx_logits_match_numpy(net, photo):
    x = net.preprocess(Image.open(SKIMAGE / photo))
    onnx_logits = net.logits(x, backend="onnx")
    numpy_logits = net.logits(x, backend="numpy")
    assert onnx_logits.shape == numpy_logits.shape == (1000,)
    assert np.abs(onnx_logits - numpy_logits).max() < 1e-3
    assert int(onnx_logits.argmax()) == int(numpy_logits.argmax())


def test_numpy_fallback_without_onnx_runtime(monkeypatch):
    monkeypatch.setitem(sys.modules, "onnxruntime", None)
    net = mobilenet.MobileNetV2(
        models.label_weights(MediaSettings(label_model="mobilenet_v2")), models.imagenet_labels()
    )
    assert net.classify(Image.open(SKIMAGE / "coffee.png"), 1)[0][0] == "espresso"
    assert net._session is None and net._session_failed
    with pytest.raises(ImportError):
        net.logits(net.preprocess(Image.open(SKIMAGE / "coffee.png")), backend="onnx")
