"""API endpoints beyond query and catalog: search, workflows and executions, data quality
results and models (the same governance as the console and the CLI's `--as`).

Workflows follow `Governance.workflow_privileges` (SELECT to see, EXECUTE to start and stop);
search and the text filter read only what the caller's grants allow; quality results are read
through governed SQL on `shoal.quality_results`; objects and models are catalog metadata.
Every call is audited."""

# No `from __future__ import annotations`: FastAPI must see `Who` (local to `router`) as an object.

import contextlib
import json
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any, Literal

from fastapi import APIRouter, Body, HTTPException, Query
from pydantic import BaseModel, Field

from shoal.config import Settings
from shoal.exceptions import ShoalError, first_line
from shoal.governance import AuditLog, Governance, GovernedSql, Principal
from shoal.governance.grants import OPERATORS
from shoal.search.query import Hit
from shoal.sql import to_json_value

if TYPE_CHECKING:
    from shoal.workflows.store import ExecutionRecord


class SearchOut(BaseModel):
    query: str
    mode: str
    hits: list[Hit]  # the search package's own result type (object, part, snippet, ranks, paths)


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


class QualityOut(BaseModel):
    results: list[dict[str, Any]]


class ModelOut(BaseModel):
    name: str
    version: str
    kind: str
    sha256: str
    size_bytes: int
    description: str
    registered_by: str
    registered_at: str


def _iso(value: Any) -> str | None:
    if value is None:
        return None
    return value.isoformat() + "Z" if hasattr(value, "isoformat") else str(value)


def router(settings: Settings, who_dependency: Any, spark: Callable[[], Any]) -> APIRouter:  # noqa: C901 - the route table: each nested handler counts toward it
    """Routes for `create_app`; `who_dependency` is its authenticated-principal dependency."""
    api = APIRouter(prefix="/api/v1")
    Who = Annotated[Principal, who_dependency]
    audit = AuditLog(settings)

    def _workflow_privileges(who: Principal, name: str) -> set[str]:
        return Governance(settings).workflow_privileges(who, name)

    def _require(who: Principal, name: str, privilege: str, action: str, resource: str) -> None:
        if privilege not in _workflow_privileges(who, name):
            audit.record(who.name, action, resource, False, reason=f"no {privilege} on workflow {name}", via="api")
            raise HTTPException(
                403,
                f"{who.name} may not {'see' if privilege == 'SELECT' else 'run'} workflow {name} "
                f"(admins, the {OPERATORS} group and grants ON WORKFLOW)",
            )

    def _execution(execution_id: str) -> "ExecutionRecord":
        from shoal.workflows import Store

        try:
            return Store(settings).execution(execution_id)
        except ShoalError:
            raise HTTPException(404, f"no execution {execution_id}") from None

    # ---- search and objects ---------------------------------------------------------------
    @api.get("/search", response_model=SearchOut)
    def search(
        who: Who,
        q: Annotated[str, Query(min_length=1, max_length=2000)],
        limit: Annotated[int, Query(ge=1, le=100)] = 10,
        mode: Literal["hybrid", "vector", "keyword"] = "hybrid",
        media_type: Annotated[str | None, Query(max_length=200)] = None,
        lang: Annotated[str | None, Query(max_length=20)] = None,
    ) -> SearchOut:
        from shoal.search.query import search as run_search

        hits = run_search(
            settings, q, k=limit, media_type=media_type, lang=lang, principal=who, spark=spark(), mode=mode
        )
        audit.record(who.name, "search.query", None, True, via="api", hits=len(hits))
        return SearchOut(query=q, mode=mode, hits=hits)

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

    # ---- data quality and models ----------------------------------------------------------
    @api.get("/quality/results", response_model=QualityOut)
    def quality_results(
        who: Who,
        ruleset: Annotated[str | None, Query(max_length=200)] = None,
        limit: Annotated[int, Query(ge=1, le=10_000)] = 200,
    ) -> QualityOut:
        import sqlglot.expressions as exp

        from shoal.lake.metadata import NAMESPACE

        session = spark()
        if not session.catalog.tableExists(f"{NAMESPACE}.quality_results"):
            return QualityOut(results=[])  # no ruleset has run yet
        # Governed SQL: the caller's grant on shoal.quality_results (columns, rows) applies.
        where = f" WHERE ruleset = {exp.Literal.string(ruleset).sql()}" if ruleset else ""
        sql = f"SELECT * FROM {NAMESPACE}.quality_results{where} ORDER BY evaluated_at DESC, rule"
        result = GovernedSql(session, settings, who).execute(sql, limit=limit)
        return QualityOut(results=[{k: to_json_value(v) for k, v in r.items()} for r in result.records()])

    @api.get("/models", response_model=list[ModelOut])
    def models(who: Who, name: Annotated[str | None, Query(max_length=200)] = None) -> list[ModelOut]:
        from shoal.models import list_models

        if not (who.is_admin or settings.governance.metadata_visible_to_all):
            audit.record(who.name, "model.list", None, False, reason="catalog metadata not visible", via="api")
            raise HTTPException(403, f"{who.name} may not list models")
        found = list_models(settings, name)
        return [ModelOut.model_validate({**m.to_dict(), "registered_at": str(m.registered_at)}) for m in found]

    return api
