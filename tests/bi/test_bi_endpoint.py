"""The governed PostgreSQL endpoint, driven by real clients (psycopg 3 and psql) on loopback.

The server runs in a thread of the test process on an ephemeral port, over the test session's
SparkSession. Every statement goes through GovernedSql, so grants, filters and masks hold;
canary values in refused columns, rows and tables must never reach any client output.
"""

from __future__ import annotations

import os
import shutil
import socket
import struct
import subprocess
import threading
import time

import psycopg
import pytest

from shoal.bi import pg as pgwire
from shoal.governance import AuditLog, Principals
from shoal.governance.masks import mask_hash
from tests.bi import rawpg
from tests.bi.conftest import CANARIES, CANARY_NOTE, CANARY_US, PASSWORD


def no_canary(*outputs) -> None:
    text = repr(outputs)
    for canary in CANARIES:
        assert canary not in text


def test_row_filter_and_mask_apply(connect, lake, settings):
    with connect() as conn:
        rows = conn.execute(f"SELECT id, region, revenue, email FROM {lake.opps} ORDER BY id").fetchall()
    assert rows == [
        (1, "EU", 10.0, mask_hash(settings, "ann@eu.example")),
        (3, "EU", 30.0, mask_hash(settings, "cy@eu.example")),
    ]
    no_canary(rows)


def test_refused_column_is_42501_and_the_connection_stays_usable(connect, lake):
    conn = connect()
    with pytest.raises(psycopg.errors.InsufficientPrivilege) as err:
        conn.execute(f"SELECT notes FROM {lake.opps}")
    assert err.value.sqlstate == "42501"
    assert "notes" in str(err.value) and CANARY_NOTE not in str(err.value)
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        conn.execute(f"SELECT * FROM {lake.hr}")
    assert conn.execute(f"SELECT count(*) FROM {lake.opps}").fetchone() == (2,)


def test_types_and_results_through_the_extended_protocol(connect):
    with connect() as conn:
        row = conn.execute(
            "SELECT true AS b, CAST(7 AS SMALLINT) AS s, 42 AS i, CAST(9 AS BIGINT) AS l, CAST(1.5 AS FLOAT) AS f,"
            " 2.25D AS d, CAST('12.34' AS DECIMAL(6,2)) AS n, 'héllo' AS t, DATE'2024-02-29' AS dt,"
            " TIMESTAMP'2024-01-02 03:04:05.123456' AS ts, X'00ff' AS bin, CAST(NULL AS STRING) AS z"
        ).fetchone()
    import datetime as dt
    import decimal

    assert row[:8] == (True, 7, 42, 9, 1.5, 2.25, decimal.Decimal("12.34"), "héllo")
    assert row[8] == dt.date(2024, 2, 29)
    assert row[9] == dt.datetime(2024, 1, 2, 3, 4, 5, 123456, tzinfo=dt.UTC)
    assert row[10] == b"\x00\xff" and row[11] is None


def test_parameters_are_literals_never_sql(connect, lake):
    conn = connect()
    q = f"SELECT id FROM {lake.opps} WHERE id = %s ORDER BY id"
    assert conn.execute(q, (1,)).fetchall() == [(1,)]
    assert conn.execute(q, ("1",)).fetchall() == [(1,)]
    # An injection attempt in a value stays a value: no row has id '1 OR 1=1'.
    assert conn.execute(q, ("1 OR 1=1",)).fetchall() == []
    assert conn.execute(f"SELECT id FROM {lake.opps} WHERE region = %s", ("EU' OR '1'='1",)).fetchall() == []
    assert conn.execute(f"SELECT id FROM {lake.opps} WHERE region = %s", ("x\\' OR 1=1 --",)).fetchall() == []
    # Filtered rows stay filtered however the value is written.
    assert conn.execute(f"SELECT id FROM {lake.opps} WHERE region = %s", ("US",)).fetchall() == []
    # Values round-trip exactly (quotes, backslashes, newlines, unicode, None, numbers, bytes).
    for value in ["it's", "back\\slash", "a\nb", "€ ✓", "$1 %s ?", None, 3.25, -7, True, b"\x00'\\"]:
        got = conn.execute("SELECT %s AS v", (value,)).fetchone()[0]
        assert got == value and type(got) is type(value)
    # Server-side prepared statements (Parse once, Bind many) work too.
    for i in (1, 3):
        assert conn.execute(q, (i,), prepare=True).fetchall() == [(i,)]


