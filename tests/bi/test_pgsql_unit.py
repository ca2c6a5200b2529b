"""The PostgreSQL session and catalog layers without Spark: SET/SHOW, translation, catalog rewrites."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from shoal.bi import pgcatalog
from shoal.bi.pg.codec import PgError
from shoal.bi.pgsql import PgSession, _parse_postgres, _startup_options, copy_spec
from shoal.exceptions import SqlError


def _snapshot() -> pgcatalog.Snapshot:
    cols = [
        pgcatalog.CatalogColumn("id", pgcatalog.INT4),
        pgcatalog.CatalogColumn("amount", pgcatalog.NUMERIC, ((10 << 16) | 2) + 4),
        pgcatalog.CatalogColumn("email", pgcatalog.TEXT),
    ]
    return pgcatalog.Snapshot([pgcatalog.CatalogTable("hr", "salaries", cols, "Pay")], ["hr", "public"])


@pytest.fixture
def session() -> PgSession:
    principal = SimpleNamespace(name="ann", is_admin=False)
    return PgSession(principal, pid=7, server_version="15.0 (Shoal)", startup={}, snapshot=_snapshot)


def test_format_type_and_startup_options() -> None:
    assert pgcatalog.format_type(pgcatalog.NUMERIC, ((10 << 16) | 2) + 4) == "numeric(10,2)"
    assert pgcatalog.format_type(pgcatalog.INT8, -1) == "bigint"
    assert pgcatalog.format_type(1009, -1) == "text[]"
    assert pgcatalog.format_type(None, -1) is None
    assert _startup_options("-c shoal.dialect=spark --search_path=hr") == {
        "shoal.dialect": "spark",
        "search_path": "hr",
    }


def test_set_show_reset(session: PgSession) -> None:
    assert session.answer("SET SESSION application_name TO 'dash'") == ([], [], [], "SET")
    assert session.answer("SHOW application_name")[2] == [("dash",)]
    assert session.answer("show transaction isolation level")[2] == [("read committed",)]
    session.answer("RESET ALL")
    assert session.answer("SHOW application_name")[2] == [("",)]
    session.answer("SET spark.sql.ansi.enabled = true")  # a placeholder: remembered, no effect
    assert session.answer("SHOW spark.sql.ansi.enabled")[2] == [("true",)]
    for bad, code in (("SET nope = 1", "42704"), ("SET TIME ZONE 'Europe/Paris'", "22023"),
                      ("SET server_version = '9'", "55P02"), ("SET ROLE admin", "0A000")):  # fmt: skip
        with pytest.raises(PgError) as err:
            session.answer(bad)
        assert err.value.code == code
    assert session.answer("SAVEPOINT s1")[3] == "SAVEPOINT"
    assert session.answer("ROLLBACK TO SAVEPOINT s1")[3] == "ROLLBACK"
    assert session.answer("ROLLBACK") is None  # ends the transaction: pgwire's business
    with pytest.raises(PgError, match="COPY FROM is not supported"):
        copy_spec("COPY t FROM STDIN")


def test_translation(session: PgSession) -> None:
    assert session.translate("SELECT \"id\" FROM public.t WHERE x ILIKE 'a%' LIMIT 2 OFFSET 1") == (
        "SELECT `id` FROM default.t WHERE x ILIKE 'a%' LIMIT 2 OFFSET 1"
    )
    assert session.translate("SELECT hr.salaries.id FROM hr.salaries") == (
        "SELECT salaries.id FROM hr.salaries AS salaries"
    )
    assert (
        session.translate("SELECT x::int FROM t") == "SELECT CAST(x AS INT) AS `x` FROM t"
    )  # named as PostgreSQL does
    with pytest.raises(SqlError, match="as PostgreSQL"):
        session.translate("SELECT `id` FROM t")
    session.answer("SET shoal.dialect = spark")
    assert session.translate("SELECT `id` FROM t") == "SELECT `id` FROM t"


def test_catalog_queries(session: PgSession) -> None:
    assert not pgcatalog.is_catalog_query(_parse_postgres("SELECT id FROM hr.salaries"))
    assert pgcatalog.is_catalog_query(_parse_postgres("SELECT 'hr.salaries'::regclass"))
    cols, oids, rows, tag = session.answer(
        "SELECT a.attname, pg_catalog.format_type(a.atttypid, a.atttypmod) FROM pg_catalog.pg_attribute a"
        " WHERE a.attrelid = 'hr.salaries'::pg_catalog.regclass AND a.attnum > 0 ORDER BY a.attnum"
    )
    assert cols == ["attname", "format_type"] and oids == [pgcatalog.TEXT, pgcatalog.TEXT]
    assert rows == [("id", "integer"), ("amount", "numeric(10,2)"), ("email", "text")] and tag == "SELECT 3"
    _, _, rows, _ = session.answer(
        "SELECT n.nspname, c.relname FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n"
        " ON n.oid = c.relnamespace WHERE c.relkind = ANY('{r,p}') AND n.nspname OPERATOR(pg_catalog.~) '^(hr)$'"
        " COLLATE pg_catalog.default"
    )
    assert rows == [("hr", "salaries")]
    _, _, rows, _ = session.answer("SELECT obj_description('hr.salaries'::regclass, 'pg_class'), current_schema()")
    assert rows == [("Pay", "public")]
    with pytest.raises(PgError) as err:
        session.answer("SELECT 'hr.secret'::regclass")
    assert err.value.code == "42P01"
    with pytest.raises(PgError, match="not available"):
        session.answer("SELECT * FROM pg_catalog.pg_no_such_relation")


def test_catalog_queries_reach_nothing_of_duckdb_but_the_catalog(session: PgSession) -> None:
    """Found in review: DuckDB table functions through LATERAL (settings, files, any SELECT),
    DuckDB's version, and queries that never end."""
    for query in (
        "SELECT q.name, q.value FROM pg_namespace n CROSS JOIN LATERAL duckdb_settings() q",
        "SELECT * FROM pg_namespace n, LATERAL read_text('.tmp/x.txt') q",
        "SELECT * FROM pg_namespace n JOIN LATERAL query('SELECT 1') q ON true",
        "SELECT * FROM pg_namespace n JOIN LATERAL query_table('pg_namespace') q ON true",
        "SELECT (SELECT count(*) FROM duckdb_functions()) FROM pg_namespace",
    ):
        with pytest.raises(PgError, match="not available") as err:
            session.answer(query)
        assert err.value.code == "42883", query
    _, _, rows, _ = session.answer("SELECT version(), current_user")
    assert rows[0][0].startswith("PostgreSQL") or "Shoal" in rows[0][0], rows
    assert "v2." not in rows[0][0] and "v1." not in rows[0][0]


