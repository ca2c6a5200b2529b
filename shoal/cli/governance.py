"""Commands for governance: principals, groups, tokens, grants, tags, owners, audit.

The CLI runs as the workspace's operator (it can read the catalog database directly), so
it acts as `admin` unless `--as PRINCIPAL` says otherwise; grants made with `--as` need
that principal's authority (owner or WITH GRANT OPTION).
"""

from __future__ import annotations

import getpass
import sys
from typing import TYPE_CHECKING, Annotated

import typer

from shoal.cli import output
from shoal.cli.context import JsonOpt, out, settings
from shoal.exceptions import ShoalError

if TYPE_CHECKING:
    from shoal.config import Settings
    from shoal.governance import Governance, Principals

principal_app = typer.Typer(help="Users: add, list, remove, passwords.", no_args_is_help=True)
group_app = typer.Typer(help="Groups of users.", no_args_is_help=True)
token_app = typer.Typer(help="API tokens (shown once, stored hashed).", no_args_is_help=True)
tag_app = typer.Typer(help="Tags (keys with allowed values) on databases, tables and columns.", no_args_is_help=True)
grants_app = typer.Typer(help="List grants.", no_args_is_help=True)
audit_app = typer.Typer(help="The audit log (admins).", no_args_is_help=True)
owner_app = typer.Typer(help="Table owners and descriptions.", no_args_is_help=True)

AsOpt = Annotated[str, typer.Option("--as", help="Act as this principal (default: admin, the operator).")]


def _principals() -> Principals:
    from shoal.governance import Principals

    return Principals(settings())


def _gov() -> Governance:
    from shoal.governance import Governance

    return Governance(settings())


def _split(value: str | None) -> list[str] | None:
    return [v.strip() for v in value.split(",") if v.strip()] if value else None


@principal_app.command("create")
@principal_app.command("add", hidden=True)
def principal_add(
    name: Annotated[str, typer.Argument()],
    admin: Annotated[bool, typer.Option("--admin", help="Full rights on everything.")] = False,
    password_stdin: Annotated[
        bool, typer.Option("--password-stdin", help="Read a password from stdin (for the web console).")
    ] = False,
    _json: JsonOpt = False,
) -> None:
    """Add a user."""
    password = sys.stdin.readline().rstrip("\n") if password_stdin else None
    _principals().add(name, kind="user", admin=admin, password=password)
    out().done(f"user {name} added")


@principal_app.command("password")
def principal_password(name: Annotated[str, typer.Argument()], _json: JsonOpt = False) -> None:
    """Set a user's password (prompted; or piped on stdin); their console sessions end."""
    password = getpass.getpass(f"password for {name}: ") if sys.stdin.isatty() else sys.stdin.readline().rstrip("\n")
    if len(password) < 8:
        raise ShoalError("a password needs at least 8 characters")
    _principals().set_password(name, password)
    out().done(f"password of {name} set")


@principal_app.command("list")
def principal_list(_json: JsonOpt = False) -> None:
    """Users and groups."""
    rows = _principals().list()
    out().table(
        "Principals",
        ["name", "kind", "admin", "groups", "password"],
        [[r["name"], r["kind"], r["admin"], ", ".join(r["groups"]), r["has_password"]] for r in rows],
        rows,
    )


@principal_app.command("delete")
@principal_app.command("remove", hidden=True)
def principal_remove(name: Annotated[str, typer.Argument()], _json: JsonOpt = False) -> None:
    """Remove a user or group with its tokens, sessions, grants, memberships, access-point places,
    access requests, table ownership and SQL editor history."""
    from shoal.web.console.history import QueryHistory

    _principals().remove(name)
    QueryHistory(settings()).forget(name)
    out().done(f"{name} removed")


@group_app.command("create")
def group_create(name: Annotated[str, typer.Argument()], _json: JsonOpt = False) -> None:
    """Create a group."""
    _principals().add(name, kind="group")
    out().done(f"group {name} created")


@group_app.command("add")
def group_add(
    group: Annotated[str, typer.Argument()], user: Annotated[str, typer.Argument()], _json: JsonOpt = False
) -> None:
    """Add a user to a group."""
    _principals().add_member(group, user)
    out().done(f"{user} is in {group}")


