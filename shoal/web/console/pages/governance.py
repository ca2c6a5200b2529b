"""Access requests, grants, access points and the audit log."""

from __future__ import annotations

import csv
import io
import json
from datetime import datetime, timedelta
from typing import Annotated, Any
from urllib.parse import urlencode

from fastapi import APIRouter, Form, Path, Query, Request
from fastapi.responses import JSONResponse, RedirectResponse, Response

from shoal.exceptions import ShoalError, first_line
from shoal.governance import AccessDenied, Governance, GovernanceError, Principal
from shoal.governance.access import AccessRequests
from shoal.governance.errors import NotFound
from shoal.governance.grants import MASKS, PRIVILEGES, TARGETS, table_key
from shoal.governance.principals import EVERYONE
from shoal.routing import Routes
from shoal.web.console import views
from shoal.web.console.base import Console

AUDIT_PAGE = 100
LATEST_AUDIT = 20  # on the overview; the audit tab has the rest
AUDIT_CSV_MAX = 100_000  # rows in one export; narrow the filters for more


def _split(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def _day(text: str, *, end: bool = False) -> datetime | None:
    """A YYYY-MM-DD (UTC) as the start of that day, or of the next one for an inclusive end."""
    if not text:
        return None
    day = datetime.strptime(text, "%Y-%m-%d")
    return day + timedelta(days=1) if end else day


def _tables(c: Console) -> list[str]:
    """Every table in the catalog (for an admin's grant form), as db.table."""
    spark = c.spark()
    return sorted(
        f"{db}.{row['tableName']}"
        for (db,) in spark.sql("SHOW NAMESPACES").collect()
        for row in spark.sql(f"SHOW TABLES IN `{db}`").collect()
    )


def _effective(c: Console, gov: Governance, name: str, names: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The grants that apply to a principal: to it, to its groups and to everyone (for a user);
    to the group itself and to everyone (for a group)."""
    row = next((r for r in names if r["name"] == name), None)
    if row is None:
        return []
    if row["kind"] == "user":
        grants = gov.grants_for(c.principals.principal(name))
    else:
        grants = [g for g in gov.list() if g.grantee in (name, EVERYONE)]
    return [g.to_dict() for g in sorted(grants, key=lambda g: g.id)]


def _table_columns(c: Console, target: str) -> list[str]:
    """The table's columns, which a narrowed grant is checked against (as the CLI does)."""
    db, _, name = target.partition(".")
    try:
        return [f.name for f in c.spark().table(f"`{db}`.`{name}`").schema.fields]
    except Exception as exc:  # a missing table: the grant is refused with a reason
        raise GovernanceError(f"no table {target}") from exc


# The page's notices, by code: the URL only picks one and names a request id, so a link cannot
# make the console say anything else (no text from the query string is shown).
MESSAGES = {
    "sent": "request {id} for {table} sent",
    "approved": "request {id} approved",
    "rejected": "request {id} rejected",
    "notfound": "no access request {id}",
    "already": "request {id} was already decided",
    "invalid": "the request was not sent: name a table as DB.TABLE and give a reason of a few words",
    "granted": "grant {id} made",
    "revoked": "grant {id} revoked",
}


def _back(done: str, request_id: int | None = None) -> RedirectResponse:
    query = {"done": done, **({"id": str(request_id)} if request_id else {})}
    return RedirectResponse("/governance?" + urlencode(query), status_code=303)


def _message(done: str | None, request_id: int | None, visible: list[dict[str, Any]]) -> str | None:
    template = MESSAGES.get(done or "")
    if template is None or ("{id}" in template and request_id is None):
        return None
    table = next((r["table"] for r in visible if r["id"] == request_id), None)
    if "{table}" in template and table is None:  # only a request the viewer may see is named
        return None
    return template.format(id=request_id, table=table)


routes = Routes()


# ---- governance ------------------------------------------------------------------------
@routes.get("/governance")
def governance_page(
    c: Console,
    request: Request,
    done: Annotated[str | None, Query(max_length=20)] = None,
    request_id: Annotated[int | None, Query(alias="id", ge=1, le=2**31 - 1)] = None,
    for_name: Annotated[str, Query(alias="for", max_length=200)] = "",
) -> Response:
    who, session = c.viewer(request)
    return _governance_view(c, request, who, session, done, request_id, for_name)


def _governance_view(
    c: Console,
    request: Request,
    who: Principal,
    session: Any,
    done: str | None = None,
    request_id: int | None = None,
    for_name: str = "",
    **extra: Any,
) -> Response:
    """The governance page; `extra` carries a refused grant's error and entries back to its form."""
    gov = Governance(c.settings)
    requests_ = AccessRequests(c.settings).list(who)
    admin_view: dict[str, Any] = {}
    if who.is_admin:
        names = c.principals.list()
        admin_view = {
            "names": [r["name"] for r in names],
            "tables": _tables(c),
            "effective_for": for_name if any(r["name"] == for_name for r in names) else "",
            "effective": _effective(c, gov, for_name, names) if for_name else None,
        }
    return c.page(
        request,
        "governance.html",
        who,
        session,
        requests=requests_,
        grants=[g.to_dict() for g in (gov.list() if who.is_admin else gov.grants_for(who))],
        audit_rows=c.audit.list(limit=LATEST_AUDIT) if who.is_admin else None,
        message=_message(done, request_id, requests_),
        privileges=[*PRIVILEGES[:-1], "EXECUTE", "ALL"],
        targets=TARGETS,
        masks=list(MASKS),
        **admin_view,
        **extra,
    )


@routes.get("/governance/columns.json")
def governance_columns(
    c: Console, request: Request, table: Annotated[str, Query(min_length=3, max_length=400)]
) -> Response:
    """A table's columns, for the grant form's column and mask pickers (admins)."""
    who, session = c.viewer(request)
    if not who.is_admin:
        return c.refuse(request, who, session, "grant", f"table {table}", "only admins grant and revoke in the console")
    try:
        columns = _table_columns(c, ".".join(table_key(table)))
    except ShoalError as exc:
        return JSONResponse({"error": first_line(exc)}, status_code=404)
    return JSONResponse({"table": table, "columns": columns})


@routes.post("/governance/requests")
def governance_request(
    c: Console,
    request: Request,
    table: Annotated[str, Form(min_length=3, max_length=400)],
    reason: Annotated[str, Form(min_length=5, max_length=2000)],
    csrf: Annotated[str, Form()] = "",
) -> Response:
    who, session = c.viewer(request)
    c.check_csrf(request, session, csrf)
    try:
        made = AccessRequests(c.settings).request(who, table, reason)
    except (GovernanceError, AccessDenied):
        return _back("invalid")
    return _back("sent", made["id"])


@routes.post("/governance/requests/{request_id}/{decision}")
def governance_decide(
    c: Console,
    request: Request,
    request_id: Annotated[int, Path(ge=1, le=2**31 - 1)],
    decision: str,
    csrf: Annotated[str, Form()] = "",
    note: Annotated[str, Form(max_length=2000)] = "",
) -> Response:
    who, session = c.viewer(request)
    c.check_csrf(request, session, csrf)
    if decision not in ("approve", "reject"):
        return Response("unknown decision", status_code=404)
    try:
        AccessRequests(c.settings).decide(who, request_id, approve=decision == "approve", note=note or None)
    except NotFound:  # not theirs to decide, or missing: one answer
        return _back("notfound", request_id)
    except (GovernanceError, AccessDenied):
        return _back("already", request_id)
    return _back(f"{decision}d", request_id)


# ---- grants (admins) ---------------------------------------------------------------------
@routes.post("/governance/grants")
def governance_grant(
    c: Console,
    request: Request,
    privilege: Annotated[str, Form(pattern="^(SELECT|INSERT|ALTER|DROP|DESCRIBE|EXECUTE|ALL)$")],
    kind: Annotated[str, Form(pattern="^(TABLE|DATABASE|TAGS|WORKFLOW)$")],
    target: Annotated[str, Form(min_length=1, max_length=400)],
    grantee: Annotated[str, Form(min_length=1, max_length=200)],
    columns: Annotated[str, Form(max_length=4000)] = "",
    exclude_columns: Annotated[str, Form(max_length=4000)] = "",
    row_filter: Annotated[str, Form(max_length=4000)] = "",
    masks: Annotated[str, Form(max_length=4000)] = "",
    with_grant_option: Annotated[str, Form(max_length=5)] = "",
    csrf: Annotated[str, Form()] = "",
) -> Response:
    """The CLI's `shoal grant`, for admins only (deny by default), audited like it."""
    who, session = c.viewer(request)
    c.check_csrf(request, session, csrf)
    resource = f"{kind.lower()} {target}"
    if not who.is_admin:
        return c.refuse(request, who, session, "grant", resource, "only admins grant and revoke in the console")
    gov = Governance(c.settings)
    try:
        mask_map = {}
        for item in _split(masks):
            col, sep, how = item.partition("=")
            if not sep:
                raise GovernanceError(f"mask {item!r}: write COLUMN=KIND (hash, redact, null, last4, email)")
            mask_map[col.strip()] = how.strip()
        narrowed = kind == "TABLE" and bool(columns or exclude_columns or row_filter or mask_map)
        grant = gov.grant(
            who,
            privilege,
            kind,
            target.strip(),
            grantee.strip(),
            columns=_split(columns) or None,
            exclude_columns=_split(exclude_columns) or None,
            row_filter=row_filter.strip() or None,
            masks=mask_map,
            grantable=bool(with_grant_option),
            table_columns=_table_columns(c, target.strip()) if narrowed else None,
        )
    except (GovernanceError, AccessDenied, ShoalError) as exc:
        c.audit.record(who.name, "grant", resource, False, reason=first_line(exc), via="console")
        # The form again, open, with the reason beside it and every entry as typed.
        entries = {
            "privilege": privilege,
            "kind": kind,
            "target": target,
            "grantee": grantee,
            "columns": columns,
            "exclude_columns": exclude_columns,
            "row_filter": row_filter,
            "masks": masks,
            "with_grant_option": bool(with_grant_option),
        }
        return _governance_view(
            c, request, who, session, status=400, grant_error=f"not granted: {first_line(exc)}", grant_form=entries
        )
    c.audit.record(
        who.name, "grant", resource, True, via="console", grant_id=grant.id, grantee=grantee, privilege=privilege
    )
    return RedirectResponse(f"/governance?done=granted&id={grant.id}#grants", status_code=303)


@routes.post("/governance/grants/{grant_id}/revoke")
def governance_revoke(
    c: Console, request: Request, grant_id: Annotated[int, Path(ge=1, le=2**31 - 1)], csrf: Annotated[str, Form()] = ""
) -> Response:
    who, session = c.viewer(request)
    c.check_csrf(request, session, csrf)
    if not who.is_admin:
        return c.refuse(request, who, session, "revoke", str(grant_id), "only admins grant and revoke in the console")
    try:
        Governance(c.settings).revoke(who, grant_id)
    except (GovernanceError, AccessDenied, NotFound) as exc:
        c.audit.record(who.name, "revoke", str(grant_id), False, reason=first_line(exc), via="console")
        return c.error(request, who, session, 404, f"no grant {grant_id}")
    c.audit.record(who.name, "revoke", str(grant_id), True, via="console")
    return RedirectResponse(f"/governance?done=revoked&id={grant_id}#grants", status_code=303)


# ---- the audit log (admins) ----------------------------------------------------------------
def _audit_filters(
    c: Console, principal: str, action: str, resource: str, decision: str, since: str, until: str
) -> dict[str, Any]:
    return {
        "principal": principal.strip() or None,
        "action": action.strip() or None,
        "resource": resource.strip() or None,
        "decision": decision or None,
        "since": _day(since),
        "until": _day(until, end=True),
    }


def _action_choices(actions: list[str]) -> list[str]:
    """The filter's choices: every action on record and each family of them ("catalog.")."""
    families = {a.split(".", 1)[0] + "." for a in actions if "." in a}
    return sorted(set(actions) | families)


@routes.get("/governance/audit")
def audit_page(
    c: Console,
    request: Request,
    principal: Annotated[str, Query(max_length=200)] = "",
    action: Annotated[str, Query(max_length=100)] = "",
    resource: Annotated[str, Query(max_length=400)] = "",
    decision: Annotated[str, Query(pattern="^(allow|deny|)$")] = "",
    since: Annotated[str, Query(pattern=r"^(\d{4}-\d{2}-\d{2})?$")] = "",
    until: Annotated[str, Query(pattern=r"^(\d{4}-\d{2}-\d{2})?$")] = "",
    page_no: Annotated[int, Query(alias="page", ge=1, le=100_000)] = 1,
    per: Annotated[int, Query(ge=1, le=500)] = AUDIT_PAGE,
) -> Response:
    who, session = c.viewer(request)
    if not who.is_admin:
        return c.refuse(request, who, session, "audit.view", None, "the audit log is for admins")
    filters = _audit_filters(c, principal, action, resource, decision, since, until)
    rows = c.audit.list(**filters, limit=per + 1, offset=(page_no - 1) * per)
    form = {
        "principal": principal,
        "action": action,
        "resource": resource,
        "decision": decision,
        "since": since,
        "until": until,
    }
    query = urlencode({k: v for k, v in {**form, "per": per if per != AUDIT_PAGE else ""}.items() if v})
    return c.page(
        request,
        "audit.html",
        who,
        session,
        rows=rows[:per],
        actions=_action_choices(c.audit.actions()),
        has_next=len(rows) > per,
        page=page_no,
        form=form,
        query=query,
    )


@routes.get("/governance/audit.csv")
def audit_csv(
    c: Console,
    request: Request,
    principal: Annotated[str, Query(max_length=200)] = "",
    action: Annotated[str, Query(max_length=100)] = "",
    resource: Annotated[str, Query(max_length=400)] = "",
    decision: Annotated[str, Query(pattern="^(allow|deny|)$")] = "",
    since: Annotated[str, Query(pattern=r"^(\d{4}-\d{2}-\d{2})?$")] = "",
    until: Annotated[str, Query(pattern=r"^(\d{4}-\d{2}-\d{2})?$")] = "",
) -> Response:
    who, session = c.viewer(request)
    if not who.is_admin:
        return c.refuse(request, who, session, "audit.view", None, "the audit log is for admins")
    rows = c.audit.list(**_audit_filters(c, principal, action, resource, decision, since, until), limit=AUDIT_CSV_MAX)
    buf = io.StringIO()
    writer = csv.writer(buf)
    fields = ["id", "ts", "principal", "action", "resource", "decision", "reason", "detail"]
    writer.writerow(fields)
    for r in rows:
        values = {**r, "detail": json.dumps(r.get("detail") or {}, sort_keys=True, default=str)}
        writer.writerow([views.csv_safe(values.get(f)) for f in fields])
    return Response(
        buf.getvalue(),
        media_type="text/csv; charset=utf-8",
        headers={"Content-Disposition": 'attachment; filename="shoal-audit.csv"'},
    )


def add(router: APIRouter, c: Console) -> None:
    """Mount this module's pages on the console's router, in the order they are defined above."""
    routes.mount(router, c)
