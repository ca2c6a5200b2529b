"""Shoal's state tables upgrade in place: a catalog made by release 0.1.0 opens with this release."""

from __future__ import annotations

import datetime as dt
import importlib
import pkgutil
import sqlite3
from pathlib import Path

import pytest
from sqlalchemy import MetaData, inspect, text

import shoal
from shoal.config import load_settings
from shoal.lake import database, migrations

SCHEMA_0_1_0 = Path(__file__).resolve().parents[1] / "support" / "data" / "state_schema_0.1.0.sql"


def _state_metadata() -> list[MetaData]:
    """Every MetaData declared anywhere in shoal/ (found by type, whatever its name)."""
    found: dict[int, MetaData] = {}
    for info in pkgutil.walk_packages(shoal.__path__, "shoal."):
        source = Path(importlib.util.find_spec(info.name).origin or "")
        if source.suffix != ".py" or "MetaData(" not in source.read_text(encoding="utf-8"):
            continue
        module = importlib.import_module(info.name)
        for value in vars(module).values():
            if isinstance(value, MetaData):
                found[id(value)] = value
    return list(found.values())


def _old_catalog(tmp_path: Path) -> Path:
    db = tmp_path / "ws" / "catalog.db"
    db.parent.mkdir(parents=True)
    con = sqlite3.connect(db)
    con.executescript(SCHEMA_0_1_0.read_text())
    now = dt.datetime(2026, 11, 1, 12, 0)
    con.execute(
        "INSERT INTO shoal_principals (name, kind, is_admin, created_at) VALUES ('olduser', 'user', 0, ?)", (now,)
    )
    con.execute(
        "INSERT INTO shoal_web_sessions (id_hash, principal, csrf, created_at, last_seen, expires_at)"
        " VALUES ('h', 'olduser', 'c', ?, ?, ?)",
        (now, now, now),
    )
    con.execute(
        "INSERT INTO shoal_audit (ts, principal, action, resource, decision) VALUES (?, 'olduser', 'sql.read', 't', 'allow')",
        (now,),
    )
    con.commit()
    con.close()
    return db


@pytest.fixture
def old_settings(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _old_catalog(tmp_path)
    settings = load_settings(workspace=str(tmp_path / "ws"))
    yield settings
    database.dispose()


def test_a_0_1_0_catalog_upgrades_and_keeps_its_data(old_settings) -> None:
    assert migrations.current(database.engine(old_settings)) == migrations.head()
    eng = database.engine(old_settings)
    with eng.connect() as conn:
        tables = set(inspect(conn).get_table_names())
        assert "shoal_web_sessions" not in tables  # migration 0002
        assert "shoal_web_queries" not in tables  # migration 0005
        assert conn.execute(text("SELECT name FROM shoal_principals")).scalars().all() == ["olduser"]
        assert conn.execute(text("SELECT count(*) FROM shoal_audit")).scalar() == 1
    # The audit log is still append-only after the upgrade (its triggers survive).
    with pytest.raises(Exception, match="append-only"), eng.begin() as conn:
        conn.execute(text("DELETE FROM shoal_audit"))
    # The current code reads the upgraded tables.
    from shoal.governance import Principals

    assert Principals(old_settings).principal("olduser").name == "olduser"


def test_every_declared_column_exists_after_upgrading_0_1_0(old_settings) -> None:
    """A column added to an existing state table without a migration fails here: create_all
    never alters a table that already exists."""
    eng = database.engine(old_settings)
    declared = _state_metadata()
    assert len(declared) >= 8
    for metadata in declared:
        metadata.create_all(eng)  # what each module does on first use
    with eng.connect() as conn:
        inspector = inspect(conn)
        for metadata in declared:
            for table in metadata.sorted_tables:
                have = {c["name"] for c in inspector.get_columns(table.name)}
                missing = {c.name for c in table.columns} - have
                assert not missing, f"{table.name} lacks {sorted(missing)}: add a migration in shoal/lake/migrations"


def test_new_install_is_stamped_and_upgrade_is_idempotent(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    settings = load_settings(workspace=str(tmp_path / "fresh"))
    try:
        eng = database.engine(settings)
        assert migrations.current(eng) == migrations.head()
        migrations.upgrade(eng)  # nothing left to do
        assert migrations.current(eng) == migrations.head()
        with eng.connect() as conn:
            versions = conn.execute(text(f"SELECT version_num FROM {migrations.VERSION_TABLE}")).scalars().all()
        assert versions == [migrations.head()]
    finally:
        database.dispose()
