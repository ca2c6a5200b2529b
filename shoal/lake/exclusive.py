"""The two kinds of table lock behind `shoal.lake.locks.table_lock`, given the engine to lock on."""

from __future__ import annotations

import fcntl
import hashlib
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from sqlalchemy import Engine, text

from shoal.config import Settings
from shoal.exceptions import ShoalError
from shoal.private import private_dir


def _busy(table: str, where: str) -> ShoalError:
    return ShoalError(
        f"table {table} is locked by another Shoal process ({where})", hint="wait for the other run to finish"
    )


@contextmanager
def held(settings: Settings, table: str, *, timeout_s: float, engine: Callable[[], Engine]) -> Iterator[None]:
    """The lock of `table`: a lock file, or an advisory lock taken on `engine()` (the catalog
    database's engine: passed in because `shoal.lake.database` takes this lock while it migrates)."""
    if settings.catalog.type == "postgresql":
        with _advisory_lock(engine(), table, timeout_s):
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
def _advisory_lock(eng: Engine, table: str, timeout_s: float) -> Iterator[None]:
    # A signed 64-bit key from the table name (advisory locks are keyed by bigint).
    key = int.from_bytes(hashlib.sha256(f"shoal-table:{table}".encode()).digest()[:8], "big", signed=True)
    with eng.connect() as conn:
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
