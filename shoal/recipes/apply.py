"""Apply a recipe's steps, in order, to a DataFrame."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pyspark.sql import DataFrame

from shoal.recipes.operations import OPERATIONS, RecipeError, StepContext


def apply_recipe(df: DataFrame, steps: list[dict[str, Any]], load: Callable[[Any], DataFrame]) -> DataFrame:
    for i, step in enumerate(steps, 1):
        action = step.get("Action") or step.get("RecipeAction") or {}
        op = str(action.get("Operation", "")).upper()
        fn = OPERATIONS.get(op)
        if fn is None:
            raise RecipeError(
                f"step {i}: unknown operation {action.get('Operation')!r}",
                hint=f"supported operations: {', '.join(sorted(OPERATIONS))}",
            )
        params = dict(action.get("Parameters") or {})
        conditions = step.get("ConditionExpressions")
        if conditions:
            params["__conditions__"] = conditions
        df = fn(df, params, StepContext(step=i, operation=op, load=load))
    return df
