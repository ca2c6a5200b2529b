"""Catalog and table pages: databases, tables, their schema, history and description."""

from __future__ import annotations

from typing import Annotated, Any
from urllib.parse import quote

from fastapi import APIRouter, Form, Query, Request
from fastapi.responses import RedirectResponse, Response

from shoal.exceptions import first_line
from shoal.governance import Governance, GovernanceError
from shoal.governance.grants import TableAccess
from shoal.routing import Routes
from shoal.web.console import views
from shoal.web.console.base import Console, identifier

TOMBSTONES_SUFFIX = "__cdc_tombstones"  # shoal.cdc's bookkeeping tables (NS.TABLE__cdc_tombstones)


def _internal(entry: dict[str, Any]) -> bool:
    """Shoal's own tables (the metadata layer, CDC tombstones): behind the catalog's toggle."""
    return entry["database"] == "shoal" or str(entry["table"]).endswith(TOMBSTONES_SUFFIX)


routes = Routes()


@routes.get("/catalog")
def catalog(
    c: Console,
    request: Request,
    q: Annotated[str, Query(max_length=200)] = "",
    internal: Annotated[str | None, Query(pattern="^(1|0)?$")] = None,
) -> Response:
    who, session = c.viewer(request)
    databases: dict[str, list[dict[str, Any]]] = {}
    hidden = 0
    words = q.lower().split()
    for entry in Governance(c.settings).visible_tables(c.spark(), who):
        if _internal(entry) and internal != "1":
            hidden += 1
            continue
        haystack = " ".join(str(entry.get(k) or "") for k in ("name", "owner", "description")).lower()
        if any(w not in haystack for w in words):
            continue
        databases.setdefault(entry["database"], []).append(
            {key: value for key, value in entry.items() if key != "database"}
        )
    c.audit.record(who.name, "catalog.list", None, True, via="console", tables=sum(map(len, databases.values())))
    return c.page(
        request, "catalog.html", who, session, databases=databases, q=q, internal=internal == "1", hidden=hidden
    )


@routes.get("/catalog/{database}/{table}")
def table_page(c: Console, request: Request, database: str, table: str) -> Response:
    who, session = c.viewer(request)
    name = f"{database}.{table}".lower()
    gov = Governance(c.settings)
    if not (identifier(database) and identifier(table)):
        return c.error(request, who, session, 404, "not a table name")
    if not c.spark().catalog.tableExists(name):
        return c.error(request, who, session, 404, f"no table {name}")
    if not gov.discoverable(who, name):
        return c.error(request, who, session, 403, f"{name} is not visible to {who.name}")
    info = gov.info(name)
    columns = [{"name": f.name, "type": f.dataType.simpleString()} for f in c.spark().table(name).schema.fields]
    table_tags, column_tags = gov.tags_of(name, [c["name"] for c in columns])
    privileges = sorted(gov.privileges(who, name))
    sample = views.governed_rows(c.spark(), c.settings, who, f"SELECT * FROM `{database}`.`{table}` LIMIT 10", 10)
    access = gov.access(who, name, [col["name"] for col in columns])
    filtered = _mark_columns(access, columns)
    snapshots: list[dict[str, Any]] | None = None
    # Snapshots reveal record counts of rows the viewer may not see: the rule of metadata
    # tables in governed SQL (only unrestricted access: every column, every row, no mask).
    if access.unrestricted:
        try:
            snapshots = [
                {k: views.to_json_value(v) for k, v in r.asDict().items()}
                for r in c.spark()
                .sql(
                    f"SELECT committed_at, snapshot_id, operation, summary['added-records'] AS added, "
                    f"summary['deleted-records'] AS deleted, summary['total-records'] AS total "
                    f"FROM `{database}`.`{table}`.snapshots ORDER BY committed_at DESC LIMIT 20"
                )
                .collect()
            ]
        except Exception:  # noqa: BLE001 - not an Iceberg table (an external table has no snapshots)
            snapshots = []
    return c.page(
        request,
        "table.html",
        who,
        session,
        name=name,
        info=info,
        columns=columns,
        table_tags=table_tags,
        column_tags=column_tags,
        privileges=privileges,
        may_edit=who.is_admin or info["owner"] == who.name,
        saved=request.query_params.get("saved") == "1",
        sample=sample,
        snapshots=snapshots,
        filtered=filtered,
    )


def _mark_columns(access: TableAccess, columns: list[dict[str, Any]]) -> bool:
    """Mark each column the viewer may not read ("hidden") or reads masked, so the schema says
    what the sample leaves out; True when their grants filter the rows (the filter itself is
    not shown: it is the grantor's text)."""
    if access.unrestricted:
        return False
    visible = set(access.visible_columns)
    for col in columns:
        key = col["name"].lower()
        shown = [r for r in access.rules if key in r.columns]
        col["hidden"] = key not in visible
        col["masked"] = bool(shown) and all(key in r.masks for r in shown)
    return access.projection()[1] is not None


@routes.post("/catalog/{database}/{table}/about")
def table_about(
    c: Console,
    request: Request,
    database: str,
    table: str,
    description: Annotated[str, Form(max_length=2000)] = "",
    owner: Annotated[str, Form(max_length=200)] = "",
    csrf: Annotated[str, Form()] = "",
) -> Response:
    """Owner and description, changed by the table's owner or an admin (audited)."""
    who, session = c.viewer(request)
    c.check_csrf(request, session, csrf)
    if not (identifier(database) and identifier(table)):
        return c.error(request, who, session, 404, "not a table name")
    name = f"{database}.{table}".lower()
    gov = Governance(c.settings)
    if not (who.is_admin or gov.owner(name) == who.name):
        return c.refuse(
            request, who, session, "table.describe", name, f"only the owner of {name} or an admin may edit it"
        )
    try:
        gov.set_owner(name, owner.strip() or None, description.strip())
    except GovernanceError as exc:
        return c.error(request, who, session, 400, first_line(exc))
    c.audit.record(who.name, "table.describe", name, True, via="console", owner=owner.strip() or None)
    return RedirectResponse(f"/catalog/{quote(database)}/{quote(table)}?saved=1", status_code=303)


def add(router: APIRouter, c: Console) -> None:
    """Mount this module's pages on the console's router, in the order they are defined above."""
    routes.mount(router, c)
