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
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Annotated

from fastapi import Depends, FastAPI, HTTPException, Request
from fastapi.responses import JSONResponse, Response
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from fastapi_offline import FastAPIOffline

from shoal import __version__
from shoal.admission import Overloaded
from shoal.config import Settings
from shoal.exceptions import ShoalError, SqlError, first_line
from shoal.governance import (
    AccessDenied,
    AuditLog,
    AuthError,
    GovernanceError,
    Principal,
    Principals,
)
from shoal.governance.errors import NotFound
from shoal.governance.throttle import Throttled
from shoal.spark import jvm_down
from shoal.web.routers import access, catalog, quality, query, raw, search, workflows
from shoal.web.routers.common import client_address, failed

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

API_CSP = "default-src 'none'; frame-ancestors 'none'"
DOCS_CSP = (
    "default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; worker-src 'self' blob:; frame-ancestors 'none'"
)
log = logging.getLogger("shoal.api")


def _engine_down(settings: Settings) -> Response | None:
    """503 for an API request while serve's Spark JVM is dead (every query would fail), with
    when to come back: serve exits and its service manager restarts it."""
    if jvm_down() is None:
        return None
    return JSONResponse(
        {"detail": "unavailable: the query engine is restarting"},
        status_code=503,
        headers={"Retry-After": str(max(1, round(settings.server.unavailable_exit_s)) + 5)},
    )


def _health(settings: Settings) -> JSONResponse:
    from sqlalchemy import text

    from shoal.lake.database import engine

    down = jvm_down()
    if down is None:
        try:
            with engine(settings).connect() as conn:
                conn.execute(text("SELECT 1"))
        except Exception as exc:  # noqa: BLE001 - any failure reaching the database means "not ready"
            down = f"catalog database unreachable: {first_line(exc)}"
    if down is not None:
        log.warning("health check: %s", down)
        return JSONResponse({"status": "unavailable"}, status_code=503, headers={"Cache-Control": "no-store"})
    return JSONResponse({"status": "ok"}, headers={"Cache-Control": "no-store"})


def create_app(settings: Settings) -> FastAPI:
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
        client = client_address(request)
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

    @app.middleware("http")
    async def _api_headers(request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        path = request.url.path
        response = _engine_down(settings) if path.startswith("/api/") else None
        if response is None:
            response = await call_next(request)
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

    @app.exception_handler(Overloaded)
    async def _overloaded(_request: Request, exc: Overloaded) -> JSONResponse:
        # A full queue: 429, come back soon; a wait that timed out: 503, the server is busy.
        return JSONResponse(
            {"detail": first_line(exc), "hint": exc.hint},
            status_code=503 if exc.timed_out else 429,
            headers={"Retry-After": str(exc.retry_after)},
        )

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        return failed(settings, request, exc)

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

    @app.get(
        "/healthz",
        tags=["health"],
        responses={503: {"description": "the catalog database is unreachable, or the Spark JVM has died"}},
    )
    def healthz() -> JSONResponse:
        """Liveness and readiness for load balancers and service managers: no sign-in, no
        details beyond up or down (the reason goes to the server log)."""
        return _health(settings)

    app.include_router(search.router(settings, Depends(current), spark))
    app.include_router(workflows.router(settings, Depends(current), spark))
    app.include_router(quality.router(settings, Depends(current), spark))
    app.include_router(query.router(settings, Depends(current), spark))
    app.include_router(catalog.router(settings, Depends(current), spark))
    app.include_router(raw.router(settings, Depends(current), current, bearer))
    app.include_router(access.router(settings, Depends(current)))

    from shoal.web.console import mount

    mount(app, settings)
    return app
