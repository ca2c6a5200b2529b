"""The governed SQL endpoint for BI tools: the PostgreSQL wire protocol (v3) over Shoal's grants.

Clients (psql, psycopg, JDBC/ODBC drivers for PostgreSQL, BI tools) sign in as a Shoal
principal: the password message carries the user's password or one of their API tokens
(`shoal_<id>_<secret>`). It is sent in cleartext (AuthenticationCleartextPassword), so the
endpoint binds to loopback by default; put a TLS-terminating proxy in front of it for other
hosts. SSL and GSS encryption requests are answered "no".

Every statement runs through `GovernedSql` (refused, rewritten, audited exactly as in
`shoal sql --as` and the HTTP API), as the signed-in principal, on the process's one
SparkSession. Only session chatter is answered without Spark: SET, RESET, BEGIN, COMMIT,
ROLLBACK, DISCARD, DEALLOCATE, `SHOW <setting>`, `SELECT version()` and
`SELECT current_database()`. There are no transactions: each statement takes effect when it runs.

Supported: the simple query protocol; the extended protocol (Parse, Bind, Describe, Execute,
Close, Sync, Flush) with parameters in text or binary format, substituted into the statement
as typed SQL literals (rendered by sqlglot, never pasted as text); results in text format, or
binary for fixed-size types; CancelRequest (cancels the connection's Spark jobs). Statements
are PostgreSQL, translated to Spark SQL before governance (or Spark SQL with the startup option
`-c shoal.dialect=spark`); SET/SHOW and catalog queries (pg_catalog, information_schema, governed)
are answered by `shoal.bi.pgsql` (see docs/bi.md, "Catalog and SQL for BI tools").

One thread per connection (socketserver.ThreadingTCPServer); `[server] pg_max_connections`,
`pg_max_rows` (per statement) and `pg_idle_timeout_s` bound what clients can hold. A client's
protocol error closes its own connection only. Sign-ins, successful or not, are audited
(`pg.login`); GovernedSql audits the statements.
"""

from __future__ import annotations

import datetime as dt
import decimal
import hmac
import json
import logging
import math
import re
import secrets
import socket
import socketserver
import struct
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sqlglot import exp

from shoal.config import Settings
from shoal.exceptions import ShoalError, SqlError, first_line
from shoal.governance.sessions import Sessions

log = logging.getLogger("shoal.pgwire")

PROTOCOL_3 = 196608
SSL_REQUEST = 80877103
GSSENC_REQUEST = 80877104
CANCEL_REQUEST = 80877102
MAX_STARTUP = 10_000
MAX_MESSAGE = 64 * 1024 * 1024
STARTUP_TIMEOUT_S = 30.0
SERVER_VERSION = "15.0 (Shoal)"
_FLUSH_AT = 256 * 1024

# Type OIDs.
BOOL, BYTEA, INT8, INT2, INT4, TEXT, FLOAT4, FLOAT8 = 16, 17, 20, 21, 23, 25, 700, 701
VARCHAR, BPCHAR, NAME, UNKNOWN, JSON, JSONB = 1043, 1042, 19, 705, 114, 3802
DATE, TIMESTAMP, TIMESTAMPTZ, NUMERIC, UUID, OID = 1082, 1114, 1184, 1700, 2950, 26
_TYPE_SIZE = {BOOL: 1, INT2: 2, INT4: 4, INT8: 8, FLOAT4: 4, FLOAT8: 8, DATE: 4, TIMESTAMP: 8, TIMESTAMPTZ: 8}
_PG_EPOCH = dt.datetime(2000, 1, 1)
_PG_EPOCH_DATE = dt.date(2000, 1, 1)

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
_WRITES = ("INSERT", "DROP", "ALTER", "CREATE", "MERGE", "DELETE", "UPDATE", "TRUNCATE")


class ProtocolError(Exception):
    """The client broke the protocol: its connection is closed."""


class SessionEnded(Exception):
    """The connection's sign-in no longer holds (token revoked, password changed, principal removed)."""


class PgError(Exception):
    """An error reported to the client as an ErrorResponse."""

    def __init__(self, message: str, code: str = "XX000", *, severity: str = "ERROR", hint: str | None = None):
        super().__init__(message)
        self.code, self.severity, self.hint = code, severity, hint


