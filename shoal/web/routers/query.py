"""The caller (`/api/v1/me`) and governed SQL (`/api/v1/query`)."""

# No `from __future__ import annotations`: FastAPI must see `Who` (local to `router`) as an object.

from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any

from fastapi import APIRouter, Request
from pydantic import BaseModel, Field

from shoal.config import Settings
from shoal.exceptions import ShoalError
from shoal.governance import GovernedSql, Principal
from shoal.sql import to_json_value
from shoal.web.routers.common import Out, failed

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


class QueryIn(BaseModel):
    sql: str = Field(min_length=1, max_length=100_000)
    limit: int = Field(default=1000, ge=1, le=100_000)


class QueryOut(BaseModel):
    columns: list[str]
    types: list[str]
    rows: list[list[Any]]


class MeOut(Out):
    name: str
    admin: bool
    groups: list[str]


def router(settings: Settings, who_dependency: Any, spark: Callable[[], "SparkSession"]) -> APIRouter:
    api = APIRouter(prefix="/api/v1")
    Who = Annotated[Principal, who_dependency]

    @api.get("/me", response_model=MeOut)
    def me(who: Who) -> Any:
        return {"name": who.name, "admin": who.is_admin, "groups": sorted(who.groups)}

    @api.post(
        "/query",
        response_model=QueryOut,
        responses={
            400: {"description": "the query failed"},
            429: {"description": "too many queries waiting (Retry-After)"},
            503: {"description": "the query waited too long for a slot, or the engine is restarting (Retry-After)"},
        },
    )
    def query(body: QueryIn, who: Who, request: Request) -> Any:
        from shoal.admission import admission, spark_pool

        try:
            with admission(settings).enter(who.name):  # Overloaded: 429/503 (shoal.web.api)
                session = spark()
                session.sparkContext.setLocalProperty("spark.scheduler.pool", spark_pool(who.name))
                result = GovernedSql(session, settings, who).execute(body.sql, limit=body.limit)
            return QueryOut(
                columns=result.columns,
                types=result.types,
                rows=[[to_json_value(v) for v in row] for row in result.rows],
            )
        except ShoalError:  # refused (403) or invalid (400): the handlers below answer
            raise
        except Exception as exc:  # noqa: BLE001 - audited and answered 400, never an unaudited 500
            return failed(settings, request, exc)

    return api
