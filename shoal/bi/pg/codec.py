"""The PostgreSQL v3 wire codec: type OIDs, values in text and binary format, bound parameters
as typed SQL literals, and the reader for one message's body.

Nothing here touches a socket or a principal: it is the pure part of the protocol, shared by
the connection state machine (`session`) and the catalog emulation that answers statements
locally.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import math
import re
import struct
import uuid
from collections.abc import Sequence
from typing import Any

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError
from sqlglot.tokens import TokenType

from shoal.exceptions import SqlError, first_line

PROTOCOL_3 = 196608
SSL_REQUEST = 80877103
GSSENC_REQUEST = 80877104
CANCEL_REQUEST = 80877102
# Before sign-in a client is a stranger: its startup packet and password/SASL messages are
# small in every real client, so anything bigger is refused before it is read into memory.
MAX_STARTUP = 10 * 1024
MAX_AUTH_MESSAGE = 10 * 1024
MAX_MESSAGE = 64 * 1024 * 1024
SERVER_VERSION = "15.0 (Shoal)"

# Type OIDs.
BOOL, BYTEA, INT8, INT2, INT4, TEXT, FLOAT4, FLOAT8 = 16, 17, 20, 21, 23, 25, 700, 701
VARCHAR, BPCHAR, NAME, UNKNOWN, JSON, JSONB = 1043, 1042, 19, 705, 114, 3802
DATE, TIMESTAMP, TIMESTAMPTZ, NUMERIC, UUID, OID = 1082, 1114, 1184, 1700, 2950, 26
TYPE_SIZE = {BOOL: 1, INT2: 2, INT4: 4, INT8: 8, FLOAT4: 4, FLOAT8: 8, DATE: 4, TIMESTAMP: 8, TIMESTAMPTZ: 8}
_PG_EPOCH = dt.datetime(2000, 1, 1)
_PG_EPOCH_DATE = dt.date(2000, 1, 1)


class ProtocolError(Exception):
    """The client broke the protocol: its connection is closed."""


class SessionEnded(Exception):
    """The connection's sign-in no longer holds (token revoked or expired, password changed,
    principal removed): the connection is closed with this message."""

    def __init__(self, reason: str = "the credentials it signed in with were revoked or changed; sign in again"):
        super().__init__(reason)


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


def pg_typmod(spark_type: str) -> int:
    """The type modifier a Spark type is reported with: numeric's precision and scale (as
    PostgreSQL encodes them: ((precision << 16) | scale) + 4), -1 for the rest."""
    t = spark_type.lower().replace(" ", "")
    m = re.fullmatch(r"decimal\((\d+),(\d+)\)", t)
    if m:
        return ((int(m.group(1)) << 16) | int(m.group(2))) + 4
    return ((10 << 16) | 0) + 4 if t == "decimal" else -1


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
    text = repr(v)  # the shortest text that reads back exactly, as PostgreSQL 12+ prints float8
    return text[:-2] if text.endswith(".0") else text  # 10, not 10.0


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
            s = _timestamp_text(value) + "+00"  # the session time zone is UTC
        else:
            s = _timestamp_text(value.replace(tzinfo=None))
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


def _timestamp_text(value: dt.datetime) -> str:
    """As PostgreSQL prints a timestamp: fractional seconds without trailing zeros (.1234, not .123400)."""
    text = value.isoformat(sep=" ")
    return text.rstrip("0") if value.microsecond else text


def binary_value(value: Any, oid: int) -> bytes:
    """One non-NULL value in PostgreSQL's binary format (fixed-size types, numeric, text, bytea)."""
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
    if oid == NUMERIC:
        return numeric_binary(value if isinstance(value, decimal.Decimal) else decimal.Decimal(str(value)))
    raise PgError(f"binary results are not supported for type {oid}; ask for text", "0A000")