def sqlstate(exc: BaseException) -> str:
    """The SQLSTATE for an error from GovernedSql or Spark."""
    from shoal.governance import AccessDenied, AuthError

    text = str(exc)
    if isinstance(exc, AccessDenied):
        if text.startswith(("cannot parse the statement", "the statement cannot be checked")):
            return "42601"
        return "42501"
    if isinstance(exc, AuthError):
        return "28P01"
    if isinstance(exc, SqlError):
        if re.search(r"PARSE_SYNTAX_ERROR|Syntax error|cannot read SQL", text, re.I):
            return "42601"
        if "TABLE_OR_VIEW_NOT_FOUND" in text:
            return "42P01"
    return "XX000"


# ---- values and literals ------------------------------------------------------------------------
def pg_type(spark_type: str) -> int:
    """The type OID a Spark type (its simpleString) is reported as."""
    t = spark_type.lower()
    if t.startswith("decimal"):
        return NUMERIC
    return {
        "boolean": BOOL,
        "tinyint": INT2,
        "smallint": INT2,
        "int": INT4,
        "bigint": INT8,
        "float": FLOAT4,
        "double": FLOAT8,
        "date": DATE,
        "timestamp": TIMESTAMPTZ,
        "timestamp_ntz": TIMESTAMP,
        "binary": BYTEA,
    }.get(t, TEXT)


def _float_text(v: float, oid: int) -> str:
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "Infinity" if v > 0 else "-Infinity"
    if oid == FLOAT4:  # the shortest text that reads back as the same 32-bit float
        f32 = struct.unpack("!f", struct.pack("!f", v))[0]
        for digits in range(1, 10):
            s = f"{v:.{digits}g}"
            if struct.unpack("!f", struct.pack("!f", float(s)))[0] == f32:
                return s
    return repr(v)


def text_value(value: Any, oid: int) -> bytes:
    """One non-NULL value in PostgreSQL's text format."""
    from shoal.sql import to_json_value

    if isinstance(value, bool):
        s = "t" if value else "f"
    elif isinstance(value, float):
        s = _float_text(value, oid)
    elif isinstance(value, decimal.Decimal):
        s = format(value, "f")
    elif isinstance(value, dt.datetime):
        if oid == TIMESTAMPTZ:
            if value.tzinfo is not None:
                value = value.astimezone(dt.UTC).replace(tzinfo=None)
            s = value.isoformat(sep=" ") + "+00"  # the session time zone is UTC
        else:
            s = value.replace(tzinfo=None).isoformat(sep=" ")
    elif isinstance(value, dt.date):
        s = value.isoformat()
    elif isinstance(value, bytes | bytearray):
        s = "\\x" + bytes(value).hex()
    elif isinstance(value, str):
        s = value
    elif isinstance(value, int):
        s = str(value)
    else:  # arrays, maps, structs: JSON text
        s = json.dumps(to_json_value(value), ensure_ascii=False, default=str)
    return s.encode("utf-8")


def binary_value(value: Any, oid: int) -> bytes:
    """One non-NULL value in PostgreSQL's binary format (fixed-size types, text and bytea)."""
    if oid == BOOL:
        return b"\x01" if value else b"\x00"
    if oid in (INT2, INT4, INT8):
        return struct.pack({INT2: "!h", INT4: "!i", INT8: "!q"}[oid], int(value))
    if oid in (FLOAT4, FLOAT8):
        return struct.pack("!f" if oid == FLOAT4 else "!d", float(value))
    if oid == DATE:
        return struct.pack("!i", (value - _PG_EPOCH_DATE).days)
    if oid in (TIMESTAMP, TIMESTAMPTZ):
        if value.tzinfo is not None:
            value = value.astimezone(dt.UTC).replace(tzinfo=None)
        delta = value - _PG_EPOCH
        return struct.pack("!q", (delta.days * 86400 + delta.seconds) * 1_000_000 + delta.microseconds)
    if oid == BYTEA:
        return bytes(value)
    if oid == TEXT:
        return text_value(value, oid)
    raise PgError(f"binary results are not supported for type {oid}; ask for text", "0A000")


