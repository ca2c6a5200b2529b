"""Search over what the caller's grants allow (`/api/v1/search`); every call is audited."""

# No `from __future__ import annotations`: FastAPI must see `Who` (local to `router`) as an object.

from collections.abc import Callable
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query
from pydantic import BaseModel

from shoal.config import Settings
from shoal.governance import AuditLog, Principal
from shoal.search.query import Hit


class SearchOut(BaseModel):
    query: str
    mode: str
    hits: list[Hit]  # the search package's own result type (object, part, snippet, ranks, paths)


def router(settings: Settings, who_dependency: Any, spark: Callable[[], Any]) -> APIRouter:
    """Routes for `create_app`; `who_dependency` is its authenticated-principal dependency."""
    api = APIRouter(prefix="/api/v1")
    Who = Annotated[Principal, who_dependency]
    audit = AuditLog(settings)

    # ---- search and objects ---------------------------------------------------------------
    @api.get("/search", response_model=SearchOut)
    def search(
        who: Who,
        q: Annotated[str, Query(min_length=1, max_length=2000)],
        limit: Annotated[int, Query(ge=1, le=100)] = 10,
        mode: Literal["hybrid", "vector", "keyword"] = "hybrid",
        media_type: Annotated[str | None, Query(max_length=200)] = None,
        lang: Annotated[str | None, Query(max_length=20)] = None,
    ) -> SearchOut:
        from shoal.search.query import search as run_search

        hits = run_search(
            settings, q, k=limit, media_type=media_type, lang=lang, principal=who, spark=spark(), mode=mode
        )
        audit.record(who.name, "search.query", None, True, via="api", hits=len(hits))
        return SearchOut(query=q, mode=mode, hits=hits)

    return api
