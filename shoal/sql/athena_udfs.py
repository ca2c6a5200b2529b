"""Python functions giving Trino's answers where Spark has no built-in with the same one
(registered in the Athena session by `shoal.sql.athena.athena_session`).

URLs are read the way Trino reads them (java.net.URI): a missing part is '' (the port
NULL), text java.net.URI rejects is NULL. Only the plain URL shapes whose parts are certain
are read; any other text is refused at run time ("not supported in Shoal: ...") rather than
answered differently.
"""

from __future__ import annotations

import base64
import decimal
import hmac
import itertools
import json
import math
import re
import struct
import unicodedata
from typing import Any

_REFUSED = "not supported in Shoal: "


def hamming_distance(a: str | None, b: str | None) -> int | None:
    """string.md: the number of positions whose characters differ; the lengths must match."""
    if a is None or b is None:
        return None
    if len(a) != len(b):
        raise ValueError("The input strings to hamming_distance function must have the same length")
    return sum(x != y for x, y in zip(a, b, strict=True))


def strpos_instance(s: str | None, sub: str | None, instance: int | None) -> int | None:
    """string.md: the position (from 1) of the N-th `sub` in `s`, counted from the end when
    N < 0; 0 if there is none. Matches may overlap (each search starts one past the last)."""
    if s is None or sub is None or instance is None:
        return None
    if sub == "":
        raise ValueError(f"{_REFUSED}STRPOS of an empty substring with an instance")
    if instance == 0:
        raise ValueError("'instance' must be a positive or negative number.")
    at = -1 if instance > 0 else len(s) + 1
    for _ in range(abs(instance)):
        at = s.find(sub, at + 1) if instance > 0 else s.rfind(sub, 0, at - 1 + len(sub))
        if at < 0:
            return 0
    return at + 1


def truncate_double(x: float | None, n: int | None) -> float | None:
    """math.md: x truncated to n decimal places (n < 0 zeroes digits left of the point)."""
    if x is None or n is None:
        return None
    if x != x or x in (float("inf"), float("-inf")):
        return x
    with decimal.localcontext(decimal.Context(prec=2000)):
        step = decimal.Decimal(1).scaleb(-n)
        return float((decimal.Decimal(repr(x)) / step).to_integral_value(rounding=decimal.ROUND_DOWN) * step)


# ---- URLs ----------------------------------------------------------------------------------------
_SCHEME = r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*):"
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?"
_HOST = rf"(?P<host>(?:{_LABEL}\.)*{_LABEL}\.?)"
_PCHARS = r"(?:[A-Za-z0-9\-_.!~*'();:@&=+$,/]|%[0-9A-Fa-f]{2})"
_URL = re.compile(
    rf"(?:{_SCHEME})?(?://{_HOST}(?::(?P<port>\d{{0,9}}))?)?(?P<path>{_PCHARS}*)"
    rf"(?:\?(?P<query>(?:{_PCHARS}|\?)*))?(?:#(?P<fragment>(?:{_PCHARS}|\?)*))?"
)


def _url(url: str | None) -> dict[str, str | None] | None:
    if url is None:
        return None
    m = _URL.fullmatch(url)
    parts = m.groupdict() if m else {}
    scheme, host, path = parts.get("scheme"), parts.get("host"), parts.get("path") or ""
    rest = url[len(scheme) + 1 :] if scheme else url
    if (
        m is None
        or (scheme and not rest.startswith("/"))  # opaque (mailto:...)
        or (rest.startswith("//") and host is None)  # an authority this pattern does not read
        or (host and path and not path.startswith("/"))
        or (host and host.rstrip(".").split(".")[-1][:1].isdigit() and not _ipv4(host))
    ):
        raise ValueError(f"{_REFUSED}a URL Shoal cannot read as Trino does: {url[:80]!r}")
    return parts


def _ipv4(host: str) -> bool:
    parts = host.split(".")
    return len(parts) == 4 and all(p.isdigit() and int(p) <= 255 for p in parts)