def _numeric_from_binary(data: bytes) -> decimal.Decimal:
    ndigits, weight, sign, dscale = struct.unpack("!hhHH", data[:8])
    if sign == 0xC000:
        return decimal.Decimal("NaN")
    digits = struct.unpack(f"!{ndigits}H", data[8 : 8 + 2 * ndigits])
    value = decimal.Decimal(0)
    for i, d in enumerate(digits):
        value += decimal.Decimal(d).scaleb(4 * (weight - i))
    value = value.quantize(decimal.Decimal(1).scaleb(-dscale)) if dscale else value
    return -value if sign == 0x4000 else value


def literal(raw: bytes | None, oid: int, fmt: int) -> exp.Expression:
    """A bound parameter as a typed SQL expression (never text pasted into the statement)."""
    if raw is None:
        return exp.Null()
    try:
        if fmt == 1:
            return _binary_literal(raw, oid)
        text = raw.decode("utf-8")
        if "\x00" in text:
            raise PgError("a parameter contains a NUL character", "22021")
        if oid in (INT2, INT4, INT8, OID):
            return exp.Literal.number(int(text.strip()))
        if oid in (FLOAT4, FLOAT8, NUMERIC):
            number = decimal.Decimal(text.strip())
            if not number.is_finite():
                word = "NaN" if number.is_nan() else ("Infinity" if number > 0 else "-Infinity")
                return exp.cast(exp.Literal.string(word), "DOUBLE")
            if oid == NUMERIC:
                return exp.Literal.number(format(number, "f"))
            return exp.cast(exp.Literal.number(format(number, "f")), "FLOAT" if oid == FLOAT4 else "DOUBLE")
        if oid == BOOL:
            t = text.strip().lower()
            if t in ("t", "true", "1", "yes", "on", "y"):
                return exp.true()
            if t in ("f", "false", "0", "no", "off", "n"):
                return exp.false()
            raise ValueError(text)
        if oid == DATE:
            return exp.cast(exp.Literal.string(dt.date.fromisoformat(text.strip()).isoformat()), "DATE")
        if oid in (TIMESTAMP, TIMESTAMPTZ):
            ts = dt.datetime.fromisoformat(text.strip())
            if ts.tzinfo is not None:
                ts = ts.astimezone(dt.UTC).replace(tzinfo=None)
            return exp.cast(
                exp.Literal.string(ts.isoformat(sep=" ")), "TIMESTAMP" if oid == TIMESTAMPTZ else "TIMESTAMP_NTZ"
            )
        if oid == BYTEA:
            data = bytes.fromhex(text[2:]) if text.startswith("\\x") else text.encode("utf-8")
            return _bytes_literal(data)
        return exp.Literal.string(text)  # text, varchar, unknown (0) and the rest
    except PgError:
        raise
    except (ValueError, ArithmeticError, UnicodeDecodeError, struct.error) as exc:
        raise PgError(f"invalid parameter value for type {oid}: {first_line(exc)}", "22P02") from exc


def _binary_literal(raw: bytes, oid: int) -> exp.Expression:
    if oid == BOOL:
        return exp.true() if raw != b"\x00" else exp.false()
    if oid in (INT2, INT4, INT8, OID):
        fmt = {INT2: "!h", INT4: "!i", INT8: "!q", OID: "!I"}[oid]
        return exp.Literal.number(struct.unpack(fmt, raw)[0])
    if oid in (FLOAT4, FLOAT8):
        v = struct.unpack("!f" if oid == FLOAT4 else "!d", raw)[0]
        if math.isnan(v) or math.isinf(v):
            return exp.cast(exp.Literal.string(_float_text(v, oid)), "DOUBLE")
        return exp.cast(exp.Literal.number(repr(v)), "FLOAT" if oid == FLOAT4 else "DOUBLE")
    if oid == NUMERIC:
        number = _numeric_from_binary(raw)
        if number.is_nan():
            return exp.cast(exp.Literal.string("NaN"), "DOUBLE")
        return exp.Literal.number(format(number, "f"))
    if oid == DATE:
        days = struct.unpack("!i", raw)[0]
        return exp.cast(exp.Literal.string((_PG_EPOCH_DATE + dt.timedelta(days=days)).isoformat()), "DATE")
    if oid in (TIMESTAMP, TIMESTAMPTZ):
        us = struct.unpack("!q", raw)[0]
        ts = _PG_EPOCH + dt.timedelta(microseconds=us)
        return exp.cast(
            exp.Literal.string(ts.isoformat(sep=" ")), "TIMESTAMP" if oid == TIMESTAMPTZ else "TIMESTAMP_NTZ"
        )
    if oid == BYTEA:
        return _bytes_literal(raw)
    if oid == UUID and len(raw) == 16:
        return exp.Literal.string(str(uuid.UUID(bytes=raw)))
    if oid in (TEXT, VARCHAR, BPCHAR, NAME, UNKNOWN, JSON, 0):
        text = raw.decode("utf-8")
        if "\x00" in text:
            raise PgError("a parameter contains a NUL character", "22021")
        return exp.Literal.string(text)
    raise PgError(f"binary parameters of type {oid} are not supported; send text", "0A000")


