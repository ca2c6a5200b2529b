"""Governance state in the catalog database: principals, groups, tokens, grants, tags,
table owners, console sessions, failed sign-in counters, and the append-only audit log."""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    Boolean,
    Column,
    Connection,
    DateTime,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    event,
    text,
)

state_tables = MetaData()

principals = Table(
    "shoal_principals",
    state_tables,
    Column("name", String(200), primary_key=True),
    Column("kind", String(8), nullable=False),  # user | group
    Column("is_admin", Boolean, nullable=False, default=False),
    Column("password_hash", Text),
    Column("created_at", DateTime, nullable=False),
)
members = Table(
    "shoal_group_members",
    state_tables,
    Column("group_name", String(200), primary_key=True),
    Column("member", String(200), primary_key=True),
)
tokens = Table(
    "shoal_tokens",
    state_tables,
    Column("id", String(32), primary_key=True),
    Column("principal", String(200), nullable=False, index=True),
    Column("secret_hash", String(128), nullable=False),
    Column("description", Text),
    Column("created_at", DateTime, nullable=False),
    Column("expires_at", DateTime),
    Column("revoked_at", DateTime),
    Column("last_used_at", DateTime),
    # SCRAM-SHA-256 verifier of the token (PostgreSQL endpoint); NULL for tokens made before 0004.
    Column("scram_verifier", Text),
)
grants = Table(
    "shoal_grants",
    state_tables,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("grantee", String(200), nullable=False, index=True),
    Column("privilege", String(16), nullable=False),
    Column("target_kind", String(16), nullable=False),  # table | database | tags
    Column("target", Text, nullable=False),  # db.table | db | canonical tag expression
    Column("columns", Text),  # JSON list (include)
    Column("exclude_columns", Text),  # JSON list
    Column("row_filter", Text),
    Column("masks", Text),  # JSON {column: mask}
    Column("grantable", Boolean, nullable=False, default=False),
    Column("granted_by", String(200), nullable=False),
    Column("created_at", DateTime, nullable=False),
)
tag_keys = Table(
    "shoal_tag_keys",
    state_tables,
    Column("key", String(128), primary_key=True),
    Column("allowed_values", Text, nullable=False),  # JSON list
)
tag_assignments = Table(
    "shoal_tag_assignments",
    state_tables,
    Column("key", String(128), nullable=False),
    Column("value", String(256), nullable=False),
    Column("database", String(200), nullable=False),
    Column("table_name", String(200), nullable=False, default=""),  # "" = the database itself
    Column("column_name", String(200), nullable=False, default=""),  # "" = the table itself
    UniqueConstraint("key", "database", "table_name", "column_name", name="uq_tag_target"),
)
table_info = Table(
    "shoal_table_info",
    state_tables,
    Column("name", String(400), primary_key=True),
    Column("owner", String(200)),
    Column("description", Text),
)
# Console sign-in sessions (shoal.governance.sessions). A new table beside the earlier
# `shoal_web_sessions`, dropped by migration 0002.
sessions = Table(
    "shoal_sessions",
    state_tables,
    Column("id_hash", String(64), primary_key=True),
    Column("principal", String(200), nullable=False, index=True),
    Column("token_id", String(32), index=True),  # the API token signed in with, if any
    Column("csrf", String(64), nullable=False),
    Column("created_at", DateTime, nullable=False),
    Column("last_seen", DateTime, nullable=False),
    Column("expires_at", DateTime, nullable=False),
)
# Failed credential checks per key (`account:NAME`, `token:ID`, `client:ADDR`, ...): shoal.governance.throttle.
auth_failures = Table(
    "shoal_auth_failures",
    state_tables,
    Column("key", String(300), primary_key=True),
    Column("failures", Integer, nullable=False, default=0),
    Column("window_start", DateTime, nullable=False),
    Column("locked_until", DateTime),
    Column("lockouts", Integer, nullable=False, default=0),
)
audit = Table(
    "shoal_audit",
    state_tables,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("ts", DateTime, nullable=False, index=True),
    Column("principal", String(200), nullable=False),
    Column("action", String(64), nullable=False),
    Column("resource", Text),
    Column("decision", String(8), nullable=False),  # allow | deny
    Column("reason", Text),
    Column("fingerprint", String(64)),
    Column("detail", Text),
)


@event.listens_for(audit, "after_create")
def _append_only(target: Table, connection: Connection, **kw: Any) -> None:
    """The audit log only grows: the database itself refuses updates and deletes."""
    if connection.dialect.name == "sqlite":
        for op in ("UPDATE", "DELETE"):
            connection.execute(
                text(
                    f"CREATE TRIGGER IF NOT EXISTS shoal_audit_no_{op.lower()} BEFORE {op} ON shoal_audit "
                    "BEGIN SELECT RAISE(ABORT, 'shoal_audit is append-only'); END"
                )
            )
    elif connection.dialect.name == "postgresql":
        connection.execute(
            text(
                "CREATE OR REPLACE FUNCTION shoal_audit_append_only() RETURNS trigger AS $$ "
                "BEGIN RAISE EXCEPTION 'shoal_audit is append-only'; END; $$ LANGUAGE plpgsql"
            )
        )
        connection.execute(
            text(
                "CREATE TRIGGER shoal_audit_append_only BEFORE UPDATE OR DELETE ON shoal_audit "
                "FOR EACH ROW EXECUTE FUNCTION shoal_audit_append_only()"
            )
        )


# Access points and access requests: their own MetaData, created when raw access is first used.
access_tables = MetaData()
access_points = Table(
    "shoal_access_points",
    access_tables,
    Column("name", String(100), primary_key=True),
    Column("prefix", Text, nullable=False),
    Column("tags", Text),  # JSON {key: value}
    Column("principals", Text, nullable=False),  # JSON list of users/groups
    Column("cidrs", Text),  # JSON list
    Column("created_by", String(200), nullable=False),
    Column("created_at", DateTime, nullable=False),
)
access_requests = Table(
    "shoal_access_requests",
    access_tables,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("principal", String(200), nullable=False, index=True),
    Column("table_name", String(400), nullable=False),
    Column("privilege", String(16), nullable=False),
    Column("reason", Text, nullable=False),
    Column("status", String(16), nullable=False),  # pending | approved | rejected
    Column("decided_by", String(200)),
    Column("decision_note", Text),
    Column("grant_id", Integer),
    Column("created_at", DateTime, nullable=False),
    Column("decided_at", DateTime),
)