def _decoded(text: str | None) -> str:
    """java.net.URI's decoded component: %XX sequences read as UTF-8."""
    if not text:
        return ""
    try:
        return re.sub(
            r"(?:%[0-9A-Fa-f]{2})+", lambda m: bytes.fromhex(m.group(0).replace("%", "")).decode("utf-8"), text
        )
    except UnicodeDecodeError as exc:
        raise ValueError(f"{_REFUSED}a URL whose escapes are not UTF-8") from exc


def url_extract_protocol(url: str | None) -> str | None:
    parts = _url(url)
    return None if parts is None else parts["scheme"] or ""


def url_extract_host(url: str | None) -> str | None:
    parts = _url(url)
    return None if parts is None else parts["host"] or ""


def url_extract_port(url: str | None) -> int | None:
    parts = _url(url)
    return int(parts["port"]) if parts is not None and parts["port"] else None


def url_extract_path(url: str | None) -> str | None:
    parts = _url(url)
    return None if parts is None else _decoded(parts["path"])


def url_extract_query(url: str | None) -> str | None:
    parts = _url(url)
    return None if parts is None else _decoded(parts["query"])


def url_extract_fragment(url: str | None) -> str | None:
    parts = _url(url)
    return None if parts is None else _decoded(parts["fragment"])


def url_extract_parameter(url: str | None, name: str | None) -> str | None:
    """The first `name=value` of the raw query, value form-decoded; '' for `name` alone."""
    parts = _url(url)
    if parts is None or name is None or parts["query"] is None:
        return None
    for arg in parts["query"].split("&"):
        key, eq, value = arg.partition("=")
        if key == name:
            return url_decode(value) if eq else ""
    return None


def url_encode(value: str | None) -> str | None:
    """url.md: letters, digits and `.-*_` kept, space as +, every other byte of UTF-8 as %XX."""
    if value is None:
        return None
    return "".join(
        ch
        if (ch.isascii() and ch.isalnum()) or ch in ".-*_"
        else "+"
        if ch == " "
        else "".join(f"%{b:02X}" for b in ch.encode("utf-8"))
        for ch in value
    )


def url_decode(value: str | None) -> str | None:
    """url.md: the inverse of url_encode (+ is a space); a stray % is an error, as in Trino."""
    if value is None:
        return None
    if re.search(r"%(?![0-9A-Fa-f]{2})", value):
        raise ValueError(f"URLDecoder: Illegal hex characters in escape (%) pattern: {value[:80]!r}")
    return _decoded(value.replace("+", " "))


# ---- CAST(json AS type) --------------------------------------------------------------------------
_INT_RANGES = {"tinyint": 2**7, "smallint": 2**15, "integer": 2**31, "bigint": 2**63}


def json_cast(text: str | None, target: str | None) -> str | None:
    """The JSON value `text` as `target` (a type described in JSON: "bigint", ["array", t],
    ["map", k, v], ["row", [[name, t], ...]]), as JSON text {"v": value} that Spark's from_json
    reads exactly. Only conversions whose Trino answer is certain are made (json.md's casts:
    numbers to integers and doubles, strings to varchar, booleans, arrays, objects to maps and
    rows); any other is refused when it is met."""
    if text is None or target is None:
        return None
    value = json.loads(text, parse_float=decimal.Decimal, parse_int=int)
    return json.dumps({"v": _as(value, json.loads(target))}, default=_number)


def _as(value: Any, target: Any) -> Any:
    if value is None:
        return None
    if isinstance(target, str) and target in _INT_RANGES:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"{_REFUSED}CAST of JSON {_shown(value)} to {target.upper()}")
        if not -_INT_RANGES[target] <= value < _INT_RANGES[target]:
            raise ValueError(f"Cannot cast JSON {value} to {target.upper()}: out of range")
        return value
    if target == "double" and isinstance(value, int | decimal.Decimal) and not isinstance(value, bool):
        return float(value)
    if (target == "varchar" and isinstance(value, str)) or (target == "boolean" and isinstance(value, bool)):
        return value
    if isinstance(target, list) and target[0] == "array" and isinstance(value, list):
        return [_as(v, target[1]) for v in value]
    if isinstance(target, list) and target[0] == "map" and target[1] == "varchar" and isinstance(value, dict):
        return {k: _as(v, target[2]) for k, v in value.items()}
    if isinstance(target, list) and target[0] == "row":
        return _as_row(value, target[1])
    raise ValueError(f"{_REFUSED}CAST of JSON {_shown(value)} to {target}")


