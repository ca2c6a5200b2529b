"""Workflows and their executions: list, show, start, history, stop.

Workflows follow `Governance.workflow_privileges` (SELECT to see, EXECUTE to start and stop), as in
the console and the CLI's `--as`; every call is audited."""

# No `from __future__ import annotations`: FastAPI must see `Who` (local to `router`) as an object.

import contextlib
import json
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any

from fastapi import APIRouter, Body, HTTPException, Query
from pydantic import BaseModel, Field

from shoal.config import Settings
from shoal.exceptions import ShoalError, first_line
from shoal.governance import AuditLog, Governance, Principal
from shoal.governance.grants import OPERATORS

if TYPE_CHECKING:
    from shoal.workflows.store import ExecutionRecord


def _iso(value: Any) -> str | None:
    if value is None:
        return None
    return value.isoformat() + "Z" if hasattr(value, "isoformat") else str(value)


class WorkflowOut(BaseModel):
    name: str
    version: int | None = None
    source: str | None = None
    updated_at: str | None = None
    last_run: str | None = None


class WorkflowDetail(WorkflowOut):
    definition: dict[str, Any]
    privileges: list[str]


class ExecutionOut(BaseModel):
    execution_id: str
    workflow: str
    name: str | None
    status: str
    started_at: str
    stopped_at: str | None
    duration_s: float | None
    error: str | None
    cause: str | None
    input: Any = None
    output: Any = None
    trigger: Any = None


class StartIn(BaseModel):
    input: dict[str, Any] | list[Any] = Field(default_factory=dict)
    name: str | None = Field(default=None, max_length=80)


class StopIn(BaseModel):
    error: str | None = Field(default=None, max_length=256)
    cause: str | None = Field(default=None, max_length=32_768)


class EventOut(BaseModel):
    id: int
    type: str
    timestamp: str
    state: str | None = None
    scope: str = ""
    details: dict[str, Any] = Field(default_factory=dict)