def _bytes_literal(data: bytes) -> exp.Expression:
    return exp.HexString(this=data.hex()) if data else exp.cast(exp.Literal.string(""), "BINARY")


def substitute(sql: str, params: list[exp.Expression], dialect: str = "spark") -> str:
    """Replace $1..$n outside strings, quoted identifiers and comments with the rendered literals."""

    def render(k: int) -> str:
        if not 1 <= k <= len(params):
            raise PgError(f"there is no parameter ${k}", "42P02")
        return " " + params[k - 1].sql(dialect=dialect) + " "

    return _scan(sql, render)


def placeholders(sql: str) -> list[int]:
    """The parameter numbers ($1 -> 1) a statement uses, in order of appearance."""
    found: list[int] = []

    def note(k: int) -> str:
        found.append(k)
        return ""

    _scan(sql, note)
    return found


def _scan(sql: str, render: Callable[[int], str]) -> str:
    out: list[str] = []
    i, n = 0, len(sql)
    while i < n:
        ch = sql[i]
        if ch in "'\"`":
            j = i + 1
            while j < n and sql[j] != ch:
                j += 2 if sql[j] == "\\" and ch != "`" else 1
            out.append(sql[i : j + 1])
            i = j + 1
        elif sql.startswith("--", i):
            j = sql.find("\n", i)
            j = n if j < 0 else j
            out.append(sql[i:j])
            i = j
        elif sql.startswith("/*", i):
            j = sql.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(sql[i:j])
            i = j
        elif (
            ch == "$" and i + 1 < n and sql[i + 1].isdigit() and not (i and (sql[i - 1].isalnum() or sql[i - 1] == "_"))
        ):
            j = i + 1
            while j < n and sql[j].isdigit():
                j += 1
            out.append(render(int(sql[i + 1 : j])))
            i = j
        else:
            out.append(ch)
            i += 1
    return "".join(out)


# ---- per-connection state -------------------------------------------------------------------------
@dataclass
class Result:
    columns: list[str]
    oids: list[int]
    rows: list[tuple[Any, ...]]
    tag: str
    notice: str | None = None


@dataclass
class Prepared:
    sql: str
    param_oids: list[int]


@dataclass
class Portal:
    statement: Prepared
    sql: str
    result_formats: list[int]
    result: Result | None = None
    sent: int = 0
    described: bool = False
    extra: dict[str, Any] = field(default_factory=dict)


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def int16(self) -> int:
        v = struct.unpack_from("!h", self.data, self.pos)[0]
        self.pos += 2
        return v

    def int32(self) -> int:
        v = struct.unpack_from("!i", self.data, self.pos)[0]
        self.pos += 4
        return v

    def cstring(self) -> str:
        end = self.data.index(b"\x00", self.pos)
        s = self.data[self.pos : end].decode("utf-8")
        self.pos = end + 1
        return s

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise ProtocolError("message shorter than it says")
        v = self.data[self.pos : self.pos + n]
        self.pos += n
        return v


