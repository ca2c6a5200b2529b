"""SQL editor history: each principal's queries, kept in the catalog database."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Boolean, Column, DateTime, Integer, MetaData, String, Table, Text, delete, insert, select

from shoal.config import Settings
from shoal.lake import database

state_tables = MetaData()
queries = Table(
    "shoal_web_queries",
    state_tables,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("principal", String(200), nullable=False, index=True),
    Column("sql", Text, nullable=False),
    Column("ok", Boolean, nullable=False),
    Column("rows", Integer),
    Column("error", Text),
    Column("duration_ms", Integer, nullable=False),
    Column("ran_at", DateTime, nullable=False),
)


class QueryHistory:
    def __init__(self, settings: Settings) -> None:
        self.engine = database.engine(settings, state_tables)

    def add(self, principal: str, sql: str, *, ok: bool, rows: int | None, error: str | None, duration_ms: int) -> int:
        with self.engine.begin() as conn:
            result = conn.execute(
                insert(queries).values(
                    principal=principal,
                    sql=sql,
                    ok=ok,
                    rows=rows,
                    error=error,
                    duration_ms=duration_ms,
                    ran_at=database.utcnow(),
                )
            )
            return database.inserted_id(result)

    def get(self, principal: str, query_id: int) -> dict[str, Any] | None:
        """Only the principal's own queries: history is private."""
        with self.engine.connect() as conn:
            row = conn.execute(
                select(queries).where(queries.c.id == query_id, queries.c.principal == principal)
            ).first()
        return dict(row._mapping) if row else None

    def list(self, principal: str, limit: int = 30) -> list[dict[str, Any]]:
        with self.engine.connect() as conn:
            rows = conn.execute(
                select(queries).where(queries.c.principal == principal).order_by(queries.c.id.desc()).limit(limit)
            )
            return [dict(r._mapping) for r in rows]

    def forget(self, principal: str) -> None:
        """A removed principal's queries go with it (a later principal of that name sees none)."""
        with self.engine.begin() as conn:
            conn.execute(delete(queries).where(queries.c.principal == principal))
