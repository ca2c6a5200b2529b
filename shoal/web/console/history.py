"""SQL editor history: each principal's statements and the results they returned, kept in the
catalog database.

A statement runs once, when its author presses Run (a POST carrying the session's CSRF token).
What it returned is kept with it, bounded to the first `MAX_KEPT_ROWS` rows, and every later
view of the entry (paging, the CSV download) reads the kept result: a GET never runs SQL, so a
link, a reload or a prefetch cannot repeat an INSERT. Entry ids are random (unguessable) and an
entry is only ever found for its author: anyone else is answered exactly as for a missing id.
"""

from __future__ import annotations

import builtins
import json
import secrets
from typing import Any

from sqlalchemy import Boolean, Column, DateTime, Integer, MetaData, String, Table, Text, delete, insert, select

from shoal.config import Settings
from shoal.lake import database

# Rows kept per statement: what the result pages and the CSV download show. A query needing
# more is better served by the API or the PostgreSQL endpoint than by a browser.
MAX_KEPT_ROWS = 10_000
MAX_KEPT_BYTES = 16 << 20  # and at most this much JSON, whatever the width of the rows
ID_BYTES = 16  # 128 random bits: ids cannot be guessed or enumerated

state_tables = MetaData()
# Replaces `shoal_web_queries` (sequential ids, no kept result), dropped by migration 0005.
queries = Table(
    "shoal_console_queries",
    state_tables,
    Column("id", String(32), primary_key=True),
    Column("principal", String(200), nullable=False, index=True),
    Column("sql", Text, nullable=False),
    Column("ok", Boolean, nullable=False),
    Column("rows", Integer),  # rows kept (at most MAX_KEPT_ROWS)
    Column("truncated", Boolean, nullable=False, default=False),  # the statement returned more
    Column("result", Text),  # JSON {"columns": [...], "types": [...], "rows": [[...], ...]}
    Column("error", Text),
    Column("duration_ms", Integer, nullable=False),
    Column("ran_at", DateTime, nullable=False, index=True),
)


# Saved queries: named statements kept by their owner; `shared` lets every signed-in user open
# (and run, under their own grants) a copy. Only the owner changes or deletes one.
saved = Table(
    "shoal_console_saved",
    state_tables,
    Column("id", String(32), primary_key=True),
    Column("owner", String(200), nullable=False, index=True),
    Column("name", String(200), nullable=False),
    Column("sql", Text, nullable=False),
    Column("shared", Boolean, nullable=False, default=False),
    Column("saved_at", DateTime, nullable=False),
)


def new_id() -> str:
    return secrets.token_urlsafe(ID_BYTES)