class _Shared:
    """What the routes share: the caller's privileges on a workflow, and one execution."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.audit = AuditLog(settings)

    def privileges(self, who: Principal, name: str) -> set[str]:
        return Governance(self.settings).workflow_privileges(who, name)

    def require(self, who: Principal, name: str, privilege: str, action: str, resource: str) -> None:
        if privilege not in self.privileges(who, name):
            self.audit.record(who.name, action, resource, False, reason=f"no {privilege} on workflow {name}", via="api")
            raise HTTPException(
                403,
                f"{who.name} may not {'see' if privilege == 'SELECT' else 'run'} workflow {name} "
                f"(admins, the {OPERATORS} group and grants ON WORKFLOW)",
            )

    def execution(self, execution_id: str) -> "ExecutionRecord":
        from shoal.workflows import Store

        try:
            return Store(self.settings).execution(execution_id)
        except ShoalError:
            raise HTTPException(404, f"no execution {execution_id}") from None


def router(settings: Settings, who_dependency: Any, spark: Callable[[], Any]) -> APIRouter:
    """Routes for `create_app`; `who_dependency` is its authenticated-principal dependency."""
    api = APIRouter(prefix="/api/v1")
    Who = Annotated[Principal, who_dependency]
    shared = _Shared(settings)
    _workflow_routes(api, settings, Who, shared)
    _execution_routes(api, settings, Who, shared)
    return api


def _workflow_routes(api: APIRouter, settings: Settings, Who: Any, shared: _Shared) -> None:
    audit, _require, _workflow_privileges = shared.audit, shared.require, shared.privileges

    # ---- workflows and executions ---------------------------------------------------------
    @api.get("/workflows", response_model=list[WorkflowOut])
    def workflows_list(who: Who) -> list[WorkflowOut]:
        from shoal.workflows import Store

        visible = Governance(settings).workflows_visible(who)
        rows = [w for w in Store(settings).list_workflows() if visible is None or w["name"] in visible]
        audit.record(who.name, "workflow.list", None, True, via="api", workflows=len(rows))
        return [
            WorkflowOut(
                name=w["name"],
                version=w.get("version"),
                source=w.get("source"),
                updated_at=_iso(w.get("updated_at")),
                last_run=_iso(w.get("last_run")),
            )
            for w in rows
        ]

    @api.get("/workflows/{name}", response_model=WorkflowDetail)
    def workflow_detail(name: str, who: Who) -> WorkflowDetail:
        from shoal.workflows import Store

        _require(who, name, "SELECT", "workflow.view", name)
        wf = Store(settings).workflow(name)
        if wf is None:
            raise HTTPException(404, f"no workflow {name}")
        audit.record(who.name, "workflow.view", name, True, via="api")
        return WorkflowDetail(
            name=name,
            version=wf.get("version"),
            source=wf.get("source"),
            updated_at=_iso(wf.get("updated_at")),
            definition=wf["definition"],
            privileges=sorted(_workflow_privileges(who, name)),
        )

    @api.get("/workflows/{name}/executions", response_model=list[ExecutionOut])
    def workflow_executions(
        name: str,
        who: Who,
        status: Annotated[str | None, Query(max_length=16)] = None,
        limit: Annotated[int, Query(ge=1, le=1000)] = 50,
    ) -> list[ExecutionOut]:
        from shoal.workflows import Store

        _require(who, name, "SELECT", "workflow.view", name)
        found = Store(settings).list_executions(workflow=name, status=status, limit=limit)
        return [ExecutionOut(**e.to_dict()) for e in found]

    @api.post("/workflows/{name}/executions", response_model=ExecutionOut, status_code=202)
    def workflow_start(name: str, who: Who, body: Annotated[StartIn, Body()] = StartIn()) -> ExecutionOut:
        from shoal import workflows
        from shoal.workflows.interpreter import new_execution_id

        _require(who, name, "EXECUTE", "workflow.start", name)
        try:
            machine = workflows.load_machine(settings, name)
        except ShoalError as exc:
            raise HTTPException(404 if "no workflow" in str(exc) else 400, first_line(exc)) from None
        execution_id = new_execution_id(machine.name)
        audit.record(who.name, "workflow.start", name, True, via="api", execution=execution_id)

        def run() -> None:
            # Failures are recorded in the execution's own history; the thread must not die loudly.
            with contextlib.suppress(Exception):
                workflows.run(
                    settings, machine, body.input, name=body.name, execution_id=execution_id, trigger={"api": who.name}
                )

        threading.Thread(target=run, daemon=True, name=f"api-{execution_id}").start()
        record = _wait_created(execution_id)
        return ExecutionOut(**record.to_dict(full=True))

    def _wait_created(execution_id: str, timeout: float = 10) -> "ExecutionRecord":
        import time

        from shoal.workflows import Store

        store = Store(settings)
        deadline = time.monotonic() + timeout
        while True:
            try:
                return store.execution(execution_id)
            except ShoalError:
                if time.monotonic() > deadline:
                    raise HTTPException(500, f"execution {execution_id} did not start") from None
                time.sleep(0.05)


def _execution_routes(api: APIRouter, settings: Settings, Who: Any, shared: _Shared) -> None:
    audit, _require, _execution = shared.audit, shared.require, shared.execution

    @api.get("/executions/{execution_id}", response_model=ExecutionOut)
    def execution_detail(execution_id: str, who: Who) -> ExecutionOut:
        record = _execution(execution_id)
        _require(who, record.workflow, "SELECT", "workflow.view", execution_id)
        return ExecutionOut(**record.to_dict(full=True))

    @api.get("/executions/{execution_id}/history", response_model=list[EventOut])
    def execution_history(execution_id: str, who: Who) -> list[EventOut]:
        from shoal.workflows import Store

        record = _execution(execution_id)
        _require(who, record.workflow, "SELECT", "workflow.view", execution_id)
        out = []
        for e in Store(settings).history(execution_id):
            details = {k: v for k, v in e.items() if k not in ("id", "type", "timestamp", "state", "scope")}
            out.append(
                EventOut(
                    id=e["id"],
                    type=e["type"],
                    timestamp=e["timestamp"],
                    state=e["state"],
                    scope=e["scope"],
                    details=json.loads(json.dumps(details, default=str)),
                )
            )
        return out

    @api.post("/executions/{execution_id}/stop", response_model=ExecutionOut)
    def execution_stop(execution_id: str, who: Who, body: Annotated[StopIn, Body()] = StopIn()) -> ExecutionOut:
        from shoal.workflows import Store

        record = _execution(execution_id)
        _require(who, record.workflow, "EXECUTE", "workflow.stop", execution_id)
        try:
            Store(settings).request_stop(execution_id, by=who.name, error=body.error, cause=body.cause)
        except ShoalError as exc:
            raise HTTPException(409, first_line(exc)) from None
        audit.record(who.name, "workflow.stop", execution_id, True, via="api")
        return ExecutionOut(**_execution(execution_id).to_dict(full=True))
