"""Console sign-in sessions: server-side rows in the catalog database, a random cookie.

The cookie holds a 256-bit random value; the database keeps only its SHA-256, so a leaked
database cannot be replayed as cookies. Each session has its own CSRF token, required on
every state-changing request (form field `csrf` or header `X-CSRF-Token`). Sessions end on
logout, after `[server] session_hours`, or when the principal is removed.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import secrets
from dataclasses import dataclass

from sqlalchemy import Column, DateTime, MetaData, String, Table, delete, insert, select, update

from shoal.config import Settings
from shoal.lake import database

COOKIE = "shoal_session"
LOGIN_COOKIE = "shoal_login_csrf"  # double-submit token for the sign-in form (no session yet)

metadata = MetaData()
sessions = Table(
    "shoal_web_sessions",
    metadata,
    Column("id_hash", String(64), primary_key=True),
    Column("principal", String(200), nullable=False),
    Column("csrf", String(64), nullable=False),
    Column("created_at", DateTime, nullable=False),
    Column("last_seen", DateTime, nullable=False),
    Column("expires_at", DateTime, nullable=False),
)


@dataclass(frozen=True)
class Session:
    principal: str
    csrf: str
    expires_at: dt.datetime


def _hash(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()


class Sessions:
    def __init__(self, settings: Settings) -> None:
        self.engine = database.engine(settings, metadata)
        self.lifetime = dt.timedelta(hours=settings.server.session_hours)

    def create(self, principal: str) -> tuple[str, Session]:
        cookie = secrets.token_urlsafe(32)
        now = database.utcnow()
        session = Session(principal, secrets.token_urlsafe(32), now + self.lifetime)
        with self.engine.begin() as conn:
            conn.execute(delete(sessions).where(sessions.c.expires_at < now))
            conn.execute(
                insert(sessions).values(
                    id_hash=_hash(cookie),
                    principal=principal,
                    csrf=session.csrf,
                    created_at=now,
                    last_seen=now,
                    expires_at=session.expires_at,
                )
            )
        return cookie, session

    def get(self, cookie: str | None) -> Session | None:
        if not cookie or len(cookie) > 200:
            return None
        now = database.utcnow()
        with self.engine.begin() as conn:
            row = conn.execute(select(sessions).where(sessions.c.id_hash == _hash(cookie))).first()
            if row is None or row.expires_at < now:
                return None
            conn.execute(update(sessions).where(sessions.c.id_hash == row.id_hash).values(last_seen=now))
        return Session(row.principal, row.csrf, row.expires_at)

    def end(self, cookie: str | None) -> None:
        if cookie:
            with self.engine.begin() as conn:
                conn.execute(delete(sessions).where(sessions.c.id_hash == _hash(cookie)))


def same(a: str | None, b: str | None) -> bool:
    return bool(a) and bool(b) and hmac.compare_digest(str(a), str(b))
