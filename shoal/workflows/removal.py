"""Deleting a registered workflow (`shoal workflow delete`): refused while something still needs it."""

from __future__ import annotations

from sqlalchemy import delete

from shoal.config import Settings
from shoal.workflows.errors import WorkflowError
from shoal.workflows.schedule import Schedules
from shoal.workflows.store import RUNNING, Store, workflows


def delete_workflow(settings: Settings, name: str) -> None:
    """Delete a workflow's stored definition. Its executions and their history stay readable
    (`shoal workflow executions`, `history`). Refused while a schedule fires it or an execution runs."""
    store = Store(settings)
    if store.workflow(name) is None:
        raise WorkflowError(f"no workflow named {name!r}", hint="list workflows with `shoal workflow list`")
    scheduled = sorted(s["name"] for s in Schedules(settings).list() if s["workflow"] == name)
    if scheduled:
        raise WorkflowError(
            f"workflow {name!r} is fired by schedule(s) {', '.join(scheduled)}",
            hint="delete them first: shoal schedule delete NAME",
        )
    running = store.list_executions(name, RUNNING, limit=1)
    if running:
        raise WorkflowError(
            f"workflow {name!r} has a running execution ({running[0].id})",
            hint=f"wait for it or stop it: shoal workflow stop {running[0].id}",
        )
    with store.engine.begin() as conn:
        conn.execute(delete(workflows).where(workflows.c.name == name))