def test_write_attacks_are_refused(connect, lake, spark):
    conn = connect()
    for attack in (
        f"INSERT INTO {lake.db}.inbox TABLE {lake.hr}",
        f"INSERT INTO {lake.db}.inbox SELECT id, notes FROM {lake.opps}",
        f"INSERT INTO {lake.db}.inbox SELECT id, ssn FROM {lake.hr}",
        f"DROP TABLE {lake.hr}",
        f"CREATE TABLE {lake.db}.copy AS SELECT * FROM {lake.hr}",
    ):
        with pytest.raises(psycopg.Error) as err:
            conn.execute(attack)
        assert err.value.sqlstate == "42501"
    # SET is session chatter answered by the endpoint: it never reaches Spark.
    before = spark.conf.get("spark.sql.parser.escapedStringLiterals")
    conn.execute("SET spark.sql.parser.escapedStringLiterals=true")
    assert spark.conf.get("spark.sql.parser.escapedStringLiterals") == before
    # A permitted write works (and copies only what the analyst may read).
    conn.execute(f"INSERT INTO {lake.db}.inbox SELECT id, email FROM {lake.opps}")
    assert sorted(r[0] for r in spark.sql(f"SELECT id FROM {lake.db}.inbox").collect()) == [1, 3]
    no_canary(spark.sql(f"SELECT * FROM {lake.db}.inbox").collect())


def test_canaries_never_reach_any_output(connect, lake):
    conn = connect()
    seen: list[object] = []
    conn.add_notice_handler(lambda d: seen.append(d.message_primary))
    attacks = [
        f"SELECT * FROM {lake.opps}",
        f"SELECT notes FROM {lake.opps}",
        f"SELECT max(notes) FROM {lake.opps}",
        f"SELECT * FROM {lake.opps} WHERE region = 'US'",
        f"SELECT email FROM {lake.opps} WHERE id = 2",
        f"SELECT (SELECT max(ssn) FROM {lake.hr})",
        f"WITH x AS (SELECT * FROM {lake.hr}) SELECT * FROM x",
        f"SELECT * FROM {lake.opps}.snapshots",
        "SELECT * FROM parquet.`/tmp`",
        f"SELECT cast(notes AS int) FROM {lake.opps}",
        f"SELECT assert_true(notes IS NULL) FROM {lake.opps}",
        f"DESCRIBE {lake.hr}",
        "SELECT * FROM pg_catalog.pg_tables",
        "SHOW TABLES",
    ]
    for sql in attacks:
        try:
            seen.append(conn.execute(sql).fetchall())
        except psycopg.Error as exc:
            seen.append((exc.sqlstate, str(exc)))
    for value in ("2", "US", "2) OR (1=1", CANARY_US):
        try:
            seen.append(
                conn.execute(f"SELECT * FROM {lake.opps} WHERE id = %s OR region = %s", (value, value)).fetchall()
            )
        except psycopg.Error as exc:
            seen.append(str(exc))
    no_canary(seen)
    assert conn.execute("SELECT 1").fetchone() == (1,)


def test_wrong_password_is_28p01_and_audited(connect, lake, settings):
    with pytest.raises(psycopg.OperationalError) as err:
        connect(password="wrong")
    assert "password authentication failed" in str(err.value)
    with pytest.raises(psycopg.OperationalError):
        connect(password=lake.other_token)  # someone else's token
    denied = AuditLog(settings).list(principal=lake.analyst, decision="deny", limit=10)
    assert [r["action"] for r in denied][:2] == ["pg.login", "pg.login"]
    assert denied[0]["detail"]["via"] == "token" and denied[1]["detail"]["via"] == "password"


