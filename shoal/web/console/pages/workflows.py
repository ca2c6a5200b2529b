"""State machines, executions (graph, history), start and resume.

Governed per workflow (Governance.workflow_privileges): SELECT to see a workflow, its
executions and their step results; EXECUTE to start and resume it. Admins and the
operators group hold both on every workflow. A refusal is a 403 with an audit row."""

from __future__ import annotations

import json
import threading
import time
from typing import Annotated, Any
from urllib.parse import quote

from fastapi import APIRouter, Form, Request
from fastapi.responses import RedirectResponse, Response

from shoal.exceptions import ShoalError, first_line
from shoal.governance import Governance, Principal
from shoal.governance.grants import OPERATORS
from shoal.routing import Routes
from shoal.web.console.base import Console, quietly

RECENT = 30  # executions on the workflows page
EVENT_FIELDS = ("id", "timestamp", "type", "state", "scope")  # an event's columns; the rest is its detail
SHORT_DETAIL = 160  # characters of an event's detail shown before it is expanded


def _event_view(event: dict[str, Any]) -> dict[str, Any]:
    """An event with its detail as one line (what the table shows) and in full, indented (what
    expanding the row shows): long details are folded, never cut."""
    detail = {k: v for k, v in event.items() if k not in EVENT_FIELDS}
    line = " ".join(f"{k}={json.dumps(v, default=str)}" for k, v in detail.items())
    full = json.dumps(detail, indent=2, default=str) if detail else ""
    return {**{k: event.get(k) for k in EVENT_FIELDS}, "line": line, "full": full, "long": len(line) > SHORT_DETAIL}


def steps(history: list[dict[str, Any]], definition: dict[str, Any]) -> list[dict[str, Any]]:
    """Each state an execution entered (per scope: every Map iteration is its own step) with
    its input, output and error, in the order they were first entered. `node` is the graph's
    node for it (Map iterations share their body's), so clicking a state opens its steps."""
    from shoal.workflows.graph import _key, parallel_states

    parallel = parallel_states(definition)
    found: dict[str, dict[str, Any]] = {}
    for e in history:
        if not e.get("state"):
            continue
        key = f"{e.get('scope') or ''}/{e['state']}"
        step = found.setdefault(
            key,
            {"key": key, "node": _key(e.get("scope") or "", e["state"], parallel), "status": "running", "events": 0},
        )
        step["events"] += 1
        for field in ("input", "output", "error", "cause"):
            if field in e:
                step[field] = json.dumps(e[field], indent=2, default=str) if field in ("input", "output") else e[field]
        kind = e["type"]
        if kind == "CaughtError":
            step["status"] = "caught"
        elif kind.endswith(("StateFailed", "Failed")) or kind == "FailStateExited":
            step["status"] = "failed"
        elif kind.endswith("StateExited") and step["status"] != "caught":
            step["status"] = "succeeded"
    return list(found.values())


routes = Routes()


def _refused_svg(c: Console, who: Principal, action: str, resource: str) -> Response:
    c.audit.record(who.name, action, resource, False, reason="no SELECT on the workflow", via="console")
    return Response("not allowed", status_code=403, media_type="text/plain")


# ---- workflows -------------------------------------------------------------------------
@routes.get("/workflows")
def workflows_page(c: Console, request: Request) -> Response:
    from shoal.workflows import Store
    from shoal.workflows.schedule import Schedules

    who, session = c.viewer(request)
    visible = Governance(c.settings).workflows_visible(who)  # None: every workflow
    if visible is not None and not visible:
        return c.refuse(
            request,
            who,
            session,
            "workflow.list",
            None,
            f"{who.name} may see no workflows (admins, the {OPERATORS} group and grants ON WORKFLOW)",
        )
    store = Store(c.settings)
    if visible is None:
        executions = store.list_executions(limit=RECENT)
    else:
        mine = [e for name in sorted(visible) for e in store.list_executions(workflow=name, limit=RECENT)]
        executions = sorted(mine, key=lambda e: e.started_at, reverse=True)[:RECENT]
    return c.page(
        request,
        "workflows.html",
        who,
        session,
        workflows=[w for w in store.list_workflows() if visible is None or w["name"] in visible],
        executions=[e.to_dict() for e in executions],
        schedules=[s for s in Schedules(c.settings).list() if visible is None or s["workflow"] in visible],
    )


@routes.get("/workflows/{name}")
def workflow_page(c: Console, request: Request, name: str) -> Response:
    from shoal.workflows import Store

    who, session = c.viewer(request)
    may = c.workflow_privileges(who, name)
    if "SELECT" not in may:
        return c.refuse(request, who, session, "workflow.view", name, f"{who.name} may not see workflow {name}")
    store = Store(c.settings)
    wf = store.workflow(name)
    if wf is None:
        return c.error(request, who, session, 404, f"no workflow {name}")
    return c.page(
        request,
        "workflow.html",
        who,
        session,
        name=name,
        wf=wf,
        definition=json.dumps(wf["definition"], indent=2),
        executions=[e.to_dict() for e in store.list_executions(workflow=name, limit=50)],
        operator="EXECUTE" in may,
    )