def numeric_binary(value: decimal.Decimal) -> bytes:
    """numeric_send: ndigits, weight, sign, dscale, then base-10000 digits grouped from the
    decimal point (leading and trailing zero groups dropped, as PostgreSQL does)."""
    if value.is_nan():
        return struct.pack("!hhHH", 0, 0, 0xC000, 0)
    if value.is_infinite():
        return struct.pack("!hhHH", 0, 0, 0xD000 if value > 0 else 0xF000, 0)
    sign, digits, exponent = value.as_tuple()
    assert isinstance(exponent, int)
    dscale = max(0, -exponent)
    text = "".join(map(str, digits)) + "0" * max(0, exponent)
    point = len(text) + min(0, exponent)  # where the decimal point falls in text
    whole, frac = text[: max(point, 0)], "0" * max(0, -point) + text[max(point, 0) :]
    whole = whole.zfill(-(-len(whole) // 4) * 4)
    frac = frac.ljust(-(-len(frac) // 4) * 4, "0")
    groups = [int(whole[i : i + 4]) for i in range(0, len(whole), 4)]
    weight = len(groups) - 1
    groups += [int(frac[i : i + 4]) for i in range(0, len(frac), 4)]
    while groups and groups[0] == 0:
        groups.pop(0)
        weight -= 1
    while groups and groups[-1] == 0:
        groups.pop()
    if not groups:
        weight, sign = 0, 0  # zero has no sign in PostgreSQL
    head = struct.pack("!hhHH", len(groups), weight, 0x4000 if sign else 0, dscale)
    return head + struct.pack(f"!{len(groups)}H", *groups)


def _numeric_from_binary(data: bytes) -> decimal.Decimal:
    ndigits, weight, sign, dscale = struct.unpack("!hhHH", data[:8])
    if sign == 0xC000:
        return decimal.Decimal("NaN")
    digits = struct.unpack(f"!{ndigits}H", data[8 : 8 + 2 * ndigits])
    with decimal.localcontext() as ctx:
        ctx.prec = max(28, 4 * (ndigits + abs(weight)) + dscale + 4)  # exact: numeric has up to 131072 digits
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
                # PostgreSQL's own bounds: an 11-byte '1e100000000' must not become 100 MB of SQL.
                digits = number.as_tuple()
                exponent = digits.exponent if isinstance(digits.exponent, int) else 0
                if number.adjusted() >= 131072 or -exponent > 16383:
                    raise PgError("value overflows numeric format", "22003")
                return exp.Literal.number(format(number, "f"))
            as_float = float(number)
            if math.isinf(as_float):
                kind = "real" if oid == FLOAT4 else "double precision"
                raise PgError(f'"{text.strip()[:40]}" is out of range for type {kind}', "22003")
            return exp.cast(exp.Literal.number(repr(as_float)), "FLOAT" if oid == FLOAT4 else "DOUBLE")
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


def parameter_numbers(sql: str, dialect: str) -> list[int]:
    """The parameter numbers ($1 -> 1) a statement uses, in order of appearance, found by the
    dialect's own tokenizer: a `$1` inside a string, a dollar-quoted string (`$$...$$`,
    `$tag$...$tag$`), a quoted identifier or a comment is text, not a parameter."""
    try:
        tokens = sqlglot.tokenize(sql, read=dialect)
    except SqlglotError as exc:
        raise PgError(f"cannot read the statement: {first_line(exc)}", "42601") from exc
    found = []
    for dollar, number in zip(tokens, tokens[1:], strict=False):
        if (
            dollar.token_type == TokenType.PARAMETER
            and number.token_type == TokenType.NUMBER
            and number.start == dollar.end + 1
            and number.text.isdigit()
        ):
            found.append(int(number.text))
    return found


def _parameter_number(node: exp.Expr) -> int | None:
    if isinstance(node, exp.Parameter) and isinstance(node.this, exp.Literal) and not node.this.is_string:
        text = str(node.this.this)
        return int(text) if text.isdigit() else None
    return None


def tree_parameters(tree: exp.Expr) -> list[int]:
    """The parameter numbers the parsed statement holds as parameter nodes."""
    return [n for n in (_parameter_number(node) for node in tree.walk()) if n is not None]


# Field names date_part/extract/date_trunc and interval arithmetic accept (PostgreSQL's words and
# Spark's). A parameter in such a place becomes one of these words: Spark SQL writes a unit as a
# bare word, so any other text there would be read as SQL.
UNITS = frozenset(
    [
        "CENTURY",
        "DAY",
        "DAYS",
        "DAYOFWEEK",
        "DAYOFYEAR",
        "DECADE",
        "DOW",
        "DOY",
        "EPOCH",
        "HOUR",
        "HOURS",
        "ISODOW",
        "ISOYEAR",
        "JULIAN",
        "MICROSECOND",
        "MICROSECONDS",
        "MILLENNIUM",
        "MILLISECOND",
        "MILLISECONDS",
        "MINUTE",
        "MINUTES",
        "MONTH",
        "MONTHS",
        "QUARTER",
        "SECOND",
        "SECONDS",
        "TIMEZONE",
        "TIMEZONE_HOUR",
        "TIMEZONE_MINUTE",
        "WEEK",
        "WEEKS",
        "YEAR",
        "YEARS",
        "DAYOFWEEK_ISO",
        "YEAROFWEEK",
    ]
)


def _in_unit_slot(node: exp.Expr) -> bool:
    parent = node.parent
    return node.arg_key == "unit" or (isinstance(parent, exp.Extract) and node.arg_key == "this")


def _unit(value: exp.Expr) -> exp.Expr:
    word = value.name.strip().upper() if isinstance(value, exp.Literal) and value.is_string else ""
    if word not in UNITS:
        shown = value.sql(dialect="postgres")[:80]
        raise PgError(f"unit {shown} not recognized", "22023", hint="a field name: year, month, day, hour, ...")
    return exp.var(word)


def bind(tree: exp.Expr, params: Sequence[exp.Expr]) -> exp.Expr:
    """A copy of the parsed statement with each `$n` node replaced by the literal node of
    parameter n: values become nodes of the tree, never text read again as SQL. A parameter
    naming a date/time field (date_part($1, ts), extract) becomes that field's word, if it is one."""

    def replace(node: exp.Expr) -> exp.Expr:
        k = _parameter_number(node)
        if k is None:
            return node
        if not 1 <= k <= len(params):
            raise PgError(f"there is no parameter ${k}", "42P02")
        value = params[k - 1].copy()
        return _unit(value) if _in_unit_slot(node) else value

    return tree.transform(replace)  # transform works on a copy


def check_bound_sql(text: str, params: Sequence[exp.Expr], dialect: str = "spark") -> None:
    """The bound statement as written for Spark must read back as one statement that holds every
    string value as a string literal: a value the generator wrote as bare text (a slot no check
    above knows) is refused instead of run."""
    try:
        trees = [t for t in sqlglot.parse(text, read=dialect) if t is not None]
    except SqlglotError as exc:
        raise PgError("parameters are not supported in this position", "0A000") from exc
    if len(trees) != 1:
        raise PgError("parameters are not supported in this position", "0A000")
    found = [n.this for n in trees[0].find_all(exp.Literal) if n.is_string]
    for value in params:
        strings = [n.this for n in value.find_all(exp.Literal) if n.is_string]
        for s in strings:
            if s not in found and s.upper() not in UNITS:
                raise PgError("parameters are not supported in this position", "0A000")


# ---- COPY ... TO STDOUT -------------------------------------------------------------------------------
COPY_BINARY_HEADER = b"PGCOPY\n\xff\r\n\x00" + struct.pack("!ii", 0, 0)  # signature, flags, no extension
COPY_BINARY_TRAILER = struct.pack("!h", -1)
_TEXT_ESCAPES = {"\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\b": "\\b", "\f": "\\f", "\v": "\\v"}


def copy_line(
    values: Sequence[Any], oids: Sequence[int], spec: Any, names: Sequence[str] = (), header: bool = False
) -> bytes:
    """One row of COPY TO's output in spec's format (`pgsql.CopySpec`): text (backslash escapes,
    NULL as spec.null), csv (quoted where needed, as PostgreSQL quotes), or binary (one tuple)."""
    if spec.format == "binary":
        out = bytearray(struct.pack("!h", len(values)))
        for value, oid in zip(values, oids, strict=True):
            data = None if value is None else binary_value(value, oid)
            out += struct.pack("!i", -1) if data is None else struct.pack("!i", len(data)) + data
        return bytes(out)
    fields = []
    for i, (value, oid) in enumerate(zip(values, oids, strict=True)):
        if value is None:
            fields.append(spec.null)
            continue
        text = text_value(value, oid).decode("utf-8")
        if spec.format == "csv":  # FORCE_QUOTE is for values: PostgreSQL does not force the header's
            forced = not header and (
                "*" in spec.force_quote or (i < len(names) and names[i].lower() in spec.force_quote)
            )
            fields.append(_csv_field(text, spec, forced))
        else:
            text = "".join(_TEXT_ESCAPES.get(ch, ch) for ch in text)
            fields.append(text.replace(spec.delimiter, "\\" + spec.delimiter) if spec.delimiter not in "\\" else text)
    return (spec.delimiter.join(fields) + "\n").encode("utf-8")


def _csv_field(text: str, spec: Any, forced: bool) -> str:
    # As PostgreSQL: quoted if asked, if it holds the delimiter, the quote, the escape or a line
    # break, or if it reads like the NULL string (the empty string included).
    special = (spec.delimiter, spec.quote, spec.escape, "\n", "\r")
    if not (forced or text == spec.null or text == "\\." or any(c in text for c in special)):
        return text
    body = "".join(spec.escape + ch if ch in (spec.quote, spec.escape) else ch for ch in text)
    return spec.quote + body + spec.quote


class Reader:
    """Reads the fields of one message body; a short body is a ProtocolError."""

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


def cstr(s: str) -> bytes:
    return s.replace("\x00", "").encode("utf-8") + b"\x00"


def format_for(formats: list[int], i: int) -> int:
    if not formats:
        return 0
    return formats[0] if len(formats) == 1 else formats[i]


def error_fields(severity: str, code: str, message: str, hint: str | None = None) -> bytes:
    """The body of an ErrorResponse or NoticeResponse."""
    out = b"S" + cstr(severity) + b"V" + cstr(severity) + b"C" + cstr(code) + b"M" + cstr(message)
    if hint:
        out += b"H" + cstr(hint)
    return out + b"\x00"


def error_message(severity: str, code: str, message: str) -> bytes:
    """A whole ErrorResponse message, for answering a socket without a Connection."""
    body = error_fields(severity, code, message)
    return b"E" + struct.pack("!i", len(body) + 4) + body
