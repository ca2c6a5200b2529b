"""ONNX models through ONNX Runtime.

The first input decides what a model takes: a string tensor gets texts (shape [N, 1], as
skl2onnx writes text pipelines), a numeric tensor gets feature rows. Outputs are read by
shape: a 1-D tensor is the label, a 2-D float tensor (or a list of dicts, skl2onnx's
ZipMap) the class probabilities, named by the labels given at registration.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from shoal.models.base import ModelError, Prediction, from_scores

_NUMERIC = {
    "tensor(float)": np.float32,
    "tensor(double)": np.float64,
    "tensor(int64)": np.int64,
    "tensor(int32)": np.int32,
}


def _session(path: Path) -> Any:
    try:
        import onnxruntime as ort
    except ImportError as exc:  # pragma: no cover - onnxruntime is a dependency
        raise ModelError("onnxruntime is not installed", hint="pip install 'shoal[models]'") from exc
    opts = ort.SessionOptions()
    # Spark runs one task per core: one thread per session keeps the cores for the tasks.
    opts.intra_op_num_threads = 1
    opts.inter_op_num_threads = 1
    try:
        return ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
    except Exception as exc:  # noqa: BLE001 - ONNX Runtime's errors are untyped (Fail, InvalidGraph, ...): all mean unloadable
        reason = str(exc).splitlines()[0]
        hint = None
        if "locale" in reason:  # StringNormalizer (lower-casing text) needs a generated locale
            hint = "generate the locale the model names, e.g. apt install locales && locale-gen en_US.UTF-8"
        raise ModelError(f"{path.name} is not a loadable ONNX model: {reason[:300]}", hint=hint) from None


def inspect(path: Path, options: dict[str, Any]) -> dict[str, Any]:
    sess = _session(path)
    inputs = [{"name": i.name, "type": i.type, "shape": [str(d) for d in i.shape]} for i in sess.get_inputs()]
    outputs = [{"name": o.name, "type": o.type, "shape": [str(d) for d in o.shape]} for o in sess.get_outputs()]
    first = inputs[0]["type"]
    if first != "tensor(string)" and first not in _NUMERIC:
        raise ModelError(f"{path.name}: input {inputs[0]['name']} has type {first}; Shoal feeds strings or numbers")
    meta = sess.get_modelmeta()
    return {
        "inputs": inputs,
        "outputs": outputs,
        "input_kind": "text" if first == "tensor(string)" else "features",
        "producer": meta.producer_name,
        "labels": options.get("labels") or [],
    }


class OnnxPredictor:
    def __init__(self, path: Path, info: dict[str, Any]) -> None:
        self.sess = _session(path)
        self.info = info
        self.input = self.sess.get_inputs()[0]
        self.labels = [str(x) for x in info.get("labels") or []]

    def _feed(self, inputs: list[Any]) -> np.ndarray:
        if self.input.type == "tensor(string)":
            arr = np.array([str(x) for x in inputs], dtype=object)
            # Text pipelines take [N, 1]; a model declaring one dimension takes [N].
            return arr.reshape(-1, 1) if len(self.input.shape) == 2 else arr
        try:
            return np.asarray(inputs, dtype=_NUMERIC[self.input.type])
        except (TypeError, ValueError) as exc:
            raise ModelError(f"model input {self.input.name} needs numeric rows: {exc}") from None

    def predict(self, inputs: list[Any]) -> list[Prediction]:
        if not inputs:
            return []
        outs = self.sess.run(None, {self.input.name: self._feed(inputs)})
        names = [o.name for o in self.sess.get_outputs()]
        label_out = probs = None
        extra: dict[str, Any] = {}
        for name, value in zip(names, outs, strict=True):
            if isinstance(value, list) and value and isinstance(value[0], dict):
                probs = [{str(k): float(v) for k, v in d.items()} for d in value]
            elif isinstance(value, np.ndarray) and value.ndim == 1 and label_out is None:
                label_out = value
            elif isinstance(value, np.ndarray) and value.ndim == 2 and value.dtype.kind == "f" and probs is None:
                names_ = self.labels if len(self.labels) == value.shape[1] else [str(i) for i in range(value.shape[1])]
                probs = [dict(zip(names_, map(float, row), strict=True)) for row in value]
            else:
                extra[name] = value
        result = []
        for i in range(len(inputs)):
            output = {k: _jsonable(v[i]) for k, v in extra.items() if hasattr(v, "__len__") and len(v) == len(inputs)}
            if probs is not None:
                pred = from_scores(probs[i], output)
                if label_out is not None:
                    pred.label = self._label(label_out[i])
                    pred.score = pred.scores.get(pred.label, pred.score)
            elif label_out is not None:
                if label_out.dtype.kind == "f":  # a regressor: the number is the answer
                    pred = Prediction(score=float(label_out[i]), output=output)
                else:
                    pred = Prediction(label=self._label(label_out[i]), output=output)
            else:
                pred = Prediction(output=output)
            result.append(pred)
        return result

    def _label(self, value: Any) -> str:
        value = value.item() if isinstance(value, np.generic) else value
        if isinstance(value, int) and 0 <= value < len(self.labels):
            return self.labels[value]
        return value.decode() if isinstance(value, bytes) else str(value)


def _jsonable(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    return value


def load(path: Path, info: dict[str, Any]) -> OnnxPredictor:
    return OnnxPredictor(path, info)
