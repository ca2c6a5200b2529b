"""One writer per table at a time.

Iceberg's optimistic commits keep the table itself consistent, but two CDC batches
racing on one table would each read the same ledger; the lock serialises them. With a
SQLite catalog (one machine) it is a lock file in the workspace; with a PostgreSQL catalog
it is a PostgreSQL advisory lock, so `shoal` processes on different hosts sharing the
catalog exclude each other too. Either lock dies with its holder (file descriptor or
database session), so a killed run never leaves a table locked.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager

from shoal.config import Settings
from shoal.exceptions import ShoalError
from shoal.private import private_dir


def _busy(table: str, where: str) -> ShoalError:
    return ShoalError(
        f"table {table} is locked by another Shoal process ({where})", hint="wait for the other run to finish"
    )


@contextmanager
def table_lock(settings: Settings, table: str, *, timeout_s: float = 600) -> Iterator[None]:
    if settings.catalog.type == "postgresql":
        with _advisory_lock(settings, table, timeout_s):
            yield
        return
    lock_dir = private_dir(settings.workspace_dir / "locks")
    path = lock_dir / f"{table}.lock"
    # 0600 like the rest of the workspace (open() would use the process umask).
    with os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600), "w") as handle:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise _busy(table, str(path)) from None
                time.sleep(0.2)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@contextmanager
def _advisory_lock(settings: Settings, table: str, timeout_s: float) -> Iterator[None]:
    from sqlalchemy import text

    from shoal.lake import database

    # A signed 64-bit key from the table name (advisory locks are keyed by bigint).
    key = int.from_bytes(hashlib.sha256(f"shoal-table:{table}".encode()).digest()[:8], "big", signed=True)
    with database.engine(settings).connect() as conn:
        deadline = time.monotonic() + timeout_s
        while not conn.execute(text("SELECT pg_try_advisory_lock(:k)"), {"k": key}).scalar():
            conn.rollback()  # end the probe's transaction; the session keeps no snapshot while waiting
            if time.monotonic() > deadline:
                raise _busy(table, f"PostgreSQL advisory lock {key}")
            time.sleep(0.2)
        conn.commit()
        try:
            yield
        finally:
            conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": key})
            conn.commit()
