"""One writer per table at a time.

Iceberg's optimistic commits keep the table itself consistent, but two CDC batches
racing on one table would each read the same ledger; the lock serialises them. With a
SQLite catalog (one machine) it is a lock file in the workspace; with a PostgreSQL catalog
it is a PostgreSQL advisory lock, so `shoal` processes on different hosts sharing the
catalog exclude each other too. Either lock dies with its holder (file descriptor or
database session), so a killed run never leaves a table locked.
"""

from __future__ import annotations

from contextlib import AbstractContextManager

from shoal.config import Settings
from shoal.lake import database, exclusive


def table_lock(settings: Settings, table: str, *, timeout_s: float = 600) -> AbstractContextManager[None]:
    return exclusive.held(settings, table, timeout_s=timeout_s, engine=lambda: database.engine(settings))