@routes.get("/workflows/{name}/graph.svg")
def workflow_graph(c: Console, request: Request, name: str) -> Response:
    from shoal.workflows import Store
    from shoal.workflows.graph import render

    who, _session = c.viewer(request)
    if "SELECT" not in c.workflow_privileges(who, name):
        return _refused_svg(c, who, "workflow.view", name)
    wf = Store(c.settings).workflow(name)
    if wf is None:
        return Response("no such workflow", status_code=404)
    return Response(render(wf["definition"], title=name), media_type="image/svg+xml")


@routes.post("/workflows/{name}/start")
def workflow_start(
    c: Console,
    request: Request,
    name: str,
    csrf: Annotated[str, Form()] = "",
    input: Annotated[str, Form(max_length=100_000)] = "{}",
) -> Response:
    from shoal import workflows
    from shoal.workflows.interpreter import new_execution_id

    who, session = c.viewer(request)
    c.check_csrf(request, session, csrf)
    if "EXECUTE" not in c.workflow_privileges(who, name):
        return c.refuse(
            request,
            who,
            session,
            "workflow.start",
            name,
            f"{who.name} may not start {name} (admins, the {OPERATORS} group and EXECUTE grants)",
        )
    try:
        payload = json.loads(input or "{}")
        machine = workflows.load_machine(c.settings, name)
    except (ValueError, ShoalError) as exc:
        return c.error(request, who, session, 400, f"cannot start {name}: {first_line(exc)}")
    execution_id = new_execution_id(machine.name)
    c.audit.record(who.name, "workflow.start", name, True, via="console", execution=execution_id)
    threading.Thread(
        target=quietly(workflows.run),
        args=(c.settings, machine, payload),
        kwargs={"execution_id": execution_id, "trigger": {"console": who.name}},
        daemon=True,
        name=f"console-{execution_id}",
    ).start()
    _wait_created(c, execution_id)
    return RedirectResponse(f"/executions/{quote(execution_id)}", status_code=303)


def _wait_created(c: Console, execution_id: str, timeout: float = 10) -> None:
    from shoal.workflows import Store

    store = Store(c.settings)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            store.execution(execution_id)
            return
        except ShoalError:
            time.sleep(0.1)


@routes.get("/executions/{execution_id}")
def execution_page(c: Console, request: Request, execution_id: str) -> Response:
    from shoal.workflows import Store

    who, session = c.viewer(request)
    store = Store(c.settings)
    try:
        record = store.execution(execution_id)
    except ShoalError:
        return c.error(request, who, session, 404, f"no execution {execution_id}")
    may = c.workflow_privileges(who, record.workflow)
    if "SELECT" not in may:
        message = f"{who.name} may not see executions of {record.workflow}"
        return c.refuse(request, who, session, "workflow.view", execution_id, message)
    history = store.history(execution_id)
    return c.page(
        request,
        "execution.html",
        who,
        session,
        record=record.to_dict(full=True),
        input=json.dumps(record.input, indent=2, default=str),
        output=json.dumps(record.output, indent=2, default=str),
        history=[_event_view(e) for e in history],
        steps=steps(history, record.definition),
        operator="EXECUTE" in may,
        running=record.status == "RUNNING",
    )


@routes.get("/executions/{execution_id}/graph.svg")
def execution_graph(c: Console, request: Request, execution_id: str) -> Response:
    from shoal.workflows import Store
    from shoal.workflows.graph import render

    who, _session = c.viewer(request)
    store = Store(c.settings)
    try:
        record = store.execution(execution_id)
    except ShoalError:
        return Response("no such execution", status_code=404)
    if "SELECT" not in c.workflow_privileges(who, record.workflow):
        return _refused_svg(c, who, "workflow.view", execution_id)
    svg = render(record.definition, title=f"{record.workflow} {record.status}", history=store.history(execution_id))
    return Response(svg, media_type="image/svg+xml")


@routes.post("/executions/{execution_id}/resume")
def execution_resume(c: Console, request: Request, execution_id: str, csrf: Annotated[str, Form()] = "") -> Response:
    from shoal import workflows
    from shoal.workflows import Store

    who, session = c.viewer(request)
    c.check_csrf(request, session, csrf)
    try:
        record = Store(c.settings).execution(execution_id)
    except ShoalError:
        return c.error(request, who, session, 404, f"no execution {execution_id}")
    if "EXECUTE" not in c.workflow_privileges(who, record.workflow):
        message = f"{who.name} may not resume {record.workflow}"
        return c.refuse(request, who, session, "workflow.resume", execution_id, message)
    c.audit.record(who.name, "workflow.resume", execution_id, True, via="console")
    threading.Thread(target=quietly(workflows.resume), args=(c.settings, execution_id), daemon=True).start()
    time.sleep(0.3)
    return RedirectResponse(f"/executions/{quote(execution_id)}", status_code=303)


def add(router: APIRouter, c: Console) -> None:
    """Mount this module's pages on the console's router, in the order they are defined above."""
    routes.mount(router, c)