@group_app.command("remove")
def group_remove(
    group: Annotated[str, typer.Argument()], user: Annotated[str, typer.Argument()], _json: JsonOpt = False
) -> None:
    """Remove a user from a group."""
    _principals().remove_member(group, user)
    out().done(f"{user} left {group}")


@token_app.command("create")
def token_create(
    name: Annotated[str, typer.Argument(help="The user the token acts as.")],
    description: Annotated[str | None, typer.Option("--description")] = None,
    expires_days: Annotated[float | None, typer.Option("--expires-days", help="Expire after this many days.")] = None,
    _json: JsonOpt = False,
) -> None:
    """Create an API token; it is printed once and stored only as a hash."""
    token_id, token = _principals().create_token(name, description=description, expires_in_days=expires_days)

    def as_text() -> None:
        output.out.print(token)
        output.err.print(f"token {token_id} for {name}: store it now, it is not shown again")

    out().show({"id": token_id, "principal": name, "token": token}, as_text)


@token_app.command("revoke")
def token_revoke(token_id: Annotated[str, typer.Argument()], _json: JsonOpt = False) -> None:
    """Revoke a token by id (console sessions signed in with it end too)."""
    _principals().revoke_token(token_id)
    out().done(f"token {token_id} revoked")


@token_app.command("list")
def token_list(name: Annotated[str | None, typer.Argument()] = None, _json: JsonOpt = False) -> None:
    """Tokens (ids and dates, never secrets)."""
    rows = _principals().list_tokens(name)
    out().table(
        "Tokens",
        ["id", "principal", "created", "expires", "revoked", "last used"],
        [
            [r["id"], r["principal"], r["created_at"], r["expires_at"] or "-", r["revoked"], r["last_used_at"] or "-"]
            for r in rows
        ],
        rows,
    )


def grant(
    privilege: Annotated[
        str,
        typer.Argument(help="SELECT, INSERT, ALTER, DROP, DESCRIBE or ALL; on a workflow SELECT, EXECUTE or ALL."),
    ],
    on: Annotated[str, typer.Argument(metavar="ON")],
    kind: Annotated[str, typer.Argument(metavar="TABLE|DATABASE|TAGS|WORKFLOW")],
    target: Annotated[str, typer.Argument(metavar="NAME|TAG-EXPRESSION")],
    to: Annotated[str, typer.Argument(metavar="TO")],
    grantee: Annotated[str, typer.Argument(metavar="PRINCIPAL")],
    columns: Annotated[str | None, typer.Option("--columns", help="Only these columns (a,b,c).")] = None,
    exclude_columns: Annotated[str | None, typer.Option("--exclude-columns", help="All columns but these.")] = None,
    row_filter: Annotated[
        str | None, typer.Option("--row-filter", help="Only rows where this SQL predicate holds.")
    ] = None,
    mask: Annotated[
        list[str] | None, typer.Option("--mask", help="COLUMN=hash|redact|null|last4|email (repeatable).")
    ] = None,
    with_grant_option: Annotated[
        bool, typer.Option("--with-grant-option", help="The grantee may grant it on.")
    ] = False,
    as_: AsOpt = "admin",
    _json: JsonOpt = False,
) -> None:
    """Grant a privilege: shoal grant SELECT ON TABLE db.t TO analysts [--columns ...] [--row-filter ...];
    shoal grant SELECT|EXECUTE ON WORKFLOW name TO PRINCIPAL (see / also start and resume it in the console)."""
    from shoal.governance import AuditLog

    if on.upper() != "ON" or to.upper() != "TO":
        raise ShoalError("write: shoal grant PRIVILEGE ON TABLE|DATABASE|TAGS|WORKFLOW NAME TO PRINCIPAL")
    masks = {}
    for m in mask or []:
        if "=" not in m:
            raise ShoalError(f"--mask {m!r}: write COLUMN=KIND")
        col, kind_ = m.split("=", 1)
        masks[col.strip()] = kind_.strip()
    s = settings()
    gov = _gov()
    by = gov.principals.principal(as_)
    table_columns = None
    if kind.upper() == "TABLE" and (columns or exclude_columns or row_filter or masks):
        table_columns = _table_columns(s, target)
    try:
        g = gov.grant(
            by,
            privilege,
            kind,
            target,
            grantee,
            columns=_split(columns),
            exclude_columns=_split(exclude_columns),
            row_filter=row_filter,
            masks=masks,
            grantable=with_grant_option,
            table_columns=table_columns,
        )
    except ShoalError as exc:
        AuditLog(s).record(by.name, "grant", f"{kind.lower()} {target}", False, reason=str(exc).splitlines()[0])
        raise
    AuditLog(s).record(
        by.name, "grant", f"{kind.lower()} {target}", True, grant_id=g.id, grantee=grantee, privilege=privilege.upper()
    )
    out().record(f"Grant {g.id}", g.to_dict())


