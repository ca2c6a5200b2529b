"""Catalog browsing: the tables the caller may see, one table's columns, the object inventory."""

# No `from __future__ import annotations`: FastAPI must see `Who` (local to `router`) as an object.

from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any

from fastapi import APIRouter, Query, Response
from pydantic import Field

from shoal.config import Settings
from shoal.governance import AccessDenied, AuditLog, Governance, GovernedSql, Principal
from shoal.sql import to_json_value
from shoal.web.routers.common import Out

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

MAX_OFFSET = 10_000  # deeper pages cost a scan of everything before them: filter instead


class TableOut(Out):
    name: str = Field(description="database.table")
    owner: str | None = None
    description: str | None = None
    privileges: list[str] = Field(default_factory=list, description="what the caller may do with it")


class ColumnOut(Out):
    name: str
    type: str


class TableDetail(Out):
    """The columns, and DESCRIBE's details (partitioning, location, provider...) as extra keys."""

    name: str
    columns: list[ColumnOut]


class ObjectPath(Out):
    source_name: str
    source_path: str


class ObjectOut(Out):
    object_id: str
    source_name: str | None = None
    source_path: str | None = None
    media_type: str | None = None
    status: str | None = None
    languages: list[str] | None = None
    has_pii: bool | None = None
    page_count: int | None = None
    size_bytes: int | None = None
    raw_path: str | None = None
    extracted_paths: Any = None
    enriched_paths: Any = None
    tags: dict[str, str] | None = None
    is_latest: bool | None = None
    parent_object_id: str | None = None
    paths: list[ObjectPath] = Field(default_factory=list, description="every (source, path) holding the content")
    owner: str | None = None
    description: str | None = None


def router(settings: Settings, who_dependency: Any, spark: Callable[[], "SparkSession"]) -> APIRouter:
    api = APIRouter(prefix="/api/v1")
    Who = Annotated[Principal, who_dependency]

    @api.get("/catalog/tables", response_model=list[TableOut], response_model_exclude_unset=True)
    def tables(who: Who) -> Any:
        out = [
            {key: value for key, value in entry.items() if key not in ("database", "table")}
            for entry in Governance(settings).visible_tables(spark(), who)
        ]
        AuditLog(settings).record(who.name, "catalog.list", None, True, tables=len(out))
        return out

    @api.get("/catalog/tables/{database}/{table}", response_model=TableDetail, response_model_exclude_unset=True)
    def table(database: str, table: str, who: Who) -> Any:
        result = GovernedSql(spark(), settings, who).execute(
            f"DESCRIBE `{database.replace('`', '')}`.`{table.replace('`', '')}`"
        )
        columns = [{"name": r[0], "type": r[1]} for r in result.rows if not str(r[0]).startswith("#")]
        info = {str(r[0]).lstrip("# "): r[1] for r in result.rows if str(r[0]).startswith("#")}
        return {"name": f"{database}.{table}".lower(), "columns": columns, **info}

    @api.get("/objects", response_model=list[ObjectOut], response_model_exclude_unset=True)
    def objects(
        who: Who,
        response: Response,
        type: Annotated[str | None, Query(max_length=200)] = None,
        lang: Annotated[str | None, Query(max_length=20)] = None,
        has_pii: bool | None = None,
        text: Annotated[str | None, Query(max_length=500)] = None,
        limit: Annotated[int, Query(ge=1, le=1000)] = 100,
        offset: Annotated[int, Query(ge=0, le=MAX_OFFSET)] = 0,
    ) -> Any:
        """One page of the object inventory; `X-Next-Offset` names the next page's offset (absent
        on the last page)."""
        from shoal.catalog import list_objects

        if not settings.governance.metadata_visible_to_all and not who.is_admin:
            raise AccessDenied("the object inventory is not open to all users here")
        rows = list_objects(
            spark(),
            media_type=type,
            language=lang,
            has_pii=has_pii,
            text=text,
            limit=offset + limit + 1,  # one more: is there a next page?
            principal=who,
            settings=settings,
        )
        page = rows[offset : offset + limit]
        if len(rows) > offset + limit and offset + limit <= MAX_OFFSET:
            response.headers["X-Next-Offset"] = str(offset + limit)
        AuditLog(settings).record(who.name, "catalog.objects", None, True, rows=len(page))
        gov = Governance(settings)
        return [{**{k: to_json_value(v) for k, v in r.items()}, **gov.object_info(r["object_id"])} for r in page]

    return api
