"""Schema migrations for Shoal's own state tables (`shoal_*` in the catalog database), by Alembic.

Each module declares its tables and `create_all` creates the missing ones; that cannot change
a table an earlier release already created. Migrations here do: they run automatically, once
per process and database, the first time Shoal opens the catalog database (under a lock, so
two processes starting together migrate once). A migration touches a table only when it
exists: on a new install the table is later created in its current shape by `create_all`.
Revision 0001 is release 0.1.0's schema, the baseline of every install made before Alembic.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import Connection, Engine, inspect

if TYPE_CHECKING:
    from alembic.config import Config

VERSION_TABLE = "shoal_schema_version"
_HERE = Path(__file__).parent


def _config(connection: Connection) -> Config:
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(_HERE))
    cfg.attributes["connection"] = connection
    return cfg


def head() -> str:
    from alembic.config import Config
    from alembic.script import ScriptDirectory

    cfg = Config()
    cfg.set_main_option("script_location", str(_HERE))
    heads = ScriptDirectory.from_config(cfg).get_heads()
    assert len(heads) == 1, f"migrations have several heads: {heads}"
    return heads[0]


def current(engine: Engine) -> str | None:
    with engine.connect() as conn:
        if not inspect(conn).has_table(VERSION_TABLE):
            return None
        from alembic.runtime.migration import MigrationContext

        return MigrationContext.configure(conn, opts={"version_table": VERSION_TABLE}).get_current_revision()


def upgrade(engine: Engine) -> None:
    """Bring the state tables to this release's schema (a no-op when they already are)."""
    from alembic import command

    with engine.begin() as conn:
        command.upgrade(_config(conn), "head")
