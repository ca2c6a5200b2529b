"""spaCy pipelines: a folder written by `nlp.to_disk` or an installed package, archived.

A prediction carries the pipeline's entities, and its text categories when it has a
`textcat` component (the best category is the label).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

from shoal.models.base import ModelError, Prediction, from_scores


def resolve(ref: str) -> Path:
    """A folder, or an installed pipeline package's data folder (e.g. en_core_web_sm)."""
    path = Path(ref)
    if path.is_dir():
        return path
    spec = importlib.util.find_spec(ref) if ref.isidentifier() else None
    if spec is None or not spec.submodule_search_locations:
        raise ModelError(f"{ref} is neither a folder nor an installed spaCy pipeline package")
    pkg = Path(next(iter(spec.submodule_search_locations)))
    for candidate in sorted(pkg.iterdir()):
        if candidate.is_dir() and (candidate / "config.cfg").is_file():
            return candidate
    raise ModelError(f"package {ref} holds no spaCy pipeline folder (config.cfg)")


def _load(path: Path) -> Any:
    import spacy

    try:
        return spacy.load(path)
    except Exception as exc:  # noqa: BLE001 - spaCy raises many kinds for a broken pipeline: all mean unloadable
        raise ModelError(f"{path.name} is not a loadable spaCy pipeline: {str(exc).splitlines()[0][:300]}") from None


def inspect(path: Path, options: dict[str, Any]) -> dict[str, Any]:
    nlp = _load(path)
    return {
        "pipeline": list(nlp.pipe_names),
        "spacy_version": nlp.meta.get("spacy_version", ""),
        "pipeline_name": f"{nlp.meta.get('lang', '')}_{nlp.meta.get('name', '')}",
        "pipeline_version": nlp.meta.get("version", ""),
        "input_kind": "text",
    }


class SpacyPredictor:
    def __init__(self, path: Path, info: dict[str, Any]) -> None:
        self.nlp = _load(path)
        self.max_chars = int(info.get("max_chars") or 100_000)

    def predict(self, inputs: list[Any]) -> list[Prediction]:
        out = []
        for doc in self.nlp.pipe(str(x)[: self.max_chars] for x in inputs):
            ents = [
                {"text": e.text, "label": e.label_, "start_char": e.start_char, "end_char": e.end_char}
                for e in doc.ents
            ]
            out.append(from_scores(dict(doc.cats), {"entities": ents}))
        return out


def load(path: Path, info: dict[str, Any]) -> SpacyPredictor:
    return SpacyPredictor(path, info)
