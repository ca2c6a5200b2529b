"""The PostgreSQL endpoint's transport, sign-in and session lifecycle: TLS, SCRAM-SHA-256, the
handshake's limits (slow-loris), and sign-ins that change while a connection is open."""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import select
import shutil
import socket
import stat
import struct
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
import pytest
from sqlalchemy import update

from shoal.bi.pg import MAX_AUTH_MESSAGE, PgServer, session
from shoal.governance import Governance, Principals
from shoal.governance.store import tokens
from shoal.lake import database
from tests.bi import rawpg
from tests.bi.conftest import PASSWORD


@contextmanager
def pg_server(spark, settings, **server) -> Iterator[PgServer]:
    custom = settings.model_copy(update={"server": settings.server.model_copy(update=server)})
    srv = PgServer(custom, spark=spark, host="127.0.0.1", port=0).start()
    try:
        yield srv
    finally:
        srv.stop()


def dsn(server: PgServer, user: str, password: str, **kw) -> dict:
    host, port = server.address
    return {"host": host, "port": port, "user": user, "password": password, "dbname": "lake",
            "connect_timeout": 20, "autocommit": True, **kw}  # fmt: skip


def libpq_version() -> int:
    return psycopg.pq.version()


# ---- TLS -------------------------------------------------------------------------------------------
def test_tls_with_a_generated_self_signed_certificate(server, lake, settings):
    with psycopg.connect(**dsn(server, lake.analyst, PASSWORD, sslmode="require")) as conn:
        assert conn.pgconn.ssl_in_use
        assert conn.execute(f"SELECT count(*) FROM {lake.opps}").fetchone() == (2,)
    folder = settings.workspace_dir / "secrets" / "pg-tls"
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    for name in ("server.crt", "server.key"):
        assert stat.S_IMODE((folder / name).stat().st_mode) == 0o600
    # From loopback, a plain connection still works (it signs in with SCRAM and a token).
    with psycopg.connect(**dsn(server, lake.analyst, lake.token, sslmode="disable")) as conn:
        assert not conn.pgconn.ssl_in_use
        assert conn.execute("SELECT 1").fetchone() == (1,)


def test_plain_connections_from_other_hosts_are_refused(server, lake, monkeypatch):
    monkeypatch.setattr(session, "is_loopback", lambda _address: False)
    with pytest.raises(psycopg.OperationalError, match="must use TLS: connect with sslmode=require"):
        psycopg.connect(**dsn(server, lake.analyst, lake.token, sslmode="disable"))
    with psycopg.connect(**dsn(server, lake.analyst, PASSWORD, sslmode="require")) as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)


@pytest.mark.skipif(shutil.which("psql") is None, reason="psql (postgresql-client) is not installed")
def test_psql_over_tls_and_with_scram(server, lake):
    host, port = server.address
    base = f"host={host} port={port} user={lake.analyst} dbname=lake"

    def psql(conninfo: str, secret: str) -> subprocess.CompletedProcess:
        env = {**os.environ, "PGPASSWORD": secret, "PGCONNECT_TIMEOUT": "20"}
        sql = "SELECT 40 + 2"
        return subprocess.run(["psql", "-X", "-A", "-t", "-w", conninfo, "-c", sql], env=env,
                              capture_output=True, text=True, timeout=120)  # fmt: skip

    tls = psql(f"{base} sslmode=require", PASSWORD)
    assert tls.returncode == 0 and tls.stdout.strip() == "42", tls.stderr
    plain = psql(f"{base} sslmode=disable", lake.token)  # SCRAM: the token never crosses the wire
    assert plain.returncode == 0 and plain.stdout.strip() == "42", plain.stderr
    bad = psql(f"{base} sslmode=disable", PASSWORD)  # a password has no SCRAM verifier
    assert bad.returncode != 0 and "password authentication failed" in bad.stderr


# ---- SCRAM-SHA-256 ---------------------------------------------------------------------------------
def test_scram_message_sequence_on_a_plain_socket(server, lake):
    host, port = server.address
    with socket.create_connection((host, port), timeout=20) as s:
        seen = rawpg.scram_sign_in(s, lake.analyst, lake.token)
    kinds = [k for k, _ in seen]
    assert seen[:4] == [(b"R", 10), (b"R", 11), (b"R", 12), (b"R", 0)]
    assert kinds[-1] == b"Z" and b"K" in kinds
    # An unknown user gets the same exchange (a salt, then failure), not an early "no such user".
    with socket.create_connection((host, port), timeout=20) as s:
        seen = rawpg.scram_sign_in(s, f"nobody_{uuid.uuid4().hex[:6]}", lake.token)
    assert seen == [(b"R", 10), (b"R", 11), (b"E", None), (b"28P01", None)]


