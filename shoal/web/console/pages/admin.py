"""Governance editing for admins: principals and groups, API tokens, access points.

Every change goes through the governance library (which validates names and keeps its own
invariants), is CSRF-checked like every console form, and is audited under the signed-in
principal's name, refusals too. Notices are picked by code from the URL, never taken from it.
"""

from __future__ import annotations

from typing import Annotated, Any
from urllib.parse import urlencode

from fastapi import APIRouter, Form, Path, Query, Request
from fastapi.responses import RedirectResponse, Response

from shoal.exceptions import ShoalError, first_line
from shoal.governance import AccessDenied, GovernanceError, Principal
from shoal.governance.access import RawAccess
from shoal.governance.principals import ADMIN, EVERYONE
from shoal.routing import Routes
from shoal.web.console.base import Console
from shoal.web.console.history import QueryHistory
from shoal.web.console.sessions import Session

NAME = r"^[A-Za-z][A-Za-z0-9_.@-]{0,199}$"  # the library's principal names (it checks them again)
TOKEN_ID = r"^[0-9a-f]{16}$"
ONLY_ADMINS = "only admins manage principals, groups, tokens and access points in the console"

# The notices each page may show, by the code in `?done=`.
MESSAGES = {
    "user": "user created",
    "group": "group created",
    "deleted": "principal deleted",
    "joined": "member added",
    "left": "member removed",
    "revoked": "token revoked",
    "ap-created": "access point created",
    "ap-deleted": "access point deleted",
}