def _table_columns(s: Settings, target: str) -> list[str]:
    from shoal.governance.grants import table_key
    from shoal.spark import get_spark

    db, name = table_key(target)
    try:
        return [f.name for f in get_spark(s).table(f"{s.catalog.name}.`{db}`.`{name}`").schema.fields]
    except Exception as exc:  # a missing table is the user's error
        raise ShoalError(
            f"table {db}.{name} does not exist", hint="column, row and mask grants need the table's columns"
        ) from exc


def revoke(grant_id: Annotated[int, typer.Argument()], as_: AsOpt = "admin", _json: JsonOpt = False) -> None:
    """Revoke a grant by id (see `shoal grants list`)."""
    from shoal.governance import AuditLog

    gov = _gov()
    by = gov.principals.principal(as_)
    gov.revoke(by, grant_id)
    AuditLog(settings()).record(by.name, "revoke", str(grant_id), True)
    out().done(f"grant {grant_id} revoked")


@grants_app.command("list")
def grants_list(
    grantee: Annotated[str | None, typer.Option("--to", help="Only grants to this principal.")] = None,
    _json: JsonOpt = False,
) -> None:
    """Grants, oldest first."""
    rows = [g.to_dict() for g in _gov().list(grantee)]
    out().table(
        "Grants",
        ["id", "privilege", "on", "to", "columns", "row filter", "masks", "grant option"],
        [
            [
                r["id"],
                r["privilege"],
                r["on"],
                r["grantee"],
                ", ".join(r["columns"] or [])
                or ("all but " + ", ".join(r["exclude_columns"]) if r["exclude_columns"] else "all"),
                r["row_filter"] or "",
                r["masks"] or "",
                r["with_grant_option"],
            ]
            for r in rows
        ],
        rows,
    )


@tag_app.command("create")
def tag_create(
    key: Annotated[str, typer.Argument()],
    values: Annotated[str, typer.Option("--values", help="Allowed values: a,b,c.")],
    _json: JsonOpt = False,
) -> None:
    """Create (or redefine) a tag key with its allowed values."""
    _gov().create_tag(key, _split(values) or [])
    out().done(f"tag {key}: {values}")


@tag_app.command("assign")
def tag_assign(
    assignment: Annotated[str, typer.Argument(metavar="KEY=VALUE")],
    table: Annotated[str | None, typer.Option("--table")] = None,
    database_name: Annotated[str | None, typer.Option("--database")] = None,
    column: Annotated[str | None, typer.Option("--column")] = None,
    _json: JsonOpt = False,
) -> None:
    """Tag a database, a table or a column (columns inherit their table's tags, tables their database's)."""
    if "=" not in assignment:
        raise ShoalError("write KEY=VALUE")
    key, value = assignment.split("=", 1)
    _gov().assign_tag(key.strip(), value.strip(), database_name=database_name, table=table, column=column)
    out().done(f"{key}={value} on {table or database_name}{'.' + column if column else ''}")


@tag_app.command("unassign")
def tag_unassign(
    key: Annotated[str, typer.Argument()],
    table: Annotated[str | None, typer.Option("--table")] = None,
    database_name: Annotated[str | None, typer.Option("--database")] = None,
    column: Annotated[str | None, typer.Option("--column")] = None,
    _json: JsonOpt = False,
) -> None:
    """Take a tag off a database, a table or a column (grants on that tag stop covering it)."""
    _gov().unassign_tag(key.strip(), database_name=database_name, table=table, column=column)
    out().done(f"{key} removed from {table or database_name}{'.' + column if column else ''}")


