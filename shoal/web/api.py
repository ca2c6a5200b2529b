"""The HTTP API (FastAPI; OpenAPI at /openapi.json) and the web console mounted beside it:
governed query, catalog browsing,
access points, signed URLs, raw-object reads, access requests and audit.

Every route but the raw read of a signed URL takes `Authorization: Bearer <token>`; a
missing, wrong, expired or revoked token is a 401. Refusals are 403 with the reason.
Raw bytes are served as attachments with `nosniff` and a sandboxing CSP: an uploaded
HTML file must never run in the API's origin; every other API answer carries `nosniff` and
`default-src 'none'`. Wrong tokens and signatures are throttled (429 while locked; see
shoal.governance.throttle). An unexpected error is audited (`api.error`); on the query
path it is a 400 like any other failed query. Swagger UI (/docs) and ReDoc (/redoc) are served
with their scripts from local assets (`[server] api_docs = false` turns them off); /openapi.json
is always served. /healthz answers without sign-in: up or down, nothing more.
"""

import logging
from collections.abc import Awaitable, Callable, Iterator
from typing import TYPE_CHECKING, Annotated, Any
from urllib.parse import quote

from fastapi import Depends, FastAPI, HTTPException, Path, Query, Request
from fastapi.responses import FileResponse, JSONResponse, Response, StreamingResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from fastapi_offline import FastAPIOffline
from pydantic import BaseModel, ConfigDict, Field

from shoal import __version__, storage
from shoal.config import Settings
from shoal.exceptions import ShoalError, SqlError, first_line
from shoal.governance import (
    AccessDenied,
    AuditLog,
    AuthError,
    Governance,
    GovernanceError,
    GovernedSql,
    Principal,
    Principals,
)
from shoal.governance.access import AccessRequests, RawAccess
from shoal.governance.errors import NotFound
from shoal.governance.throttle import Throttled
from shoal.sql import to_json_value
from shoal.web import resources

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

API_CSP = "default-src 'none'; frame-ancestors 'none'"
DOCS_CSP = (
    "default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; worker-src 'self' blob:; frame-ancestors 'none'"
)
QUERY_PATHS = ("/api/v1/query",)
MAX_OFFSET = 10_000  # deeper pages cost a scan of everything before them: filter instead  # a failure here is the query's failure: 400, never 500
log = logging.getLogger("shoal.api")

RequestId = Annotated[int, Path(ge=1, le=2**31 - 1)]


class QueryIn(BaseModel):
    sql: str = Field(min_length=1, max_length=100_000)
    limit: int = Field(default=1000, ge=1, le=100_000)


class QueryOut(BaseModel):
    columns: list[str]
    types: list[str]
    rows: list[list[Any]]


class SignIn(BaseModel):
    path: str = Field(min_length=1, max_length=4096)
    expires_in: int = Field(default=900, ge=1, le=7 * 24 * 3600)


class AccessPointIn(BaseModel):
    name: str = Field(min_length=2, max_length=63)
    prefix: str = Field(default="", max_length=4096)
    principals: list[str] = Field(min_length=1, max_length=100)
    tags: dict[str, str] = Field(default_factory=dict)
    cidrs: list[str] = Field(default_factory=list, max_length=100)


class AccessRequestIn(BaseModel):
    table: str = Field(min_length=3, max_length=400)
    reason: str = Field(min_length=5, max_length=2000)


class DecisionIn(BaseModel):
    note: str | None = Field(default=None, max_length=2000)


# ---- response models: what each answer holds (the OpenAPI schema documents them) ---------------
# Answers are built from the library's dicts; `exclude_unset` on the routes writes exactly the
# keys a dict had (an absent optional key stays absent, not null), and `extra="allow"` keeps
# keys a model does not name (a table's DESCRIBE details), so the JSON is what it always was.


class _Out(BaseModel):
    model_config = ConfigDict(extra="allow")


class MeOut(_Out):
    name: str
    admin: bool
    groups: list[str]


class TableOut(_Out):
    name: str = Field(description="database.table")
    owner: str | None = None
    description: str | None = None
    privileges: list[str] = Field(default_factory=list, description="what the caller may do with it")


class ColumnOut(_Out):
    name: str
    type: str


class TableDetail(_Out):
    """The columns, and DESCRIBE's details (partitioning, location, provider...) as extra keys."""

    name: str
    columns: list[ColumnOut]


class ObjectPath(_Out):
    source_name: str
    source_path: str


