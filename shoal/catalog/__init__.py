"""Discovery over the metadata layer: find objects by facts and words, show one object whole.

The implementation is in `shoal.catalog.objects`; this package re-exports its public names."""

from shoal.catalog.objects import (
    LIST_COLUMNS,
    ORDERS,
    list_objects,
    object_paths,
    resolve_object_id,
    show_object,
)

__all__ = [
    "LIST_COLUMNS",
    "ORDERS",
    "list_objects",
    "object_paths",
    "resolve_object_id",
    "show_object",
]
