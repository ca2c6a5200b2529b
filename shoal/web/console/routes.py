"""Console pages: sign-in, catalog, objects, SQL, search, dashboards, workflows, governance."""

from __future__ import annotations

import logging
import secrets
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import urlencode

from fastapi import APIRouter, FastAPI, Form, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles
from jinja2 import Environment, FileSystemLoader, select_autoescape

from shoal import __version__
from shoal.config import Settings
from shoal.exceptions import first_line
from shoal.governance import AuditLog, AuthError, Governance, GovernanceError, Principal, Principals
from shoal.governance.principals import token_id
from shoal.governance.throttle import Throttled
from shoal.web.console import sessions as sess

HERE = Path(__file__).resolve().parent.parent
PAGE_SIZE = 50
MAX_QUERY_ROWS = 10_000
# Pictures the console shows inline; anything else is only downloaded.
INLINE_IMAGES = {"image/png", "image/jpeg", "image/gif", "image/webp", "image/bmp"}
CSP = (
    "default-src 'self'; script-src 'self'{eval}; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
    "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'; connect-src 'self'"
)


class LoginRequired(Exception):
    def __init__(self, next_url: str) -> None:
        self.next_url = next_url


class CsrfFailed(Exception):
    pass


def _safe_next(value: str | None) -> str:
    """Only local paths: a sign-in link must not bounce people to another site."""
    if not value or not value.startswith("/") or value.startswith("//") or "\\" in value:
        return "/catalog"
    return value


class Console:
    """What every page needs: settings, templates, the signed-in viewer, CSRF checks, audit."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.env = Environment(
            loader=FileSystemLoader(str(HERE / "templates")),
            autoescape=select_autoescape(default=True, default_for_string=True),
            trim_blocks=True,
            lstrip_blocks=True,
        )
        self.env.filters["num"] = lambda v, fmt=",.0f": "" if v is None else format(v, fmt)
        self.principals = Principals(settings)
        self.sessions = sess.Sessions(settings)
        self.audit = AuditLog(settings)

    def spark(self):
        from shoal.spark import get_spark

        return get_spark(self.settings)

    def viewer(self, request: Request) -> tuple[Principal, sess.Session]:
        """The signed-in principal and session, or a redirect to the sign-in page."""
        cookie = request.cookies.get(sess.COOKIE)
        session = self.sessions.get(cookie)
        if session is None:
            raise LoginRequired(request.url.path + (f"?{request.url.query}" if request.url.query else ""))
        try:
            return self.principals.principal(session.principal), session
        except (GovernanceError, AuthError):  # the principal was removed: the session dies with it
            self.sessions.end(cookie)
            raise LoginRequired(request.url.path) from None

    def check_csrf(self, request: Request, session: sess.Session, form_value: str | None) -> None:
        if not sess.same(form_value or request.headers.get("x-csrf-token"), session.csrf):
            raise CsrfFailed()

    def page(self, request: Request, template: str, who: Principal | None, session: sess.Session | None, **ctx: Any):
        html = self.env.get_template(template).render(
            request=request,
            who=who,
            workflows_link=who is not None and self.sees_workflows(who),
            csrf=session.csrf if session else "",
            version=__version__,
            path=request.url.path,
            **ctx,
        )
        response = HTMLResponse(html, status_code=int(ctx.get("status", 200)))
        # Vega compiles chart expressions with Function(): only chart pages allow it.
        response.headers["Content-Security-Policy"] = CSP.format(eval=" 'unsafe-eval'" if ctx.get("charts") else "")
        return response

    def error(self, request: Request, who: Principal, session: sess.Session, status: int, message: str):
        return self.page(request, "error.html", who, session, status=status, message=message)

    def workflow_privileges(self, who: Principal, name: str) -> set[str]:
        """SELECT (see it, its executions and step results) and EXECUTE (start, resume): see
        Governance.workflow_privileges (admins, the operators group, grants ON WORKFLOW)."""
        return Governance(self.settings).workflow_privileges(who, name)

    def sees_workflows(self, who: Principal) -> bool:
        visible = Governance(self.settings).workflows_visible(who)
        return visible is None or bool(visible)

    def refuse(
        self, request: Request, who: Principal, session: sess.Session, action: str, resource: str | None, message: str
    ):
        """A 403 page, with its audit row."""
        self.audit.record(who.name, action, resource, False, reason=message, via="console")
        return self.error(request, who, session, 403, message)


def mount(app: FastAPI, settings: Settings) -> None:
    from shoal.web.console.pages import boards, catalog, governance, query, workflows

    c = Console(settings)
    router = APIRouter(include_in_schema=False)
    app.mount("/static", StaticFiles(directory=str(HERE / "static")), name="static")

    @app.exception_handler(LoginRequired)
    async def _login(_request: Request, exc: LoginRequired) -> Response:
        return RedirectResponse("/login?" + urlencode({"next": exc.next_url}), status_code=303)

    @app.exception_handler(CsrfFailed)
    async def _csrf(_request: Request, _exc: CsrfFailed) -> Response:
        return HTMLResponse(
            "<h1>403</h1><p>The form expired or did not come from this console. Go back, reload the page "
            "and try again.</p>",
            status_code=403,
        )

    @app.middleware("http")
    async def _headers(request: Request, call_next):
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
        response = c.page(request, "login.html", None, None, login_csrf=token, next=_safe_next(next), error=error)
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
            message = "Too many failed sign-ins. Try again later." if throttled else first_line(exc)
            return RedirectResponse(
                "/login?" + urlencode({"next": _safe_next(next), "error": message}), status_code=303
            )
        cookie, _session = c.sessions.create(who.name, token_id=token_id(token) if method == "token" else None)
        c.audit.record(who.name, "console.login", None, True, client=client, via=method)
        response = RedirectResponse(_safe_next(next), status_code=303)
        response.set_cookie(
            sess.COOKIE,
            cookie,
            httponly=True,
            samesite="lax",
            secure=c.settings.server.secure_cookies,
            max_age=int(c.settings.server.session_hours * 3600),
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

    for pages in (catalog, query, boards, workflows, governance):
        pages.add(router, c)
    app.include_router(router)


def identifier(name: str) -> bool:
    return name.replace("_", "a").isalnum() and len(name) <= 128


def quietly(fn):
    """Workflow runs in a console thread: the execution's record holds any failure; log the rest."""

    def run(*args, **kwargs):
        try:
            fn(*args, **kwargs)
        except Exception:
            logging.getLogger("shoal.console").exception("workflow run from the console failed")

    return run
