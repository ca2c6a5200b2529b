"""Access requests, grants, access points and the audit log."""

from __future__ import annotations

from typing import Annotated
from urllib.parse import urlencode

from fastapi import APIRouter, Form, Request
from fastapi.responses import RedirectResponse, Response

from shoal.exceptions import first_line
from shoal.governance import AccessDenied, Governance, GovernanceError
from shoal.governance.access import AccessRequests, RawAccess
from shoal.web.console.base import Console


def add(router: APIRouter, c: Console) -> None:
    # ---- governance ------------------------------------------------------------------------
    @router.get("/governance")
    def governance_page(request: Request, message: str | None = None) -> Response:
        who, session = c.viewer(request)
        gov = Governance(c.settings)
        requests_ = AccessRequests(c.settings).list(who)
        grants = [g.to_dict() for g in (gov.list() if who.is_admin else gov.grants_for(who))]
        return c.page(
            request,
            "governance.html",
            who,
            session,
            requests=requests_,
            grants=grants,
            access_points=RawAccess(c.settings).list(who),
            audit_rows=c.audit.list(limit=200) if who.is_admin else None,
            message=message,
        )

    @router.post("/governance/requests")
    def governance_request(
        request: Request,
        table: Annotated[str, Form(min_length=3, max_length=400)],
        reason: Annotated[str, Form(min_length=5, max_length=2000)],
        csrf: Annotated[str, Form()] = "",
    ) -> Response:
        who, session = c.viewer(request)
        c.check_csrf(request, session, csrf)
        try:
            made = AccessRequests(c.settings).request(who, table, reason)
            message = f"request {made['id']} for {table} sent"
        except (GovernanceError, AccessDenied) as exc:
            message = first_line(exc)
        return RedirectResponse("/governance?" + urlencode({"message": message}), status_code=303)

    @router.post("/governance/requests/{request_id}/{decision}")
    def governance_decide(
        request: Request,
        request_id: int,
        decision: str,
        csrf: Annotated[str, Form()] = "",
        note: Annotated[str, Form(max_length=2000)] = "",
    ) -> Response:
        who, session = c.viewer(request)
        c.check_csrf(request, session, csrf)
        if decision not in ("approve", "reject"):
            return Response("unknown decision", status_code=404)
        try:
            AccessRequests(c.settings).decide(who, request_id, approve=decision == "approve", note=note or None)
            message = f"request {request_id} {decision}d"
        except (GovernanceError, AccessDenied) as exc:
            message = first_line(exc)
        return RedirectResponse("/governance?" + urlencode({"message": message}), status_code=303)
