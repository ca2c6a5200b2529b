"""Sign-in throttling: failed credential checks counted per account and per client, with lockout.

Every check of a secret (console password or token sign-in, API bearer token, signed URL)
names its keys: the account (`account:NAME`, `token:ID`) and the client (`client:ADDR`, or
`signed-url:ADDR` for signed URLs, so a flood of bad links does not lock sign-ins). A key
that collects `[governance] throttle_account_failures` (accounts) or
`throttle_client_failures` (clients) failures within `throttle_window_s` is locked for
`throttle_lockout_s`, doubled for each lock in a row (up to `throttle_lockout_max_s`).
While any of its keys is locked a check is refused before the secret is looked at (no
password hash is computed), and a success resets the account's key. The counters live in
the catalog database, so they hold across processes and restarts.
"""

from __future__ import annotations

import datetime as dt

from sqlalchemy import delete, select

from shoal.config import Settings
from shoal.governance.errors import AuthError
from shoal.governance.store import auth_failures, state_tables
from shoal.lake import database
from shoal.lake.database import utcnow


class Throttled(AuthError):
    """Too many failed attempts for this account or client: refused without checking."""

    def __init__(self, retry_after: int) -> None:
        super().__init__("throttled", hint="too many failed attempts; try again later")
        self.retry_after = retry_after


def account_key(name: str) -> str:
    return f"account:{name.lower()[:200]}"


def client_key(client: str | None, kind: str = "client") -> str | None:
    return f"{kind}:{client}" if client else None


class Throttle:
    def __init__(self, settings: Settings) -> None:
        self.engine = database.engine(settings, state_tables)
        g = settings.governance
        self.window = dt.timedelta(seconds=g.throttle_window_s)
        self.base = g.throttle_lockout_s
        self.cap = g.throttle_lockout_max_s
        self.limits = {"client": g.throttle_client_failures, "signed-url": g.throttle_client_failures}
        self.account_limit = g.throttle_account_failures

    def _limit(self, key: str) -> int:
        return self.limits.get(key.split(":", 1)[0], self.account_limit)

    def check(self, *keys: str | None) -> None:
        """Raise Throttled while any of the keys is locked."""
        wanted = [k for k in keys if k]
        if not wanted:
            return
        now = utcnow()
        with self.engine.connect() as conn:
            rows = conn.execute(
                select(auth_failures.c.locked_until).where(
                    auth_failures.c.key.in_(wanted), auth_failures.c.locked_until > now
                )
            ).all()
        if rows:
            until = max(r.locked_until for r in rows)
            raise Throttled(max(1, int((until - now).total_seconds()) + 1))

    def fail(self, *keys: str | None) -> None:
        now = utcnow()
        with self.engine.begin() as conn:
            for key in (k for k in keys if k):
                row = conn.execute(select(auth_failures).where(auth_failures.c.key == key)).first()
                in_window = row is not None and now - row.window_start <= self.window
                # Locks in a row double; a quiet window after the last lock forgives them.
                recent_lock = row is not None and row.locked_until is not None and now - row.locked_until <= self.window
                failures = (row.failures if row is not None and in_window else 0) + 1
                lockouts = row.lockouts if row is not None and (in_window or recent_lock) else 0
                values: dict[str, object] = {"failures": failures, "lockouts": lockouts}
                if not in_window:
                    values["window_start"] = now
                if failures >= self._limit(key):
                    seconds = min(self.base * 2**lockouts, self.cap)
                    values = {
                        "failures": 0,
                        "window_start": now,
                        "locked_until": now + dt.timedelta(seconds=seconds),
                        "lockouts": lockouts + 1,
                    }
                database.upsert(conn, auth_failures, {"key": key}, values)

    def succeed(self, *keys: str | None) -> None:
        """A correct secret: the account's counter (and lock history) starts over."""
        wanted = [k for k in keys if k]
        if wanted:
            with self.engine.begin() as conn:
                conn.execute(delete(auth_failures).where(auth_failures.c.key.in_(wanted)))
