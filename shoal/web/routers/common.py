"""What the API's routers share: the response-model base, the caller's address, and the answer
to an error nobody foresaw."""

import logging

from fastapi import Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict

from shoal.config import Settings
from shoal.governance import AuditLog

QUERY_PATHS = ("/api/v1/query",)  # a failure here is the query's failure: 400, never 500
log = logging.getLogger("shoal.api")


# ---- response models: what each answer holds (the OpenAPI schema documents them) ---------------
# Answers are built from the library's dicts; `exclude_unset` on the routes writes exactly the
# keys a dict had (an absent optional key stays absent, not null), and `extra="allow"` keeps
# keys a model does not name (a table's DESCRIBE details), so the JSON is what it always was.


class Out(BaseModel):
    model_config = ConfigDict(extra="allow")


def client_address(request: Request) -> str | None:
    return request.client.host if request.client else None


def failed(settings: Settings, request: Request, exc: Exception) -> JSONResponse:
    """An error nobody foresaw: logged, audited, and answered without its details."""
    log.exception("unexpected error on %s %s", request.method, request.url.path, exc_info=exc)
    AuditLog(settings).record(
        getattr(request.state, "principal", None) or "anonymous",
        "api.error",
        request.url.path,
        False,
        reason=type(exc).__name__,
        client=client_address(request),
    )
    query = request.url.path in QUERY_PATHS
    return JSONResponse(
        {"detail": "the query failed" if query else "internal error", "hint": "the error is in the audit log"},
        status_code=400 if query else 500,
    )
