"""CDC upserts: change files (op I/U/D) merged into Iceberg tables exactly once.

Public API: `apply_changes(spark, settings, source, ApplyOptions(...)) -> ApplyResult`, and
`file_status(spark, settings, table, source)` for the files applied and pending. Like every
library entry point, they take the caller's Spark session and settings first.
"""

from shoal.cdc.apply import ApplyOptions, ApplyResult, apply_changes, file_status

__all__ = ["ApplyOptions", "ApplyResult", "apply_changes", "file_status"]
