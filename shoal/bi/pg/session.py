"""One client connection: the PostgreSQL v3 protocol state machine over Shoal's grants.

A connection goes through two phases:

* the handshake (startup packet, optional TLS, sign-in), done as a stranger: bounded in time
  as a whole (`[server] pg_handshake_timeout_s` from the accept, however slowly the bytes trickle
  in), in message size (`codec.MAX_STARTUP`, `codec.MAX_AUTH_MESSAGE`) and in number (the server
  admits `pg_max_pending` such connections at once, `pg_max_pending_per_address` from one address;
  its event loop reads the first startup packet before this thread starts). It holds no slot.
* the session, after a successful sign-in: it takes one of `pg_max_connections` slots and runs
  statements. Before each statement the sign-in is checked again (the token still active and
  unexpired, the principal still there, its groups re-read), as the HTTP API does per request:
  a grant taken from a group stops applying to open connections at once.

Statements run through `GovernedSql` as the signed-in principal. `_local()` is the hook that
answers a statement without Spark (or returns None); `_run()` is the governed run.

Results stream: a governed query's rows are read from Spark a partition at a time as DataRow
messages go out (simple query, each Execute of a portal, FETCH from a cursor, COPY TO STDOUT), so
memory holds a partition, not the result; the CommandComplete tag counts the rows at the end.
A portal or cursor keeps its stream between Executes until it is read out, closed, or its
transaction ends; an error while rows flow is an ErrorResponse after the rows already sent.
"""

from __future__ import annotations

import base64
import datetime as dt
import ipaddress
import itertools
import logging
import re
import secrets
import socket
import socketserver
import ssl
import struct
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from sqlglot import exp

from shoal.bi.pg.codec import (
    CANCEL_REQUEST,
    COPY_BINARY_HEADER,
    COPY_BINARY_TRAILER,
    GSSENC_REQUEST,
    MAX_AUTH_MESSAGE,
    MAX_MESSAGE,
    MAX_STARTUP,
    SERVER_VERSION,
    SSL_REQUEST,
    TEXT,
    TYPE_SIZE,
    PgError,
    ProtocolError,
    Reader,
    SessionEnded,
    binary_value,
    copy_line,
    cstr,
    error_fields,
    format_for,
    literal,
    pg_type,
    pg_typmod,
    sqlstate,
    text_value,
)
from shoal.exceptions import ShoalError, SqlError, first_line

if TYPE_CHECKING:
    from shoal.bi.pgsql import Parsed
    from shoal.config import Settings
    from shoal.governance import Principals
    from shoal.governance.sessions import Sessions


class Server(Protocol):
    """What a connection needs of its server (`shoal.bi.pg.server.PgServer`): a protocol, so that
    the session module needs nothing from the server module, which builds on it."""

    settings: Settings
    spark: Any
    sessions: Sessions
    principals: Principals
    tls_context: ssl.SSLContext | None

    def handshake_done(self, conn: Connection) -> None: ...
    def acquire(self, conn: Connection) -> str | None: ...
    def release(self, conn: Connection) -> None: ...
    def running(self, conn: Connection, group: str) -> AbstractContextManager[None]: ...
    def cancel(self, pid: int, secret: int) -> None: ...


log = logging.getLogger("shoal.pgwire")

_FLUSH_AT = 256 * 1024
SCRAM = "SCRAM-SHA-256"

# What a client's SET, SHOW and ParameterStatus see. standard_conforming_strings is off because
# Spark reads a backslash in a string literal as an escape: drivers that quote values on the
# client side (rather than sending parameters) then double backslashes, as Spark needs.
_SETTINGS = {
    "server_version": SERVER_VERSION,
    "server_encoding": "UTF8",
    "client_encoding": "UTF8",
    "DateStyle": "ISO, MDY",
    "IntervalStyle": "postgres",
    "TimeZone": "UTC",
    "integer_datetimes": "on",
    "standard_conforming_strings": "off",
}
_SHOW_EXTRA = {"transaction_isolation": "read committed", "search_path": "default", "max_identifier_length": "128"}

# Session statements answered without Spark (first word -> command tag).
_SESSION = {
    "SET": "SET",
    "RESET": "RESET",
    "BEGIN": "BEGIN",
    "START": "START TRANSACTION",
    "COMMIT": "COMMIT",
    "END": "COMMIT",
    "ROLLBACK": "ROLLBACK",
    "ABORT": "ROLLBACK",
    "DISCARD": "DISCARD ALL",
    "DEALLOCATE": "DEALLOCATE",
}
_VERSION = re.compile(r"(?is)^select\s+(?:pg_catalog\.)?version\s*\(\s*\)\s*$")
_CURRENT_DB = re.compile(r"(?is)^select\s+(?:pg_catalog\.)?current_database\s*\(\s*\)\s*$")
_SHOW = re.compile(r"(?is)^show\s+([a-z_]+)\s*$")
_DECLARE = re.compile(
    r'(?is)^\s*declare\s+("(?:[^"]|"")+"|[a-z_][\w$]*)\s+(?:binary\s+)?(?:insensitive\s+)?(?:(?:no\s+)?scroll\s+)?'
    r"cursor\s+(?:(with|without)\s+hold\s+)?for\s+(.*?);?\s*$"
)
_FETCH = re.compile(
    r'(?is)^\s*fetch\s+(?:(?:forward|next)\s+)?(all|\d+)?\s*(?:(?:from|in)\s+)?("(?:[^"]|"")+"|[a-z_][\w$]*)\s*;?\s*$'
)
_CLOSE = re.compile(r'(?is)^\s*close\s+("(?:[^"]|"")+"|[a-z_][\w$]*)\s*;?\s*$')
_WRITES = ("INSERT", "DROP", "ALTER", "CREATE", "MERGE", "DELETE", "UPDATE", "TRUNCATE")


