"""Sign-in and sign-out: the password or token form, the session cookie, the audit rows."""

from __future__ import annotations

import secrets
from typing import Annotated
from urllib.parse import urlencode

from fastapi import APIRouter, Form, Request
from fastapi.responses import RedirectResponse, Response

from shoal.exceptions import first_line
from shoal.governance import AuthError, GovernanceError
from shoal.governance.principals import token_id
from shoal.governance.throttle import Throttled
from shoal.lake.database import utcnow
from shoal.routing import Routes
from shoal.web.console import sessions as sess
from shoal.web.console.base import Console, CsrfFailed, _safe_next

# What the sign-in page may say, by the code in its `?error=`; any other code shows nothing.
# Token failures share one message: whether a token exists, expired or was revoked is the
# owner's to learn from `shoal token list`, not a stranger's from the sign-in page.
LOGIN_ERRORS = {
    "password": "wrong user name or password",
    "token": "That token is not valid (wrong, expired or revoked).",
    "throttled": "Too many failed sign-ins. Try again later.",
}

routes = Routes()


@routes.get("/login")
def login_form(c: Console, request: Request, next: str | None = None, error: str | None = None) -> Response:
    token = request.cookies.get(sess.LOGIN_COOKIE) or secrets.token_urlsafe(24)
    # Only a message of ours, chosen by its code: the URL is anyone's to write, so text
    # taken from it would let a link put words in the console's mouth.
    message = LOGIN_ERRORS.get(error or "")
    response = c.page(request, "login.html", None, None, login_csrf=token, next=_safe_next(next), error=message)
    response.set_cookie(
        sess.LOGIN_COOKIE, token, httponly=True, samesite="strict", secure=c.settings.server.secure_cookies
    )
    return response


@routes.post("/login")
def login(
    c: Console,
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
        return RedirectResponse("/login?" + urlencode({"next": _safe_next(next), "error": "token"}), status_code=303)
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


@routes.post("/logout")
def logout(c: Console, request: Request, csrf: Annotated[str, Form()] = "") -> Response:
    who, session = c.viewer(request)
    c.check_csrf(request, session, csrf)
    c.sessions.end(request.cookies.get(sess.COOKIE))
    c.audit.record(who.name, "console.logout", None, True)
    response = RedirectResponse("/login", status_code=303)
    response.delete_cookie(sess.COOKIE)
    return response


@routes.get("/")
def home(_c: Console) -> Response:
    return RedirectResponse("/catalog", status_code=303)


def add(router: APIRouter, c: Console) -> None:
    """Mount this module's pages on the console's router, in the order they are defined above."""
    routes.mount(router, c)
