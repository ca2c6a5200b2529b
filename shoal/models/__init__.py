"""Custom models: a registry of versioned models and the code that runs them on Spark.

A model is registered once (`shoal model register`) with a name and a version. Its file is
copied into the warehouse (`<warehouse>/models/<name>/<version>/`), its SHA-256 recorded,
and from then on it is used by reference (`NAME` for the newest version, `NAME@VERSION`
for one). Four kinds, one module each, picked by the record's `kind`:

- `onnx`: an ONNX file run with ONNX Runtime (text models take a string tensor);
- `sklearn`: a scikit-learn estimator in skops' format, loaded without pickle's code
  execution; types beyond skops' safe list must be trusted by name at registration;
- `spacy`: a spaCy pipeline (a folder or an installed package), archived;
- `entrypoint`: a Python callable `module:attr` importable where Spark runs.

Every kind answers `predict(inputs) -> list[Prediction]`; enrichment jobs (`type: model`)
and `shoal model predict` store predictions with the model's name and version.
"""

from __future__ import annotations

from shoal.models.base import ModelError, Prediction, Predictor
from shoal.models.registry import (
    KINDS,
    ModelVersion,
    detect_kind,
    get_model,
    list_models,
    load_predictor,
    register_model,
)

__all__ = [
    "KINDS",
    "ModelError",
    "ModelVersion",
    "Prediction",
    "Predictor",
    "detect_kind",
    "get_model",
    "list_models",
    "load_predictor",
    "register_model",
]