class HandshakeTimeout(TimeoutError):
    """The client did not finish startup and sign-in within `[server] pg_handshake_timeout_s`."""


class _AuthFailed(Exception):
    """The sign-in failed (the reason is audited, never sent: the client sees 28P01 only)."""


def is_loopback(address: str) -> bool:
    try:
        return ipaddress.ip_address(address.split("%", 1)[0]).is_loopback
    except ValueError:
        return False  # not an IP address (a Unix socket path is not served here): treat as remote


# ---- per-connection state -------------------------------------------------------------------------
@dataclass
class Result:
    """A statement's answer; its rows are iterated once, as they are sent (`count` so far)."""

    columns: list[str]
    oids: list[int]
    rows: list[tuple[Any, ...]]
    tag: str
    notice: str | None = None
    typmods: list[int] | None = None  # per column (numeric precision and scale); None: all -1
    stream: Iterator[tuple[Any, ...]] | None = None  # read from Spark as sent; None: `rows`
    counted: bool = False  # the tag is "<tag> <rows sent>" (SELECT n, FETCH n)
    cap: int = 0  # [server] pg_max_rows: more rows than this are an error (0: no cap)
    count: int = 0
    _ahead: list[tuple[Any, ...]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._source = self.stream if self.stream is not None else iter(self.rows)

    def __iter__(self) -> Result:
        return self

    def __next__(self) -> tuple[Any, ...]:
        row = self._ahead.pop() if self._ahead else next(self._source)
        self.count += 1
        if self.cap and self.count > self.cap:
            raise PgError(
                f"the result has more than {self.cap} rows, the most one statement may return ([server] pg_max_rows)",
                "54000",
                hint="add a LIMIT (or a WHERE), fetch through a cursor, or raise [server] pg_max_rows",
            )
        return row

    def more(self) -> bool:
        """Whether another row follows (read ahead and kept for the next fetch)."""
        if not self._ahead:
            try:
                self._ahead.append(next(self._source))
            except StopIteration:
                return False
        return True

    def close(self) -> None:
        """Release the stream (Spark stops serving it); idempotent."""
        close = getattr(self.stream, "close", None)
        self.stream, self._source, self._ahead = None, iter(()), []
        if close is not None:
            close()

    def final_tag(self) -> str:
        return f"{self.tag} {self.count}" if self.counted else self.tag


@dataclass
class Prepared:
    sql: str
    param_oids: list[int]
    parsed: Parsed  # read once at Parse: its $n parameters and, when it has some, its tree


@dataclass
class Portal:
    statement: Prepared
    sql: str
    result_formats: list[int]
    bound: Parsed | None = None  # the tree with the parameters bound as literal nodes
    result: Result | None = None
    described: bool = False
    hold: bool = False  # a cursor DECLAREd WITH HOLD: it outlives its transaction
    extra: dict[str, Any] = field(default_factory=dict)


class Connection(socketserver.BaseRequestHandler):
    server: Server  # type: ignore[assignment]  # socketserver's BaseServer, narrowed to what is used

    def __init__(self, request: Any, client_address: Any, server: Any, *, first: bytes = b"", accepted: float = 0.0):
        # The server's event loop read the first startup packet (`first`); the handshake's
        # deadline counts from when the socket was accepted.
        self.first, self.accepted = first, accepted or time.monotonic()
        super().__init__(request, client_address, server)

    def setup(self) -> None:
        self.sock: socket.socket = self.request
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.out = bytearray()
        self.client = self.client_address[0] if isinstance(self.client_address, tuple) else str(self.client_address)
        self.pid = 0
        self.secret = 0
        self.in_txn = False
        self.wrote_in_txn = False
        self.governed: Any = None
        self.session: str | None = None
        self.principal: Any = None
        self.token_id: str | None = None  # the API token signed in with (None: a password)
        self.expires_at: dt.datetime | None = None  # the token's expiry (naive UTC), if it has one
        self.tls = False
        # Monotonic time by which the handshake must be done; None once signed in.
        self.deadline: float | None = None
        self.statements: dict[str, Prepared] = {}
        self.portals: dict[str, Portal] = {}
        self.skip_to_sync = False
        self.canceled = False
        self.pg: Any = None  # shoal.bi.pgsql.PgSession: settings, catalog, dialect

    def finish(self) -> None:
        try:
            self._close_portals(keep_hold=False)  # their streams, and their audit rows
        except Exception:
            log.exception("PostgreSQL endpoint: closing the portals of %s failed", self.client)
        # After TLS, self.sock is the wrapped socket; socketserver closes only the original one.
        # TLS ends with close_notify, as PostgreSQL's does: libpq reports a connection that ends
        # without it (e.g. after a CancelRequest sent inside TLS) as "unexpected eof".
        if isinstance(self.sock, ssl.SSLSocket):
            with _quiet():
                self.sock.settimeout(1)
                self.sock.unwrap()
            with _quiet():
                self.sock.close()

    # ---- socket ------------------------------------------------------------------------------
    def _recv(self, n: int) -> bytes:
        # Exactly n bytes, never more: after an SSLRequest nothing sent in the clear may be
        # buffered and later read as if it had come through TLS.
        chunks, left = [], n
        if self.first:  # what the server read before this thread began
            chunks.append(self.first[:n])
            self.first = self.first[n:]
            left -= len(chunks[0])
        while left:
            if self.deadline is not None:
                # The handshake's deadline is total: each byte trickled in does not buy more time.
                remaining = self.deadline - time.monotonic()
                if remaining <= 0:
                    raise HandshakeTimeout()
                self.sock.settimeout(remaining)
            try:
                chunk = self.sock.recv(min(left, 1 << 20))
            except TimeoutError:
                if self.deadline is not None:
                    raise HandshakeTimeout() from None
                raise
            if not chunk:
                raise ConnectionError("client closed the connection")
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)

    def send(self, kind: bytes, payload: bytes = b"") -> None:
        self.out += kind + struct.pack("!i", len(payload) + 4) + payload
        if len(self.out) > _FLUSH_AT:
            self.flush()

    def flush(self) -> None:
        if self.out:
            self.sock.sendall(self.out)
            self.out.clear()

    # ---- the connection ----------------------------------------------------------------------
    def handle(self) -> None:
        settings = self.server.settings.server
        registered = False
        try:
            self.deadline = self.accepted + settings.pg_handshake_timeout_s
            params = self._startup()
            if params is None or not self._transport_allowed():
                return
            self._check_engine()
            registered = self._authenticate(params)
            if not registered:
                return
            self.deadline = None
            self.server.handshake_done(self)
            self.sock.settimeout(settings.pg_idle_timeout_s)
            self._serve()
        except HandshakeTimeout:
            with _quiet():
                self._fatal(
                    "canceling authentication due to timeout: startup and sign-in must finish within"
                    f" {settings.pg_handshake_timeout_s:g} s ([server] pg_handshake_timeout_s)",
                    "57014",
                )
        except TimeoutError:
            with _quiet():
                self._fatal("terminating connection due to idle timeout", "57P05")
        except SessionEnded as exc:
            with _quiet():
                self._fatal(f"terminating connection: {exc}", "57P01")
        except EngineDown as exc:
            with _quiet():
                # PostgreSQL's words and code when it cannot take connections (57P03).
                self._fatal("the database system is not accepting connections", "57P03", hint=str(exc))
        except ProtocolError as exc:
            with _quiet():
                self._fatal(f"protocol violation: {exc}", "08P01")
        except (ConnectionError, OSError):
            pass
        except Exception:  # a bug: this connection ends, the server goes on
            log.exception("PostgreSQL endpoint: connection from %s failed", self.client)
            with _quiet():
                self._fatal("internal error; the connection is closed", "XX000")
        finally:
            self.server.handshake_done(self)
            # Always: the slot is taken inside _authenticate, and a client that resets the
            # socket right after signing in (the last flush fails) would otherwise keep it.
            self.server.release(self)
            if self.session is not None:
                with _quiet():
                    self.server.sessions.end(self.session)

    def _startup(self) -> dict[str, str] | None:
        while True:
            length = struct.unpack("!i", self._recv(4))[0]
            if not 8 <= length <= MAX_STARTUP:
                raise ProtocolError(f"invalid startup packet length (at most {MAX_STARTUP} bytes)")
            body = self._recv(length - 4)
            code = struct.unpack("!i", body[:4])[0]
            if code == SSL_REQUEST:
                self._start_tls()
                continue
            if code == GSSENC_REQUEST:
                self.sock.sendall(b"N")  # no GSSAPI encryption: the client goes on to TLS or plain
                continue
            if code == CANCEL_REQUEST and len(body) == 12:
                pid, secret = struct.unpack("!ii", body[4:12])
                self.server.cancel(pid, secret)
                return None
            if code >> 16 != 3:
                self._fatal(f"unsupported frontend protocol {code >> 16}.{code & 0xFFFF}", "0A000")
                return None
            r = Reader(body)
            r.pos = 4
            params: dict[str, str] = {}
            try:
                while r.pos < len(body) and body[r.pos] != 0:
                    key = r.cstring()
                    params[key] = r.cstring()
            except (ValueError, UnicodeDecodeError) as exc:
                raise ProtocolError("malformed startup packet") from exc
            unknown = [k for k in params if k.startswith("_pq_.")]
            if code & 0xFFFF or unknown:  # newer minor version or protocol options: we speak 3.0
                names = b"".join(cstr(k) for k in unknown)
                self.send(b"v", struct.pack("!ii", 0, len(unknown)) + names)  # NegotiateProtocolVersion
            return params

    def _start_tls(self) -> None:
        context = self.server.tls_context
        if self.tls or context is None:
            # TLS is off ([server] pg_tls = false) or already on: the client goes on as it is.
            self.sock.sendall(b"N")
            return
        self.sock.sendall(b"S")
        remaining = (self.deadline or time.monotonic()) - time.monotonic()
        if remaining <= 0:
            raise HandshakeTimeout()
        self.sock.settimeout(remaining)
        try:
            self.sock = context.wrap_socket(self.sock, server_side=True)
        except TimeoutError:
            raise HandshakeTimeout() from None
        self.tls = True

    def _transport_allowed(self) -> bool:
        settings = self.server.settings.server
        if self.tls or not settings.pg_require_tls_non_loopback or is_loopback(self.client):
            return True
        self._fatal(
            f"connections from {self.client} must use TLS: connect with sslmode=require"
            " ([server] pg_require_tls_non_loopback is on)",
            "28000",
        )
        return False

    def _auth_method(self) -> str:
        """ "password" (a password message) or "scram": a secret crosses the wire only inside TLS.
        Inside TLS the client must check the certificate (sslmode=verify-ca/verify-full): with
        sslmode=require a machine in the middle could present its own and read the password
        message. `pg_auth = "scram-sha-256"` makes every sign-in SCRAM (tokens only)."""
        configured = self.server.settings.server.pg_auth
        if configured == "auto":
            return "password" if self.tls else "scram"
        return "scram" if configured == "scram-sha-256" else "password"

    def _authenticate(self, params: dict[str, str]) -> bool:
        """Sign the client in and take a connection slot; False (the client told why) if not."""
        from shoal.bi.pgsql import PgSession
        from shoal.governance import AuditLog, AuthError, GovernanceError, GovernedSql
        from shoal.governance.principals import token_id

        user = params.get("user", "")
        method = self._auth_method()
        audit = AuditLog(self.server.settings)
        principals = self.server.principals
        via = "scram" if method == "scram" else "password"
        tid: str | None
        try:
            if method == "scram":
                principal, tid = self._scram(user)
            else:
                self.send(b"R", struct.pack("!i", 3))  # AuthenticationCleartextPassword
                kind, body = self._read_message(MAX_AUTH_MESSAGE)
                if kind != b"p":
                    raise ProtocolError("expected a password message")
                password = body.rstrip(b"\x00").decode("utf-8", "replace")
                via = "token" if password.startswith("shoal_") else "password"
                if via == "token":
                    principal = principals.authenticate(password, client=self.client)
                    if principal.name != user:
                        raise AuthError("the token belongs to another user")
                    tid = token_id(password)
                else:
                    principal, tid = principals.check_password(user, password, client=self.client), None
                del password  # the secret is not kept for the connection's life
        except (AuthError, GovernanceError, _AuthFailed) as exc:
            audit.record(
                user or "anonymous",
                "pg.login",
                None,
                False,
                reason=first_line(exc),
                client=self.client,
                via=via,
                application=params.get("application_name"),
            )
            self._fatal(f'password authentication failed for user "{user}"', "28P01")
            return False
        # The slot is taken only now: strangers who never finish signing in cannot hold them.
        self.principal = principal
        refusal = self.server.acquire(self)
        if refusal is not None:
            audit.record(principal.name, "pg.login", None, False, reason=refusal, client=self.client, via=via)
            self._fatal(refusal, "53300")
            return False
        audit.record(
            principal.name,
            "pg.login",
            None,
            True,
            client=self.client,
            via=via,
            application=params.get("application_name"),
            tls=self.tls,
        )
        self.principal, self.token_id = principal, tid
        self.expires_at = principals.token_expires_at(tid) if tid else None
        self.governed = GovernedSql(self.server.spark, self.server.settings, principal)
        self.pg = PgSession.connect(
            self.server.spark, self.server.settings, principal, self.pid, SERVER_VERSION, params
        )
        # The sign-in is a session like the console's, so revoking the token, changing the
        # password or removing the principal ends it; it never outlives the token.
        self.session, _ = self.server.sessions.create(principal.name, token_id=tid, not_after=self.expires_at)
        self.send(b"R", struct.pack("!i", 0))
        status = {
            **_SETTINGS,
            "application_name": params.get("application_name", ""),
            "session_authorization": principal.name,
            "is_superuser": "on" if principal.is_admin else "off",
            **self.pg.parameter_status(),
        }
        for key, value in status.items():
            self.send(b"S", cstr(key) + cstr(value))
        self.send(b"K", struct.pack("!ii", self.pid, self.secret))
        self._ready()
        return True

    def _scram(self, user: str) -> tuple[Any, str]:
        """SCRAM-SHA-256 without channel binding (RFC 5802/7677, as PostgreSQL does it): the
        client proves it holds one of the user's API tokens; nothing replayable crosses the wire.
        Returns (principal, token id); raises _AuthFailed or AuthError."""
        from shoal.governance import scram

        self.send(b"R", struct.pack("!i", 10) + cstr(SCRAM) + b"\x00")  # AuthenticationSASL
        kind, body = self._read_message(MAX_AUTH_MESSAGE)
        if kind != b"p":
            raise ProtocolError("expected a SASLInitialResponse message")
        r = Reader(body)
        try:
            mechanism = r.cstring()
            n = r.int32()
            first = r.take(n).decode("utf-8") if n >= 0 else ""
        except (ValueError, UnicodeDecodeError, struct.error) as exc:
            raise ProtocolError("malformed SASLInitialResponse") from exc
        if mechanism != SCRAM:
            raise _AuthFailed(f"client asked for SASL mechanism {mechanism!r}; only {SCRAM} is offered")
        # client-first-message: gs2-header ("n,," or "y,,": no channel binding) then the bare part.
        m = re.fullmatch(r"([ny]),(?:a=[^,]*)?,(n=[^,]*,r=([!-+\--~]+)(?:,.*)?)", first, re.S)
        if m is None:
            if first.startswith("p="):
                raise _AuthFailed("the client requires channel binding, which this server does not offer")
            raise ProtocolError("malformed SCRAM client-first-message")
        gs2_header = first[: first.index(",", 2) + 1]
        client_first_bare, client_nonce = m.group(2), m.group(3)
        salt, iterations = self.server.principals.scram_challenge(user, client=self.client)
        nonce = client_nonce + base64.b64encode(secrets.token_bytes(18)).decode("ascii")
        server_first = f"r={nonce},s={base64.b64encode(salt).decode('ascii')},i={iterations}"
        self.send(b"R", struct.pack("!i", 11) + server_first.encode("ascii"))  # AuthenticationSASLContinue
        kind, body = self._read_message(MAX_AUTH_MESSAGE)
        if kind != b"p":
            raise ProtocolError("expected a SASLResponse message")
        try:
            final = body.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ProtocolError("malformed SCRAM client-final-message") from exc
        fm = re.fullmatch(r"c=([A-Za-z0-9+/=]*),r=([^,]*)(?:,.*)?,p=([A-Za-z0-9+/=]+)", final, re.S)
        if fm is None:
            raise ProtocolError("malformed SCRAM client-final-message")
        try:
            binding, proof = base64.b64decode(fm.group(1), validate=True), base64.b64decode(fm.group(3), validate=True)
        except ValueError as exc:
            raise ProtocolError("malformed SCRAM client-final-message") from exc
        if binding != gs2_header.encode("utf-8") or fm.group(2) != nonce:
            raise _AuthFailed("SCRAM channel-binding header or nonce does not match")
        without_proof = final[: final.rindex(",p=")]
        auth_message = f"{client_first_bare},{server_first},{without_proof}".encode()
        principal, tid, verifier = self.server.principals.authenticate_scram(
            user, salt, auth_message, proof, client=self.client
        )
        signature = scram.server_signature(verifier, auth_message)
        final_message = b"v=" + base64.b64encode(signature)
        self.send(b"R", struct.pack("!i", 12) + final_message)  # AuthenticationSASLFinal
        return principal, tid

    def _read_message(self, max_length: int = MAX_MESSAGE) -> tuple[bytes, bytes]:
        self.flush()
        kind = self._recv(1)
        length = struct.unpack("!i", self._recv(4))[0]
        if not 4 <= length <= max_length:
            raise ProtocolError(f"invalid message length {length} (at most {max_length} bytes here)")
        return kind, self._recv(length - 4)

    def _check_signed_in(self) -> None:
        """Before each statement: the sign-in still holds, and the principal is read afresh
        (groups, admin flag), so changes made while the connection is open apply at once."""
        from shoal.governance import AuthError, GovernedSql
        from shoal.lake.database import utcnow

        if self.expires_at is not None and utcnow() >= self.expires_at:
            raise SessionEnded(
                f"the token it signed in with expired at {self.expires_at.isoformat(timespec='seconds')}Z;"
                " sign in again with a valid token"
            )
        try:  # first: it says why (token expired, revoked, principal removed)
            principal = self.server.principals.signed_in(self.principal.name, self.token_id)
        except AuthError as exc:
            raise SessionEnded(f"{exc}; sign in again") from None
        if self.server.sessions.get(self.session) is None:
            raise SessionEnded()
        if principal != self.principal:
            self.principal = principal
            self.governed = GovernedSql(self.server.spark, self.server.settings, principal)
            self.pg.set_principal(principal)

    def _serve(self) -> None:
        while True:
            kind, body = self._read_message()
            if kind == b"X":
                return
            self._check_engine()
            try:
                if kind == b"Q":
                    self._simple(body)
                    continue
                if kind == b"S":
                    self.skip_to_sync = False
                    if not self.in_txn:  # as PostgreSQL: the implicit transaction ends, and its portals
                        self._close_portals()
                    self._ready()
                    continue
                if kind == b"H":
                    self.flush()
                    continue
                if self.skip_to_sync:
                    continue
                handler = {
                    b"P": self._parse,
                    b"B": self._bind,
                    b"D": self._describe,
                    b"E": self._execute,
                    b"C": self._close,
                }
                if kind not in handler:
                    raise ProtocolError(f"unexpected message type {kind!r}")
                handler[kind](Reader(body))
            except PgError as exc:
                self._error(exc)
                if kind != b"Q":
                    self.skip_to_sync = True
            except (IndexError, ValueError, struct.error, UnicodeDecodeError) as exc:
                raise ProtocolError(f"malformed {kind!r} message") from exc

    # ---- simple query -------------------------------------------------------------------------
    def _simple(self, body: bytes) -> None:
        sql = body.rstrip(b"\x00").decode("utf-8")
        try:
            try:
                statements = self.pg.split(sql)
            except SqlError as exc:
                raise PgError(first_line(exc), "42601") from exc
            self._close_portal("")  # as PostgreSQL: a Query drops the unnamed portal
            if not statements:
                self.send(b"I")
            for statement in statements:  # one after another; the first error stops the rest
                if _is_copy(statement):
                    self._copy(statement)
                    continue
                result = self._run(statement)
                try:
                    if result.columns:
                        self._row_description(result, [])
                    self._data_rows(result, [])
                finally:
                    result.close()
                self._complete(result)
        except PgError as exc:
            self._error(exc)
        self._ready()

    # ---- extended query ----------------------------------------------------------------------
    def _parse(self, r: Reader) -> None:
        name, sql = r.cstring(), r.cstring()
        oids = [r.int32() for _ in range(r.int16())]
        try:
            parts = self.pg.split(sql)
        except SqlError as exc:
            raise PgError(first_line(exc), "42601") from exc
        if len(parts) > 1:
            raise PgError("cannot insert multiple commands into a prepared statement", "42601")
        if name and name in self.statements:
            raise PgError(f'prepared statement "{name}" already exists', "42P05")
        text = parts[0] if parts else ""
        declare = _DECLARE.match(text)  # the cursor's query takes the parameters
        self.statements[name] = Prepared(text, oids, self.pg.prepare(declare.group(3) if declare else text))
        self.send(b"1")

    def _bind(self, r: Reader) -> None:
        portal, name = r.cstring(), r.cstring()
        stmt = self.statements.get(name)
        if stmt is None:
            raise PgError(f'prepared statement "{name}" does not exist', "26000")
        formats = [r.int16() for _ in range(r.int16())]
        values: list[bytes | None] = []
        for _ in range(r.int16()):
            n = r.int32()
            values.append(None if n == -1 else r.take(n))
        result_formats = [r.int16() for _ in range(r.int16())]
        if len(formats) not in (0, 1, len(values)):
            raise ProtocolError("parameter format count does not match")
        params = []
        for i, raw in enumerate(values):
            fmt = formats[0] if len(formats) == 1 else (formats[i] if formats else 0)
            oid = stmt.param_oids[i] if i < len(stmt.param_oids) else 0
            params.append(literal(raw, oid, fmt))
        wanted = max([len(stmt.param_oids), *stmt.parsed.numbers])
        if len(params) != wanted:  # as PostgreSQL: a value no $n takes is an error, not ignored
            raise PgError(
                f'bind message supplies {len(params)} parameters, but prepared statement "{name}" requires {wanted}',
                "08P01",
            )
        # The values become literal nodes of the statement's tree: never text read again as SQL.
        bound = self.pg.bind(stmt.parsed, params) if stmt.parsed.tree is not None else None
        self._close_portal(portal)  # a new unnamed portal replaces the old: its stream ends
        self.portals[portal] = Portal(stmt, stmt.sql, result_formats, bound)
        self.send(b"2")

    def _describe(self, r: Reader) -> None:
        what, name = r.take(1), r.cstring()
        if what == b"S":
            stmt = self.statements.get(name)
            if stmt is None:
                raise PgError(f'prepared statement "{name}" does not exist', "26000")
            count = max([len(stmt.param_oids), *stmt.parsed.numbers])
            oids = [(stmt.param_oids[i] if i < len(stmt.param_oids) else 0) or TEXT for i in range(count)]
            self.send(b"t", struct.pack("!h", len(oids)) + b"".join(struct.pack("!i", o) for o in oids))
            # The columns are known only by running the statement: a query runs once with NULL
            # parameters (at most one row); anything else is described as returning no rows.
            if _is_query(stmt.sql) and not _session_tag(stmt.sql):
                bound = self.pg.bind(stmt.parsed, [exp.Null()] * count) if stmt.parsed.tree is not None else None
                result = self._run(stmt.sql, limit=1, bound=bound)
                if result.columns:
                    self._row_description(result, [])
                    return
            self.send(b"n")
            return
        if what != b"P":
            raise ProtocolError("Describe must name S or P")
        portal = self._portal(name)
        if _is_copy(portal.sql):  # as PostgreSQL: a COPY portal returns no rows (its data is CopyData)
            self.send(b"n")
            return
        result = self._result(portal)
        portal.described = True
        if result.columns:
            self._row_description(result, portal.result_formats)
        else:
            self.send(b"n")

    def _execute(self, r: Reader) -> None:
        name, max_rows = r.cstring(), r.int32()
        # Every fetch, also of rows a suspended portal already holds: a revoke or an expiry
        # ends delivery at once, not at the next statement.
        self._check_signed_in()
        portal = self._portal(name)
        if _is_copy(portal.sql):
            self._copy(portal.sql)
            return
        result = self._result(portal)
        if portal.statement.sql.strip() == "":
            self.send(b"I")
            return
        try:
            done = self._data_rows(result, portal.result_formats, max_rows)
        except PgError:
            self._close_portal(name)  # as PostgreSQL: a portal that failed cannot go on
            raise
        if not done:
            self.send(b"s")  # PortalSuspended: the client asks for more with another Execute
            return
        self._complete(result)

    def _close(self, r: Reader) -> None:
        what, name = r.take(1), r.cstring()
        if what == b"S":
            self.statements.pop(name, None)
        elif what == b"P":
            self._close_portal(name)
        else:
            raise ProtocolError("Close must name S or P")
        self.send(b"3")

    def _close_portal(self, name: str) -> None:
        portal = self.portals.pop(name, None)
        if portal is not None and portal.result is not None:
            portal.result.close()

    def _close_portals(self, *, keep_hold: bool = True) -> None:
        """At a transaction's end: portals and cursors go, but for cursors declared WITH HOLD."""
        for name in [n for n, p in self.portals.items() if not (keep_hold and p.hold)]:
            self._close_portal(name)

    def _portal(self, name: str, what: str = "portal") -> Portal:
        portal = self.portals.get(name)
        if portal is None:
            raise PgError(f'{what} "{name}" does not exist', "34000")
        return portal

    def _result(self, portal: Portal) -> Result:
        if portal.result is None:
            sql = portal.sql.strip()
            portal.result = Result([], [], [], "") if not sql else self._run(sql, bound=portal.bound)
        return portal.result

    def _copy(self, sql: str) -> None:
        """COPY (query) TO STDOUT: the governed query's rows as CopyData (text, csv or binary),
        between CopyOutResponse and CopyDone, as psql's \\copy and ADBC read them."""
        from shoal.bi.pgsql import copy_spec

        spec = copy_spec(sql)
        result = self._run(spec.query)  # governed like any query; a refusal comes before any data
        try:
            self._copy_rows(result, spec)
        finally:
            result.close()
        if result.notice:
            self._notice(result.notice)
        self.send(b"C", cstr(f"COPY {result.count}"))

    def _copy_rows(self, result: Result, spec: Any) -> None:
        binary = spec.format == "binary"
        n = len(result.columns)
        self.send(b"H", struct.pack("!bh", int(binary), n) + struct.pack(f"!{n}h", *[int(binary)] * n))
        # As PostgreSQL: one row per CopyData, the binary header with the first row and the
        # trailer alone (ADBC reads whole rows from each message).
        pending = COPY_BINARY_HEADER if binary else b""
        if spec.header and not binary:
            pending = copy_line(result.columns, [TEXT] * n, spec, header=True)
        with self._job_group(result.stream is not None):
            for row in result:
                self.send(b"d", pending + copy_line(row, result.oids, spec, result.columns))
                pending = b""
        if binary or pending:
            self.send(b"d", pending + (COPY_BINARY_TRAILER if binary else b""))
        self.send(b"c")

    # ---- running one statement ----------------------------------------------------------------
    def _run(self, sql: str, *, limit: int | None = None, bound: Parsed | None = None) -> Result:
        """Run one statement; `bound`: its tree with the parameters bound (then sql is only
        the statement's text, for its first word)."""
        self._check_signed_in()
        local = self._cursor(sql, bound) or self._local(sql, bound)
        if local is not None:
            return local
        # `limit` (Describe of a statement): collected at once. Otherwise the rows stream.
        with self._job_group(True):
            qr = self.governed.execute(self.pg.translate(sql, bound), limit=limit, stream=limit is None)
        word = sql.split(None, 1)[0].upper()
        if self.in_txn and word in _WRITES:
            self.wrote_in_txn = True
        if qr.columns:
            tag = "SELECT"
        elif word == "INSERT":
            tag = "INSERT 0 0"
        else:
            tag = " ".join(sql.split()[:2]).upper()
        oids, typmods = [pg_type(t) for t in qr.types], [pg_typmod(t) for t in qr.types]
        cap = self.server.settings.server.pg_max_rows
        return Result(
            list(qr.columns), oids, qr.rows, tag, typmods=typmods, stream=qr.stream, counted=bool(qr.columns), cap=cap
        )

    def _fetched(self, name: str, rows: Iterator[tuple[Any, ...]]) -> Iterator[tuple[Any, ...]]:
        try:
            yield from rows
        except Exception:
            self._close_portal(name)  # as PostgreSQL: a cursor that failed is gone (no silent 0 rows later)
            raise

    @contextmanager
    def _job_group(self, spark: bool) -> Iterator[None]:
        """Spark work for this connection (running a statement, reading its stream): in the
        connection's job group, so that a CancelRequest cancels it; its failures are the
        client's errors (PgError), but a broken socket is not."""
        if not spark:
            yield
            return
        from shoal.admission import Overloaded, admission, spark_pool

        group = f"shoal-pg-{self.pid}"
        sc = self.server.spark.sparkContext
        self.canceled = False
        name = self.principal.name
        try:
            with (
                self.server.running(self, group),
                admission(self.server.settings).enter(name, cancelled=lambda: self.canceled),
            ):
                sc.setJobGroup(group, f"PostgreSQL endpoint: {name}", interruptOnCancel=True)
                sc.setLocalProperty("spark.scheduler.pool", spark_pool(name))
                try:
                    yield
                finally:
                    sc.setLocalProperty("spark.jobGroup.id", None)
        except (PgError, OSError):
            raise
        except Overloaded as exc:  # PostgreSQL's own words for a full server and a timeout
            if self.canceled:
                raise PgError("canceling statement due to user request", "57014") from exc
            if exc.timed_out:
                raise PgError("canceling statement due to statement timeout", "57014", hint=exc.hint) from exc
            raise PgError("sorry, too many clients already", "53300", hint=f"{exc}; {exc.hint}") from exc
        except Exception as exc:  # every failure is the client's error, not the server's
            if self.canceled:
                raise PgError("canceling statement due to user request", "57014") from exc
            if isinstance(exc, ShoalError):
                raise PgError(first_line(exc), sqlstate(exc), hint=exc.hint) from exc
            log.exception("PostgreSQL endpoint: statement failed")
            raise PgError(first_line(exc), "XX000") from exc

    def _cursor(self, sql: str, bound: Parsed | None) -> Result | None:
        """DECLARE, FETCH and CLOSE: a cursor is a named portal whose stream FETCH reads on."""
        if m := _DECLARE.match(sql):
            name, hold = _ident(m.group(1)), (m.group(2) or "").lower() == "with"
            if not hold and not self.in_txn:
                raise PgError("DECLARE CURSOR can only be used in transaction blocks", "25P01")
            if name in self.portals:
                raise PgError(f'cursor "{name}" already exists', "42P03")
            result = self._run(m.group(3), bound=bound)
            from shoal.bi.pgsql import Parsed

            query = Prepared(m.group(3), [], Parsed(m.group(3), self.pg.dialect, []))
            self.portals[name] = Portal(query, m.group(3), [], result=result, described=True, hold=hold)
            return Result([], [], [], "DECLARE CURSOR")
        if m := _FETCH.match(sql):
            cursor = self._portal(_ident(m.group(2)), "cursor")
            assert cursor.result is not None
            wanted = (m.group(1) or "1").lower()  # FETCH name: the next row
            source = cursor.result
            # A view of the cursor's stream: closing it (the FETCH done) leaves the cursor open.
            view = source if wanted == "all" else itertools.islice(source, int(wanted))
            rows = self._fetched(_ident(m.group(2)), view)
            return Result(source.columns, source.oids, [], "FETCH", typmods=source.typmods, stream=rows, counted=True)
        if m := _CLOSE.match(sql):
            if m.group(1).lower() == "all":
                self._close_portals(keep_hold=False)
            else:
                self._portal(_ident(m.group(1)), "cursor")
                self._close_portal(_ident(m.group(1)))
            return Result([], [], [], "CLOSE CURSOR")
        return None

    def _local(self, sql: str, bound: Parsed | None = None) -> Result | None:
        """Session statements and probes answered without Spark; None for everything else."""
        answer = self.pg.answer(sql, bound) if self.pg is not None else None  # SET, SHOW, the catalog (pgsql)
        if answer is not None:
            return Result(*answer)
        if bound is not None and bound.tree is not None:
            return None  # a statement with parameters: never a session statement (prepare refuses them)
        tag = _session_tag(sql)
        if tag is not None:
            notice = None
            if tag in ("BEGIN", "START TRANSACTION"):
                self.in_txn, self.wrote_in_txn = True, False
            elif tag in ("COMMIT", "ROLLBACK"):
                if tag == "ROLLBACK" and self.wrote_in_txn:
                    notice = "Shoal has no transactions: the statements before ROLLBACK have taken effect"
                self.in_txn = self.wrote_in_txn = False
                self._close_portals()  # cursors WITHOUT HOLD end with their transaction
            if tag in ("DEALLOCATE", "DISCARD ALL"):
                words = sql.replace(";", " ").split()
                name = words[-1] if len(words) > 1 else "ALL"
                if tag == "DISCARD ALL" or name.upper() == "ALL":
                    self.statements.clear()
                    self._close_portals(keep_hold=False)
                else:
                    self.statements.pop(name.strip('"'), None)
            return Result([], [], [], tag, notice)
        body = sql.strip().rstrip(";").strip()
        if _VERSION.match(body):
            return Result(
                ["version"], [TEXT], [(f"PostgreSQL {SERVER_VERSION}, Spark SQL governed by Shoal",)], "SELECT 1"
            )
        if _CURRENT_DB.match(body):
            return Result(["current_database"], [TEXT], [("lake",)], "SELECT 1")
        m = _SHOW.match(body)
        if m:
            known = {k.lower(): v for k, v in {**_SETTINGS, **_SHOW_EXTRA}.items()}
            if m.group(1).lower() in known:
                return Result([m.group(1).lower()], [TEXT], [(known[m.group(1).lower()],)], "SHOW")
        return None

    # ---- messages --------------------------------------------------------------------------------
    def _row_description(self, result: Result, formats: list[int]) -> None:
        payload = bytearray(struct.pack("!h", len(result.columns)))
        for i, (name, oid) in enumerate(zip(result.columns, result.oids, strict=True)):
            fmt = format_for(formats, i)
            typmod = result.typmods[i] if result.typmods else -1
            payload += cstr(name) + struct.pack("!ihihih", 0, 0, oid, TYPE_SIZE.get(oid, -1), typmod, fmt)
        self.send(b"T", bytes(payload))

    def _data_rows(self, result: Result, formats: list[int], max_rows: int = 0) -> bool:
        """Send the next rows (all, or at most max_rows > 0) as they are read; True when the
        result is done (no row follows), False when the portal is to be suspended."""
        fmts = [format_for(formats, i) for i in range(len(result.columns))]
        sent = 0
        with self._job_group(result.stream is not None):
            for row in result:
                payload = bytearray(struct.pack("!h", len(row)))
                for value, oid, fmt in zip(row, result.oids, fmts, strict=True):
                    if value is None:
                        payload += b"\xff\xff\xff\xff"
                        continue
                    data = binary_value(value, oid) if fmt == 1 else text_value(value, oid)
                    payload += struct.pack("!i", len(data)) + data
                self.send(b"D", bytes(payload))
                sent += 1
                if sent == max_rows:
                    return not result.more()  # read ahead: the last page ends with its tag, not a suspension
        return True

    def _complete(self, result: Result) -> None:
        if result.notice:
            self._notice(result.notice)
        self.send(b"C", cstr(result.final_tag()))

    def _ready(self) -> None:
        self.send(b"Z", b"T" if self.in_txn else b"I")
        self.flush()

    def _error(self, exc: PgError) -> None:
        self.send(b"E", error_fields(exc.severity, exc.code, str(exc), exc.hint))

    def _notice(self, message: str) -> None:
        self.send(b"N", error_fields("WARNING", "01000", message))

    def _fatal(self, message: str, code: str, hint: str | None = None) -> None:
        self.send(b"E", error_fields("FATAL", code, message, hint))
        self.flush()

    def _check_engine(self) -> None:
        """Before sign-in and each message: a dead JVM fails every statement, so say it plainly."""
        from shoal.spark import jvm_down

        reason = jvm_down(self.server.spark)
        if reason is not None:
            raise EngineDown(f"{reason}; the server is restarting: connect again in a moment")


class EngineDown(Exception):
    """The Spark JVM behind the endpoint has died: the connection ends with 57P03."""


def _ident(name: str) -> str:
    """A cursor's name as PostgreSQL keeps it: quoted as written, unquoted folded to lower case."""
    return name[1:-1].replace('""', '"') if name.startswith('"') else name.lower()


def _session_tag(sql: str) -> str | None:
    words = sql.split(None, 1)
    return _SESSION.get(words[0].upper().rstrip(";")) if words else None


def _is_copy(sql: str) -> bool:
    return re.match(r"(?i)\s*copy\b", sql) is not None


def _is_query(sql: str) -> bool:
    word = (sql.lstrip("( \t\r\n").split(None, 1) or [""])[0].upper()
    return word in ("SELECT", "WITH", "VALUES", "TABLE", "SHOW", "DESCRIBE", "DESC", "FROM")


class _quiet:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> bool:
        return exc[0] is not None and issubclass(exc[0], OSError)  # type: ignore[arg-type]
