"""Shoal's own state lives in the catalog database, next to Iceberg's tables.

One SQLAlchemy engine per catalog URL and process. Each capability declares its tables
(prefixed `shoal_`) on its own `MetaData` and calls `engine(settings, metadata)`, which
first brings existing tables to this release's schema (shoal.lake.migrations, once per process
and database) and then creates missing tables once. SQLite runs in WAL mode with a busy timeout, as the Iceberg
JDBC catalog does, so CLI calls, the scheduler and Spark commits can share the file.
"""

from __future__ import annotations

import datetime as dt
import threading
from collections.abc import Mapping
from typing import Any

from sqlalchemy import Connection, CursorResult, Engine, MetaData, Table, create_engine, event, insert, update

from shoal.config import Settings
from shoal.lake import exclusive
from shoal.private import private_dir, private_file

_engines: dict[str, Engine] = {}
_created: set[tuple[str, int]] = set()
_lock = threading.Lock()
_migrated: set[str] = set()
_migrating: set[str] = set()
_migrate_lock = threading.RLock()


def utcnow() -> dt.datetime:
    """Naive UTC: what the DateTime columns hold on every backend."""
    return dt.datetime.now(dt.UTC).replace(tzinfo=None)


def upsert(conn: Connection, table: Table, key: Mapping[str, object], values: Mapping[str, object]) -> None:
    """Update the row with this key, or insert it (portable: no dialect-specific ON CONFLICT)."""
    where = [table.c[k] == v for k, v in key.items()]
    if not conn.execute(update(table).where(*where).values(**values)).rowcount:
        conn.execute(insert(table).values(**key, **values))


def engine(settings: Settings, metadata: MetaData | None = None) -> Engine:
    url = settings.catalog_sqlalchemy_uri
    with _lock:
        eng = _engines.get(url)
        if eng is None:
            eng = _engines[url] = _create(url, settings)
    _migrate_once(url, settings, eng)
    with _lock:
        if metadata is not None and (url, id(metadata)) not in _created:
            metadata.create_all(eng)
            _created.add((url, id(metadata)))
    return eng


def _migrate_once(url: str, settings: Settings, eng: Engine) -> None:
    """Run the schema migrations before any module touches its tables: once per process."""
    with _migrate_lock:
        if url in _migrated or url in _migrating:  # done, or the lock below asking for the engine
            return
        _migrating.add(url)
        try:
            from shoal.lake import migrations

            # Two processes starting together: the second waits, then finds nothing to do.
            with exclusive.held(settings, "shoal-state-schema", timeout_s=600, engine=lambda: eng):
                migrations.upgrade(eng)
            _migrated.add(url)
        finally:
            _migrating.discard(url)


def _create(url: str, settings: Settings) -> Engine:
    if url.startswith("sqlite"):
        private_dir(settings.workspace_dir)
        if settings.catalog_sqlite_file is not None:
            private_file(settings.catalog_sqlite_file)  # SQLite's -wal and -shm files copy its mode
        eng = create_engine(url, connect_args={"timeout": 30, "check_same_thread": False})

        @event.listens_for(eng, "connect")
        def _pragmas(dbapi_conn: Any, _record: Any) -> None:  # pragma: no cover - runs per connection
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA journal_mode=WAL")
            # WAL + NORMAL stays durable across process crashes (not power loss) and keeps
            # a state transition under a millisecond.
            cur.execute("PRAGMA synchronous=NORMAL")
            cur.execute("PRAGMA busy_timeout=30000")
            cur.close()

        return eng
    return create_engine(url, pool_pre_ping=True)


def dispose() -> None:
    """Close every pooled connection (tests that delete a workspace call this)."""
    with _lock:
        for eng in _engines.values():
            eng.dispose()
        _engines.clear()
        _created.clear()
    with _migrate_lock:
        _migrated.clear()


def inserted_id(result: CursorResult[Any]) -> int:
    """The primary key an INSERT of one row created."""
    key = result.inserted_primary_key
    assert key is not None, "not an INSERT of one row"
    return int(key[0])