def test_scram_is_negotiated_by_psycopg(spark, settings, lake):
    with pg_server(spark, settings, pg_auth="scram-sha-256") as srv:
        kw = {"require_auth": "scram-sha-256"} if libpq_version() >= 160000 else {}
        for sslmode in ("require", "disable"):
            with psycopg.connect(**dsn(srv, lake.analyst, lake.token, sslmode=sslmode, **kw)) as conn:
                assert conn.execute(f"SELECT count(*) FROM {lake.opps}").fetchone() == (2,)
        with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
            psycopg.connect(**dsn(srv, lake.analyst, PASSWORD, sslmode="require"))


def test_tokens_made_before_scram_sign_in_over_tls_only(server, lake, settings):
    """Tokens without a verifier (made before migration 0004) cannot do SCRAM; inside TLS the
    password message carries them, as before."""
    user = f"legacy_{uuid.uuid4().hex[:6]}"
    p = Principals(settings)
    p.add(user)
    tid, token = p.create_token(user, description="legacy")
    engine = database.engine(settings)
    with engine.begin() as conn:
        conn.execute(update(tokens).where(tokens.c.id == tid).values(scram_verifier=None))
    with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
        psycopg.connect(**dsn(server, user, token, sslmode="disable"))
    with psycopg.connect(**dsn(server, user, token, sslmode="require")) as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)


def test_a_suspended_portal_delivers_nothing_after_a_revoke(server, lake, settings):
    """Rows a portal already holds are not sent once the token is revoked (found in review)."""
    p = Principals(settings)
    tid, token = p.create_token(lake.analyst, description="portal")
    host, port = server.address
    with socket.create_connection((host, port), timeout=30) as s:
        assert rawpg.scram_sign_in(s, lake.analyst, token)[-1][0] == b"Z"
        query = f"SELECT id FROM {lake.opps} ORDER BY id".encode() + b"\x00"
        rawpg.send(s, b"P", b"\x00" + query + struct.pack("!h", 0))
        rawpg.send(s, b"B", b"p1\x00\x00" + struct.pack("!hhh", 0, 0, 0))
        rawpg.send(s, b"E", b"p1\x00" + struct.pack("!i", 1))
        rawpg.send(s, b"H", b"")
        kinds = []
        while not kinds or kinds[-1] not in (b"s", b"C", b"E"):
            kinds.append(rawpg.message(s)[0])
        assert kinds[-2:] == [b"D", b"s"]  # one row sent, the portal suspended with more
        p.revoke_token(tid)
        rawpg.send(s, b"E", b"p1\x00" + struct.pack("!i", 1))
        rawpg.send(s, b"S", b"")
        kind, body = rawpg.message(s)
        assert kind == b"E" and b"FATAL" in body, (kind, body)


# ---- the handshake's limits --------------------------------------------------------------------------
def _trickle(sock: socket.socket, stop: threading.Event) -> None:
    """A slow-loris client: a startup packet that claims 9 KiB, one byte at a time."""
    try:
        sock.sendall(struct.pack("!i", 9000))
        while not stop.wait(0.2):
            sock.sendall(b"x")
    except OSError:
        pass


def _read_until_closed(sock: socket.socket, into: list[bytes]) -> None:
    try:
        while chunk := sock.recv(4096):
            into.append(chunk)
    except OSError:
        pass  # a reset after the server closed: what arrived before it is kept