def _as_row(value: Any, fields: list) -> dict[str, Any]:
    names = [n for n, _ in fields]
    if isinstance(value, list) and len(value) == len(fields):
        return {n: _as(v, t) for (n, t), v in zip(fields, value, strict=True)}
    if isinstance(value, dict) and not any(k not in names and k.lower() in names for k in value):
        return {n: _as(value.get(n), t) for n, t in fields}
    raise ValueError(f"{_REFUSED}CAST of JSON {_shown(value)} to ROW({', '.join(names)})")


def _shown(value: Any) -> str:
    return json.dumps(value, default=_number)[:80]


def _number(value: Any) -> Any:
    if isinstance(value, decimal.Decimal):
        return float(value)
    raise TypeError(type(value).__name__)


def format_number(value: int | float | None) -> str | None:
    """conversion.md: the number with a unit symbol (123456 is 123K). As Trino computes it: a
    DOUBLE truncated to a BIGINT, divided by 1000 while at least 1000 (K, M, B, T, Q), then
    printed with up to two decimals under 10, one under 100, none above, rounded half up."""
    if value is None:
        return None
    count = _to_long(value) if isinstance(value, float) else value
    fractional, unit = float(count), ""
    for symbol in "KMBTQ":
        if fractional >= 1000 or fractional <= -1000:
            fractional, unit = fractional / 1000, symbol
    places = 2 if fractional < 10 else 1 if fractional < 100 else 0
    exact = decimal.Decimal(fractional).quantize(decimal.Decimal(1).scaleb(-places), rounding=decimal.ROUND_HALF_UP)
    text = format(exact.normalize(), "f") if exact else "0"
    if text.startswith(("0.", "-0.")):
        raise ValueError(f"{_REFUSED}format_number of a value under 1")  # never met from a BIGINT
    return text + unit


def _to_long(value: float) -> int:
    """Java's (long) of a double: toward zero, NaN as 0, clamped to the BIGINT range."""
    if value != value:
        return 0
    if value >= 2.0**63:
        return 2**63 - 1
    if value <= -(2.0**63):
        return -(2**63)
    return int(value)


# ---- binary.md: encodings, integer and IEEE 754 layouts, HMACs (issue 44) -------------------------
def _bytes(value: bytes | bytearray | None) -> bytes | None:
    return None if value is None else bytes(value)


def to_base64(value: bytes | None) -> str | None:
    return None if value is None else base64.b64encode(value).decode("ascii")


def to_base64url(value: bytes | None) -> str | None:
    return None if value is None else base64.urlsafe_b64encode(value).decode("ascii")


def to_base32(value: bytes | None) -> str | None:
    return None if value is None else base64.b32encode(value).decode("ascii")


def _decode64(text: str, alphabet: str, name: str) -> bytes:
    """java.util.Base64's decoder: '=' padding optional, any other character outside the
    alphabet an error (Python's decoder would skip it)."""
    body = text.rstrip("=")
    pad = len(text) - len(body)
    if not re.fullmatch(f"[A-Za-z0-9{alphabet}]*", body) or len(body) % 4 == 1 or pad > 2:
        raise ValueError(f"{name}: illegal base64 input")
    if pad and (len(body) + pad) % 4:
        raise ValueError(f"{name}: illegal base64 padding")
    padded = body + "=" * (-len(body) % 4)
    return base64.b64decode(padded, altchars=alphabet.encode().replace(b"\\", b""), validate=True)


def from_base64(text: str | None) -> bytes | None:
    return None if text is None else _decode64(text, "+/", "from_base64")


def from_base64url(text: str | None) -> bytes | None:
    return None if text is None else _decode64(text, "\\-_", "from_base64url")


def from_base32(text: str | None) -> bytes | None:
    """Guava's base32(): upper-case alphabet, '=' padding optional, a length Guava rejects an error."""
    if text is None:
        return None
    body = text.rstrip("=")
    if not re.fullmatch("[A-Z2-7]*", body) or len(body) % 8 in (1, 3, 6):
        raise ValueError("from_base32: illegal base32 input")
    return base64.b32decode(body + "=" * (-len(body) % 8))


