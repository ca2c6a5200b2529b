"""Python entry points: `package.module:attr`, imported where the work runs.

`attr` is a function `predict(inputs) -> list`, a class (instantiated once per process)
or an object with a `predict` method. Each answer may be a dict with label/score/scores/
output, a label, or a number. The code is not copied: it must be installed on every
machine; the installed distribution's version is recorded with the model.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import re
from typing import Any

from shoal.models.base import ModelError, Prediction, normalise

PATTERN = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")


def _resolve(ref: str) -> Any:
    if not PATTERN.match(ref):
        raise ModelError(f"entry point {ref!r} must look like package.module:attribute")
    module_name, attr = ref.split(":", 1)
    try:
        obj: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise ModelError(f"cannot import {module_name} for entry point {ref}: {exc}") from None
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ModelError(f"module {module_name} has no attribute {attr}")
        obj = getattr(obj, part)
    return obj


def inspect(ref: str, options: dict[str, Any]) -> dict[str, Any]:
    target = _resolve(ref)
    if not callable(target) and not hasattr(target, "predict"):
        raise ModelError(f"entry point {ref} is neither callable nor has predict()")
    top = ref.split(".", 1)[0].split(":", 1)[0]
    dists = importlib.metadata.packages_distributions().get(top, [])
    version = ""
    if dists:
        try:
            version = importlib.metadata.version(dists[0])
        except importlib.metadata.PackageNotFoundError:
            version = ""
    return {"entry_point": ref, "distribution": dists[0] if dists else "", "distribution_version": version}


class EntryPointPredictor:
    def __init__(self, ref: str) -> None:
        target = _resolve(ref)
        if isinstance(target, type):
            target = target()
        self.fn = target.predict if hasattr(target, "predict") else target
        self.ref = ref

    def predict(self, inputs: list[Any]) -> list[Prediction]:
        answers = list(self.fn(list(inputs)))
        if len(answers) != len(inputs):
            raise ModelError(f"entry point {self.ref} returned {len(answers)} answers for {len(inputs)} inputs")
        return [normalise(a) for a in answers]


def load(ref: str, info: dict[str, Any]) -> EntryPointPredictor:
    return EntryPointPredictor(ref)