@tag_app.command("list")
def tag_list(_json: JsonOpt = False) -> None:
    """Tag keys and allowed values."""
    tags = _gov().tags()
    out().table("Tags", ["key", "allowed values"], [[k, ", ".join(v)] for k, v in tags.items()], tags)


@owner_app.command("set")
def owner_set(
    name: Annotated[str, typer.Argument(metavar="DB.TABLE|OBJECT_ID")],
    owner: Annotated[str | None, typer.Option("--owner")] = None,
    description: Annotated[str | None, typer.Option("--description")] = None,
    is_object: Annotated[
        bool, typer.Option("--object", help="NAME is a raw object's id (or a unique prefix).")
    ] = False,
    _json: JsonOpt = False,
) -> None:
    """Set the owner (who approves access requests and may grant) and description of a table or object."""
    gov = _gov()
    if is_object:
        from shoal.catalog import resolve_object_id
        from shoal.spark import get_spark

        object_id = resolve_object_id(get_spark(settings()), name)
        gov.set_object_owner(object_id, owner, description)
        out().done(f"object {object_id}: owner {owner or '(unchanged)'}")
        return
    gov.set_owner(name, owner, description)
    out().done(f"{name}: owner {owner or '(unchanged)'}")


@owner_app.command("show")
def owner_show(
    name: Annotated[str, typer.Argument(metavar="DB.TABLE|OBJECT_ID")],
    is_object: Annotated[bool, typer.Option("--object")] = False,
    _json: JsonOpt = False,
) -> None:
    """Owner and description of a table or object."""
    gov = _gov()
    if is_object:
        from shoal.catalog import resolve_object_id
        from shoal.spark import get_spark

        info = gov.object_info(resolve_object_id(get_spark(settings()), name))
    else:
        from shoal.governance.grants import table_key

        info = gov.info(".".join(table_key(name)))
    out().record(name, info)


@audit_app.command("list")
def audit_list(
    principal: Annotated[str | None, typer.Option("--principal")] = None,
    decision: Annotated[str | None, typer.Option("--decision", help="allow or deny")] = None,
    limit: Annotated[int, typer.Option("--limit")] = 100,
    as_: AsOpt = "admin",
    _json: JsonOpt = False,
) -> None:
    """Recent authorization decisions, newest first (admins only)."""
    from shoal.governance import AccessDenied, AuditLog

    s = settings()
    who = _principals().principal(as_)
    log = AuditLog(s)
    if not who.is_admin:
        log.record(who.name, "audit.read", None, False, reason="not an admin")
        raise AccessDenied(f"{who.name} may not read the audit log")
    rows = log.list(principal=principal, decision=decision, limit=limit)
    out().table(
        "Audit",
        ["id", "time", "principal", "action", "resource", "decision", "reason"],
        [
            [r["id"], r["ts"], r["principal"], r["action"], r["resource"] or "", r["decision"], r["reason"] or ""]
            for r in rows
        ],
        rows,
    )


access_point_app = typer.Typer(
    help="Access points: the only way raw objects leave the lake (read-only).", no_args_is_help=True
)
access_app = typer.Typer(help="Access requests: ask for a table; owners approve or reject.", no_args_is_help=True)


@access_point_app.command("create")
def access_point_create(
    name: Annotated[str, typer.Argument()],
    principal: Annotated[list[str], typer.Option("--principal", help="User or group allowed (repeatable).")],
    prefix: Annotated[str, typer.Option("--prefix", help="Raw-zone prefix, e.g. inbox/2026 (default: all).")] = "",
    tag: Annotated[
        list[str] | None, typer.Option("--tag", help="Only objects with this tag KEY=VALUE (repeatable).")
    ] = None,
    cidr: Annotated[list[str] | None, typer.Option("--cidr", help="Only clients in this network (repeatable).")] = None,
    as_: AsOpt = "admin",
    _json: JsonOpt = False,
) -> None:
    """Create a read-only access point over a raw-zone prefix and/or object tags."""
    from shoal.governance.access import RawAccess

    tags = dict(t.split("=", 1) for t in tag or [] if "=" in t)
    ap = RawAccess(settings()).create(
        _principals().principal(as_), name, prefix=prefix, principals=principal, tags=tags or None, cidrs=cidr or None
    )
    out().record(f"Access point {name}", ap)


