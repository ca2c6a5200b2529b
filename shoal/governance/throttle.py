"""Sign-in throttling that slows guessing without letting anyone lock a victim out.

A credential check (console password or token sign-in, API bearer token, PostgreSQL sign-in)
names an account (`account:NAME`, or `token:ID` for an API token) and the client address. Three
counters see each failure:

- the (account, client) pair: `[governance] throttle_account_failures` failures within
  `throttle_window_s` lock that pair for `throttle_lockout_s`, doubling with each lock in a row
  up to `throttle_lockout_max_s`. This is what stops a guesser: their address is locked for that
  account, while the account's owner, elsewhere, signs in as usual.
- the account, across all clients: beyond `throttle_account_global_failures` failures in the
  window, each further failure slows the account down for clients it has not signed in from
  lately (a delay of `throttle_lockout_s`, doubling per further failure up to
  `throttle_lockout_max_s`), which
  caps the guessing rate of an attacker spread over many addresses.
- the client, across all accounts: beyond `throttle_client_failures` failures, the same slow-down
  for that address and the accounts that have not signed in from it lately (password spraying).

A success marks the (account, client) pair as known for `throttle_known_days` and clears the
pair's counter. The account-wide and client-wide slow-downs never apply to a known pair, so
nobody's failures can keep an account's owner out of their own usual client: the slow-downs
only ever refuse unknown (account, client) combinations, and a pair is only locked by failures
from that very pair. While a check is refused, the secret is not even looked at (no password
hash is computed). The counters live in the catalog database, so they hold across processes and
restarts.

Signed URLs (`signed-url:ADDR`) keep a plain per-client lock through `check`/`fail`: a link
carries no account to pair with, and a flood of bad links must not touch sign-ins.
"""

from __future__ import annotations

import datetime as dt

from sqlalchemy import Connection, delete, select

from shoal.config import Settings
from shoal.governance.errors import AuthError
from shoal.governance.store import auth_failures, state_tables
from shoal.lake import database
from shoal.lake.database import utcnow


class Throttled(AuthError):
    """Too many failed attempts for this account and client: refused without checking."""

    def __init__(self, retry_after: int) -> None:
        super().__init__("throttled", hint="too many failed attempts; try again later")
        self.retry_after = retry_after


def account_key(name: str) -> str:
    return f"account:{name.lower()[:200]}"


def client_key(client: str | None, kind: str = "client") -> str | None:
    return f"{kind}:{client[:64]}" if client else None


def pair_key(account: str, client: str | None) -> str:
    """The counter of one account from one client (`-` when the address is unknown)."""
    return f"pair:{account}|{(client or '-')[:64]}"


def known_key(account: str, client: str | None) -> str:
    """Marks a client the account signed in from (its window_start: the last success)."""
    return f"known:{account}|{(client or '-')[:64]}"


def account_prefixes(account: str) -> tuple[str, str]:
    """The key prefixes of every pair and known row of an account (for removing a principal)."""
    return f"pair:{account}|", f"known:{account}|"