def _split(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def _back(path: str, done: str) -> RedirectResponse:
    return RedirectResponse(f"{path}?{urlencode({'done': done})}", status_code=303)


routes = Routes()


def admin_only(
    c: Console, request: Request, action: str, resource: str | None, csrf: str | None = None
) -> tuple[Principal, Session, Response | None]:
    """The viewer (with the form's CSRF token checked, for a POST); and a refusal page
    (audited) unless they are an admin."""
    who, session = c.viewer(request)
    if csrf is not None:
        c.check_csrf(request, session, csrf)
    if not who.is_admin:
        return who, session, c.refuse(request, who, session, action, resource, ONLY_ADMINS)
    return who, session, None


def failed(
    c: Console, request: Request, who: Principal, session: Session, action: str, resource: str | None, exc: Exception
) -> Response:
    """A change the library refused: its reason on a 400 page, and a deny row."""
    c.audit.record(who.name, action, resource, False, reason=first_line(exc), via="console")
    return c.error(request, who, session, 400, f"{action} refused: {first_line(exc)}")


# ---- principals and groups -----------------------------------------------------------------
@routes.get("/governance/principals")
def principals_page(c: Console, request: Request, done: Annotated[str | None, Query(max_length=20)] = None) -> Response:
    who, session, refused = admin_only(c, request, "principal.list", None)
    if refused:
        return refused
    rows = c.principals.list()
    users = [r for r in rows if r["kind"] == "user"]
    groups = [
        {**g, "members": [u["name"] for u in users if g["name"] in u["groups"]]} for g in rows if g["kind"] == "group"
    ]
    return c.page(
        request,
        "principals.html",
        who,
        session,
        users=users,
        groups=groups,
        builtin=(ADMIN, EVERYONE),
        message=MESSAGES.get(done or ""),
    )


@routes.post("/governance/principals")
def principal_create(
    c: Console,
    request: Request,
    name: Annotated[str, Form(min_length=1, max_length=200)],
    kind: Annotated[str, Form(pattern="^(user|group)$")] = "user",
    admin: Annotated[str, Form(max_length=5)] = "",
    password: Annotated[str, Form(max_length=1000)] = "",
    csrf: Annotated[str, Form()] = "",
) -> Response:
    name = name.strip()
    who, session, refused = admin_only(c, request, "principal.create", name, csrf)
    if refused:
        return refused
    try:
        if password and len(password) < 8:
            raise GovernanceError("a password needs at least 8 characters")
        c.principals.add(name, kind=kind, admin=bool(admin) and kind == "user", password=password or None)
    except ShoalError as exc:
        return failed(c, request, who, session, "principal.create", name, exc)
    c.audit.record(
        who.name, "principal.create", name, True, via="console", kind=kind, admin=bool(admin) and kind == "user"
    )
    return _back("/governance/principals", kind)


@routes.post("/governance/principals/{name}/delete")
def principal_delete(
    c: Console, request: Request, name: Annotated[str, Path(pattern=NAME)], csrf: Annotated[str, Form()] = ""
) -> Response:
    who, session, refused = admin_only(c, request, "principal.delete", name, csrf)
    if refused:
        return refused
    if name == who.name:  # an admin cannot lock themself out from the console
        return failed(c, request, who, session, "principal.delete", name, GovernanceError("you cannot delete yourself"))
    try:
        c.principals.remove(name)
    except ShoalError as exc:
        return failed(c, request, who, session, "principal.delete", name, exc)
    QueryHistory(c.settings).forget(name)  # as `shoal principal delete` does
    c.audit.record(who.name, "principal.delete", name, True, via="console")
    return _back("/governance/principals", "deleted")


@routes.post("/governance/groups/{group}/members")
def member_add(
    c: Console,
    request: Request,
    group: Annotated[str, Path(pattern=NAME)],
    member: Annotated[str, Form(min_length=1, max_length=200)],
    csrf: Annotated[str, Form()] = "",
) -> Response:
    who, session, refused = admin_only(c, request, "group.add", group, csrf)
    if refused:
        return refused
    try:
        c.principals.add_member(group, member.strip())
    except ShoalError as exc:
        return failed(c, request, who, session, "group.add", group, exc)
    c.audit.record(who.name, "group.add", group, True, via="console", member=member.strip())
    return _back("/governance/principals", "joined")


@routes.post("/governance/groups/{group}/members/{member}/remove")
def member_remove(
    c: Console,
    request: Request,
    group: Annotated[str, Path(pattern=NAME)],
    member: Annotated[str, Path(pattern=NAME)],
    csrf: Annotated[str, Form()] = "",
) -> Response:
    who, session, refused = admin_only(c, request, "group.remove", group, csrf)
    if refused:
        return refused
    try:
        c.principals.get_row(group)
        c.principals.remove_member(group, member)
    except ShoalError as exc:
        return failed(c, request, who, session, "group.remove", group, exc)
    c.audit.record(who.name, "group.remove", group, True, via="console", member=member)
    return _back("/governance/principals", "left")


# ---- API tokens ----------------------------------------------------------------------------
def tokens_view(
    c: Console,
    request: Request,
    who: Principal,
    session: Session,
    *,
    message: str | None,
    made: dict[str, Any] | None = None,
) -> Response:
    users = [r["name"] for r in c.principals.list() if r["kind"] == "user"]
    tokens = sorted(c.principals.list_tokens(), key=lambda t: t["created_at"], reverse=True)
    return c.page(request, "tokens.html", who, session, tokens=tokens, users=users, made=made, message=message)


@routes.get("/governance/tokens")
def tokens_page(c: Console, request: Request, done: Annotated[str | None, Query(max_length=20)] = None) -> Response:
    who, session, refused = admin_only(c, request, "token.list", None)
    if refused:
        return refused
    return tokens_view(c, request, who, session, message=MESSAGES.get(done or ""))


@routes.post("/governance/tokens")
def token_create(
    c: Console,
    request: Request,
    principal: Annotated[str, Form(min_length=1, max_length=200)],
    description: Annotated[str, Form(max_length=500)] = "",
    expires_days: Annotated[float | None, Form(gt=0, le=3650)] = None,
    csrf: Annotated[str, Form()] = "",
) -> Response:
    who, session, refused = admin_only(c, request, "token.create", principal, csrf)
    if refused:
        return refused
    try:
        token_id, secret = c.principals.create_token(
            principal, description=description.strip() or None, expires_in_days=expires_days
        )
    except ShoalError as exc:
        return failed(c, request, who, session, "token.create", principal, exc)
    # The row names the token by id; the secret is in this one response only (never logged, not kept).
    c.audit.record(who.name, "token.create", token_id, True, via="console", user=principal)
    made = {"id": token_id, "principal": principal, "secret": secret}
    return tokens_view(c, request, who, session, message=f"token {token_id} created", made=made)


@routes.post("/governance/tokens/{token_id}/revoke")
def token_revoke(
    c: Console, request: Request, token_id: Annotated[str, Path(pattern=TOKEN_ID)], csrf: Annotated[str, Form()] = ""
) -> Response:
    who, session, refused = admin_only(c, request, "token.revoke", token_id, csrf)
    if refused:
        return refused
    try:
        c.principals.revoke_token(token_id)
    except ShoalError as exc:
        return failed(c, request, who, session, "token.revoke", token_id, exc)
    c.audit.record(who.name, "token.revoke", token_id, True, via="console")
    return _back("/governance/tokens", "revoked")


# ---- access points -------------------------------------------------------------------------
@routes.get("/governance/access-points")
def access_points_page(
    c: Console, request: Request, done: Annotated[str | None, Query(max_length=20)] = None
) -> Response:
    """Everyone sees the access points that name them; admins see all and edit them."""
    who, session = c.viewer(request)
    names = [r["name"] for r in c.principals.list()] if who.is_admin else []
    return c.page(
        request,
        "access_points.html",
        who,
        session,
        access_points=RawAccess(c.settings).list(who),
        names=names,
        message=MESSAGES.get(done or ""),
    )


@routes.post("/governance/access-points")
def access_point_create(
    c: Console,
    request: Request,
    name: Annotated[str, Form(min_length=1, max_length=63)],
    principals: Annotated[list[str] | None, Form()] = None,
    prefix: Annotated[str, Form(max_length=1000)] = "",
    tags: Annotated[str, Form(max_length=2000)] = "",
    cidrs: Annotated[str, Form(max_length=2000)] = "",
    csrf: Annotated[str, Form()] = "",
) -> Response:
    name = name.strip()
    who, session, refused = admin_only(c, request, "access_point.create", name, csrf)
    if refused:
        return refused
    try:
        tag_map = {}
        for item in _split(tags):
            key, sep, value = item.partition("=")
            if not sep:
                raise GovernanceError(f"tag {item!r}: write KEY=VALUE")
            tag_map[key.strip()] = value.strip()
        # The library audits a created access point under `who`; a refusal is audited here.
        RawAccess(c.settings).create(
            who,
            name,
            prefix=prefix.strip(),
            principals=[p for p in principals or [] if p],
            tags=tag_map or None,
            cidrs=_split(cidrs) or None,
        )
    except (ShoalError, AccessDenied) as exc:
        return failed(c, request, who, session, "access_point.create", name, exc)
    return _back("/governance/access-points", "ap-created")


@routes.post("/governance/access-points/{name}/delete")
def access_point_delete(
    c: Console, request: Request, name: Annotated[str, Path(max_length=63)], csrf: Annotated[str, Form()] = ""
) -> Response:
    who, session, refused = admin_only(c, request, "access_point.delete", name, csrf)
    if refused:
        return refused
    try:
        RawAccess(c.settings).delete(who, name)  # audited by the library under `who`
    except (ShoalError, AccessDenied) as exc:
        return failed(c, request, who, session, "access_point.delete", name, exc)
    return _back("/governance/access-points", "ap-deleted")


def add(router: APIRouter, c: Console) -> None:
    """Mount this module's pages on the console's router, in the order they are defined above."""
    routes.mount(router, c)
