"""Bound parameters without Spark: which `$n` are parameters (PostgreSQL's quoting rules, dollar
quotes included) and how values enter the parsed statement (as literal nodes, never as text)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import sqlglot
from sqlglot import exp

from shoal.bi import pgcatalog
from shoal.bi.pg.codec import PgError, literal, parameter_numbers
from shoal.bi.pgsql import PgSession


def _session(dialect: str = "postgres") -> PgSession:
    principal = SimpleNamespace(name="ann", is_admin=False)
    return PgSession(principal, pid=7, server_version="15.0 (Shoal)", startup={"options": f"-c shoal.dialect={dialect}"},
                     snapshot=lambda: pgcatalog.Snapshot([], ["public"]))  # fmt: skip


def test_parameters_are_found_by_postgresql_quoting_rules() -> None:
    assert parameter_numbers("SELECT $1, $2::int, f($10)", "postgres") == [1, 2, 10]
    for text in ("SELECT $$label $1$$", "SELECT $tag$a $1 $$ b$tag$", "SELECT 'x $1'", 'SELECT "$1"',
                 "SELECT 1 -- $1", "SELECT /* $1 */ 1", "SELECT E'\\' $1'"):  # fmt: skip
        assert parameter_numbers(text, "postgres") == [], text
    assert parameter_numbers("SELECT $t$ $1 $t$, $2", "postgres") == [2]


def _spark_of(session: PgSession, sql: str, *values: str | None) -> str:
    parsed = session.prepare(sql)
    params = [literal(None if v is None else v.encode(), 0, 0) for v in values]
    return session.translate(sql, session.bind(parsed, params))


@pytest.mark.parametrize("dialect", ["postgres", "spark"])
def test_a_bound_value_is_one_literal_node(dialect: str) -> None:
    session = _session(dialect)
    quote = "$$" if dialect == "postgres" else "'"
    for value in ("$$ AS v UNION ALL SELECT 999 --", "$t$; INSERT INTO t VALUES (1); SELECT $t$",
                  "x' OR '1'='1", "back\\slash \\' $1", "\n;--"):  # fmt: skip
        spark_sql = _spark_of(session, f"SELECT {quote}label $1{quote} AS v, $1 AS w", value)
        trees = sqlglot.parse(spark_sql, read="spark")
        assert len(trees) == 1 and isinstance(trees[0], exp.Select), spark_sql
        literals = [e.this for e in trees[0].expressions]
        assert [lit.this for lit in literals] == ["label $1", value], spark_sql


def test_no_text_substitution_even_when_the_value_looks_like_a_parameter() -> None:
    session = _session()
    assert sqlglot.parse_one(_spark_of(session, "SELECT $1 AS a, $2 AS b", "$2", "x"), read="spark").sql() == (
        "SELECT '$2' AS a, 'x' AS b"
    )
    assert "NULL" in _spark_of(session, "SELECT $1 AS a", None)


def test_statements_that_cannot_take_parameters() -> None:
    session = _session()
    for sql in ("SET application_name = $1", "SELECT ( $1", "SELECT $1; SELECT $2"):
        with pytest.raises(PgError) as err:
            session.prepare(sql)
        assert err.value.code == "42601", sql
    assert session.prepare("SELECT $$ $1 $$").tree is None  # no parameter: read as text, as before
    assert session.split("SELECT $$a;b$$; SELECT 2") == ["SELECT $$a;b$$", "SELECT 2"]
