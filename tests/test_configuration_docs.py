"""docs/configuration.md covers every section and every key of the settings (read from the
settings classes themselves, so a new key without documentation fails here)."""

from __future__ import annotations

import re
from pathlib import Path

from pydantic import BaseModel

from shoal.config import LlmEndpoint, Settings

DOC = Path(__file__).resolve().parents[1] / "docs" / "configuration.md"


def _sections(model: type[BaseModel], prefix: str = ""):
    keys = []
    for name, field in model.model_fields.items():
        kind = field.annotation
        if isinstance(kind, type) and issubclass(kind, BaseModel):
            section = f"{prefix}.{name}" if prefix else name
            yield from _sections(kind, section)
        else:
            keys.append(name)
    yield prefix, keys


def test_every_section_and_key_is_documented() -> None:
    doc = DOC.read_text(encoding="utf-8")
    sections = dict(_sections(Settings))
    sections["llm.endpoints.NAME"] = list(LlmEndpoint.model_fields)
    assert len(sections) >= 16
    missing = [f"[{s}]" for s in sections if s and f"[{s.replace('.NAME', '')}" not in doc]
    missing += [
        f"[{s}] {k}" if s else k for s, keys in sections.items() for k in keys if not re.search(rf"\b{k}\b", doc)
    ]
    assert not missing, "docs/configuration.md does not cover: " + ", ".join(missing)
