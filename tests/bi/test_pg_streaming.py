"""Results stream through the PostgreSQL endpoint (issue 42, "no silent cap"): a result longer
than the old 100,000-row cap comes back whole through a plain query, a server-side cursor, COPY
and a portal read in pages; governance applies to streamed rows; errors and cancels mid-stream."""

from __future__ import annotations

import socket
import struct
import threading
import time

import psycopg
import pytest

from shoal.governance import AuditLog
from tests.bi import rawpg
from tests.bi.conftest import CANARIES, CANARY_US

N = 100_001  # one more than the cap there used to be
BIG = f"SELECT id FROM range({N})"


def test_a_plain_query_returns_every_row(connect):
    conn = connect()
    cur = conn.execute(BIG)
    rows = cur.fetchall()
    assert len(rows) == N and rows[-1] == (N - 1,)
    assert cur.statusmessage == f"SELECT {N}"


def test_a_server_side_cursor_fetches_in_pages(connect):
    conn = connect(autocommit=False)  # DECLARE ... CURSOR needs a transaction block
    total, pages = 0, 0
    with conn.cursor(name="big_cursor") as cur:
        cur.execute(BIG)
        assert [d.name for d in cur.description] == ["id"]
        while page := cur.fetchmany(10_000):
            assert page[0] == (total,)
            total, pages = total + len(page), pages + 1
    conn.commit()
    assert total == N and pages == 11
    assert conn.execute("SELECT 1").fetchone() == (1,)


def test_a_cursor_needs_a_transaction_and_ends_with_it(connect):
    conn = connect()
    with pytest.raises(psycopg.errors.NoActiveSqlTransaction):
        conn.execute("DECLARE c CURSOR FOR SELECT 1")
    conn.execute("BEGIN")
    conn.execute("DECLARE c CURSOR FOR SELECT id FROM range(5)")
    assert conn.execute("FETCH 2 FROM c").fetchall() == [(0,), (1,)]
    assert conn.execute("FETCH ALL FROM c").fetchall() == [(2,), (3,), (4,)]
    conn.execute("COMMIT")
    with pytest.raises(psycopg.errors.InvalidCursorName):
        conn.execute("FETCH 1 FROM c")


def test_copy_to_stdout_streams_every_row(connect):
    conn = connect()
    cur = conn.cursor()
    count = 0
    with cur.copy(f"COPY ({BIG}) TO STDOUT") as copy:
        for row in copy.rows():
            assert int(row[0]) == count
            count += 1
    assert count == N and cur.rowcount == N  # from the tag, COPY 100001


def _signed_in(server, lake) -> socket.socket:
    s = socket.create_connection(server.address, timeout=60)
    assert rawpg.scram_sign_in(s, lake.analyst, lake.token)[-1][0] == b"Z"
    return s


def _page(s: socket.socket) -> tuple[int, bytes, bytes]:
    """After an Execute and a Flush: (DataRows, the message that ended the page, its body)."""
    rows = 0
    while True:
        kind, body = rawpg.message(s)
        if kind == b"D":
            rows += 1
        elif kind in (b"s", b"C", b"E"):
            return rows, kind, body


def test_a_portal_is_read_in_pages_of_1000(server, lake):
    with _signed_in(server, lake) as s:
        rawpg.send(s, b"P", b"\x00" + BIG.encode() + b"\x00" + struct.pack("!h", 0))
        rawpg.send(s, b"B", b"big\x00\x00" + struct.pack("!hhh", 0, 0, 0))
        total, suspended = 0, 0
        while True:
            rawpg.send(s, b"E", b"big\x00" + struct.pack("!i", 1000))
            rawpg.send(s, b"H", b"")
            rows, kind, body = _page(s)
            total += rows
            if kind != b"s":
                break
            assert rows == 1000
            suspended += 1
        assert kind == b"C" and body.rstrip(b"\x00") == f"SELECT {N}".encode(), (kind, body)
        assert total == N and suspended == N // 1000  # the last page (one row) ends with the tag
        rawpg.send(s, b"S", b"")
        assert rawpg.message(s)[0] == b"Z"


def test_streamed_rows_are_governed(connect, lake, settings):
    conn = connect(autocommit=False)
    with conn.cursor(name="governed") as cur:
        cur.execute(f"SELECT * FROM {lake.opps} ORDER BY id")
        assert [d.name for d in cur.description] == ["id", "region", "revenue", "email"]
        rows = cur.fetchmany(1) + cur.fetchmany(10)
    conn.commit()
    assert [(r[0], r[1]) for r in rows] == [(1, "EU"), (3, "EU")]  # the row filter
    assert all(r[3] != "ann@eu.example" for r in rows)  # the mask
    copied = conn.cursor()
    with copied.copy(f"COPY (SELECT * FROM {lake.opps}) TO STDOUT") as copy:
        text = b"".join(bytes(chunk) for chunk in copy).decode()
    assert text.count("\n") == 2 and not any(c in text for c in CANARIES) and CANARY_US not in text
    # The streamed statement is audited when its stream ends, with the rows it returned.
    audited = AuditLog(settings).list(principal=lake.analyst, action="select", resource=lake.opps, limit=2)
    assert [r["detail"]["rows"] for r in audited] == [2, 2], audited