def from_hex(text: str | None) -> bytes | None:
    """binary.md: an even number of hex digits; anything else is an error."""
    if text is None:
        return None
    if len(text) % 2 or not re.fullmatch("[0-9A-Fa-f]*", text):
        raise ValueError(f"from_hex: invalid hex input {text[:40]!r}")
    return bytes.fromhex(text)


def from_utf8(value: bytes | None) -> str | None:
    """Valid UTF-8 only: Trino replaces invalid sequences in its own way (refused here)."""
    if value is None:
        return None
    try:
        return bytes(value).decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"{_REFUSED}FROM_UTF8 of bytes that are not valid UTF-8") from None


def _exact(value: bytes | None, size: int, name: str) -> bytes | None:
    if value is None:
        return None
    if len(value) != size:
        raise ValueError(f"{name}: expected {size}-byte input, but got instead: {len(value)}")
    return bytes(value)


def from_big_endian_32(value: bytes | None) -> int | None:
    data = _exact(value, 4, "from_big_endian_32")
    return None if data is None else int(struct.unpack(">i", data)[0])


def from_big_endian_64(value: bytes | None) -> int | None:
    data = _exact(value, 8, "from_big_endian_64")
    return None if data is None else int(struct.unpack(">q", data)[0])


def to_big_endian_32(value: int | None) -> bytes | None:
    return None if value is None else struct.pack(">i", value)


def to_big_endian_64(value: int | None) -> bytes | None:
    return None if value is None else struct.pack(">q", value)


def from_ieee754_32(value: bytes | None) -> float | None:
    data = _exact(value, 4, "from_ieee754_32")
    return None if data is None else float(struct.unpack(">f", data)[0])


def from_ieee754_64(value: bytes | None) -> float | None:
    data = _exact(value, 8, "from_ieee754_64")
    return None if data is None else float(struct.unpack(">d", data)[0])


def to_ieee754_32(value: float | None) -> bytes | None:
    return None if value is None else struct.pack(">f", value)


def to_ieee754_64(value: float | None) -> bytes | None:
    return None if value is None else struct.pack(">d", value)


def _hmac(digest: str) -> Any:
    def keyed(value: bytes | None, key: bytes | None) -> bytes | None:
        if value is None or key is None:
            return None
        if not key:
            raise ValueError("Empty key")  # Guava's Hashing.hmac* (javax SecretKeySpec) rejects it
        return hmac.new(bytes(key), bytes(value), digest).digest()

    return keyed


hmac_md5, hmac_sha1, hmac_sha256, hmac_sha512 = (_hmac(d) for d in ("md5", "sha1", "sha256", "sha512"))


# ---- math.md: base conversion (Java's Long.toString / Long.parseLong) ------------------------------
_DIGITS = "0123456789abcdefghijklmnopqrstuvwxyz"


def _radix(radix: int) -> None:
    if not 2 <= radix <= 36:
        raise ValueError("Radix must be between 2 and 36")


def to_base(value: int | None, radix: int | None) -> str | None:
    if value is None or radix is None:
        return None
    _radix(radix)
    n, digits = abs(value), ""
    while True:
        n, d = divmod(n, radix)
        digits = _DIGITS[d] + digits
        if not n:
            break
    return ("-" if value < 0 else "") + digits


def from_base(text: str | None, radix: int | None) -> int | None:
    if text is None or radix is None:
        return None
    _radix(radix)
    if not text.isascii():  # Java reads other scripts' digits too: refused rather than guessed
        raise ValueError(f"{_REFUSED}FROM_BASE of text with non-ASCII characters")
    m = re.fullmatch(r"[+-]?([0-9A-Za-z]+)", text)
    if not m or any(_DIGITS.index(c) >= radix for c in m.group(1).lower()):
        raise ValueError(f"Not a valid base-{radix} number: {text}")
    value = int(text, radix)
    if not -(2**63) <= value < 2**63:
        raise ValueError(f"Not a valid base-{radix} number: {text}")
    return value


