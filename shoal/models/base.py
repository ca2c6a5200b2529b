"""What every model kind provides: inspection at registration, prediction on executors."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

from shoal.exceptions import ShoalError


class ModelError(ShoalError):
    """A model cannot be registered, found or run."""


@dataclass
class Prediction:
    """One input's result. `label`/`score` for classifiers; `output` holds anything else."""

    label: str | None = None
    score: float | None = None
    scores: dict[str, float] = field(default_factory=dict)
    output: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class Predictor(Protocol):
    def predict(self, inputs: list[Any]) -> list[Prediction]: ...


def from_scores(scores: dict[str, float], output: dict[str, Any] | None = None) -> Prediction:
    """The best-scoring class as the label (ties: the first name in order)."""
    clean = {str(k): float(v) for k, v in scores.items() if v is not None and not math.isnan(float(v))}
    if not clean:
        return Prediction(output=output or {})
    label = max(sorted(clean), key=lambda k: clean[k])
    return Prediction(label=label, score=clean[label], scores=clean, output=output or {})


def normalise(value: Any) -> Prediction:
    """An entry point's answer for one input: a Prediction, a dict, or a plain label/number."""
    if isinstance(value, Prediction):
        return value
    if isinstance(value, dict):
        known = {k: value[k] for k in ("label", "score", "scores", "output") if k in value}
        extra = {k: v for k, v in value.items() if k not in known}
        scores = {str(k): float(v) for k, v in (known.get("scores") or {}).items()}
        if "label" not in known and scores:
            pred = from_scores(scores)
        else:
            label = known.get("label")
            score = known.get("score")
            pred = Prediction(
                label=None if label is None else str(label),
                score=None if score is None else float(score),
                scores=scores,
            )
        pred.output = {**(known.get("output") or {}), **extra}
        return pred
    if isinstance(value, bool | int | float) and not isinstance(value, bool):
        return Prediction(score=float(value))
    return Prediction(label=None if value is None else str(value))
