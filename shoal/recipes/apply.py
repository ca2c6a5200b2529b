"""Apply a recipe's steps, in order, to a DataFrame, honouring each step's ConditionExpressions."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from shoal.recipes.operations import Operation, RecipeError, StepContext, col
from shoal.recipes.ops.filters import condition
from shoal.recipes.registry import OPERATIONS

# How a step's ConditionExpressions apply (rows matching all of them are "selected"):
#   "mask":   the step changes or adds values in selected rows only; other rows keep theirs
#             (new columns are null there).
#   "filter": the step removes rows, and only among the selected rows.
#   "self":   the operation reads the conditions itself (REMOVE_VALUES, KEEP_VALUES).
# An operation not listed refuses conditions: it renames, drops, reorders or reshapes whole
# columns or tables, where "only in some rows" has no meaning.
_FILTER = {"REMOVE_MISSING", "REMOVE_DUPLICATES", "DELETE_DUPLICATE_ROWS", "FILTER"}
_SELF = {"REMOVE_VALUES", "KEEP_VALUES"}
_REFUSE = {
    "RENAME",
    "DELETE",
    "CHANGE_DATA_TYPE",
    "MOVE_TO_START",
    "MOVE_TO_END",
    "MOVE_TO_INDEX",
    "MOVE_AFTER",
    "MOVE_BEFORE",
    "SPLIT_COLUMN_SINGLE_DELIMITER",
    "SPLIT_COLUMN_MULTIPLE_DELIMITER",
    "SPLIT_COLUMN_FROM_START",
    "SPLIT_COLUMN_FROM_END",
    "SPLIT_COLUMN_BETWEEN_POSITIONS",
    "SPLIT_COLUMN_WITH_INTERVALS",
    "JOIN",
    "UNION",
    "GROUP_BY",
    "PIVOT",
    "UNPIVOT",
    "TRANSPOSE",
    "SORT",
    "UNNEST_ARRAY",
}


def condition_mode(op: str) -> str | None:
    if op in _SELF:
        return "self"
    if op in _FILTER:
        return "filter"
    if op in _REFUSE or op not in OPERATIONS:
        return None
    return "mask"


def step_parts(step: Any) -> tuple[Any, dict[str, Any], list[dict[str, Any]]] | None:
    """(operation, parameters, conditions) of a step written with the format's capitalised
    keys or with the lower-case keys some exports use; None when it has no action."""
    if not isinstance(step, dict):
        return None
    action = step.get("Action") or step.get("RecipeAction") or step.get("action") or step.get("recipeAction")
    if not isinstance(action, dict):
        return None
    op = action.get("Operation", action.get("operation"))
    if op is None:
        return None
    params = action.get("Parameters") or action.get("parameters") or {}
    conditions = step.get("ConditionExpressions") or step.get("conditionExpressions") or []
    return op, dict(params), list(conditions)


def apply_recipe(df: DataFrame, steps: list[dict[str, Any]], load: Callable[[Any], DataFrame]) -> DataFrame:
    for i, step in enumerate(steps, 1):
        parts = step_parts(step)
        if parts is None:
            raise RecipeError(f"step {i}: expected {{'Action': {{'Operation': ..., 'Parameters': {{...}}}}}}")
        raw_op, params, conditions = parts
        op = str(raw_op).upper()
        fn = OPERATIONS.get(op)
        if fn is None:
            raise RecipeError(
                f"step {i}: unknown operation {raw_op!r}",
                hint=f"supported operations: {', '.join(sorted(OPERATIONS))}",
            )
        ctx = StepContext(step=i, operation=op, load=load)
        if not conditions:
            df = fn(df, params, ctx)
            continue
        mode = condition_mode(op)
        if mode is None:
            raise RecipeError(
                f"step {i} ({op}): ConditionExpressions are not supported for this operation "
                "(it changes whole columns or the table's shape, not values in some rows)",
                hint="remove the conditions, or filter rows with KEEP_VALUES / REMOVE_VALUES in a step of their own",
            )
        if mode == "self":
            params["__conditions__"] = conditions
            df = fn(df, params, ctx)
        elif mode == "filter":
            df = _filtered(df, fn, params, ctx, conditions)
        else:
            df = _masked(df, fn, params, ctx, conditions)
    return df


def _selected(df: DataFrame, conditions: list[dict[str, Any]], ctx: StepContext) -> Column:
    out = None
    for c in conditions:
        if not isinstance(c, dict):
            raise RecipeError(f"step {ctx.step} ({ctx.operation}): each condition must be an object")
        test = condition(df, c, ctx)
        out = test if out is None else out & test
    assert out is not None  # callers pass at least one condition
    return out


_MASK = "__shoal_condition__"


def _masked(
    df: DataFrame, fn: Operation, params: dict[str, Any], ctx: StepContext, conditions: list[dict[str, Any]]
) -> DataFrame:
    """Run the step on every row, then keep its result only where the conditions hold."""
    keep = {c: f"__shoal_before_{n}__" for n, c in enumerate(df.columns)}
    staged = df.withColumn(_MASK, _selected(df, conditions, ctx))
    for c, hidden in keep.items():
        staged = staged.withColumn(hidden, col(c))
    after = fn(staged, params, ctx)
    hidden_cols = {_MASK, *keep.values()}
    missing = [c for c in [_MASK, *keep.values(), *df.columns] if c not in after.columns]
    if missing:
        # The step dropped columns: unselected rows would lose their values.
        raise RecipeError(
            f"step {ctx.step} ({ctx.operation}): ConditionExpressions are not supported with these "
            "parameters (the step removes columns, so rows outside the condition would lose data)",
            hint="remove the conditions, or keep the source columns",
        )
    selected = F.col(_MASK)
    out = []
    for c in after.columns:
        if c in hidden_cols:
            continue
        if c in keep and _unchanged(staged, after, c):
            out.append(col(c))
        elif c in keep:
            out.append(F.when(selected, col(c)).otherwise(col(keep[c])).alias(c))
        else:
            out.append(F.when(selected, col(c)).alias(c))
    return after.select(*out)


def _unchanged(before: DataFrame, after: DataFrame, name: str) -> bool:
    """True when the step passed the column through untouched (same attribute id), so no
    per-row choice is needed for it; any doubt answers False, which is always correct."""
    quoted = "`" + name.replace("`", "``") + "`"
    try:
        return before[quoted]._jc.expr().exprId().id() == after[quoted]._jc.expr().exprId().id()
    except Exception:  # noqa: BLE001 - a column without an expression id (a py4j error) counts as changed
        return False


def _filtered(
    df: DataFrame, fn: Operation, params: dict[str, Any], ctx: StepContext, conditions: list[dict[str, Any]]
) -> DataFrame:
    """Apply a row-removing step to the selected rows only; the other rows all stay."""
    order = "__shoal_row_order__"
    staged = df.withColumn(order, F.monotonically_increasing_id())
    selected = _selected(df, conditions, ctx)
    chosen = fn(staged.where(selected), params, ctx)
    # Put the two parts back in the order the rows had.
    return staged.where(~selected).unionByName(chosen).orderBy(order).drop(order)