def test_an_error_mid_stream_follows_the_rows_already_sent(server, lake):
    """As PostgreSQL: rows, then the ErrorResponse (not an error instead of every row)."""
    # Two partitions: the first (0..50000) is sent whole before the second fails (at 60000).
    failing = f"SELECT assert_true(id < 60000) AS ok FROM range(0, {N}, 1, 2)"
    with _signed_in(server, lake) as s:
        rawpg.send(s, b"Q", failing.encode() + b"\x00")
        kinds, rows = [], 0
        while True:
            kind, body = rawpg.message(s)
            if kind == b"D":
                rows += 1
                continue
            kinds.append(kind)
            if kind == b"E":
                error = rawpg.fields(body)
            if kind == b"Z":
                break
        assert kinds == [b"T", b"E", b"Z"] and rows >= 1, (kinds, rows)
        assert error["C"] == "XX000" and "60000" in error["M"], error
        rawpg.send(s, b"Q", b"SELECT 1\x00")
        assert [rawpg.message(s)[0] for _ in range(4)] == [b"T", b"D", b"C", b"Z"]


def test_a_cancel_stops_a_fetch(connect):
    conn = connect(autocommit=False)
    cur = conn.cursor(name="slow")
    cur.execute("SELECT id FROM range(0, 100000000000, 1, 4) WHERE id < 0")  # no row comes, slowly
    timer = threading.Timer(3, conn.cancel_safe)
    timer.start()
    start = time.monotonic()
    with pytest.raises(psycopg.errors.QueryCanceled):
        cur.fetchmany(10)
    timer.join()
    assert time.monotonic() - start < 60
    conn.rollback()
    assert conn.execute("SELECT 1").fetchone() == (1,)


def test_a_portal_closed_early_releases_its_stream(server, lake, settings):
    with _signed_in(server, lake) as s:
        sql = f"SELECT id FROM range({N})"
        rawpg.send(s, b"P", b"\x00" + sql.encode() + b"\x00" + struct.pack("!h", 0))
        rawpg.send(s, b"B", b"p\x00\x00" + struct.pack("!hhh", 0, 0, 0))
        rawpg.send(s, b"E", b"p\x00" + struct.pack("!i", 10))
        rawpg.send(s, b"H", b"")
        assert _page(s)[:2] == (10, b"s")
        rawpg.send(s, b"C", b"Pp\x00")
        rawpg.send(s, b"S", b"")
        assert [rawpg.message(s)[0] for _ in range(2)] == [b"3", b"Z"]
        rawpg.send(s, b"E", b"p\x00" + struct.pack("!i", 10))  # the portal is gone
        rawpg.send(s, b"S", b"")
        kind, body = rawpg.message(s)
        assert kind == b"E" and rawpg.fields(body)["C"] == "34000"
        assert rawpg.message(s)[0] == b"Z"
    # Closing released the stream: its audit row is written with the rows read so far.
    (last,) = AuditLog(settings).list(principal=lake.analyst, action="select", limit=1)
    assert last["decision"] == "allow" and 10 <= last["detail"]["rows"] < N, last


def test_a_cursor_that_failed_is_gone(connect):
    """Never a later FETCH that quietly returns no rows after the error."""
    conn = connect()
    conn.execute("BEGIN")
    conn.execute(f"DECLARE bad CURSOR FOR SELECT assert_true(id < 60000) AS ok FROM range(0, {N}, 1, 2)")
    assert len(conn.execute("FETCH 50000 FROM bad").fetchall()) == 50000  # the first partition
    with pytest.raises(psycopg.errors.InternalError_, match="60000"):
        conn.execute("FETCH ALL FROM bad")
    with pytest.raises(psycopg.errors.InvalidCursorName):
        conn.execute("FETCH 1 FROM bad")
    conn.execute("ROLLBACK")


def test_sync_outside_a_transaction_and_a_new_query_end_portals(server, lake):
    with _signed_in(server, lake) as s:
        for ender in (b"S", b"Q"):
            rawpg.send(s, b"P", b"\x00" + BIG.encode() + b"\x00" + struct.pack("!h", 0))
            rawpg.send(s, b"B", b"\x00\x00" + struct.pack("!hhh", 0, 0, 0))  # the unnamed portal
            rawpg.send(s, b"E", b"\x00" + struct.pack("!i", 10))
            rawpg.send(s, b"H", b"")
            assert _page(s)[:2] == (10, b"s")
            if ender == b"S":
                rawpg.send(s, b"S", b"")  # the implicit transaction ends, and its portals
                assert rawpg.message(s)[0] == b"Z"
            else:
                rawpg.send(s, b"Q", b"SELECT 1\x00")  # a Query drops the unnamed portal
                assert [rawpg.message(s)[0] for _ in range(4)] == [b"T", b"D", b"C", b"Z"]
            rawpg.send(s, b"E", b"\x00" + struct.pack("!i", 10))
            rawpg.send(s, b"S", b"")
            kind, body = rawpg.message(s)
            assert kind == b"E" and rawpg.fields(body)["C"] == "34000", (ender, kind, body)
            assert rawpg.message(s)[0] == b"Z"