class ObjectOut(_Out):
    object_id: str
    source_name: str | None = None
    source_path: str | None = None
    media_type: str | None = None
    status: str | None = None
    languages: list[str] | None = None
    has_pii: bool | None = None
    page_count: int | None = None
    size_bytes: int | None = None
    raw_path: str | None = None
    extracted_paths: Any = None
    enriched_paths: Any = None
    tags: dict[str, str] | None = None
    is_latest: bool | None = None
    parent_object_id: str | None = None
    paths: list[ObjectPath] = Field(default_factory=list, description="every (source, path) holding the content")
    owner: str | None = None
    description: str | None = None


class AccessPointOut(_Out):
    name: str
    prefix: str
    tags: dict[str, str]
    principals: list[str]
    cidrs: list[str]
    read_only: bool
    created_by: str
    created_at: str


class SignedUrlOut(_Out):
    url: str
    expires_at: str


class AccessRequestOut(_Out):
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


class AuditEntryOut(_Out):
    id: int
    ts: str
    principal: str
    action: str
    resource: str | None = None
    decision: str
    reason: str | None = None
    fingerprint: str | None = None
    detail: dict[str, Any] | None = Field(default=None, description="present when the entry has details")


def create_app(settings: Settings) -> FastAPI:  # noqa: C901 - the route table: each nested handler counts toward it (issue 31: split)
    docs = settings.server.api_docs
    # fastapi-offline serves Swagger UI and ReDoc from assets inside the package, not a CDN.
    app = FastAPIOffline(
        title="Shoal API",
        version=__version__,
        description="Governed access to the Shoal lakehouse.",
        docs_url="/docs" if docs else None,
        redoc_url="/redoc" if docs else None,
        static_url="/docs-assets",
    )
    bearer = HTTPBearer(auto_error=False)
    principals = Principals(settings)

    def current(request: Request, creds: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)]) -> Principal:
        if creds is None or creds.scheme.lower() != "bearer":  # no credentials: nothing to throttle
            raise HTTPException(401, "missing bearer token", headers={"WWW-Authenticate": "Bearer"})
        client = _client(request)
        try:
            who = principals.authenticate(creds.credentials, client=client)
        except Throttled as exc:
            AuditLog(settings).record("anonymous", "api.auth", None, False, reason="throttled", client=client)
            raise HTTPException(429, exc.hint or "throttled", headers={"Retry-After": str(exc.retry_after)}) from None
        except AuthError as exc:
            AuditLog(settings).record("anonymous", "api.auth", None, False, reason=first_line(exc), client=client)
            raise HTTPException(401, first_line(exc), headers={"WWW-Authenticate": "Bearer"}) from None
        request.state.principal = who.name
        return who

    Who = Annotated[Principal, Depends(current)]

    @app.middleware("http")
    async def _api_headers(request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        response = await call_next(request)
        path = request.url.path
        if path.startswith(("/api/", "/openapi", "/healthz")):
            response.headers.setdefault("X-Content-Type-Options", "nosniff")
            response.headers.setdefault("Content-Security-Policy", API_CSP)
            response.headers.setdefault("Cache-Control", "no-store")
        elif path.startswith(("/docs", "/redoc")):
            # Swagger UI and ReDoc pages start themselves with an inline script; nothing loads
            # from elsewhere.
            response.headers.setdefault("X-Content-Type-Options", "nosniff")
            response.headers.setdefault("Content-Security-Policy", DOCS_CSP)
        return response

    @app.exception_handler(Throttled)
    async def _throttled(_request: Request, exc: Throttled) -> JSONResponse:
        return JSONResponse(
            {"detail": "throttled", "hint": exc.hint}, status_code=429, headers={"Retry-After": str(exc.retry_after)}
        )

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        return _failed(request, exc)

    def _failed(request: Request, exc: Exception) -> JSONResponse:
        """An error nobody foresaw: logged, audited, and answered without its details."""
        log.exception("unexpected error on %s %s", request.method, request.url.path, exc_info=exc)
        AuditLog(settings).record(
            getattr(request.state, "principal", None) or "anonymous",
            "api.error",
            request.url.path,
            False,
            reason=type(exc).__name__,
            client=_client(request),
        )
        query = request.url.path in QUERY_PATHS
        return JSONResponse(
            {"detail": "the query failed" if query else "internal error", "hint": "the error is in the audit log"},
            status_code=400 if query else 500,
        )

    @app.exception_handler(AccessDenied)
    async def _denied(_request: Request, exc: AccessDenied) -> JSONResponse:
        return JSONResponse({"detail": str(exc).splitlines()[0], "hint": exc.hint}, status_code=403)

    @app.exception_handler(NotFound)
    async def _not_found(_request: Request, exc: NotFound) -> JSONResponse:
        # Missing and not-yours are one answer: a 403 would confirm the thing exists.
        return JSONResponse({"detail": str(exc).splitlines()[0], "hint": exc.hint}, status_code=404)

    @app.exception_handler(GovernanceError)
    async def _invalid(_request: Request, exc: GovernanceError) -> JSONResponse:
        return JSONResponse({"detail": str(exc).splitlines()[0], "hint": exc.hint}, status_code=400)

    @app.exception_handler(SqlError)
    async def _sql(_request: Request, exc: SqlError) -> JSONResponse:
        return JSONResponse({"detail": str(exc).splitlines()[0]}, status_code=400)

    @app.exception_handler(ShoalError)
    async def _shoal(_request: Request, exc: ShoalError) -> JSONResponse:
        return JSONResponse({"detail": str(exc).splitlines()[0], "hint": exc.hint}, status_code=400)

    def spark() -> "SparkSession":
        from shoal.spark import get_spark

        return get_spark(settings)

    @app.get("/healthz", tags=["health"], responses={503: {"description": "the catalog database is unreachable"}})
    def healthz() -> JSONResponse:
        """Liveness and readiness for load balancers and service managers: no sign-in, no
        details beyond up or down (the reason goes to the server log)."""
        from sqlalchemy import text

        from shoal.lake.database import engine

        try:
            with engine(settings).connect() as conn:
                conn.execute(text("SELECT 1"))
        except Exception as exc:  # noqa: BLE001 - any failure reaching the database means "not ready"
            log.warning("health check: catalog database unreachable: %s", first_line(exc))
            return JSONResponse({"status": "unavailable"}, status_code=503, headers={"Cache-Control": "no-store"})
        return JSONResponse({"status": "ok"}, headers={"Cache-Control": "no-store"})

    app.include_router(resources.router(settings, Depends(current), spark))

    @app.get("/api/v1/me", response_model=MeOut)
    def me(who: Who) -> Any:
        return {"name": who.name, "admin": who.is_admin, "groups": sorted(who.groups)}

    @app.post("/api/v1/query", response_model=QueryOut, responses={400: {"description": "the query failed"}})
    def query(body: QueryIn, who: Who, request: Request) -> Any:
        try:
            result = GovernedSql(spark(), settings, who).execute(body.sql, limit=body.limit)
            return QueryOut(
                columns=result.columns,
                types=result.types,
                rows=[[to_json_value(v) for v in row] for row in result.rows],
            )
        except ShoalError:  # refused (403) or invalid (400): the handlers below answer
            raise
        except Exception as exc:  # noqa: BLE001 - audited and answered 400, never an unaudited 500
            return _failed(request, exc)

    @app.get("/api/v1/catalog/tables", response_model=list[TableOut], response_model_exclude_unset=True)
    def tables(who: Who) -> Any:
        out = [
            {key: value for key, value in entry.items() if key not in ("database", "table")}
            for entry in Governance(settings).visible_tables(spark(), who)
        ]
        AuditLog(settings).record(who.name, "catalog.list", None, True, tables=len(out))
        return out

    @app.get("/api/v1/catalog/tables/{database}/{table}", response_model=TableDetail, response_model_exclude_unset=True)
    def table(database: str, table: str, who: Who) -> Any:
        result = GovernedSql(spark(), settings, who).execute(
            f"DESCRIBE `{database.replace('`', '')}`.`{table.replace('`', '')}`"
        )
        columns = [{"name": r[0], "type": r[1]} for r in result.rows if not str(r[0]).startswith("#")]
        info = {str(r[0]).lstrip("# "): r[1] for r in result.rows if str(r[0]).startswith("#")}
        return {"name": f"{database}.{table}".lower(), "columns": columns, **info}

    @app.get("/api/v1/objects", response_model=list[ObjectOut], response_model_exclude_unset=True)
    def objects(
        who: Who,
        response: Response,
        type: Annotated[str | None, Query(max_length=200)] = None,
        lang: Annotated[str | None, Query(max_length=20)] = None,
        has_pii: bool | None = None,
        text: Annotated[str | None, Query(max_length=500)] = None,
        limit: Annotated[int, Query(ge=1, le=1000)] = 100,
        offset: Annotated[int, Query(ge=0, le=MAX_OFFSET)] = 0,
    ) -> Any:
        """One page of the object inventory; `X-Next-Offset` names the next page's offset (absent
        on the last page)."""
        from shoal.catalog import list_objects

        if not settings.governance.metadata_visible_to_all and not who.is_admin:
            raise AccessDenied("the object inventory is not open to all users here")
        rows = list_objects(
            spark(),
            media_type=type,
            language=lang,
            has_pii=has_pii,
            text=text,
            limit=offset + limit + 1,  # one more: is there a next page?
            principal=who,
            settings=settings,
        )
        page = rows[offset : offset + limit]
        if len(rows) > offset + limit and offset + limit <= MAX_OFFSET:
            response.headers["X-Next-Offset"] = str(offset + limit)
        AuditLog(settings).record(who.name, "catalog.objects", None, True, rows=len(page))
        gov = Governance(settings)
        return [{**{k: to_json_value(v) for k, v in r.items()}, **gov.object_info(r["object_id"])} for r in page]

    @app.get("/api/v1/access-points", response_model=list[AccessPointOut], response_model_exclude_unset=True)
    def access_points(who: Who) -> Any:
        return RawAccess(settings).list(who)

    @app.post(
        "/api/v1/access-points", status_code=201, response_model=AccessPointOut, response_model_exclude_unset=True
    )
    def create_access_point(body: AccessPointIn, who: Who) -> Any:
        return RawAccess(settings).create(
            who,
            body.name,
            prefix=body.prefix,
            principals=body.principals,
            tags=body.tags or None,
            cidrs=body.cidrs or None,
        )

    @app.delete("/api/v1/access-points/{name}", status_code=204)
    def delete_access_point(name: str, who: Who) -> None:
        RawAccess(settings).delete(who, name)

    @app.post("/api/v1/access-points/{name}/sign", response_model=SignedUrlOut, response_model_exclude_unset=True)
    def sign(name: str, body: SignIn, who: Who, request: Request) -> Any:
        return RawAccess(settings).sign(who, name, body.path, expires_in=body.expires_in, client=_client(request))

    @app.get("/raw/{name}/{path:path}")
    def raw(
        name: str,
        path: str,
        request: Request,
        creds: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
        expires: Annotated[int | None, Query(ge=0, le=2**40)] = None,
        principal: Annotated[str | None, Query(max_length=200)] = None,
        signature: Annotated[str | None, Query(max_length=128)] = None,
    ) -> Response:
        access = RawAccess(settings)
        client = _client(request)
        if signature is not None or expires is not None:
            if signature is None or expires is None or principal is None:
                raise AccessDenied("a signed URL needs expires, principal and signature")
            target = access.verify(
                name, path, expires=expires, principal_name=principal, signature=signature, client=client
            )
        else:
            target = access.resolve(current(request, creds), name, path, client=client)
        headers = {
            "X-Content-Type-Options": "nosniff",
            "Content-Security-Policy": "sandbox; default-src 'none'",
            "Cache-Control": "private, no-store",
        }
        if target.local is not None:
            return FileResponse(
                target.local, media_type="application/octet-stream", filename=target.name, headers=headers
            )

        def chunks() -> Iterator[bytes]:  # an object-store object, streamed without holding it in memory
            with storage.open_input(target.uri) as f:
                while block := f.read(1 << 20):
                    yield block

        headers["Content-Disposition"] = f"attachment; filename*=UTF-8''{quote(target.name)}"
        headers["Content-Length"] = str(target.size)
        return StreamingResponse(chunks(), media_type="application/octet-stream", headers=headers)

    @app.post(
        "/api/v1/access-requests", status_code=201, response_model=AccessRequestOut, response_model_exclude_unset=True
    )
    def request_access(body: AccessRequestIn, who: Who) -> Any:
        return AccessRequests(settings).request(who, body.table, body.reason)

    @app.get("/api/v1/access-requests", response_model=list[AccessRequestOut], response_model_exclude_unset=True)
    def access_requests(
        who: Who, status: Annotated[str | None, Query(pattern="^(pending|approved|rejected)$")] = None
    ) -> Any:
        return AccessRequests(settings).list(who, status)

    @app.post(
        "/api/v1/access-requests/{request_id}/approve",
        response_model=AccessRequestOut,
        response_model_exclude_unset=True,
    )
    def approve(request_id: RequestId, who: Who, body: DecisionIn | None = None) -> Any:
        return AccessRequests(settings).decide(who, request_id, approve=True, note=body.note if body else None)

    @app.post(
        "/api/v1/access-requests/{request_id}/reject",
        response_model=AccessRequestOut,
        response_model_exclude_unset=True,
    )
    def reject(request_id: RequestId, who: Who, body: DecisionIn | None = None) -> Any:
        return AccessRequests(settings).decide(who, request_id, approve=False, note=body.note if body else None)

    @app.get("/api/v1/audit", response_model=list[AuditEntryOut], response_model_exclude_unset=True)
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

    from shoal.web.console import mount

    mount(app, settings)
    return app


def _client(request: Request) -> str | None:
    return request.client.host if request.client else None
