"""Console sign-in sessions: server-side rows in the catalog database, a random cookie.

The cookie holds a 256-bit random value; the database keeps only its SHA-256, so a leaked
database cannot be replayed as cookies. Each session has its own CSRF token, required on
every state-changing request. Sessions end on logout, after `[server] session_hours`, when
the API token they signed in with is revoked or expires (a session never outlives the
credential that opened it), when the principal's password changes (all but the session that
changed it) and when the principal is removed.

The store lives in governance (not in the web layer) so that revoking a token, changing a
password or removing a principal ends sessions wherever it happens (CLI or console).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import secrets
from dataclasses import dataclass

from sqlalchemy import Connection, delete, insert, select, update

from shoal.config import Settings
from shoal.governance.errors import AuthError
from shoal.governance.store import sessions, state_tables, tokens
from shoal.lake import database


@dataclass(frozen=True)
class Session:
    principal: str
    csrf: str
    expires_at: dt.datetime
    token_id: str | None = None


def cookie_hash(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()


def end_sessions(
    conn: Connection, *, principal: str | None = None, token_id: str | None = None, keep: str | None = None
) -> int:
    """End the sessions of a principal or of a token (all but the one whose cookie is `keep`)."""
    if principal is None and token_id is None:
        raise ValueError("end_sessions needs a principal or a token id")
    q = delete(sessions)
    if principal is not None:
        q = q.where(sessions.c.principal == principal)
    if token_id is not None:
        q = q.where(sessions.c.token_id == token_id)
    if keep:
        q = q.where(sessions.c.id_hash != cookie_hash(keep))
    return conn.execute(q).rowcount or 0


def _expired(expires_at: dt.datetime | None, now: dt.datetime) -> bool:
    return expires_at is not None and expires_at <= now


class Sessions:
    def __init__(self, settings: Settings) -> None:
        self.engine = database.engine(settings, state_tables)
        self.lifetime = dt.timedelta(hours=settings.server.session_hours)

    def create(
        self, principal: str, *, token_id: str | None = None, not_after: dt.datetime | None = None
    ) -> tuple[str, Session]:
        """A new session; it ends after `[server] session_hours`, at `not_after` if sooner, and
        signed in with an API token no later than the token does (a session never outlives its
        credential). A token that is missing, revoked or expired opens no session at all."""
        cookie = secrets.token_urlsafe(32)
        now = database.utcnow()
        expires = now + self.lifetime if not_after is None else min(now + self.lifetime, not_after)
        with self.engine.begin() as conn:
            if token_id is not None:
                token = conn.execute(select(tokens).where(tokens.c.id == token_id)).first()
                if token is None or token.revoked_at is not None or _expired(token.expires_at, now):
                    raise AuthError("the token is no longer valid; sign in again")
                if token.expires_at is not None:
                    expires = min(expires, token.expires_at)
            session = Session(principal, secrets.token_urlsafe(32), expires, token_id)
            conn.execute(delete(sessions).where(sessions.c.expires_at < now))
            conn.execute(
                insert(sessions).values(
                    id_hash=cookie_hash(cookie),
                    principal=principal,
                    token_id=token_id,
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
            row = conn.execute(select(sessions).where(sessions.c.id_hash == cookie_hash(cookie))).first()
            if row is None or row.expires_at < now:
                return None
            if row.token_id is not None:
                # Checked on every request, not only at sign-in: the token's expiry can be
                # shortened (or the token revoked) after the session began.
                token = conn.execute(
                    select(tokens.c.expires_at, tokens.c.revoked_at).where(tokens.c.id == row.token_id)
                ).first()
                if token is None or token.revoked_at is not None or _expired(token.expires_at, now):
                    conn.execute(delete(sessions).where(sessions.c.id_hash == row.id_hash))
                    return None
            conn.execute(update(sessions).where(sessions.c.id_hash == row.id_hash).values(last_seen=now))
        return Session(row.principal, row.csrf, row.expires_at, row.token_id)

    def end(self, cookie: str | None) -> None:
        if cookie:
            with self.engine.begin() as conn:
                conn.execute(delete(sessions).where(sessions.c.id_hash == cookie_hash(cookie)))

    def count(self, principal: str) -> int:
        with self.engine.connect() as conn:
            return len(conn.execute(select(sessions.c.id_hash).where(sessions.c.principal == principal)).all())