# ---- array.md: combinations (Trino's order: the index sets in colexicographic order) ---------------
def combination_indexes(size: int | None, n: int | None) -> list[list[int]] | None:
    """0-based index sets of the n-element combinations of `size` elements, in the order
    Trino's CombinationsFunction makes them; n must be 0..5 (array.md)."""
    if size is None or n is None:
        return None
    if n < 0:
        raise ValueError(f"combination size must not be negative: {n}")
    if n > 5:
        raise ValueError(f"combination size must not exceed 5: {n}")
    if n > size:
        return []
    total = math.comb(size, n) * n  # Trino's limit: fewer than 100,000 elements in all
    if total > 100_000:
        raise ValueError("combinations exceed max size")
    if total == 100_000:
        raise ValueError(f"{_REFUSED}COMBINATIONS of exactly 100,000 elements")
    out = [list(c) for c in itertools.combinations(range(size), n)]
    out.sort(key=lambda c: c[::-1])
    return out


# ---- string.md: split_to_map ----------------------------------------------------------------------
def split_to_map(text: str | None, entry_sep: str | None, kv_sep: str | None) -> dict[str, str] | None:
    """Entries split on entry_sep (a trailing one ends the text), each split on its one kv_sep;
    a duplicate key is an error (string.md, Trino's SplitToMapFunction)."""
    if text is None or entry_sep is None or kv_sep is None:
        return None
    if not entry_sep or not kv_sep or entry_sep == kv_sep:
        raise ValueError("entryDelimiter and keyValueDelimiter must be non-empty and differ")
    entries = text.split(entry_sep)
    if entries and entries[-1] == "":
        entries.pop()
    out: dict[str, str] = {}
    for entry in entries:
        parts = entry.split(kv_sep)
        if len(parts) != 2:
            raise ValueError(f"Key-value delimiter must appear exactly once in each entry. Bad input: '{entry}'")
        if parts[0] in out:
            raise ValueError(f"Duplicate keys ({parts[0]}) are not allowed")
        out[parts[0]] = parts[1]
    return out


def split_to_multimap(text: str | None, entry_sep: str | None, kv_sep: str | None) -> dict[str, list[str]] | None:
    """split_to_map's parsing; a repeated key gathers its values in order (string.md)."""
    if text is None or entry_sep is None or kv_sep is None:
        return None
    if not entry_sep or not kv_sep or entry_sep == kv_sep:
        raise ValueError("entryDelimiter and keyValueDelimiter must be non-empty and differ")
    entries = text.split(entry_sep)
    if entries and entries[-1] == "":
        entries.pop()
    out: dict[str, list[str]] = {}
    for entry in entries:
        parts = entry.split(kv_sep)
        if len(parts) != 2:
            raise ValueError(f"Key-value delimiter must appear exactly once in each entry. Bad input: '{entry}'")
        out.setdefault(parts[0], []).append(parts[1])
    return out


# ---- conversion.md: parse_data_size (Trino's DataSizeFunctions) ------------------------------------
_DATA_SIZE_UNITS = {u: 1 << (10 * k) for k, u in enumerate(("B", "kB", "MB", "GB", "TB", "PB", "EB", "ZB", "YB"))}


def parse_data_size(text: str | None) -> decimal.Decimal | None:
    """The leading digits and points read as a BigDecimal, times the unit (case as written,
    powers of 1024), truncated to whole bytes: a decimal(38,0)."""
    if text is None:
        return None
    n = 0
    while n < len(text) and (text[n] in "0123456789."):
        n += 1
    if any(c.isdecimal() and c not in "0123456789" for c in text):
        raise ValueError(f"{_REFUSED}PARSE_DATA_SIZE of digits other than 0-9")  # Java reads them as digits
    number, unit = text[:n], text[n:]
    if n == 0 or unit not in _DATA_SIZE_UNITS or not re.fullmatch(r"\d+\.?\d*|\.\d+", number):
        raise ValueError(f"Invalid data size: '{text}'")
    with decimal.localcontext(decimal.Context(prec=200)):
        size = (decimal.Decimal(number) * _DATA_SIZE_UNITS[unit]).to_integral_value(rounding=decimal.ROUND_DOWN)
    if size >= 2**127:
        raise ValueError(f"Value out of range: '{text}' ('{size}B')")
    if size >= 10**38:  # Trino keeps the 127-bit value, beyond what a decimal(38,0) holds
        raise ValueError(f"{_REFUSED}PARSE_DATA_SIZE of 10^38 bytes or more")
    return size


