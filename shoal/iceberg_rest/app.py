"""The Iceberg REST catalog routes (apache/iceberg open-api/rest-catalog-open-api.yaml), governed.

Tables live in the lake's own catalog database (the Iceberg JDBC catalog Spark writes),
opened with PyIceberg's SqlCatalog: a commit goes through its `commit_table`, which checks
the client's requirements against the current metadata and swaps the metadata pointer only
if nobody committed in between (Iceberg's optimistic concurrency; a lost race is a 409).

Every request is signed in (a bearer from /v1/oauth/tokens, or a Shoal API token) and
re-checked: the token must still be active and the grants are read anew. Governance names
tables DATABASE.TABLE, so only single-level namespaces are served to non-admins.

The routes live one module per resource in resources/ (sign-in and config, namespaces, tables,
commits), as module-level handlers taking the app's `Rest` context (context.py) first.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import ValidationError

from shoal.config import Settings
from shoal.iceberg_rest.common import RestError, error_response
from shoal.iceberg_rest.context import Rest
from shoal.iceberg_rest.resources import auth, commits, namespaces, tables
from shoal.pyiceberg_catalog import open_catalog


def create_app(settings: Settings, *, catalog: Any | None = None) -> FastAPI:
    app = FastAPI(title="Shoal Iceberg REST catalog", docs_url=None, redoc_url=None, openapi_url=None)
    app.state.rest = rest = Rest(settings, catalog if catalog is not None else open_catalog(settings))
    app.add_exception_handler(RestError, _rest_error)  # type: ignore[arg-type]
    app.add_exception_handler(RequestValidationError, _invalid)  # type: ignore[arg-type]
    app.add_exception_handler(ValidationError, _invalid_body)  # type: ignore[arg-type]
    for resource in (auth, namespaces, tables, commits):
        resource.routes.mount(app, rest)
    _map_pyiceberg_errors(app)
    return app


async def _rest_error(_r: Request, exc: RestError) -> JSONResponse:
    return error_response(exc.code, exc.kind, exc.message)


async def _invalid(_r: Request, exc: RequestValidationError) -> JSONResponse:
    return error_response(400, "BadRequestException", f"invalid request: {str(exc).splitlines()[0]}")


async def _invalid_body(_r: Request, exc: ValidationError) -> JSONResponse:
    errors = exc.errors()
    if not errors:
        return error_response(400, "BadRequestException", f"invalid request body: {exc}")
    where = ".".join(str(p) for p in errors[0]["loc"]) or "?"
    return error_response(400, "BadRequestException", f"invalid request body at {where}: {errors[0]['msg']}")


def _map_pyiceberg_errors(app: FastAPI) -> None:
    from pyiceberg import exceptions as e

    mapping: list[tuple[type[Exception], int, str]] = [
        (e.NoSuchTableError, 404, "NoSuchTableException"),
        (e.NoSuchNamespaceError, 404, "NoSuchNamespaceException"),
        (e.TableAlreadyExistsError, 409, "AlreadyExistsException"),
        (e.NamespaceAlreadyExistsError, 409, "AlreadyExistsException"),
        (e.NamespaceNotEmptyError, 409, "NamespaceNotEmptyException"),
        (e.CommitFailedException, 409, "CommitFailedException"),
        (ValueError, 400, "BadRequestException"),
    ]
    for cls, code, kind in mapping:

        def handler(_r: Request, exc: Exception, code: int = code, kind: str = kind) -> JSONResponse:
            return error_response(code, kind, str(exc).splitlines()[0] if str(exc) else kind)

        app.add_exception_handler(cls, handler)
