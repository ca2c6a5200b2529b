"""The console's core that every page depends on: the Console (settings, templates, viewer,
CSRF, audit), its limits, and small helpers. `routes.py` only mounts the pages."""

from __future__ import annotations

import datetime as dt
import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fastapi import Request
from fastapi.responses import HTMLResponse
from jinja2 import Environment, FileSystemLoader, select_autoescape
from markupsafe import Markup

from shoal import __version__
from shoal.config import Settings
from shoal.governance import AuditLog, AuthError, Governance, GovernanceError, Principal, Principals
from shoal.web.console import sessions as sess

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

HERE = Path(__file__).resolve().parent.parent
PAGE_SIZE = 50
# Pictures the console shows inline; anything else is only downloaded.
INLINE_IMAGES = {"image/png", "image/jpeg", "image/gif", "image/webp", "image/bmp"}
# What the original-file view shows in the page (besides audio/* and video/* players).
INLINE_MEDIA = INLINE_IMAGES | {"application/pdf"}
CSP = (
    "default-src 'self'; script-src 'self'{eval}; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
    "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'; connect-src 'self'; "
    "media-src 'self'; frame-src 'self'"
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
        self.env.filters["when"] = when
        self.env.filters["duration_ms"] = duration_ms
        self.env.filters["bytes"] = human_bytes
        self.env.filters["cell"] = cell
        self.principals = Principals(settings)
        self.sessions = sess.Sessions(settings)
        self.audit = AuditLog(settings)
        # SQL statements running now (pages/query.py), by (principal, the run token their page
        # posted): the Spark job group each runs in, so its author (and nobody else) can cancel it.
        self.running: dict[tuple[str, str], str] = {}
        self.cancelled: set[str] = set()
        self.run_lock = threading.Lock()

    def spark(self) -> SparkSession:
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

    def page(
        self, request: Request, template: str, who: Principal | None, session: sess.Session | None, **ctx: Any
    ) -> HTMLResponse:
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

    def error(self, request: Request, who: Principal, session: sess.Session, status: int, message: str) -> HTMLResponse:
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
    ) -> HTMLResponse:
        """A 403 page, with its audit row."""
        self.audit.record(who.name, action, resource, False, reason=message, via="console")
        return self.error(request, who, session, 403, message)


def when(value: Any) -> Markup | str:
    """One time format everywhere: a <time> with the exact UTC instant; console.js shows it in
    the reader's own zone ("3 min ago", the exact local time with its zone on hover). Naive
    datetimes are UTC (how the lake and the state database keep them)."""
    if value is None or value == "":
        return ""
    if isinstance(value, str):
        try:
            value = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return value
    if isinstance(value, int | float) and not isinstance(value, bool):
        value = dt.datetime.fromtimestamp(value, dt.UTC)
    if isinstance(value, dt.date) and not isinstance(value, dt.datetime):
        return value.isoformat()
    if not isinstance(value, dt.datetime):
        return str(value)
    if value.tzinfo is None:
        value = value.replace(tzinfo=dt.UTC)
    utc = value.astimezone(dt.UTC)
    exact = utc.strftime("%Y-%m-%d %H:%M:%S UTC")
    return Markup('<time class="when" datetime="{0}" title="{1}">{1}</time>').format(
        utc.isoformat(timespec="seconds"), exact
    )


def cell(value: Any) -> str:
    """A value as people read it, not as Python prints it: maps as key=value, lists joined,
    booleans as true/false, NULL as ∅ (autoescaped by the template like any text)."""
    if value is None:
        return "∅"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return ", ".join(f"{k}={cell(v)}" for k, v in value.items())
    if isinstance(value, list | tuple):
        return "[" + ", ".join(cell(v) for v in value) + "]"
    return str(value)


def human_bytes(value: Any) -> str:
    """Sizes for people, in binary units: 812 B, 14.2 KiB, 3.1 MiB."""
    if value is None:
        return ""
    size = float(value)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            return f"{int(size)} B" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return ""  # not reached


def duration_ms(value: Any) -> str:
    """Milliseconds for people: 840 ms, 2.4 s, 3 min 5 s."""
    if value is None:
        return ""
    ms = int(value)
    if ms < 1000:
        return f"{ms} ms"
    if ms < 60_000:
        return f"{ms / 1000:.1f} s"
    return f"{ms // 60_000} min {ms % 60_000 // 1000} s"


def identifier(name: str) -> bool:
    return name.replace("_", "a").isalnum() and len(name) <= 128


def quietly(fn: Callable[..., object]) -> Callable[..., None]:
    """Workflow runs in a console thread: the execution's record holds any failure; log the rest."""

    def run(*args: Any, **kwargs: Any) -> None:
        try:
            fn(*args, **kwargs)
        except Exception:
            logging.getLogger("shoal.console").exception("workflow run from the console failed")

    return run