# ---- math.md: wilson_interval_lower/upper (Trino's WilsonInterval, the same operations in order) ------
def _wilson(successes: int | None, trials: int | None, z: float | None, bound: int) -> float | None:
    if successes is None or trials is None or z is None:
        return None
    if successes < 0:
        raise ValueError("number of successes must not be negative")
    if trials <= 0:
        raise ValueError("number of trials must be positive")
    if successes > trials:
        raise ValueError("number of successes must not be larger than number of trials")
    if z < 0:
        raise ValueError("z-score must not be negative")
    p = successes * 1.0 / trials
    n = float(trials)
    return (p + (z * z) / (2 * n) + bound * z * math.sqrt((p * (1 - p)) / n + (z * z) / (4 * n * n))) / (
        1 + (z * z) / n
    )


def wilson_interval_lower(successes: int | None, trials: int | None, z: float | None) -> float | None:
    return _wilson(successes, trials, z, -1)


def wilson_interval_upper(successes: int | None, trials: int | None, z: float | None) -> float | None:
    return _wilson(successes, trials, z, 1)


# ---- binary.md: xxhash64 (XXH64, seed 0, big-endian) and murmur3 (MurmurHash3 x64 128, seed 0) ---------
_M64 = 2**64 - 1
_P1, _P2, _P3, _P4, _P5 = (
    0x9E3779B185EBCA87,
    0xC2B2AE3D27D4EB4F,
    0x165667B19E3779F9,
    0x85EBCA77C2B2AE63,
    0x27D4EB2F165667C5,
)


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (64 - r))) & _M64


def _xx_round(acc: int, lane: int) -> int:
    return (_rotl((acc + lane * _P2) & _M64, 31) * _P1) & _M64


def _xx_merge(acc: int, v: int) -> int:
    return ((acc ^ _xx_round(0, v)) * _P1 + _P4) & _M64


def _xxh64(data: bytes, seed: int = 0) -> int:
    n, i = len(data), 0
    if n >= 32:
        v = [(seed + _P1 + _P2) & _M64, (seed + _P2) & _M64, seed, (seed - _P1) & _M64]
        while i + 32 <= n:
            for k in range(4):
                v[k] = _xx_round(v[k], int.from_bytes(data[i + 8 * k : i + 8 * k + 8], "little"))
            i += 32
        h = (_rotl(v[0], 1) + _rotl(v[1], 7) + _rotl(v[2], 12) + _rotl(v[3], 18)) & _M64
        for lane in v:
            h = _xx_merge(h, lane)
    else:
        h = (seed + _P5) & _M64
    h = (h + n) & _M64
    while i + 8 <= n:
        h = (_rotl(h ^ _xx_round(0, int.from_bytes(data[i : i + 8], "little")), 27) * _P1 + _P4) & _M64
        i += 8
    if i + 4 <= n:
        h = (_rotl(h ^ (int.from_bytes(data[i : i + 4], "little") * _P1 & _M64), 23) * _P2 + _P3) & _M64
        i += 4
    for b in data[i:]:
        h = (_rotl(h ^ (b * _P5 & _M64), 11) * _P1) & _M64
    h = ((h ^ (h >> 33)) * _P2) & _M64
    h = ((h ^ (h >> 29)) * _P3) & _M64
    return h ^ (h >> 32)


def xxhash64(value: bytes | None) -> bytes | None:
    return None if value is None else _xxh64(bytes(value)).to_bytes(8, "big")


_C1, _C2 = 0x87C37B91114253D5, 0x4CF5AD432745937F


def _fmix(k: int) -> int:
    k = ((k ^ (k >> 33)) * 0xFF51AFD7ED558CCD) & _M64
    k = ((k ^ (k >> 33)) * 0xC4CEB9FE1A85EC53) & _M64
    return k ^ (k >> 33)