class Connection(socketserver.BaseRequestHandler):
    server: PgServer

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
        self.statements: dict[str, Prepared] = {}
        self.portals: dict[str, Portal] = {}
        self.skip_to_sync = False
        self.canceled = False
        self.pg: Any = None  # shoal.bi.pgsql.PgSession: settings, catalog, dialect

    # ---- socket ------------------------------------------------------------------------------
    def _recv(self, n: int) -> bytes:
        chunks, left = [], n
        while left:
            chunk = self.sock.recv(min(left, 1 << 20))
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
        registered = False
        try:
            self.sock.settimeout(min(STARTUP_TIMEOUT_S, self.server.settings.server.pg_idle_timeout_s))
            params = self._startup()
            if params is None:
                return
            if not self.server.acquire(self):
                self._fatal("sorry, too many clients already", "53300")
                return
            registered = True
            if not self._authenticate(params):
                return
            # The sign-in is a session like the console's, so revoking the token, changing the
            # password or removing the principal ends it (checked before every statement).
            self.sock.settimeout(self.server.settings.server.pg_idle_timeout_s)
            self._serve()
        except TimeoutError:
            with _quiet():
                self._fatal("terminating connection due to idle timeout", "57P05")
        except SessionEnded:
            with _quiet():
                self._fatal(
                    "terminating connection: the credentials it signed in with were revoked or changed", "57P01"
                )
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
            if registered:
                self.server.release(self)
            if self.session is not None:
                with _quiet():
                    self.server.sessions.end(self.session)

    def _startup(self) -> dict[str, str] | None:
        while True:
            length = struct.unpack("!i", self._recv(4))[0]
            if not 8 <= length <= MAX_STARTUP:
                raise ProtocolError("invalid startup packet length")
            body = self._recv(length - 4)
            code = struct.unpack("!i", body[:4])[0]
            if code in (SSL_REQUEST, GSSENC_REQUEST):
                self.sock.sendall(b"N")  # no encryption here: use a TLS-terminating proxy
                continue
            if code == CANCEL_REQUEST and len(body) == 12:
                pid, secret = struct.unpack("!ii", body[4:12])
                self.server.cancel(pid, secret)
                return None
            if code >> 16 != 3:
                self._fatal(f"unsupported frontend protocol {code >> 16}.{code & 0xFFFF}", "0A000")
                return None
            r = _Reader(body)
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
                names = b"".join(_cstr(k) for k in unknown)
                self.send(b"v", struct.pack("!ii", 0, len(unknown)) + names)  # NegotiateProtocolVersion
            return params

    def _authenticate(self, params: dict[str, str]) -> bool:
        from shoal.bi.pgsql import PgSession
        from shoal.governance import AuditLog, AuthError, GovernanceError, GovernedSql, Principals
        from shoal.governance.principals import token_id

        user = params.get("user", "")
        self.send(b"R", struct.pack("!i", 3))  # AuthenticationCleartextPassword
        self.flush()
        kind, body = self._read_message()
        if kind != b"p":
            raise ProtocolError("expected a password message")
        password = body.rstrip(b"\x00").decode("utf-8", "replace")
        via = "token" if password.startswith("shoal_") else "password"
        audit = AuditLog(self.server.settings)
        try:
            principals = Principals(self.server.settings)
            if via == "token":
                principal = principals.authenticate(password, client=self.client)
                if principal.name != user:
                    raise AuthError("the token belongs to another user")
            else:
                principal = principals.check_password(user, password, client=self.client)
        except (AuthError, GovernanceError) as exc:
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
        audit.record(
            principal.name,
            "pg.login",
            None,
            True,
            client=self.client,
            via=via,
            application=params.get("application_name"),
        )
        self.principal = principal
        self.governed = GovernedSql(self.server.spark, self.server.settings, principal)
        self.pg = PgSession.connect(
            self.server.spark, self.server.settings, principal, self.pid, SERVER_VERSION, params
        )
        self.session, _ = self.server.sessions.create(
            principal.name, token_id=token_id(password) if via == "token" else None
        )
        self.send(b"R", struct.pack("!i", 0))
        status = {
            **_SETTINGS,
            "application_name": params.get("application_name", ""),
            "session_authorization": principal.name,
            "is_superuser": "on" if principal.is_admin else "off",
            **self.pg.parameter_status(),
        }
        for key, value in status.items():
            self.send(b"S", _cstr(key) + _cstr(value))
        self.send(b"K", struct.pack("!ii", self.pid, self.secret))
        self._ready()
        return True

    def _read_message(self) -> tuple[bytes, bytes]:
        self.flush()
        kind = self._recv(1)
        length = struct.unpack("!i", self._recv(4))[0]
        if not 4 <= length <= MAX_MESSAGE:
            raise ProtocolError("invalid message length")
        return kind, self._recv(length - 4)

    def _serve(self) -> None:
        while True:
            kind, body = self._read_message()
            if kind == b"X":
                return
            try:
                if kind == b"Q":
                    self._simple(body)
                    continue
                if kind == b"S":
                    self.skip_to_sync = False
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
                handler[kind](_Reader(body))
            except PgError as exc:
                self._error(exc)
                if kind != b"Q":
                    self.skip_to_sync = True
            except (IndexError, ValueError, struct.error, UnicodeDecodeError) as exc:
                raise ProtocolError(f"malformed {kind!r} message") from exc

    # ---- simple query -------------------------------------------------------------------------
    def _simple(self, body: bytes) -> None:
        from shoal.sql import split_statements

        sql = body.rstrip(b"\x00").decode("utf-8")
        try:
            try:
                statements = split_statements(sql)
            except SqlError as exc:
                raise PgError(first_line(exc), "42601") from exc
            if not statements:
                self.send(b"I")
            for statement in statements:  # one after another; the first error stops the rest
                result = self._run(statement)
                if result.columns:
                    self._row_description(result, [])
                self._data_rows(result, [], 0)
                self._complete(result)
        except PgError as exc:
            self._error(exc)
        self._ready()

    # ---- extended query ----------------------------------------------------------------------
    def _parse(self, r: _Reader) -> None:
        from shoal.sql import split_statements

        name, sql = r.cstring(), r.cstring()
        oids = [r.int32() for _ in range(r.int16())]
        try:
            parts = split_statements(sql)
        except SqlError as exc:
            raise PgError(first_line(exc), "42601") from exc
        if len(parts) > 1:
            raise PgError("cannot insert multiple commands into a prepared statement", "42601")
        if name and name in self.statements:
            raise PgError(f'prepared statement "{name}" already exists', "42P05")
        self.statements[name] = Prepared(parts[0] if parts else "", oids)
        self.send(b"1")

    def _bind(self, r: _Reader) -> None:
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
        sql = substitute(stmt.sql, params, self.pg.literal_dialect) if params else stmt.sql
        if not params and placeholders(stmt.sql):
            raise PgError("the statement has parameters but none were bound", "08P01")
        self.portals[portal] = Portal(stmt, sql, result_formats)
        self.send(b"2")

    def _describe(self, r: _Reader) -> None:
        what, name = r.take(1), r.cstring()
        if what == b"S":
            stmt = self.statements.get(name)
            if stmt is None:
                raise PgError(f'prepared statement "{name}" does not exist', "26000")
            count = max([len(stmt.param_oids), *placeholders(stmt.sql)])
            oids = [(stmt.param_oids[i] if i < len(stmt.param_oids) else 0) or TEXT for i in range(count)]
            self.send(b"t", struct.pack("!h", len(oids)) + b"".join(struct.pack("!i", o) for o in oids))
            # The columns are known only by running the statement: a query runs once with NULL
            # parameters (at most one row); anything else is described as returning no rows.
            if _is_query(stmt.sql) and not _session_tag(stmt.sql):
                result = self._run(substitute(stmt.sql, [exp.Null()] * count) if count else stmt.sql, limit=1)
                if result.columns:
                    self._row_description(result, [])
                    return
            self.send(b"n")
            return
        if what != b"P":
            raise ProtocolError("Describe must name S or P")
        portal = self._portal(name)
        result = self._result(portal)
        portal.described = True
        if result.columns:
            self._row_description(result, portal.result_formats)
        else:
            self.send(b"n")

    def _execute(self, r: _Reader) -> None:
        name, max_rows = r.cstring(), r.int32()
        portal = self._portal(name)
        result = self._result(portal)
        if portal.statement.sql.strip() == "":
            self.send(b"I")
            return
        portal.sent = self._data_rows(result, portal.result_formats, portal.sent, max_rows)
        if portal.sent < len(result.rows):
            self.send(b"s")  # PortalSuspended: the client asks for more with another Execute
            return
        self._complete(result)

    def _close(self, r: _Reader) -> None:
        what, name = r.take(1), r.cstring()
        if what == b"S":
            self.statements.pop(name, None)
        elif what == b"P":
            self.portals.pop(name, None)
        else:
            raise ProtocolError("Close must name S or P")
        self.send(b"3")

    def _portal(self, name: str) -> Portal:
        portal = self.portals.get(name)
        if portal is None:
            raise PgError(f'portal "{name}" does not exist', "34000")
        return portal

    def _result(self, portal: Portal) -> Result:
        if portal.result is None:
            sql = portal.sql.strip()
            portal.result = Result([], [], [], "") if not sql else self._run(sql)
        return portal.result

    # ---- running one statement ----------------------------------------------------------------
    def _run(self, sql: str, *, limit: int | None = None) -> Result:
        local = self._local(sql)
        if local is not None:
            return local
        if self.server.sessions.get(self.session) is None:
            raise SessionEnded()
        max_rows = self.server.settings.server.pg_max_rows
        limit = min(limit or max_rows, max_rows)
        group = f"shoal-pg-{self.pid}"
        sc = self.server.spark.sparkContext
        self.canceled = False
        try:
            with self.server.running(self, group):
                sc.setJobGroup(group, f"PostgreSQL endpoint: {self.principal.name}", interruptOnCancel=True)
                try:
                    qr = self.governed.execute(self.pg.translate(sql), limit=limit + 1)
                finally:
                    sc.setLocalProperty("spark.jobGroup.id", None)
        except Exception as exc:  # noqa: BLE001 - every failure is the client's error, not the server's
            if self.canceled:
                raise PgError("canceling statement due to user request", "57014") from exc
            if isinstance(exc, ShoalError):
                raise PgError(first_line(exc), sqlstate(exc), hint=exc.hint) from exc
            log.exception("PostgreSQL endpoint: statement failed")
            raise PgError(first_line(exc), "XX000") from exc
        rows, notice = qr.rows, None
        if len(rows) > limit:
            rows = rows[:limit]
            if limit == max_rows:
                notice = f"the result was cut at {max_rows} rows ([server] pg_max_rows)"
        word = sql.split(None, 1)[0].upper()
        if self.in_txn and word in _WRITES:
            self.wrote_in_txn = True
        if qr.columns:
            tag = f"SELECT {len(rows)}"
        elif word == "INSERT":
            tag = "INSERT 0 0"
        else:
            tag = " ".join(sql.split()[:2]).upper()
        return Result(list(qr.columns), [pg_type(t) for t in qr.types], rows, tag, notice)

    def _local(self, sql: str) -> Result | None:
        """Session statements and probes answered without Spark; None for everything else."""
        answer = self.pg.answer(sql) if self.pg is not None else None  # SET, SHOW, the catalog (pgsql)
        if answer is not None:
            return Result(*answer)
        tag = _session_tag(sql)
        if tag is not None:
            notice = None
            if tag in ("BEGIN", "START TRANSACTION"):
                self.in_txn, self.wrote_in_txn = True, False
            elif tag in ("COMMIT", "ROLLBACK"):
                if tag == "ROLLBACK" and self.wrote_in_txn:
                    notice = "Shoal has no transactions: the statements before ROLLBACK have taken effect"
                self.in_txn = self.wrote_in_txn = False
            if tag in ("DEALLOCATE", "DISCARD ALL"):
                words = sql.replace(";", " ").split()
                name = words[-1] if len(words) > 1 else "ALL"
                if tag == "DISCARD ALL" or name.upper() == "ALL":
                    self.statements.clear()
                    self.portals.clear()
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
            fmt = _format_for(formats, i)
            payload += _cstr(name) + struct.pack("!ihihih", 0, 0, oid, _TYPE_SIZE.get(oid, -1), -1, fmt)
        self.send(b"T", bytes(payload))

    def _data_rows(self, result: Result, formats: list[int], start: int, max_rows: int = 0) -> int:
        end = len(result.rows) if max_rows <= 0 else min(len(result.rows), start + max_rows)
        fmts = [_format_for(formats, i) for i in range(len(result.columns))]
        for row in result.rows[start:end]:
            payload = bytearray(struct.pack("!h", len(row)))
            for value, oid, fmt in zip(row, result.oids, fmts, strict=True):
                if value is None:
                    payload += b"\xff\xff\xff\xff"
                    continue
                data = binary_value(value, oid) if fmt == 1 else text_value(value, oid)
                payload += struct.pack("!i", len(data)) + data
            self.send(b"D", bytes(payload))
        return end

    def _complete(self, result: Result) -> None:
        if result.notice:
            self._notice(result.notice)
        self.send(b"C", _cstr(result.tag))

    def _ready(self) -> None:
        self.send(b"Z", b"T" if self.in_txn else b"I")
        self.flush()

    def _fields(self, severity: str, code: str, message: str, hint: str | None = None) -> bytes:
        out = b"S" + _cstr(severity) + b"V" + _cstr(severity) + b"C" + _cstr(code) + b"M" + _cstr(message)
        if hint:
            out += b"H" + _cstr(hint)
        return out + b"\x00"

    def _error(self, exc: PgError) -> None:
        self.send(b"E", self._fields(exc.severity, exc.code, str(exc), exc.hint))

    def _notice(self, message: str) -> None:
        self.send(b"N", self._fields("WARNING", "01000", message))

    def _fatal(self, message: str, code: str) -> None:
        self.send(b"E", self._fields("FATAL", code, message))
        self.flush()


