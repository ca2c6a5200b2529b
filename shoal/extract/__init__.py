"""Extraction: route each raw object to its extractor chain and write the results to the lake.

Public API: `run_extract` (the Spark job), `Extractor` and friends (to write plugins), `Router`.
The names are imported on first use: `shoal.extract_file` runs these extractors without Spark, and
importing this package must not import pyspark (`run_extract`'s module does).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from shoal.extract.base import (
        Child,
        Context,
        ExtractedTable,
        Extraction,
        ExtractionRefused,
        ExtractionSkipped,
        Extractor,
        FormField,
        Link,
        TextPart,
    )
    from shoal.extract.job import ExtractResult, run_extract
    from shoal.extract.router import Router

__all__ = [
    "Child",
    "Context",
    "ExtractResult",
    "ExtractedTable",
    "Extraction",
    "ExtractionRefused",
    "ExtractionSkipped",
    "Extractor",
    "FormField",
    "Link",
    "Router",
    "TextPart",
    "run_extract",
]

_LAZY = {name: "shoal.extract.base" for name in __all__}
_LAZY.update(ExtractResult="shoal.extract.job", run_extract="shoal.extract.job", Router="shoal.extract.router")


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'shoal.extract' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