@access_point_app.command("list")
def access_point_list(_json: JsonOpt = False) -> None:
    """Access points."""
    from shoal.governance.access import RawAccess

    rows = RawAccess(settings()).list()
    out().table(
        "Access points",
        ["name", "prefix", "tags", "principals", "networks"],
        [
            [
                r["name"],
                r["prefix"] or "(all)",
                r["tags"] or "",
                ", ".join(r["principals"]),
                ", ".join(r["cidrs"]) or "any",
            ]
            for r in rows
        ],
        rows,
    )


@access_point_app.command("delete")
def access_point_delete(name: Annotated[str, typer.Argument()], as_: AsOpt = "admin", _json: JsonOpt = False) -> None:
    """Delete an access point."""
    from shoal.governance.access import RawAccess

    RawAccess(settings()).delete(_principals().principal(as_), name)
    out().done(f"access point {name} deleted")


@access_point_app.command("sign")
def access_point_sign(
    name: Annotated[str, typer.Argument()],
    path: Annotated[str, typer.Argument(help="Object path under the raw zone.")],
    expires_in: Annotated[int, typer.Option("--expires-in", help="Seconds the link stays valid.")] = 900,
    as_: AsOpt = "admin",
    _json: JsonOpt = False,
) -> None:
    """A time-limited signed URL (path part; prefix it with the server's address)."""
    from shoal.governance.access import RawAccess

    signed = RawAccess(settings()).sign(_principals().principal(as_), name, path, expires_in=expires_in)
    out().line(signed["url"], signed)


@access_app.command("request")
def access_request(
    table: Annotated[str, typer.Argument()],
    reason: Annotated[str, typer.Option("--reason")],
    as_: Annotated[str, typer.Option("--as", help="Who asks.")],
    _json: JsonOpt = False,
) -> None:
    """Ask for SELECT on a table; its owner (or an admin) decides."""
    from shoal.governance.access import AccessRequests

    req = AccessRequests(settings()).request(_principals().principal(as_), table, reason)
    out().line(f"request {req['id']} for {req['table']} is pending", req)


@access_app.command("list")
@access_app.command("requests", hidden=True)
def access_requests_list(
    status: Annotated[str | None, typer.Option("--status", help="pending, approved or rejected")] = None,
    as_: AsOpt = "admin",
    _json: JsonOpt = False,
) -> None:
    """Requests you made or may decide."""
    from shoal.governance.access import AccessRequests

    rows = AccessRequests(settings()).list(_principals().principal(as_), status)
    out().table(
        "Access requests",
        ["id", "who", "table", "status", "reason", "decided by"],
        [[r["id"], r["principal"], r["table"], r["status"], r["reason"], r["decided_by"] or ""] for r in rows],
        rows,
    )


@access_app.command("approve")
def access_approve(
    request_id: Annotated[int, typer.Argument()],
    note: Annotated[str | None, typer.Option("--note")] = None,
    as_: AsOpt = "admin",
    _json: JsonOpt = False,
) -> None:
    """Approve a request: the requester gets SELECT on the table."""
    from shoal.governance.access import AccessRequests

    req = AccessRequests(settings()).decide(_principals().principal(as_), request_id, approve=True, note=note)
    out().done(f"request {request_id} approved (grant {req['grant_id']})")


@access_app.command("reject")
def access_reject(
    request_id: Annotated[int, typer.Argument()],
    note: Annotated[str | None, typer.Option("--note")] = None,
    as_: AsOpt = "admin",
    _json: JsonOpt = False,
) -> None:
    """Reject a request."""
    from shoal.governance.access import AccessRequests

    AccessRequests(settings()).decide(_principals().principal(as_), request_id, approve=False, note=note)
    out().done(f"request {request_id} rejected")
