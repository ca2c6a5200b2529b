"""has_table_privilege / has_column_privilege / has_schema_privilege answer from the grants (the
principal's governed catalog), without Spark: false for what the principal may not read."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from shoal.bi import pgcatalog
from shoal.bi.pg.codec import PgError
from shoal.bi.pgsql import PgSession


def _snapshot() -> pgcatalog.Snapshot:
    # What ann's grants show: salaries (SELECT, without its ssn column) and inbox (SELECT, INSERT);
    # hr.secret and the ops schema exist in the lake but are granted to someone else.
    cols = [pgcatalog.CatalogColumn(n, pgcatalog.TEXT) for n in ("id", "amount", "email")]
    salaries = pgcatalog.CatalogTable("hr", "salaries", cols)
    inbox = pgcatalog.CatalogTable("hr", "inbox", cols[:1], privileges=frozenset({"SELECT", "INSERT"}))
    return pgcatalog.Snapshot([salaries, inbox], ["hr", "public"])


@pytest.fixture
def session() -> PgSession:
    principal = SimpleNamespace(name="ann", is_admin=False)
    return PgSession(principal, pid=7, server_version="15.0 (Shoal)", startup={}, snapshot=_snapshot)


def _one(session: PgSession, expression: str) -> object:
    answer = session.answer(f"SELECT {expression}")
    assert answer is not None
    return answer[2][0][0]


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("has_table_privilege('hr.salaries', 'SELECT')", True),
        ("has_table_privilege('hr.secret', 'SELECT')", False),
        ("has_table_privilege('ops.jobs', 'select')", False),
        ("has_table_privilege('hr.salaries', 'INSERT')", False),
        ("has_table_privilege('hr.inbox', 'INSERT')", True),
        ("has_table_privilege('hr.salaries', 'UPDATE, SELECT')", True),  # any of them, as PostgreSQL
        ("has_table_privilege('hr.salaries', 'DELETE')", False),
        ("has_table_privilege('hr.salaries', 'SELECT WITH GRANT OPTION')", False),
        ("has_table_privilege('pg_catalog.pg_class', 'SELECT')", True),
        ("has_table_privilege('ann', 'hr.salaries', 'SELECT')", True),
        ("has_table_privilege('bob', 'hr.salaries', 'SELECT')", False),
        ("has_any_column_privilege('hr.secret', 'SELECT')", False),
        ("has_column_privilege('hr.salaries', 'email', 'SELECT')", True),
        ("has_column_privilege('hr.salaries', 'ssn', 'SELECT')", False),
        ("has_column_privilege('hr.secret', 'id', 'SELECT')", False),
        ("has_column_privilege('hr.inbox', 'id', 'INSERT')", True),
        ("has_schema_privilege('hr', 'USAGE')", True),
        ("has_schema_privilege('ops', 'USAGE')", False),
        ("has_schema_privilege('hr', 'CREATE')", False),
        ("has_schema_privilege('pg_catalog', 'USAGE')", True),
        ("has_table_privilege(NULL, 'SELECT')", None),
    ],
)
def test_privileges_follow_the_grants(session: PgSession, expression: str, expected: object) -> None:
    assert _one(session, expression) is expected


def test_by_oid_as_tools_ask(session: PgSession) -> None:
    rows = session.answer(
        "SELECT c.relname, has_table_privilege(c.oid, 'SELECT'), has_table_privilege(c.oid, 'INSERT'),"
        " has_column_privilege(c.oid, 1::int2, 'SELECT'), has_schema_privilege(n.oid, 'USAGE')"
        " FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace"
        " WHERE n.nspname = 'hr' ORDER BY 1"
    )
    assert rows is not None and rows[2] == [("inbox", True, True, True, True), ("salaries", True, False, True, True)]


def test_an_unknown_privilege_is_an_error(session: PgSession) -> None:
    with pytest.raises(PgError, match="unrecognized privilege type"):
        session.answer("SELECT has_table_privilege('hr.salaries', 'READ')")
