"""Ingest: copy files into the raw zone of the warehouse and record them in `shoal.objects`.

The implementation is in `shoal.ingest.raw`; this package re-exports its public names."""

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
