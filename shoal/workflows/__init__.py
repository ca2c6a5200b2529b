"""Workflows: Amazon States Language state machines run by Shoal's own interpreter on Spark.

Public API:
- `register(settings, path, name=None)` and `load_machine(settings, ref)` (a file or a name)
- `run(settings, ref, input_)`, `resume(settings, execution_id)`
- `Store(settings)` for workflows, executions and their history
- `graph(...)` in `shoal.workflows.graph`, schedules in `shoal.workflows.schedule`
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from shoal.config import Settings
from shoal.workflows import definition, tasks
from shoal.workflows.definition import StateMachine
from shoal.workflows.errors import DefinitionError, StatesError, WorkflowError
from shoal.workflows.interpreter import Interpreter
from shoal.workflows.store import ExecutionRecord, Store

__all__ = [
    "DefinitionError",
    "ExecutionRecord",
    "StateMachine",
    "StatesError",
    "Store",
    "WorkflowError",
    "load_machine",
    "register",
    "resume",
    "run",
    "validate",
]


def validate(path: str | Path, *, name: str | None = None) -> StateMachine:
    machine = definition.load(path, name=name, resource_check=tasks.unsupported)
    # Paths in a definition file are relative to its folder, fixed now so the stored
    # definition runs the same from the scheduler, `resume` or any other folder.
    tasks.anchor_paths(machine.definition, Path(path).expanduser().resolve().parent)
    return machine


def register(settings: Settings, path: str | Path, *, name: str | None = None) -> tuple[StateMachine, int]:
    machine = validate(path, name=name)
    version = Store(settings).register(machine.name, machine.definition, str(Path(path).resolve()))
    return machine, version


def load_machine(settings: Settings, ref: str) -> StateMachine:
    """A definition file (validated and registered under its file name) or a registered name."""
    if Path(ref).is_file():
        return register(settings, ref)[0]
    stored = Store(settings).workflow(ref)
    if stored is None:
        raise WorkflowError(
            f"no workflow named {ref!r} and no such file", hint="list workflows with `shoal workflow list`"
        )
    return definition.build(stored["definition"], name=ref, source=stored["source"], resource_check=tasks.unsupported)


def run(
    settings: Settings,
    ref: str | StateMachine,
    input_: Any = None,
    *,
    name: str | None = None,
    trigger: Any = None,
    notify_on_failure: str | None = None,
    execution_id: str | None = None,
    say: Callable[[str], None] = lambda _m: None,
) -> ExecutionRecord:
    machine = ref if isinstance(ref, StateMachine) else load_machine(settings, ref)
    interpreter = Interpreter(settings, tasks.resolve, say=say, run_workflow=run)
    record = interpreter.start(
        machine, {} if input_ is None else input_, name=name, trigger=trigger, execution_id=execution_id
    )
    _notify_failure(settings, record, notify_on_failure)
    return record


def resume(
    settings: Settings,
    execution_id: str,
    *,
    notify_on_failure: str | None = None,
    say: Callable[[str], None] = lambda _m: None,
) -> ExecutionRecord:
    record = Interpreter(settings, tasks.resolve, say=say, run_workflow=run).resume(execution_id)
    _notify_failure(settings, record, notify_on_failure)
    return record


def _notify_failure(settings: Settings, record: ExecutionRecord, topic: str | None) -> None:
    topic = topic or settings.workflows.failure_topic
    if not topic or record.status not in ("FAILED", "TIMED_OUT"):
        return
    from shoal.notify import Notifier

    message = {
        "workflow": record.workflow,
        "execution_id": record.id,
        "status": record.status,
        "error": record.error,
        "cause": record.cause,
        "next": f"shoal workflow history {record.id}; shoal workflow resume {record.id}",
    }
    store = Store(settings)
    try:
        result = Notifier(settings).publish(
            topic, message, subject=f"Shoal: workflow {record.workflow} {record.status.lower()}"
        )
        store.event(record.id, "FailureNotified", topic=topic, delivered=result.delivered, failed=result.failed)
    except Exception as exc:  # noqa: BLE001 - a broken topic must not hide the execution's own failure
        store.event(record.id, "FailureNotificationFailed", topic=topic, cause=str(exc))
