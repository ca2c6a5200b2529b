"""Bound parameters in the PostgreSQL dialect: values are literal nodes of the parsed statement,
never text pasted into it (issue 42). The statements come from psycopg 3 (which binds on the
server: Parse/Bind) and from the raw protocol, where nothing hides what is sent."""

from __future__ import annotations

import datetime as dt
import decimal
import socket
import struct

import psycopg
import pytest

from tests.bi import rawpg


def _extended(server, lake, sql: str, values: list[bytes | None]) -> list[tuple[bytes, dict[str, str] | list]]:
    """Parse/Bind/Execute/Sync with text parameters of unknown type; the replies up to ReadyForQuery:
    (b"D", [column values]) for rows, (kind, error fields) for errors, (kind, {}) otherwise."""
    host, port = server.address
    with socket.create_connection((host, port), timeout=60) as s:
        assert rawpg.scram_sign_in(s, lake.analyst, lake.token)[-1][0] == b"Z"
        rawpg.send(s, b"P", b"\x00" + sql.encode() + b"\x00" + struct.pack("!h", 0))
        bind = b"\x00\x00" + struct.pack("!hh", 0, len(values))
        for v in values:
            bind += struct.pack("!i", -1) if v is None else struct.pack("!i", len(v)) + v
        rawpg.send(s, b"B", bind + struct.pack("!h", 0))
        rawpg.send(s, b"E", b"\x00" + struct.pack("!i", 0))
        rawpg.send(s, b"S", b"")
        out: list[tuple[bytes, dict[str, str] | list]] = []
        while True:
            kind, body = rawpg.message(s)
            if kind == b"Z":
                return out
            if kind == b"D":
                out.append((kind, _row(body)))
            elif kind in (b"E", b"N"):
                out.append((kind, rawpg.fields(body)))
            else:
                out.append((kind, {}))


def _row(body: bytes) -> list[str | None]:
    (n,), pos, values = struct.unpack("!h", body[:2]), 2, []
    for _ in range(n):
        (length,) = struct.unpack("!i", body[pos : pos + 4])
        pos += 4
        values.append(None if length < 0 else body[pos : pos + length].decode())
        pos += max(length, 0)
    return values


def _rows(replies) -> list[list]:
    errors = [f for k, f in replies if k == b"E"]
    assert not errors, errors
    return [v for k, v in replies if k == b"D"]


def test_dollar_quoted_text_is_not_a_parameter(server, lake, pg):
    assert _rows(_extended(server, lake, "SELECT $$label $1$$ AS v", [])) == [["label $1"]]
    assert _rows(_extended(server, lake, "SELECT $t$a $1 $$ b$t$ AS v", [])) == [["a $1 $$ b"]]
    assert _rows(_extended(server, lake, "SELECT '$1' AS v, $1 AS w", [b"x"])) == [["$1", "x"]]
    # A ; inside a dollar-quoted string does not end the statement (simple query too).
    assert pg.execute("SELECT $$a; b$$ AS v").fetchall() == [("a; b",)]


def test_a_value_cannot_close_a_dollar_quote(server, lake, pg):
    # Were $1 inside $$...$$ replaced by the quoted value, this one would end the string and
    # add a second row; bound as a node, it is one text value and one row.
    attack = "$$ AS v UNION ALL SELECT 999 --"
    replies = _extended(server, lake, "SELECT $$label $1$$ AS v, $1 AS w", [attack.encode()])
    assert _rows(replies) == [["label $1", attack]]
    for quote in ("$$", "$t$"):
        sql = f"SELECT {quote}label $1{quote} AS v, %s AS w"
        value = f"{quote} AS v, 1 AS w UNION ALL SELECT {quote}999"
        assert pg.execute(sql, (value,)).fetchall() == [("label $1", value)]


def test_a_value_cannot_run_an_insert(server, lake, pg, spark):
    inbox = f"{lake.db}.inbox"
    before = spark.sql(f"SELECT count(*) FROM {inbox} WHERE id = 4242").collect()[0][0]
    results, values = [], []
    for quote in ("$$", "$q$"):
        values.append(f"{quote} AS v; INSERT INTO {inbox} VALUES (4242, NULL); SELECT {quote}")
        try:
            results.append(pg.execute(f"SELECT {quote}note $1{quote} AS v, %s AS w", (values[-1],)).fetchall())
        except psycopg.Error as exc:
            results.append(exc.sqlstate)
    assert spark.sql(f"SELECT count(*) FROM {inbox} WHERE id = 4242").collect()[0][0] == before, results
    assert results == [[("note $1", v)] for v in values]


@pytest.mark.parametrize("prepare", [False, True])
def test_values_round_trip_as_data(pg, lake, prepare):
    texts = ["it's", "back\\slash", "a\nb", "€ ✓", "$1 %s ?", "$$", "$tag$ x $tag$", "'; DROP TABLE t; --",
             "SELECT 999 UNION ALL SELECT 1", "E'\\x41'", "\\'", "1) OR (1=1"]  # fmt: skip
    others = [None, 3.25, -7, 2**40, True, decimal.Decimal("-12.340"), dt.date(2024, 2, 29), b"\x00'\\$$"]
    for value in [*texts, *others]:
        got = pg.execute("SELECT %s AS v", (value,), prepare=prepare).fetchone()[0]
        assert got == value and type(got) is type(value), (value, got)
    for value in texts:  # compared, not only echoed: no value matches a row it does not equal
        rows = pg.execute(f"SELECT id FROM {lake.opps} WHERE region = %s OR %s = 'EU'", (value, value)).fetchall()
        assert rows == []
    assert pg.execute(f"SELECT id FROM {lake.opps} WHERE region = %s ORDER BY id", ("EU",)).fetchall() == [(1,), (3,)]


def test_parameter_counts_and_utility_statements(server, lake):
    def error(sql: str, values: list[bytes | None]) -> str | None:
        replies = _extended(server, lake, sql, values)
        return next((f["C"] for k, f in replies if k == b"E"), None)

    assert error("SELECT $1 AS v, $2 AS w", [b"x"]) == "08P01"
    assert error("SELECT $$label $1$$ AS v", [b"x"]) == "08P01"  # no $n takes it
    assert error("SET application_name = $1", [b"x"]) == "42601"
