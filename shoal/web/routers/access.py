"""Access requests (ask for SELECT on a table; admins approve or reject) and the audit log."""

# No `from __future__ import annotations`: FastAPI must see `Who` (local to `router`) as an object.

from typing import Annotated, Any

from fastapi import APIRouter, Path, Query
from pydantic import BaseModel, Field

from shoal.config import Settings
from shoal.governance import AccessDenied, AuditLog, Principal
from shoal.governance.access import AccessRequests
from shoal.web.routers.common import Out

RequestId = Annotated[int, Path(ge=1, le=2**31 - 1)]


class AccessRequestIn(BaseModel):
    table: str = Field(min_length=3, max_length=400)
    reason: str = Field(min_length=5, max_length=2000)


class DecisionIn(BaseModel):
    note: str | None = Field(default=None, max_length=2000)


class AccessRequestOut(Out):
    id: int
    principal: str
    table: str
    privilege: str
    reason: str
    status: str
    decided_by: str | None = None
    note: str | None = None
    grant_id: int | None = None
    created_at: str
    decided_at: str | None = None


class AuditEntryOut(Out):
    id: int
    ts: str
    principal: str
    action: str
    resource: str | None = None
    decision: str
    reason: str | None = None
    fingerprint: str | None = None
    detail: dict[str, Any] | None = Field(default=None, description="present when the entry has details")


def router(settings: Settings, who_dependency: Any) -> APIRouter:
    api = APIRouter(prefix="/api/v1")
    Who = Annotated[Principal, who_dependency]

    @api.post("/access-requests", status_code=201, response_model=AccessRequestOut, response_model_exclude_unset=True)
    def request_access(body: AccessRequestIn, who: Who) -> Any:
        return AccessRequests(settings).request(who, body.table, body.reason)

    @api.get("/access-requests", response_model=list[AccessRequestOut], response_model_exclude_unset=True)
    def access_requests(
        who: Who, status: Annotated[str | None, Query(pattern="^(pending|approved|rejected)$")] = None
    ) -> Any:
        return AccessRequests(settings).list(who, status)

    @api.post(
        "/access-requests/{request_id}/approve",
        response_model=AccessRequestOut,
        response_model_exclude_unset=True,
    )
    def approve(request_id: RequestId, who: Who, body: DecisionIn | None = None) -> Any:
        return AccessRequests(settings).decide(who, request_id, approve=True, note=body.note if body else None)

    @api.post(
        "/access-requests/{request_id}/reject",
        response_model=AccessRequestOut,
        response_model_exclude_unset=True,
    )
    def reject(request_id: RequestId, who: Who, body: DecisionIn | None = None) -> Any:
        return AccessRequests(settings).decide(who, request_id, approve=False, note=body.note if body else None)

    @api.get("/audit", response_model=list[AuditEntryOut], response_model_exclude_unset=True)
    def audit(
        who: Who,
        principal: Annotated[str | None, Query(max_length=200)] = None,
        decision: Annotated[str | None, Query(pattern="^(allow|deny)$")] = None,
        limit: Annotated[int, Query(ge=1, le=10_000)] = 100,
    ) -> Any:
        log = AuditLog(settings)
        if not who.is_admin:
            log.record(who.name, "audit.read", None, False, reason="not an admin")
            raise AccessDenied(f"{who.name} may not read the audit log")
        return log.list(principal=principal, decision=decision, limit=limit)

    return api