def test_sqlstate_of_a_bad_login_on_the_wire(server, lake):
    """psycopg reports only the text of a startup error: read the SQLSTATE from the raw reply.
    A plain (non-TLS) connection signs in with SCRAM: a wrong token is 28P01 after the exchange."""
    host, port = server.address
    with socket.create_connection((host, port), timeout=20) as s:
        wrong = lake.token[:-4] + ("AAAA" if not lake.token.endswith("AAAA") else "BBBB")
        seen = rawpg.scram_sign_in(s, lake.analyst, wrong)
    assert seen == [(b"R", 10), (b"R", 11), (b"E", None), (b"28P01", None)]


def test_token_login_and_session_probes(connect, lake):
    with connect(password=lake.token) as conn:
        assert conn.info.parameter_status("server_version") == pgwire.SERVER_VERSION
        assert conn.execute(f"SELECT count(*) FROM {lake.opps}").fetchone() == (2,)
        conn.execute("SET search_path TO public")
        conn.execute("BEGIN")
        conn.execute("COMMIT")
        assert conn.execute("SELECT version()").fetchone()[0].startswith("PostgreSQL 15.0")
        assert conn.execute("SHOW transaction_isolation").fetchone() == ("read committed",)
        assert conn.execute("SELECT typname FROM pg_catalog.pg_type WHERE oid = 23").fetchone() == ("int4",)
        assert conn.execute("SELECT 2").fetchone() == (2,)


def test_non_autocommit_client_and_protocol_garbage(connect, server):
    conn = connect(autocommit=False)
    assert conn.execute("SELECT 1").fetchone() == (1,)
    conn.commit()
    conn.rollback()
    host, port = server.address
    with socket.create_connection((host, port), timeout=20) as s:
        s.sendall(b"\x00\x00\x00\x08garbage-that-is-not-a-startup-packet")
        s.recv(4096)
    with socket.create_connection((host, port), timeout=20) as s:
        s.sendall(struct.pack("!ii", 8, pgwire.GSSENC_REQUEST))
        assert s.recv(1) == b"N"  # no GSSAPI encryption
        s.sendall(struct.pack("!ii", 8, pgwire.SSL_REQUEST))
        assert s.recv(1) == b"S"  # TLS is on by default (a self-signed certificate)
    assert conn.execute("SELECT 3").fetchone() == (3,)  # the server and other connections go on


def test_row_cap_and_connection_limit(spark, settings, lake):
    small = settings.model_copy(
        update={"server": settings.server.model_copy(update={"pg_max_rows": 2, "pg_max_connections": 1})}
    )
    srv = pgwire.PgServer(small, spark=spark, host="127.0.0.1", port=0).start()
    try:
        host, port = srv.address
        kw = {"host": host, "port": port, "user": lake.analyst, "password": PASSWORD, "dbname": "lake"}
        kw["sslmode"] = "require"
        kw["options"] = "-c shoal.dialect=spark"
        with psycopg.connect(autocommit=True, **kw) as conn:
            # A longer result is an error, never a shorter one that looks complete (issue 42).
            with pytest.raises(psycopg.errors.ProgramLimitExceeded, match="pg_max_rows"):
                conn.execute("SELECT id FROM range(10)").fetchall()
            assert conn.execute("SELECT id FROM range(2)").fetchall() == [(0,), (1,)]
            with pytest.raises(psycopg.OperationalError, match="too many clients"):
                psycopg.connect(**kw)
    finally:
        srv.stop()