def _cstr(s: str) -> bytes:
    return s.replace("\x00", "").encode("utf-8") + b"\x00"


def _format_for(formats: list[int], i: int) -> int:
    if not formats:
        return 0
    return formats[0] if len(formats) == 1 else formats[i]


def _session_tag(sql: str) -> str | None:
    words = sql.split(None, 1)
    return _SESSION.get(words[0].upper().rstrip(";")) if words else None


def _is_query(sql: str) -> bool:
    word = (sql.lstrip("( \t\r\n").split(None, 1) or [""])[0].upper()
    return word in ("SELECT", "WITH", "VALUES", "TABLE", "SHOW", "DESCRIBE", "DESC", "FROM")


class _quiet:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> bool:
        return exc[0] is not None and issubclass(exc[0], OSError)  # type: ignore[arg-type]


class PgServer(socketserver.ThreadingTCPServer):
    """The endpoint: `serve_forever()` (or `start()` for a background thread), `stop()`."""

    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 64

    def __init__(self, settings: Settings, *, spark=None, host: str | None = None, port: int | None = None) -> None:
        from shoal.spark import get_spark

        self.settings = settings
        self.spark = spark if spark is not None else get_spark(settings)
        # A sign-in is a governance session, like the console's (checked before each statement).
        self.sessions = Sessions(settings)
        self._lock = threading.Lock()
        self._sessions: dict[int, Connection] = {}
        self._running: dict[int, str] = {}
        self._thread: threading.Thread | None = None
        try:
            super().__init__(
                (host or settings.server.pg_host, settings.server.pg_port if port is None else port), Connection
            )
        except OSError as exc:
            raise ShoalError(
                f"cannot listen on {host or settings.server.pg_host}:{port or settings.server.pg_port}: {exc.strerror}",
                hint="pass --pg-port or set [server] pg_port",
            ) from exc

    @property
    def address(self) -> tuple[str, int]:
        host, port = self.server_address[:2]
        return str(host), int(port)

    def start(self) -> PgServer:
        self._thread = threading.Thread(target=self.serve_forever, name="shoal-pg", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self.shutdown()
        self.server_close()
        if self._thread is not None:
            self._thread.join(10)

    def acquire(self, conn: Connection) -> bool:
        with self._lock:
            if len(self._sessions) >= self.settings.server.pg_max_connections:
                return False
            while True:
                pid = secrets.randbelow(2**31 - 2) + 1
                if pid not in self._sessions:
                    break
            conn.pid, conn.secret = pid, secrets.randbelow(2**31 - 1) - (2**30)
            self._sessions[pid] = conn
            return True

    def release(self, conn: Connection) -> None:
        with self._lock:
            self._sessions.pop(conn.pid, None)
            self._running.pop(conn.pid, None)

    def running(self, conn: Connection, group: str):
        server = self

        class _Running:
            def __enter__(self) -> None:
                with server._lock:
                    server._running[conn.pid] = group

            def __exit__(self, *exc: object) -> None:
                with server._lock:
                    server._running.pop(conn.pid, None)

        return _Running()

    def cancel(self, pid: int, secret: int) -> None:
        with self._lock:
            conn = self._sessions.get(pid)
            group = self._running.get(pid)
        if (
            conn is None
            or group is None
            or not hmac.compare_digest(struct.pack("!i", conn.secret), struct.pack("!i", secret))
        ):
            return
        conn.canceled = True
        self.spark.sparkContext.cancelJobGroup(group)

    def handle_error(self, request, client_address) -> None:  # never let a connection's error reach stderr raw
        log.exception("PostgreSQL endpoint: error on a connection from %s", client_address)