def _connect_from(source: str, address: tuple[str, int], timeout: float = 20) -> socket.socket:
    """A TCP connection from another loopback address (all of 127.0.0.0/8 is loopback on Linux)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    try:
        sock.bind((source, 0))
        sock.connect(address)
    except OSError:
        sock.close()
        raise
    return sock


def test_slow_loris_cannot_hold_the_slots(spark, settings, lake):
    with pg_server(
        spark, settings, pg_handshake_timeout_s=3, pg_max_connections=2, pg_max_pending_per_address=64
    ) as srv:
        host, port = srv.address
        stop = threading.Event()
        socks = [_connect_from("127.0.0.2", (host, port)) for _ in range(40)]
        threads = [threading.Thread(target=_trickle, args=(s, stop), daemon=True) for s in socks]
        reply: list[bytes] = []
        reader = threading.Thread(target=_read_until_closed, args=(socks[0], reply), daemon=True)
        try:
            began = time.monotonic()
            for t in threads:
                t.start()
            reader.start()
            time.sleep(0.5)
            with psycopg.connect(**dsn(srv, lake.analyst, PASSWORD)) as conn:  # 40 strangers hold no slot
                assert conn.execute("SELECT 1").fetchone() == (1,)
            assert time.monotonic() - began < 15
            # The handshake's deadline is total: bytes still trickling in do not extend it.
            reader.join(15)
            assert not reader.is_alive(), "a trickling client was not cut off"
            assert time.monotonic() - began < 10
            assert b"C57014\x00" in b"".join(reply) and b"pg_handshake_timeout_s" in b"".join(reply)
        finally:
            stop.set()
            for s in socks:
                s.close()


def test_pending_connections_are_capped_and_messages_bounded(spark, settings, lake):
    with pg_server(spark, settings, pg_max_pending=3, pg_handshake_timeout_s=30) as srv:
        host, port = srv.address
        idle = [socket.create_connection((host, port), timeout=20) for _ in range(3)]
        time.sleep(0.3)
        with socket.create_connection((host, port), timeout=20) as extra:
            kind, body = rawpg.message(extra)
        assert kind == b"E" and rawpg.fields(body)["C"] == "53300" and "pg_max_pending" in rawpg.fields(body)["M"]
        for s in idle:
            s.close()
        time.sleep(0.3)
        with psycopg.connect(**dsn(srv, lake.analyst, PASSWORD)) as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)
        # A startup packet or a sign-in message bigger than any client's is refused unread.
        with socket.create_connection((host, port), timeout=20) as s:
            s.sendall(struct.pack("!i", 20_000))
            kind, body = rawpg.message(s)
        assert kind == b"E" and rawpg.fields(body)["C"] == "08P01"
        with socket.create_connection((host, port), timeout=20) as s:
            rawpg.startup(s, lake.analyst)
            assert rawpg.message(s)[0] == b"R"
            s.sendall(b"p" + struct.pack("!i", MAX_AUTH_MESSAGE + 100))
            kind, body = rawpg.message(s)
        assert kind == b"E" and rawpg.fields(body)["C"] == "08P01"


def _flood(address: tuple[str, int], source: str, count: int, stop: threading.Event, seen: dict[str, int]) -> None:
    """One client keeping `count` idle sockets open (sending nothing), reconnecting each one the
    server drops or refuses, until stopped (at most 60 s and 50,000 connections)."""
    socks: list[socket.socket] = []
    deadline = time.monotonic() + 60
    while not stop.is_set() and time.monotonic() < deadline and seen["connects"] < 50_000:
        while len(socks) < count:
            try:
                socks.append(_connect_from(source, address, timeout=2))
            except OSError:
                break
            seen["connects"] += 1
        readable, _, _ = select.select(socks, [], [], 0.05)
        for s in readable:
            try:
                data = s.recv(4096)
            except OSError:
                data = b""
            seen["refused"] += b"C53300\x00" in data
            seen["dropped"] += b"C57014\x00" in data
            socks.remove(s)
            s.close()
    for s in socks:
        s.close()


def test_one_address_flooding_idle_sockets_does_not_block_other_sign_ins(spark, settings, lake):
    """64 idle sockets from 127.0.0.2, reconnected when dropped: sign-ins from 127.0.0.1 go on.
    That address gets its share (refused beyond it at once), and its idle sockets are dropped
    after the startup timeout."""
    limits = {"pg_max_pending": 64, "pg_max_pending_per_address": 8, "pg_startup_timeout_s": 1}
    with pg_server(spark, settings, **limits) as srv:
        stop, seen = threading.Event(), {"connects": 0, "refused": 0, "dropped": 0}
        flooder = threading.Thread(target=_flood, args=(srv.address, "127.0.0.2", 64, stop, seen), daemon=True)
        flooder.start()
        signed_in = 0
        try:
            time.sleep(1.5)  # the flood is under way and has met the startup timeout once
            for _ in range(10):
                with psycopg.connect(**dsn(srv, lake.analyst, PASSWORD, sslmode="require")) as conn:
                    signed_in += conn.execute("SELECT 1").fetchone() == (1,)
        finally:
            stop.set()
            flooder.join(30)
        assert signed_in == 10
        assert seen["connects"] > 64 and seen["refused"] > 0 and seen["dropped"] > 0, seen
        # The flooder's share is exactly its setting: the 9th socket from one address is refused.
        held = [_connect_from("127.0.0.3", srv.address) for _ in range(8)]
        try:
            with _connect_from("127.0.0.3", srv.address) as extra:
                kind, body = rawpg.message(extra)
            assert kind == b"E" and rawpg.fields(body)["C"] == "53300"
            assert "pg_max_pending_per_address" in rawpg.fields(body)["M"]
        finally:
            for s in held:
                s.close()


def test_signed_in_slots_per_principal_and_reserved_for_admins(spark, settings, lake):
    u = uuid.uuid4().hex[:6]
    p = Principals(settings)
    root = f"root_{u}"
    p.add(root, admin=True, password=PASSWORD)
    limits = {"pg_max_connections": 4, "pg_max_connections_per_principal": 2, "pg_reserved_admin_connections": 1}
    with pg_server(spark, settings, **limits) as srv:
        held = []
        try:
            held += [psycopg.connect(**dsn(srv, lake.analyst, PASSWORD, sslmode="require")) for _ in range(2)]
            with socket.create_connection(srv.address, timeout=20) as s:  # the SQLSTATE, read raw
                assert rawpg.scram_sign_in(s, lake.analyst, lake.token)[-1] == (b"53300", None)
            with pytest.raises(psycopg.OperationalError, match=f'too many connections for role "{lake.analyst}"'):
                psycopg.connect(**dsn(srv, lake.analyst, PASSWORD, sslmode="require"))
            held.append(psycopg.connect(**dsn(srv, lake.other, "other-password", sslmode="require")))
            # 3 of 4 slots taken: the last one is an admin's, whoever else asks.
            with pytest.raises(psycopg.OperationalError, match="reserved for admin.*pg_reserved_admin_connections"):
                psycopg.connect(**dsn(srv, lake.other, "other-password", sslmode="require"))
            held.append(psycopg.connect(**dsn(srv, root, PASSWORD, sslmode="require")))
            assert held[-1].execute("SELECT 1").fetchone() == (1,)
            with pytest.raises(psycopg.OperationalError, match="too many clients already.*pg_max_connections"):
                psycopg.connect(**dsn(srv, root, PASSWORD, sslmode="require"))
            held.pop(0).close()  # a slot frees when its connection ends
            deadline = time.monotonic() + 10
            while True:
                try:
                    held.append(psycopg.connect(**dsn(srv, root, PASSWORD, sslmode="require")))
                    break
                except psycopg.OperationalError:
                    assert time.monotonic() < deadline, "the slot was not released"
                    time.sleep(0.2)
        finally:
            for c in held:
                c.close()


# ---- sign-ins that change under an open connection -----------------------------------------------------
def test_group_changes_apply_to_open_connections(connect, lake, settings):
    p, g = Principals(settings), Governance(settings)
    u = uuid.uuid4().hex[:6]
    group, mallory = f"hrteam_{u}", f"mallory_{u}"
    p.add(group, kind="group")
    p.add(mallory, password=PASSWORD)
    p.add_member(group, mallory)
    g.grant(p.principal("admin"), "SELECT", "TABLE", lake.hr, group)
    conn = connect(user=mallory)
    assert conn.execute(f"SELECT count(*) FROM {lake.hr}").fetchone() == (1,)
    p.remove_member(group, mallory)  # what `shoal group remove` does
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        conn.execute(f"SELECT count(*) FROM {lake.hr}")
    assert conn.execute("SELECT 1").fetchone() == (1,)  # the connection goes on, without the grant
    p.remove(mallory)
    with pytest.raises(psycopg.OperationalError, match="terminating connection"):
        conn.execute("SELECT 1")


def test_a_connection_ends_when_its_token_expires(connect, lake, settings):
    p = Principals(settings)
    _, token = p.create_token(lake.analyst, expires_in_days=6 / 86400)  # six seconds
    conn = connect(password=token)
    assert conn.execute("SELECT 1").fetchone() == (1,)
    time.sleep(6.5)
    with pytest.raises(psycopg.OperationalError, match="expired"):
        conn.execute("SELECT 1")
    assert conn.closed


def test_token_expiry_moved_earlier_ends_the_connection(connect, lake, settings):
    p = Principals(settings)
    tid, token = p.create_token(lake.analyst, expires_in_days=1)
    conn = connect(password=token)
    assert conn.execute("SELECT 1").fetchone() == (1,)
    with database.engine(settings).begin() as db:
        past = database.utcnow() - dt.timedelta(seconds=1)
        db.execute(update(tokens).where(tokens.c.id == tid).values(expires_at=past))
    with pytest.raises(psycopg.OperationalError, match="expired"):
        conn.execute("SELECT 1")


JDBC_PROBE = """
import java.sql.*;
import java.util.Properties;