@pytest.mark.skipif(shutil.which("psql") is None, reason="psql (postgresql-client) is not installed")
def test_psql_client(server, lake):
    host, port = server.address
    env = {**os.environ, "PGPASSWORD": PASSWORD, "PGCONNECT_TIMEOUT": "20"}
    dsn = f"host={host} port={port} user={lake.analyst} dbname=lake sslmode=require"

    def psql(sql: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            ["psql", "-X", "-A", "-t", dsn, "-c", sql], env=env, capture_output=True, text=True, timeout=120
        )

    ok = psql(f"SELECT id, region FROM {lake.opps} ORDER BY id")
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.split() == ["1|EU", "3|EU"]
    refused = psql(f"SELECT notes FROM {lake.opps}")
    assert refused.returncode != 0 and "ERROR" in refused.stderr and "notes" in refused.stderr
    no_canary(ok.stdout, refused.stdout, refused.stderr)
    bad = subprocess.run(
        ["psql", "-X", "-w", dsn, "-c", "SELECT 1"],
        env={**env, "PGPASSWORD": "nope"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bad.returncode != 0 and "password authentication failed" in bad.stderr


def test_cancel_request_stops_the_running_statement(connect):
    conn = connect()
    timer = threading.Timer(3, conn.cancel_safe)
    timer.start()
    start = time.monotonic()
    with pytest.raises(psycopg.errors.QueryCanceled):
        conn.execute("SELECT sum(id * 2) FROM range(0, 100000000000, 1, 4)")
    timer.join()
    assert time.monotonic() - start < 60
    assert conn.execute("SELECT 1").fetchone() == (1,)


def test_revoking_the_token_or_changing_the_password_ends_open_connections(connect, lake, settings):
    p = Principals(settings)
    tid, token = p.create_token(lake.analyst, description="revoked mid-session")
    with connect(password=token) as by_token, connect() as by_password:
        assert by_token.execute(f"SELECT count(*) FROM {lake.opps}").fetchone() == (2,)
        assert by_password.execute(f"SELECT count(*) FROM {lake.opps}").fetchone() == (2,)
        p.revoke_token(tid)
        with pytest.raises(psycopg.OperationalError, match="revoked"):
            by_token.execute(f"SELECT count(*) FROM {lake.opps}")
        assert by_password.execute("SELECT 1").fetchone() == (1,)  # another sign-in is untouched
        p.set_password(lake.analyst, PASSWORD)  # same text, new hash: a password change all the same
        with pytest.raises(psycopg.OperationalError, match="revoked|changed"):
            by_password.execute(f"SELECT count(*) FROM {lake.opps}")
    with connect() as again:
        assert again.execute(f"SELECT count(*) FROM {lake.opps}").fetchone() == (2,)


def test_admission_refuses_a_full_queue_and_ends_a_long_wait(connect, settings, lake, monkeypatch):
    """Serve's queries are admitted (shoal.admission): a full queue is 53300, a wait past the
    queue timeout 57014, each in PostgreSQL's words; statements without Spark are not counted."""
    from shoal.admission import admission

    adm = admission(settings)  # the one the server uses
    conn = connect()
    monkeypatch.setattr(adm, "slots", 1)
    monkeypatch.setattr(adm, "queue", 0)
    with adm.enter("someone-else"):  # the one slot is taken
        assert conn.execute("SHOW search_path").fetchone()  # answered without Spark: not queued
        with pytest.raises(psycopg.errors.TooManyConnections, match="sorry, too many clients already") as full:
            conn.execute(f"SELECT count(*) FROM {lake.opps}")
        assert "too many queries: 1 running and 0 waiting" in (full.value.diag.message_hint or "")
        monkeypatch.setattr(adm, "queue", 4)
        monkeypatch.setattr(adm, "timeout_s", 0.5)
        with pytest.raises(psycopg.errors.QueryCanceled, match="canceling statement due to statement timeout"):
            conn.execute(f"SELECT count(*) FROM {lake.opps}")
        # A statement waiting in the queue ends at the client's CancelRequest, not at the timeout.
        monkeypatch.setattr(adm, "timeout_s", 60)
        threading.Timer(1.0, conn.cancel_safe).start()  # cancel() holds the GIL: this server is in process
        started = time.monotonic()
        with pytest.raises(psycopg.errors.QueryCanceled, match="canceling statement due to user request"):
            conn.execute(f"SELECT count(*) FROM {lake.opps}")
        assert time.monotonic() - started < 10
    assert conn.execute(f"SELECT count(*) FROM {lake.opps}").fetchone() == (2,)  # the slot is free again
