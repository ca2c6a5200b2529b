"""CDC upserts: change files (op I/U/D) merged into Iceberg tables exactly once.

Public API: `apply_changes(settings, source, ApplyOptions(...)) -> ApplyResult`, and
`file_status(settings, table, source)` for the files applied and pending.
"""

from shoal.cdc.apply import ApplyOptions, ApplyResult, apply_changes, file_status

__all__ = ["ApplyOptions", "ApplyResult", "apply_changes", "file_status"]
