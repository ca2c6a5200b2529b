"""Tables: list, load, exists, create, drop, and metrics reports (commits: commits.py)."""

from __future__ import annotations

from typing import Any

from fastapi import Depends, Request
from fastapi.responses import Response

from shoal.governance import Principal
from shoal.iceberg_rest import policy
from shoal.iceberg_rest.common import VIA, RestError, namespace_of, read_json, run_sync
from shoal.iceberg_rest.context import Rest
from shoal.iceberg_rest.routes import signed_in
from shoal.routing import Routes

routes = Routes()


@routes.get("/v1/namespaces/{namespace}/tables")
def list_tables(r: Rest, namespace: str, who: Principal = Depends(signed_in)) -> dict[str, Any]:
    ns = namespace_of(namespace)
    if not r.namespace_visible(who, ns):
        raise r.no_namespace(ns)
    names = [t[-1] for t in r.cat.list_tables(ns)]
    return {
        "identifiers": [{"namespace": list(ns), "name": t} for t in sorted(names) if r.discoverable(who, ns, t)],
        "next-page-token": None,
    }


@routes.get("/v1/namespaces/{namespace}/tables/{table}")
def load_table(
    r: Rest, namespace: str, table: str, request: Request, who: Principal = Depends(signed_in)
) -> dict[str, Any]:
    ns, client = namespace_of(namespace), r.client_of(request)
    tbl = r.load_for(who, ns, table, "iceberg.load", client)
    snap = tbl.metadata.current_snapshot_id
    r.audit.record(who.name, "iceberg.load", ".".join((*ns, table)), True, via=VIA, client=client, snapshot=snap)
    return r.load_result(tbl, request)


@routes.head("/v1/namespaces/{namespace}/tables/{table}")
def table_exists(r: Rest, namespace: str, table: str, who: Principal = Depends(signed_in)) -> Response:
    ns = namespace_of(namespace)
    ok = r.readable(who, ns, table) and r.cat.table_exists((*ns, table))
    return Response(status_code=204 if ok else 404)


@routes.post("/v1/namespaces/{namespace}/tables/{table}/metrics")
def metrics(r: Rest, namespace: str, table: str, _who: Principal = Depends(signed_in)) -> Response:
    return Response(status_code=204)  # scan/commit reports: accepted, not kept


@routes.post("/v1/namespaces/{namespace}/tables")
async def create_table(
    r: Rest, namespace: str, request: Request, who: Principal = Depends(signed_in)
) -> dict[str, Any]:
    ns = namespace_of(namespace)
    try:
        body = await read_json(request, r.max_body)
        return await run_sync(create_sync, r, who, ns, body, request)
    except Exception as exc:  # noqa: BLE001 - every failure becomes the REST error `failed` maps it to, and is audited
        raise r.failed(exc, who, "iceberg.create", ".".join(ns), r.client_of(request)) from None


def _create_refusal(r: Rest, who: Principal, ns: tuple[str, ...], name: str, body: dict[str, Any]) -> str | None:
    """Why a non-admin may not create this table (None: they may)."""
    full = r.table_name(ns, name)
    if full is None or full != ".".join((*ns, name)):
        return "names must be one lower-case DATABASE and TABLE (letters, digits, _)"
    if not r.database_grant(who, ns[0], {"ALL"}):
        return f"creating tables needs ALL on database {ns[0]}"
    if body.get("location"):
        return "only admins choose a table's location"
    unsafe = policy.unsafe_properties({str(k): str(v) for k, v in (body.get("properties") or {}).items()})
    return f"only admins set {', '.join(unsafe)}" if unsafe else None


def create_sync(r: Rest, who: Principal, ns: tuple[str, ...], body: dict[str, Any], request: Request) -> dict[str, Any]:
    from pyiceberg.partitioning import PartitionSpec
    from pyiceberg.schema import Schema
    from pyiceberg.table.sorting import SortOrder

    client = r.client_of(request)
    name = body.get("name")
    if not isinstance(name, str) or not name:
        raise RestError(400, "BadRequestException", "name: the table name is required")
    resource = ".".join((*ns, name))
    if body.get("stage-create"):
        raise RestError(406, "UnsupportedOperationException", "staged creates (CREATE TABLE AS) are not served")
    properties = {str(k): str(v) for k, v in (body.get("properties") or {}).items()}
    reason = None if who.is_admin else _create_refusal(r, who, ns, name, body)
    if reason is not None:
        r.audit.record(who.name, "iceberg.create", resource, False, reason=reason, via=VIA, client=client)
        raise RestError(403, "ForbiddenException", f"{who.name} may not create {resource}: {reason}")
    kwargs: dict[str, Any] = {"schema": Schema.model_validate(body.get("schema") or {}), "properties": properties}
    if body.get("partition-spec"):
        kwargs["partition_spec"] = PartitionSpec.model_validate(body["partition-spec"])
    if body.get("write-order"):
        kwargs["sort_order"] = SortOrder.model_validate(body["write-order"])
    if body.get("location"):
        kwargs["location"] = body["location"]
    tbl = r.cat.create_table((*ns, name), **kwargs)
    r.audit.record(who.name, "iceberg.create", resource, True, via=VIA, client=client, properties=sorted(properties))
    return r.load_result(tbl, request)


@routes.delete("/v1/namespaces/{namespace}/tables/{table}")
def drop_table(
    r: Rest,
    namespace: str,
    table: str,
    request: Request,
    purgeRequested: bool = False,
    who: Principal = Depends(signed_in),
) -> Response:
    ns, client = namespace_of(namespace), r.client_of(request)
    resource = ".".join((*ns, table))
    if not r.readable(who, ns, table):
        r.audit.record(
            who.name, "iceberg.drop", resource, False, reason="no SELECT on the table", via=VIA, client=client
        )
        raise r.no_table(ns, table)
    full = r.table_name(ns, table)
    if not who.is_admin and (full is None or "DROP" not in r.gov.privileges(who, full)):
        r.audit.record(who.name, "iceberg.drop", resource, False, reason="no DROP", via=VIA, client=client)
        raise RestError(403, "ForbiddenException", f"{who.name} may not drop {resource}: needs DROP")
    if purgeRequested:
        raise RestError(406, "UnsupportedOperationException", "purge is not served: drop without purge")
    r.cat.drop_table((*ns, table))
    r.audit.record(who.name, "iceberg.drop", resource, True, via=VIA, client=client)
    return Response(status_code=204)
