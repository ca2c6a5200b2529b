"""The REST catalog's shared pieces: its errors in the specification's shape, request bodies
(bounded in size and depth), namespaces in paths, and the FileIO settings clients are given."""

from __future__ import annotations

import json
from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse
from pydantic import TypeAdapter, ValidationError

VIA = "iceberg-rest"
MAX_JSON_DEPTH = 100  # deeper is refused (a schema of ~30 nested structs fits)
PG_POINTER = (
    "an engine that reads the files itself cannot apply column, row or mask restrictions; "
    "query this table through Shoal's governed PostgreSQL endpoint instead (shoal serve --pg; docs/bi.md)"
)
ENDPOINTS = [
    "GET /v1/{prefix}/namespaces",
    "POST /v1/{prefix}/namespaces",
    "GET /v1/{prefix}/namespaces/{namespace}",
    "HEAD /v1/{prefix}/namespaces/{namespace}",
    "DELETE /v1/{prefix}/namespaces/{namespace}",
    "GET /v1/{prefix}/namespaces/{namespace}/tables",
    "POST /v1/{prefix}/namespaces/{namespace}/tables",
    "GET /v1/{prefix}/namespaces/{namespace}/tables/{table}",
    "HEAD /v1/{prefix}/namespaces/{namespace}/tables/{table}",
    "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}",
    "DELETE /v1/{prefix}/namespaces/{namespace}/tables/{table}",
    "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}/metrics",
]


class RestError(Exception):
    """An error in the specification's shape: {"error": {"message", "type", "code"}}."""

    def __init__(self, code: int, kind: str, message: str) -> None:
        super().__init__(message)
        self.code, self.kind, self.message = code, kind, message


def error_response(code: int, kind: str, message: str) -> JSONResponse:
    return JSONResponse({"error": {"message": message, "type": kind, "code": code}}, status_code=code)


def namespace_of(raw: str) -> tuple[str, ...]:
    # Levels are joined by the unit separator (%1F) in paths and query parameters.
    parts = tuple(raw.split("\x1f"))
    if not all(parts):
        raise RestError(400, "BadRequestException", f"invalid namespace {raw!r}")
    return parts


async def read_body(request: Request, limit: int) -> bytes:
    """The request body, refused (413) past `limit` bytes, before all of it is read."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise RestError(413, "RequestTooLargeException", f"the request body is larger than {limit} bytes")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise RestError(413, "RequestTooLargeException", f"the request body is larger than {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def depth(value: Any) -> int:
    """How deeply a parsed JSON value nests (iteratively: no recursion to exhaust)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        v, d = stack.pop()
        if isinstance(v, dict):
            v = list(v.values())
        if isinstance(v, list):
            deepest = max(deepest, d)
            stack.extend((x, d + 1) for x in v if isinstance(x, (dict, list)))
    return deepest


async def read_json(request: Request, limit: int) -> dict[str, Any]:
    try:
        body = json.loads(await read_body(request, limit) or b"{}")
    except RecursionError:
        raise RestError(400, "BadRequestException", "the request body nests too deeply") from None
    except ValueError as exc:
        raise RestError(400, "BadRequestException", f"the request body is not JSON: {exc}") from None
    if not isinstance(body, dict):
        raise RestError(400, "BadRequestException", "the request body must be a JSON object")
    if depth(body) > MAX_JSON_DEPTH:
        raise RestError(400, "BadRequestException", f"the request body nests deeper than {MAX_JSON_DEPTH} levels")
    return body


def parse(adapter: TypeAdapter[Any], value: Any, what: str) -> Any:
    """Validate one part of a request body; a refusal names where, e.g. updates[0].action."""
    try:
        return adapter.validate_python(value)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = what + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in first["loc"])
        raise RestError(400, "BadRequestException", f"invalid {where}: {first['msg']}") from None


async def run_sync(fn: Any, *args: Any) -> Any:
    """Blocking work (the catalog database, file reads) off the event loop."""
    from starlette.concurrency import run_in_threadpool

    return await run_in_threadpool(fn, *args)
