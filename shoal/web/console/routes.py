"""Console pages: sign-in, catalog, objects, SQL, search, dashboards, workflows, governance."""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Callable
from typing import Annotated
from urllib.parse import urlencode

from fastapi import APIRouter, FastAPI, Form, Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.responses import RedirectResponse, Response
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException as StarletteHTTPException

from shoal.config import Settings
from shoal.exceptions import first_line
from shoal.governance import AuthError, GovernanceError
from shoal.governance.principals import token_id
from shoal.governance.throttle import Throttled
from shoal.lake.database import utcnow
from shoal.web.console import sessions as sess
from shoal.web.console.base import CSP, HERE, Console, CsrfFailed, LoginRequired, _safe_next
from shoal.web.console.pages import admin, boards, catalog, governance, objects, originals, query, workflows

# What the sign-in page may say, by the code in its `?error=`; any other code shows nothing.
# Token failures share one message: whether a token exists, expired or was revoked is the
# owner's to learn from `shoal token list`, not a stranger's from the sign-in page.
LOGIN_ERRORS = {
    "password": "wrong user name or password",
    "token": "That token is not valid (wrong, expired or revoked).",
    "throttled": "Too many failed sign-ins. Try again later.",
}


# Paths that keep JSON errors: the HTTP API and its documentation.
API_PREFIXES = ("/api/", "/healthz", "/docs", "/openapi", "/redoc", "/static/", "/raw/")


def mount(app: FastAPI, settings: Settings) -> None:
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

    @app.middleware("http")
    async def _headers(request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        response = await call_next(request)
        if not request.url.path.startswith(("/api/", "/raw/", "/docs", "/openapi", "/redoc")):
            response.headers.setdefault("Content-Security-Policy", CSP.format(eval=""))
            response.headers.setdefault("X-Content-Type-Options", "nosniff")
            response.headers.setdefault("X-Frame-Options", "DENY")
            response.headers.setdefault("Referrer-Policy", "no-referrer")
            if not request.url.path.startswith("/static/"):
                response.headers.setdefault("Cache-Control", "no-store")
        return response

    # ---- sign-in -----------------------------------------------------------------------
    @router.get("/login")
    def login_form(request: Request, next: str | None = None, error: str | None = None) -> Response:
        token = request.cookies.get(sess.LOGIN_COOKIE) or secrets.token_urlsafe(24)
        # Only a message of ours, chosen by its code: the URL is anyone's to write, so text
        # taken from it would let a link put words in the console's mouth.
        message = LOGIN_ERRORS.get(error or "")
        response = c.page(request, "login.html", None, None, login_csrf=token, next=_safe_next(next), error=message)
        response.set_cookie(
            sess.LOGIN_COOKIE, token, httponly=True, samesite="strict", secure=c.settings.server.secure_cookies
        )
        return response

    @router.post("/login")
    def login(
        request: Request,
        csrf: Annotated[str, Form()] = "",
        method: Annotated[str, Form()] = "password",
        user: Annotated[str, Form(max_length=200)] = "",
        password: Annotated[str, Form(max_length=1000)] = "",
        token: Annotated[str, Form(max_length=2000)] = "",
        next: Annotated[str, Form(max_length=2000)] = "/catalog",
    ) -> Response:
        if not sess.same(csrf, request.cookies.get(sess.LOGIN_COOKIE)):
            raise CsrfFailed()
        client = request.client.host if request.client else None
        try:
            if method == "token" and token:
                who = c.principals.authenticate(token, client=client)
            elif method != "token" and user and password:
                who = c.principals.check_password(user, password, client=client)
            else:  # nothing to check (and nothing to count against the account)
                raise AuthError("wrong user name or password")
        except (AuthError, GovernanceError) as exc:
            throttled = isinstance(exc, Throttled)
            c.audit.record(
                user or "anonymous",
                "console.login",
                None,
                False,
                reason="throttled" if throttled else first_line(exc),
                client=client,
                via=method,
            )
            code = "throttled" if throttled else ("token" if method == "token" else "password")
            return RedirectResponse("/login?" + urlencode({"next": _safe_next(next), "error": code}), status_code=303)
        try:
            cookie, session = c.sessions.create(who.name, token_id=token_id(token) if method == "token" else None)
        except AuthError as exc:  # the token expired or was revoked in between
            c.audit.record(who.name, "console.login", None, False, reason=first_line(exc), client=client, via=method)
            return RedirectResponse(
                "/login?" + urlencode({"next": _safe_next(next), "error": "token"}), status_code=303
            )
        c.audit.record(who.name, "console.login", None, True, client=client, via=method)
        response = RedirectResponse(_safe_next(next), status_code=303)
        # The cookie lasts no longer than the session (capped at its token's expiry).
        left = (session.expires_at - utcnow()).total_seconds()
        response.set_cookie(
            sess.COOKIE,
            cookie,
            httponly=True,
            samesite="lax",
            secure=c.settings.server.secure_cookies,
            max_age=max(1, int(left)),
        )
        response.delete_cookie(sess.LOGIN_COOKIE)
        return response

    @router.post("/logout")
    def logout(request: Request, csrf: Annotated[str, Form()] = "") -> Response:
        who, session = c.viewer(request)
        c.check_csrf(request, session, csrf)
        c.sessions.end(request.cookies.get(sess.COOKIE))
        c.audit.record(who.name, "console.logout", None, True)
        response = RedirectResponse("/login", status_code=303)
        response.delete_cookie(sess.COOKIE)
        return response

    @router.get("/")
    def home() -> Response:
        return RedirectResponse("/catalog", status_code=303)

    for pages in (catalog, objects, originals, query, boards, workflows, governance, admin):
        pages.add(router, c)
    app.include_router(router)