def test_a_catalog_query_that_runs_too_long_is_stopped(session: PgSession, monkeypatch) -> None:
    monkeypatch.setattr(pgcatalog, "CATALOG_QUERY_TIMEOUT_S", 1.0)
    with pytest.raises(PgError, match="longer than") as err:
        session.answer("SELECT count(*), pg_backend_pid() FROM generate_series(1, 100000000000)")
    assert err.value.code == "57014"


def test_connections_of_one_principal_share_a_snapshot_for_the_ttl_only() -> None:
    import threading
    import time

    from shoal.governance.principals import Principal

    built: list[str] = []

    def build(principal: Principal) -> pgcatalog.Snapshot:
        built.append(principal.name)
        time.sleep(0.05)  # long enough for the two threads below to overlap
        return _snapshot()

    cache = pgcatalog.SnapshotCache(build, ttl_s=0.5)
    ann = Principal("ann", False, frozenset({"sales"}))
    threads = [threading.Thread(target=cache.get, args=(ann,)) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    first = cache.get(ann)
    assert built == ["ann"] and cache.get(Principal("ann", False, frozenset({"sales"}))) is first
    # Another principal, or the same name with other groups or rights, never gets ann's snapshot.
    cache.get(Principal("bob", False, frozenset({"sales"})))
    cache.get(Principal("ann", False, frozenset({"sales", "hr"})))
    cache.get(Principal("ann", True, frozenset({"sales"})))
    assert built == ["ann", "bob", "ann", "ann"]
    time.sleep(0.6)  # past the TTL a connection lists the lake again
    assert cache.get(ann) is not first and built[-1] == "ann" and len(built) == 5
