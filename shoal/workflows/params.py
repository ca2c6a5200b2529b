"""Reading a task's parameters: every task resource (native or cloud ARN) checks them alike."""

from __future__ import annotations

from typing import Any

from shoal.workflows.errors import StatesError


def task_params(params: Any) -> dict[str, Any]:
    if params is None:
        return {}
    if not isinstance(params, dict):
        raise StatesError("States.Runtime", f"task parameters must be an object, got {type(params).__name__}")
    return params


def need(params: dict[str, Any], *keys: str) -> Any:
    """The first of `keys` that has a value (the cloud's names and Shoal's own are both accepted)."""
    for key in keys:
        if params.get(key) not in (None, ""):
            return params[key]
    raise StatesError("States.Runtime", f"the task needs parameter {' or '.join(keys)}")
