"""Ingest: copy files into the raw zone of the warehouse and record them in `shoal.objects`.

The implementation is in `shoal.ingest.raw`; this package re-exports its public names, imported on
first use: the extractors import `shoal.ingest.sniff`, and must not import pyspark with it (`raw` does).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from shoal.ingest.raw import (
        IngestedFile,
        IngestResult,
        append_objects,
        default_source_name,
        ensure_object_sources,
        ingest,
        object_paths,
        parse_tags,
        paths_by_object,
        raw_zone,
        record_paths,
    )

__all__ = [
    "IngestResult",
    "IngestedFile",
    "append_objects",
    "default_source_name",
    "ensure_object_sources",
    "ingest",
    "object_paths",
    "parse_tags",
    "paths_by_object",
    "raw_zone",
    "record_paths",
]


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module 'shoal.ingest' has no attribute {name!r}")
    from shoal.ingest import raw

    return getattr(raw, name)
