"""The audit log: every authorization decision and raw-object read, append-only.

Queries are recorded by fingerprint (the statement with its literals replaced by `?`,
hashed), so the log shows which query shapes ran without copying values into it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import datetime
from typing import Any

import sqlglot
from sqlalchemy import insert, select
from sqlglot.dialects.dialect import Dialect

from shoal.config import Settings
from shoal.governance.store import audit, state_tables
from shoal.lake import database
from shoal.lake.database import utcnow

# Statements sqlglot has no tree for (SHOW ..., as `shoal table list` runs them): parsing one
# logs "contains unsupported syntax" on stderr and keeps its text as one literal, so every SHOW
# had one fingerprint.
_COMMANDS = Dialect.get_or_raise("spark").tokenizer_class.COMMANDS


def fingerprint(sql: str) -> str:
    shape = " ".join(sql.split()).lower()  # unparsable text and commands: their own words
    try:
        tokens = sqlglot.tokenize(sql, read="spark")
        if tokens and tokens[0].token_type not in _COMMANDS:
            tree = sqlglot.parse_one(sql, read="spark")
            shape = tree.transform(
                lambda n: sqlglot.exp.Placeholder() if isinstance(n, sqlglot.exp.Literal) else n
            ).sql(dialect="spark")
    except Exception:  # noqa: BLE001 - unparsable text still gets a stable fingerprint
        pass
    return hashlib.sha256(shape.encode()).hexdigest()[:32]


# The reads of one user action being gathered (see `gathered`), or None: a ContextVar, so each
# request (and thread the server runs it on) gathers only its own.
_gathering: ContextVar[list[dict[str, Any]] | None] = ContextVar("shoal_audit_gathering", default=None)


@contextmanager
def gathered() -> Iterator[list[dict[str, Any]]]:
    """Gather the allowed reads made inside this block into the yielded list instead of writing a
    row for each, so one user action (a console page that runs a dozen governed queries) is one
    audit row, written by the caller with the list as its detail. Refusals and failures (a row
    with a reason) are still written one by one, as they happen."""
    found: list[dict[str, Any]] = []
    token = _gathering.set(found)
    try:
        yield found
    finally:
        _gathering.reset(token)


class AuditLog:
    def __init__(self, settings: Settings) -> None:
        self.engine = database.engine(settings, state_tables)

    def record(
        self,
        principal: str,
        action: str,
        resource: str | None,
        allowed: bool,
        *,
        reason: str | None = None,
        sql: str | None = None,
        **detail: Any,
    ) -> None:
        gathering = _gathering.get()
        if gathering is not None and allowed and not reason:
            gathering.append(
                {
                    "action": action,
                    "resource": resource,
                    **({"fingerprint": fingerprint(sql)} if sql else {}),
                    **{k: v for k, v in detail.items() if v not in (None, [], {})},
                }
            )
            return
        with self.engine.begin() as conn:
            conn.execute(
                insert(audit).values(
                    ts=utcnow(),
                    principal=principal,
                    action=action,
                    resource=resource,
                    decision="allow" if allowed else "deny",
                    reason=(reason or "")[:1000] or None,
                    fingerprint=fingerprint(sql) if sql else None,
                    detail=json.dumps(detail, default=str) if detail else None,
                )
            )

    def actions(self, limit: int = 500) -> list[str]:
        """The actions on record, sorted, for a filter's choices (SQL runs as `select`, `insert`...)."""
        with self.engine.connect() as conn:
            rows = conn.execute(select(audit.c.action).distinct().order_by(audit.c.action).limit(limit)).all()
        return [r.action for r in rows]

    def list(
        self,
        *,
        principal: str | None = None,
        decision: str | None = None,
        limit: int = 100,
        action: str | None = None,
        resource: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        offset: int = 0,
    ) -> list[dict[str, Any]]:
        """Newest first. `action` matches a whole action or a prefix ending in "." ("query."),
        `resource` a part of the resource; `since`/`until` are naive UTC, until exclusive."""
        q = select(audit).order_by(audit.c.id.desc()).limit(limit).offset(offset)
        if principal:
            q = q.where(audit.c.principal == principal)
        if decision:
            q = q.where(audit.c.decision == decision)
        if action:
            q = q.where(
                audit.c.action.startswith(action, autoescape=True) if action.endswith(".") else audit.c.action == action
            )
        if resource:
            q = q.where(audit.c.resource.contains(resource, autoescape=True))
        if since:
            q = q.where(audit.c.ts >= since)
        if until:
            q = q.where(audit.c.ts < until)
        with self.engine.connect() as conn:
            rows = conn.execute(q).all()
        return [
            {
                "id": r.id,
                "ts": r.ts.isoformat() + "Z",
                "principal": r.principal,
                "action": r.action,
                "resource": r.resource,
                "decision": r.decision,
                "reason": r.reason,
                "fingerprint": r.fingerprint,
                **({"detail": json.loads(r.detail)} if r.detail else {}),
            }
            for r in rows
        ]
