"""The console's mount: error pages, security headers, then every page module (pages/)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from urllib.parse import urlencode

from fastapi import APIRouter, FastAPI, Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.responses import FileResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException as StarletteHTTPException

from shoal.config import Settings
from shoal.web.console.base import CSP, HERE, Console, CsrfFailed, LoginRequired
from shoal.web.console.pages import admin, boards, catalog, governance, objects, originals, query, signin, workflows

# Paths that keep JSON errors: the HTTP API and its documentation.
API_PREFIXES = ("/api/", "/healthz", "/docs", "/openapi", "/redoc", "/static/", "/raw/")
ICON_CACHE = {"Cache-Control": "public, max-age=86400"}


async def security_headers(request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
    """The console's pages are not framed, sniffed or cached; the API and raw reads set their own."""
    response = await call_next(request)
    if not request.url.path.startswith(("/api/", "/raw/", "/docs", "/openapi", "/redoc")):
        response.headers.setdefault("Content-Security-Policy", CSP.format(eval=""))
        response.headers.setdefault("X-Content-Type-Options", "nosniff")
        response.headers.setdefault("X-Frame-Options", "DENY")
        response.headers.setdefault("Referrer-Policy", "no-referrer")
        if not request.url.path.startswith("/static/"):
            response.headers.setdefault("Cache-Control", "no-store")
    return response


def mount(app: FastAPI, settings: Settings) -> None:
    """The console on `app`: static files, styled error pages, security headers, then every page."""
    c = Console(settings)
    router = APIRouter(include_in_schema=False)
    app.mount("/static", StaticFiles(directory=str(HERE / "static")), name="static")

    @app.exception_handler(LoginRequired)
    async def _login(_request: Request, exc: LoginRequired) -> Response:
        return RedirectResponse("/login?" + urlencode({"next": exc.next_url}), status_code=303)

    @app.exception_handler(CsrfFailed)
    async def _csrf(request: Request, _exc: CsrfFailed) -> Response:
        return _styled_error(
            request,
            403,
            "The form expired or did not come from this console. Go back, reload the page and try again.",
        )

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException) -> Response:
        # The API (and its docs) answer JSON; a person browsing the console gets a page.
        if request.url.path.startswith(API_PREFIXES):
            return await http_exception_handler(request, exc)
        messages = {404: "There is no page at this address.", 405: "This address does not take that request."}
        return _styled_error(request, exc.status_code, messages.get(exc.status_code, str(exc.detail)))

    def _styled_error(request: Request, status: int, message: str) -> Response:
        try:
            who, session = c.viewer(request)
        except LoginRequired:
            who, session = None, None
        return c.page(request, "error.html", who, session, status=status, message=message)

    async def _favicon() -> Response:
        # Browsers ask for /favicon.ico on every page whatever the page links: answer, not 404.
        return FileResponse(HERE / "static" / "favicon.ico", media_type="image/x-icon", headers=ICON_CACHE)

    app.add_api_route("/favicon.ico", _favicon, methods=["GET"], include_in_schema=False)
    app.middleware("http")(security_headers)

    for pages in (signin, catalog, objects, originals, query, boards, workflows, governance, admin):
        pages.add(router, c)
    app.include_router(router)