public class Probe {
    public static void main(String[] args) throws Exception {
        Properties p = new Properties();
        p.setProperty("user", args[1]);
        p.setProperty("password", args[2]);
        try (Connection c = DriverManager.getConnection(args[0], p);
             ResultSet r = c.createStatement().executeQuery("SELECT 40 + 2")) {
            r.next();
            System.out.println("answer=" + r.getInt(1));
        }
    }
}
"""


@pytest.mark.skipif(
    shutil.which("java") is None or not os.path.exists("/usr/share/java/postgresql.jar"),
    reason="needs a JDK and Debian's libpostgresql-jdbc-java",
)
def test_pgjdbc_over_tls_and_with_scram(server, lake, tmp_path):
    probe = tmp_path / "Probe.java"
    probe.write_text(JDBC_PROBE)
    host, port = server.address

    def run(query: str, secret: str) -> subprocess.CompletedProcess:
        url = f"jdbc:postgresql://{host}:{port}/lake?{query}"
        cmd = ["java", "-cp", "/usr/share/java/postgresql.jar", str(probe), url, lake.analyst, secret]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=300)

    tls = run("sslmode=require", PASSWORD)
    assert "answer=42" in tls.stdout, tls.stderr
    scram = run("sslmode=disable", lake.token)  # pgjdbc's own SCRAM client
    assert "answer=42" in scram.stdout, scram.stderr


def test_many_addresses_filling_the_pool_do_not_lock_out_a_newcomer(spark, settings, lake):
    """Four addresses each within their share fill the whole pre-sign-in pool (fifth attack round:
    the next sign-in, an admin's included, was refused). Now a newcomer from an address holding
    less takes the place of the oldest idle socket of the address holding the most."""
    limits = {"pg_max_pending": 32, "pg_max_pending_per_address": 8, "pg_startup_timeout_s": 30}
    with pg_server(spark, settings, **limits) as srv:
        idle = [_connect_from(f"127.0.0.{n}", srv.address) for n in (2, 3, 4, 5) for _ in range(8)]
        try:
            deadline = time.monotonic() + 10
            while len(srv._pending) < 32 and time.monotonic() < deadline:
                time.sleep(0.05)
            assert len(srv._pending) == 32  # the pool is full
            with psycopg.connect(**dsn(srv, lake.analyst, PASSWORD, sslmode="require")) as conn:
                assert conn.execute("SELECT 1").fetchone() == (1,)
            dropped = 0
            for s in idle:  # exactly one idle socket made room (the server closed it)
                s.settimeout(0.5)
                with contextlib.suppress(TimeoutError, OSError):  # still open: nothing to read
                    dropped += s.recv(1) == b""
            assert dropped == 1
        finally:
            for s in idle:
                s.close()


def test_an_ipv6_host_counts_as_its_64():
    from shoal.bi.pg.server import _address_group

    assert _address_group(("2001:db8:1:2::10", 5432, 0, 0)) == _address_group(("2001:db8:1:2:ffff::1", 1, 0, 0))
    assert _address_group(("2001:db8:1:3::10", 5432, 0, 0)) != _address_group(("2001:db8:1:2::10", 1, 0, 0))
    assert _address_group(("::ffff:10.0.0.7", 1, 0, 0)) == "10.0.0.7" == _address_group(("10.0.0.7", 1))
