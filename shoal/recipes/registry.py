"""Every recipe operation: the modules that define operations, listed once.

Each module registers its operations in `OPERATIONS` (with `@operation`) when it is imported;
importing them here, rather than one from the bottom of the other, keeps the modules in one
direction (`extended` builds on `operations`). Read `OPERATIONS` from here, not from a module
that defines only some of them.
"""

from __future__ import annotations

from types import ModuleType

from shoal.recipes import extended, operations
from shoal.recipes.operations import OPERATIONS

# The modules whose operations make up the recipe format.
MODULES: tuple[ModuleType, ...] = (operations, extended)

__all__ = ["MODULES", "OPERATIONS"]
