"""Enrichment jobs: enriched versions of extracted data, linked in the metadata layer.

The implementation is in `shoal.enrich.job`; this package re-exports its public names."""

from shoal.enrich.job import (
    DEFAULT_CLASSES,
    LLM_SCHEMA,
    MODEL_SCHEMA,
    TABLES,
    VERSION,
    EnrichError,
    EnrichmentJob,
    EnrichResult,
    Step,
    classify,
    entity_key,
    load_job,
    redact,
    run_job,
    step_table,
)

__all__ = [
    "DEFAULT_CLASSES",
    "EnrichError",
    "EnrichResult",
    "EnrichmentJob",
    "LLM_SCHEMA",
    "MODEL_SCHEMA",
    "Step",
    "TABLES",
    "VERSION",
    "classify",
    "entity_key",
    "load_job",
    "redact",
    "run_job",
    "step_table",
]
