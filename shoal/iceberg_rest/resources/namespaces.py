"""Namespaces: list, create, load, exists, drop (creating and dropping: admins only)."""

from __future__ import annotations

from typing import Any

from fastapi import Depends, Request
from fastapi.responses import Response

from shoal.governance import Principal
from shoal.iceberg_rest.common import VIA, RestError, namespace_of, read_json
from shoal.iceberg_rest.context import Rest
from shoal.iceberg_rest.routes import signed_in
from shoal.routing import Routes

routes = Routes()


@routes.get("/v1/namespaces")
def list_namespaces(r: Rest, parent: str | None = None, who: Principal = Depends(signed_in)) -> dict[str, Any]:
    base = namespace_of(parent) if parent else ()
    if base and not r.namespace_visible(who, base):
        raise r.no_namespace(base)
    found = [tuple(n) for n in r.cat.list_namespaces(base)]
    return {"namespaces": [list(n) for n in found if r.namespace_visible(who, n)]}


@routes.post("/v1/namespaces")
async def create_namespace(r: Rest, request: Request, who: Principal = Depends(signed_in)) -> dict[str, Any]:
    body = await read_json(request, r.max_body)
    ns = tuple(body.get("namespace") or ())
    if not ns or not all(isinstance(p, str) and p for p in ns):
        raise RestError(400, "BadRequestException", "namespace: a non-empty list of names is required")
    if not who.is_admin:
        r.audit.record(who.name, "iceberg.create_namespace", ".".join(ns), False, reason="admins only", via=VIA)
        raise RestError(403, "ForbiddenException", f"{who.name} may not create namespaces (admins only)")
    props = {str(k): str(v) for k, v in (body.get("properties") or {}).items()}
    r.cat.create_namespace(ns, props)
    r.audit.record(who.name, "iceberg.create_namespace", ".".join(ns), True, via=VIA)
    return {"namespace": list(ns), "properties": props}


@routes.get("/v1/namespaces/{namespace}")
def load_namespace(r: Rest, namespace: str, who: Principal = Depends(signed_in)) -> dict[str, Any]:
    ns = namespace_of(namespace)
    if not r.namespace_visible(who, ns):
        raise r.no_namespace(ns)
    return {"namespace": list(ns), "properties": r.cat.load_namespace_properties(ns)}


@routes.head("/v1/namespaces/{namespace}")
def namespace_exists(r: Rest, namespace: str, who: Principal = Depends(signed_in)) -> Response:
    return Response(status_code=204 if r.namespace_visible(who, namespace_of(namespace)) else 404)


@routes.delete("/v1/namespaces/{namespace}")
def drop_namespace(r: Rest, namespace: str, who: Principal = Depends(signed_in)) -> Response:
    ns = namespace_of(namespace)
    if not who.is_admin:
        r.audit.record(who.name, "iceberg.drop_namespace", ".".join(ns), False, reason="admins only", via=VIA)
        raise RestError(403, "ForbiddenException", f"{who.name} may not drop namespaces (admins only)")
    r.cat.drop_namespace(ns)
    r.audit.record(who.name, "iceberg.drop_namespace", ".".join(ns), True, via=VIA)
    return Response(status_code=204)
