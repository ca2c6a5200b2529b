"""Row-level helpers that run on executors, so they live in `shoal` (importable there), not in awsglue."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


class DynamicRecord(dict):
    """A record as Glue's `filter`/`map` functions see it: fields by name (`rec["age"]`)."""


def record_filter(f: Callable[[DynamicRecord], Any]) -> Callable[[Any], bool]:
    def keep(row: Any) -> bool:
        return bool(f(DynamicRecord(row.asDict(recursive=True))))

    return keep
