"""Extraction: route each raw object to its extractor chain and write the results to the lake.

Public API: `run_extract` (the Spark job), `Extractor` and friends (to write plugins), `Router`.
"""

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
