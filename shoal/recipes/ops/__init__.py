"""Recipe operations, one module per topic; importing a module registers its operations
(`shoal.recipes.registry` imports them all). Each module builds only on `shoal.recipes.operations`.

Everything is built from Spark's own column functions (no per-row Python). Operations that
depend on row order (last valid value, duplicates seen "earlier", rolling windows) follow
the DataFrame's current order, as set by the input or by a SORT step.
"""
