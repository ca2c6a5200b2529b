"""scikit-learn estimators in skops' format (`.skops`): loading runs no pickled code.

skops refuses every type it does not know to be safe. At registration the file's
untrusted types are listed; each must be named with `--trust`, and that list is stored with
the model and passed to every load, so a file swapped later cannot widen it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from shoal.models.base import ModelError, Prediction, from_scores


def _skops() -> Any:
    try:
        import skops.io as sio
    except ImportError as exc:  # pragma: no cover - skops is a dependency
        raise ModelError("skops is not installed", hint="pip install 'shoal[models]'") from exc
    return sio


def inspect(path: Path, options: dict[str, Any]) -> dict[str, Any]:
    sio = _skops()
    try:
        untrusted = sio.get_untrusted_types(file=str(path))
    except Exception as exc:  # noqa: BLE001 - whatever a damaged file makes skops raise means it is not a skops file
        raise ModelError(f"{path.name} is not a skops file: {str(exc).splitlines()[0][:300]}") from None
    trusted = list(options.get("trust") or [])
    missing = sorted(set(untrusted) - set(trusted))
    if missing:
        raise ModelError(
            f"{path.name} contains types skops does not consider safe: {', '.join(missing)}",
            hint="check them, then repeat with --trust TYPE for each",
        )
    model = sio.load(str(path), trusted=trusted)
    if not hasattr(model, "predict"):
        raise ModelError(f"{path.name} holds a {type(model).__name__}, which has no predict()")
    classes = getattr(model, "classes_", None)
    return {
        "estimator": type(model).__name__,
        "trusted": trusted,
        "labels": [str(c) for c in classes] if classes is not None else [],
        "probabilities": hasattr(model, "predict_proba"),
    }


class SklearnPredictor:
    def __init__(self, path: Path, info: dict[str, Any]) -> None:
        self.model = _skops().load(str(path), trusted=list(info.get("trusted") or []))
        self.labels = [str(x) for x in info.get("labels") or []]

    def predict(self, inputs: list[Any]) -> list[Prediction]:
        if not inputs:
            return []
        if hasattr(self.model, "predict_proba") and self.labels:
            probs = self.model.predict_proba(inputs)
            return [from_scores(dict(zip(self.labels, map(float, row), strict=True))) for row in probs]
        out = []
        for value in self.model.predict(inputs):
            value = value.item() if hasattr(value, "item") else value
            out.append(Prediction(score=float(value)) if isinstance(value, float) else Prediction(label=str(value)))
        return out


def load(path: Path, info: dict[str, Any]) -> SklearnPredictor:
    return SklearnPredictor(path, info)
