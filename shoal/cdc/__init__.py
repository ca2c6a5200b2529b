"""CDC upserts: change files (op I/U/D) merged into Iceberg tables exactly once.

Public API: `apply_changes(settings, source, ApplyOptions(...)) -> ApplyResult`.
"""

from shoal.cdc.apply import ApplyOptions, ApplyResult, apply_changes

__all__ = ["ApplyOptions", "ApplyResult", "apply_changes"]