class QueryHistory:
    def __init__(self, settings: Settings) -> None:
        self.engine = database.engine(settings, state_tables)

    def add(
        self,
        principal: str,
        sql: str,
        *,
        ok: bool,
        result: dict[str, Any] | None,
        truncated: bool = False,
        error: str | None,
        duration_ms: int,
        keep: int = MAX_KEPT_ROWS,
    ) -> str:
        """Keep a statement that has just run and what it returned (its first `keep` rows);
        the entry's random id."""
        query_id = new_id()
        rows = result["rows"][:keep] if result else None
        text = None
        if result is not None and rows is not None:
            text = json.dumps({**result, "rows": rows}, default=str)
            while len(text) > MAX_KEPT_BYTES and rows:  # wide rows: keep fewer of them
                rows = rows[: len(rows) // 2]
                truncated = True
                text = json.dumps({**result, "rows": rows}, default=str)
        with self.engine.begin() as conn:
            conn.execute(
                insert(queries).values(
                    id=query_id,
                    principal=principal,
                    sql=sql,
                    ok=ok,
                    rows=len(rows) if rows is not None else None,
                    truncated=truncated,
                    result=text,
                    error=error,
                    duration_ms=duration_ms,
                    ran_at=database.utcnow(),
                )
            )
        return query_id

    def get(self, principal: str, query_id: str) -> dict[str, Any] | None:
        """The principal's own entry with its kept result, or None (also for another's entry:
        history is private, and its ids must not be confirmable by anyone else)."""
        if not query_id or len(query_id) > 64:
            return None
        with self.engine.connect() as conn:
            row = conn.execute(
                select(queries).where(queries.c.id == query_id, queries.c.principal == principal)
            ).first()
        if row is None:
            return None
        entry = dict(row._mapping)
        entry["result"] = json.loads(row.result) if row.result else None
        return entry

    def list(self, principal: str, limit: int = 30) -> builtins.list[dict[str, Any]]:
        """The principal's latest entries, without their results (the list only shows the SQL);
        an entry that kept no rows carries its statement kind and the rows it wrote, from its
        (then small) kept result, so an INSERT lists as "1 row inserted", not "0 rows"."""
        cols = [c for c in queries.c if c.name != "result"]
        with self.engine.connect() as conn:
            rows = conn.execute(
                select(*cols).where(queries.c.principal == principal).order_by(queries.c.ran_at.desc()).limit(limit)
            )
            entries = [dict(r._mapping) for r in rows]
            empty = [e["id"] for e in entries if e["ok"] and e["rows"] == 0]
            kept = (
                dict(
                    conn.execute(
                        select(queries.c.id, queries.c.result).where(
                            queries.c.principal == principal, queries.c.id.in_(empty)
                        )
                    ).all()
                )
                if empty
                else {}
            )
        for e in entries:
            result = json.loads(kept[e["id"]]) if kept.get(e["id"]) else {}
            e["statement"], e["affected"] = result.get("statement"), result.get("affected")
        return entries

    def forget(self, principal: str) -> None:
        """A removed principal's queries go with it (a later principal of that name sees none)."""
        with self.engine.begin() as conn:
            conn.execute(delete(queries).where(queries.c.principal == principal))
            conn.execute(delete(saved).where(saved.c.owner == principal))

    # ---- saved queries ---------------------------------------------------------------------
    def save(self, owner: str, name: str, sql: str, *, shared: bool) -> str:
        """Keep a named statement; saving a name the owner already used replaces it."""
        with self.engine.begin() as conn:
            old = conn.execute(select(saved.c.id).where(saved.c.owner == owner, saved.c.name == name)).first()
            query_id = old.id if old else new_id()
            if old:
                conn.execute(delete(saved).where(saved.c.id == query_id))
            conn.execute(
                insert(saved).values(
                    id=query_id, owner=owner, name=name, sql=sql, shared=shared, saved_at=database.utcnow()
                )
            )
        return query_id

    def list_saved(self, principal: str) -> builtins.list[dict[str, Any]]:
        """The principal's own saved queries and those others shared, the principal's first."""
        with self.engine.connect() as conn:
            rows = conn.execute(
                select(saved)
                .where((saved.c.owner == principal) | saved.c.shared.is_(True))
                .order_by(saved.c.name)
                .limit(500)
            )
            found = [dict(r._mapping) for r in rows]
        return sorted(found, key=lambda r: r["owner"] != principal)

    def saved_query(self, principal: str, query_id: str) -> dict[str, Any] | None:
        """One saved query if the principal owns it or it is shared; None otherwise (as if missing)."""
        if not query_id or len(query_id) > 64:
            return None
        with self.engine.connect() as conn:
            row = conn.execute(
                select(saved).where(saved.c.id == query_id, (saved.c.owner == principal) | saved.c.shared.is_(True))
            ).first()
        return dict(row._mapping) if row else None

    def unsave(self, owner: str, query_id: str) -> bool:
        """Delete one of the owner's saved queries; False when it is not theirs or missing."""
        with self.engine.begin() as conn:
            return conn.execute(delete(saved).where(saved.c.id == query_id, saved.c.owner == owner)).rowcount > 0