class Throttle:
    def __init__(self, settings: Settings) -> None:
        self.engine = database.engine(settings, state_tables)
        g = settings.governance
        self.window = dt.timedelta(seconds=g.throttle_window_s)
        self.base = g.throttle_lockout_s
        self.cap = g.throttle_lockout_max_s
        self.pair_limit = g.throttle_account_failures
        self.account_limit = g.throttle_account_global_failures
        self.client_limit = g.throttle_client_failures
        self.known_for = dt.timedelta(days=g.throttle_known_days)

    # ---- sign-ins: (account, client) pairs, with account- and client-wide slow-downs ---------
    def check_login(self, account: str, client: str | None) -> None:
        """Raise Throttled while this pair is locked or, for a pair that has not signed in
        lately, while the account or the client is slowed down."""
        keys: list[str | None] = [pair_key(account, client)]
        if not self.known(account, client):
            keys += [account, client_key(client)]
        self.check(*keys)

    def fail_login(self, account: str, client: str | None) -> None:
        now = utcnow()
        with self.engine.begin() as conn:
            self._lock_on_failure(conn, pair_key(account, client), self.pair_limit, now)
            self._slow_on_failure(conn, account, self.account_limit, now)
            ckey = client_key(client)
            if ckey:
                self._slow_on_failure(conn, ckey, self.client_limit, now)

    def succeed_login(self, account: str, client: str | None) -> None:
        """A correct secret: the pair's counter starts over and the client becomes known to the
        account. The account-wide counter is left alone: the owner signing in must not hand a
        distributed guesser a fresh budget."""
        now = utcnow()
        with self.engine.begin() as conn:
            conn.execute(delete(auth_failures).where(auth_failures.c.key == pair_key(account, client)))
            database.upsert(
                conn,
                auth_failures,
                {"key": known_key(account, client)},
                {"failures": 0, "window_start": now, "locked_until": None, "lockouts": 0},
            )

    def known(self, account: str, client: str | None) -> bool:
        with self.engine.connect() as conn:
            row = conn.execute(
                select(auth_failures.c.window_start).where(auth_failures.c.key == known_key(account, client))
            ).first()
        return row is not None and utcnow() - row.window_start <= self.known_for

    # ---- plain keys (signed URLs) --------------------------------------------------------------
    def check(self, *keys: str | None) -> None:
        """Raise Throttled while any of the keys is locked or slowed down."""
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
        """A failure against each key, locking a key that reaches the client limit."""
        now = utcnow()
        with self.engine.begin() as conn:
            for key in (k for k in keys if k):
                self._lock_on_failure(conn, key, self._limit(key), now)

    def _limit(self, key: str) -> int:
        kind = key.split(":", 1)[0]
        return self.client_limit if kind in ("client", "signed-url") else self.pair_limit

    # ---- counters ------------------------------------------------------------------------------
    def _lock_on_failure(self, conn: Connection, key: str, limit: int, now: dt.datetime) -> None:
        """Count a failure; at `limit` failures in the window, lock the key (doubling per lock in a row)."""
        row = conn.execute(select(auth_failures).where(auth_failures.c.key == key)).first()
        in_window = row is not None and now - row.window_start <= self.window
        # Locks in a row double; a quiet window after the last lock forgives them.
        recent_lock = row is not None and row.locked_until is not None and now - row.locked_until <= self.window
        failures = (row.failures if row is not None and in_window else 0) + 1
        lockouts = row.lockouts if row is not None and (in_window or recent_lock) else 0
        values: dict[str, object] = {"failures": failures, "lockouts": lockouts}
        if not in_window:
            values["window_start"] = now
        if failures >= limit:
            seconds = min(self.base * 2**lockouts, self.cap)
            values = {
                "failures": 0,
                "window_start": now,
                "locked_until": now + dt.timedelta(seconds=seconds),
                "lockouts": lockouts + 1,
            }
        database.upsert(conn, auth_failures, {"key": key}, values)

    def _slow_on_failure(self, conn: Connection, key: str, limit: int, now: dt.datetime) -> None:
        """Count a failure; beyond `limit` in the window, hold the key for a delay that doubles
        with each further failure (`throttle_lockout_s`, twice that, ... up to the cap). Only unknown pairs
        are held by it (check_login), so this slows guessing without shutting anyone out."""
        row = conn.execute(select(auth_failures).where(auth_failures.c.key == key)).first()
        in_window = row is not None and now - row.window_start <= self.window
        failures = (row.failures if row is not None and in_window else 0) + 1
        values: dict[str, object] = {"failures": failures, "lockouts": 0}
        if not in_window:
            values["window_start"] = now
            values["locked_until"] = None
        if failures > limit:
            seconds = min(self.base * 2 ** min(failures - limit - 1, 30), self.cap)
            values["locked_until"] = now + dt.timedelta(seconds=seconds)
        database.upsert(conn, auth_failures, {"key": key}, values)