def _murmur3_128(data: bytes) -> bytes:
    h1 = h2 = 0
    n, blocks = len(data), len(data) // 16
    for b in range(blocks):
        k1 = int.from_bytes(data[16 * b : 16 * b + 8], "little")
        k2 = int.from_bytes(data[16 * b + 8 : 16 * b + 16], "little")
        h1 ^= (_rotl((k1 * _C1) & _M64, 31) * _C2) & _M64
        h1 = ((_rotl(h1, 27) + h2) * 5 + 0x52DCE729) & _M64
        h2 ^= (_rotl((k2 * _C2) & _M64, 33) * _C1) & _M64
        h2 = ((_rotl(h2, 31) + h1) * 5 + 0x38495AB5) & _M64
    tail = data[16 * blocks :]
    k1 = int.from_bytes(tail[:8], "little")
    k2 = int.from_bytes(tail[8:], "little")
    if len(tail) > 8:
        h2 ^= (_rotl((k2 * _C2) & _M64, 33) * _C1) & _M64
    if tail:
        h1 ^= (_rotl((k1 * _C1) & _M64, 31) * _C2) & _M64
    h1 ^= n
    h2 ^= n
    h1 = (h1 + h2) & _M64
    h2 = (h2 + h1) & _M64
    h1, h2 = _fmix(h1), _fmix(h2)
    h1 = (h1 + h2) & _M64
    h2 = (h2 + h1) & _M64
    return h1.to_bytes(8, "little") + h2.to_bytes(8, "little")


def murmur3(value: bytes | None) -> bytes | None:
    return None if value is None else _murmur3_128(bytes(value))


def normalize(text: str | None, form: str | None) -> str | None:
    """string.md: the text in Unicode normalization form NFC (the default), NFD, NFKC or NFKD."""
    if text is None or form is None:
        return None
    return unicodedata.normalize(form, text)  # type: ignore[arg-type]


def chr_(codepoint: int | None) -> str | None:
    """string.md, chr(n): the character of Unicode code point n (Spark's chr takes n mod 256)."""
    if codepoint is None:
        return None
    if not 0 <= codepoint <= 0x10FFFF:
        raise ValueError(f"Not a valid Unicode code point: {codepoint}")
    if 0xD800 <= codepoint <= 0xDFFF:
        raise ValueError(f"{_REFUSED}CHR of a surrogate code point")
    return chr(codepoint)


# ---- bitwise.md: Trino's BitwiseFunctions on Java longs (a shift counts modulo 64) -----------------
_MASKS = {"tinyint": 0xFF, "smallint": 0xFFFF, "int": 0xFFFFFFFF}


def _long(x: int) -> int:
    x &= _M64
    return x - 2**64 if x >= 2**63 else x


def _preserve_sign(value: int, kind: str) -> int:
    mask = _MASKS[kind]
    sign = (mask + 1) >> 1
    return _long(value | ~mask) if value & sign else value & mask


def bit_count(num: int | None, bits: int | None) -> int | None:
    if num is None or bits is None:
        return None
    if bits == 64:
        return bin(num & _M64).count("1")
    if bits <= 1 or bits > 64:
        raise ValueError(f"Bits specified in bit_count must be between 2 and 64, got {bits}")
    low = (1 << (bits - 1)) - 1
    if num > low or num < ~low:
        raise ValueError(
            f"Number must be representable with the bits specified. {num} cannot be represented with {bits} bits"
        )
    return bin(num & ((1 << bits) - 1)).count("1")


def bitwise_shift(value: int | None, shift: int | None, kind: str | None, how: str | None) -> int | None:
    """how: 'left', 'right' (logical) or 'arithmetic'; kind: the value's type."""
    if value is None or shift is None or kind is None:
        return None
    if shift >= 64:
        return -1 if how == "arithmetic" and value < 0 else 0
    s = shift & 63
    if how == "left":
        shifted = _long(value << s)
        return shifted if kind == "bigint" else _preserve_sign(shifted, kind)
    if how == "right":
        if kind == "bigint":
            return _long((value & _M64) >> s)
        return value if shift == 0 else (value & _MASKS[kind]) >> s
    return (value if kind == "bigint" else _preserve_sign(value, kind)) >> s
