"""Access requests, grants, access points and the audit log."""

from __future__ import annotations

from typing import Annotated, Any
from urllib.parse import urlencode

from fastapi import APIRouter, Form, Path, Query, Request
from fastapi.responses import RedirectResponse, Response

from shoal.governance import AccessDenied, Governance, GovernanceError
from shoal.governance.access import AccessRequests, RawAccess
from shoal.governance.errors import NotFound
from shoal.web.console.base import Console


def add(router: APIRouter, c: Console) -> None:
    # ---- governance ------------------------------------------------------------------------
    @router.get("/governance")
    def governance_page(
        request: Request,
        done: Annotated[str | None, Query(max_length=20)] = None,
        request_id: Annotated[int | None, Query(alias="id", ge=1, le=2**31 - 1)] = None,
    ) -> Response:
        who, session = c.viewer(request)
        gov = Governance(c.settings)
        requests_ = AccessRequests(c.settings).list(who)
        return c.page(
            request,
            "governance.html",
            who,
            session,
            requests=requests_,
            grants=[g.to_dict() for g in (gov.list() if who.is_admin else gov.grants_for(who))],
            access_points=RawAccess(c.settings).list(who),
            audit_rows=c.audit.list(limit=200) if who.is_admin else None,
            message=_message(done, request_id, requests_),
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
        except (GovernanceError, AccessDenied):
            return _back("invalid")
        return _back("sent", made["id"])

    @router.post("/governance/requests/{request_id}/{decision}")
    def governance_decide(
        request: Request,
        request_id: Annotated[int, Path(ge=1, le=2**31 - 1)],
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
        except NotFound:  # not theirs to decide, or missing: one answer
            return _back("notfound", request_id)
        except (GovernanceError, AccessDenied):
            return _back("already", request_id)
        return _back(f"{decision}d", request_id)


# The page's notices, by code: the URL only picks one and names a request id, so a link cannot
# make the console say anything else (no text from the query string is shown).
MESSAGES = {
    "sent": "request {id} for {table} sent",
    "approved": "request {id} approved",
    "rejected": "request {id} rejected",
    "notfound": "no access request {id}",
    "already": "request {id} was already decided",
    "invalid": "the request was not sent: name a table as DB.TABLE and give a reason of a few words",
}


def _back(done: str, request_id: int | None = None) -> RedirectResponse:
    query = {"done": done, **({"id": str(request_id)} if request_id else {})}
    return RedirectResponse("/governance?" + urlencode(query), status_code=303)


def _message(done: str | None, request_id: int | None, visible: list[dict[str, Any]]) -> str | None:
    template = MESSAGES.get(done or "")
    if template is None or ("{id}" in template and request_id is None):
        return None
    table = next((r["table"] for r in visible if r["id"] == request_id), None)
    if "{table}" in template and table is None:  # only a request the viewer may see is named
        return None
    return template.format(id=request_id, table=table)
