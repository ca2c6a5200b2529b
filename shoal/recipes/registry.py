"""Every recipe operation: the modules that define operations, listed once.

Each module registers its operations in `OPERATIONS` (with `@operation`) when it is imported;
importing them here keeps the topic modules independent of each other (each builds only on
`shoal.recipes.operations`). Read `OPERATIONS` from here, not from a module that defines only
some of them.
"""

from __future__ import annotations

from types import ModuleType

from shoal.recipes.operations import OPERATIONS
from shoal.recipes.ops import (
    columns,
    combining,
    dates,
    derived,
    filters,
    functions,
    missing,
    nesting,
    privacy,
    reshape,
    text,
)

# The modules whose operations make up the recipe format.
MODULES: tuple[ModuleType, ...] = (
    columns,
    dates,
    text,
    missing,
    filters,
    derived,
    combining,
    privacy,
    nesting,
    reshape,
    functions,
)

__all__ = ["MODULES", "OPERATIONS"]
