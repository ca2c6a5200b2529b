"""Stopping an execution from another thread or process (Step Functions' StopExecution)."""

from __future__ import annotations

import json
import threading
import time
import uuid
from typing import Any

import pytest

from shoal import workflows
from shoal.workflows import definition, tasks
from shoal.workflows.errors import WorkflowError


def _machine(states: dict[str, Any]) -> workflows.StateMachine:
    d = {"StartAt": next(iter(states)), "States": states}
    return definition.build(d, name=f"stop{uuid.uuid4().hex[:8]}", resource_check=tasks.unsupported)


def _wait_for_execution(store: workflows.Store, machine: str, timeout: float = 20) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = store.list_executions(workflow=machine, limit=1)
        if found:
            return found[0].id
        time.sleep(0.05)
    raise AssertionError("the execution never started")


def test_a_running_execution_stops_within_a_poll_and_records_aborted(settings) -> None:
    machine = _machine(
        {
            "Long": {"Type": "Wait", "Seconds": 120, "Next": "Never"},
            "Never": {"Type": "Pass", "Result": "reached", "End": True},
        }
    )
    result: dict[str, workflows.ExecutionRecord] = {}
    worker = threading.Thread(target=lambda: result.update(rec=workflows.run(settings, machine, {})), daemon=True)
    started = time.monotonic()
    worker.start()
    store = workflows.Store(settings)
    execution_id = _wait_for_execution(store, machine.name)
    assert store.request_stop(execution_id, by="ops", error="Ops.Cancelled", cause="wrong input") == "RUNNING"
    worker.join(30)
    assert not worker.is_alive(), "the stop request was not honoured"
    assert time.monotonic() - started < 30  # not the 120 s wait
    rec = result["rec"]
    assert rec.status == "ABORTED" and rec.error == "Ops.Cancelled" and rec.cause == "wrong input"
    types = [e["type"] for e in store.history(execution_id)]
    assert types[-1] == "ExecutionAborted" and "PassStateEntered" not in types
    # Stopping it again is refused with the reason.
    with pytest.raises(WorkflowError, match="not RUNNING"):
        store.request_stop(execution_id, by="ops")
    # Resuming a stopped run is allowed, and the old request does not stop it again.
    store.claim(execution_id)
    assert store.stop_request(execution_id) is None


def test_an_execution_whose_process_died_is_aborted_at_once(settings) -> None:
    store = workflows.Store(settings)
    machine = _machine({"P": {"Type": "Pass", "End": True}})
    execution_id = f"{machine.name}-dead"
    store.create_execution(execution_id, machine.name, None, machine.definition, {}, None)
    # The owner is a process that no longer exists on this host.
    from sqlalchemy import update

    from shoal.workflows.store import executions

    with store.engine.begin() as conn:
        conn.execute(update(executions).where(executions.c.id == execution_id).values(pid=2**22 + 12345))
    assert store.request_stop(execution_id, by="ops") == "ABORTED"
    rec = store.execution(execution_id)
    assert rec.status == "ABORTED" and rec.cause == "stopped by ops"


def test_cli_stop(settings, capsys, monkeypatch, cli_env) -> None:
    from helpers import run_cli

    machine = _machine({"Long": {"Type": "Wait", "Seconds": 120, "End": True}})
    worker = threading.Thread(target=lambda: workflows.run(settings, machine, {}), daemon=True)
    worker.start()
    execution_id = _wait_for_execution(workflows.Store(settings), machine.name)
    code, out, err = run_cli(
        ["workflow", "stop", execution_id[:-2], "--cause", "cli test", "--json"], capsys, monkeypatch
    )
    assert code == 0, err
    data = json.loads(out)
    assert data["status"] == "ABORTED" and data["cause"] == "cli test" and data["execution_id"] == execution_id
    worker.join(10)
    code, out, err = run_cli(["workflow", "stop", execution_id, "--json"], capsys, monkeypatch)
    assert code == 1 and "not RUNNING" in (out + err)
