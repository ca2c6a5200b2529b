"""Data quality results (read through governed SQL on `shoal.quality_results`) and registered models
(catalog metadata)."""

# No `from __future__ import annotations`: FastAPI must see `Who` (local to `router`) as an object.

from collections.abc import Callable
from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Query
from pydantic import BaseModel

from shoal.config import Settings
from shoal.governance import AuditLog, GovernedSql, Principal
from shoal.sql import to_json_value


class QualityOut(BaseModel):
    results: list[dict[str, Any]]


class ModelOut(BaseModel):
    name: str
    version: str
    kind: str
    sha256: str
    size_bytes: int
    description: str
    registered_by: str
    registered_at: str


def router(settings: Settings, who_dependency: Any, spark: Callable[[], Any]) -> APIRouter:
    """Routes for `create_app`; `who_dependency` is its authenticated-principal dependency."""
    api = APIRouter(prefix="/api/v1")
    Who = Annotated[Principal, who_dependency]
    audit = AuditLog(settings)

    # ---- data quality and models ----------------------------------------------------------
    @api.get("/quality/results", response_model=QualityOut)
    def quality_results(
        who: Who,
        ruleset: Annotated[str | None, Query(max_length=200)] = None,
        limit: Annotated[int, Query(ge=1, le=10_000)] = 200,
    ) -> QualityOut:
        import sqlglot.expressions as exp

        from shoal.lake.metadata import NAMESPACE

        session = spark()
        if not session.catalog.tableExists(f"{NAMESPACE}.quality_results"):
            return QualityOut(results=[])  # no ruleset has run yet
        # Governed SQL: the caller's grant on shoal.quality_results (columns, rows) applies.
        where = f" WHERE ruleset = {exp.Literal.string(ruleset).sql()}" if ruleset else ""
        sql = f"SELECT * FROM {NAMESPACE}.quality_results{where} ORDER BY evaluated_at DESC, rule"
        result = GovernedSql(session, settings, who).execute(sql, limit=limit)
        return QualityOut(results=[{k: to_json_value(v) for k, v in r.items()} for r in result.records()])

    @api.get("/models", response_model=list[ModelOut])
    def models(who: Who, name: Annotated[str | None, Query(max_length=200)] = None) -> list[ModelOut]:
        from shoal.models import list_models

        if not (who.is_admin or settings.governance.metadata_visible_to_all):
            audit.record(who.name, "model.list", None, False, reason="catalog metadata not visible", via="api")
            raise HTTPException(403, f"{who.name} may not list models")
        found = list_models(settings, name)
        return [ModelOut.model_validate({**m.to_dict(), "registered_at": str(m.registered_at)}) for m in found]

    return api
