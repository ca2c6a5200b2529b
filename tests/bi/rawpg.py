"""A tiny raw-socket PostgreSQL client for what drivers hide: message order, SQLSTATEs before
sign-in, and the SCRAM-SHA-256 exchange (RFC 5802/7677) done by hand."""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import socket
import struct

from shoal.bi.pg import PROTOCOL_3


def recv_exact(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError(f"closed after {len(data)} of {n} bytes")
        data += chunk
    return data


def message(sock: socket.socket) -> tuple[bytes, bytes]:
    kind = recv_exact(sock, 1)
    (length,) = struct.unpack("!i", recv_exact(sock, 4))
    return kind, recv_exact(sock, length - 4)


def send(sock: socket.socket, kind: bytes, body: bytes) -> None:
    sock.sendall(kind + struct.pack("!i", len(body) + 4) + body)


def startup(sock: socket.socket, user: str) -> None:
    body = struct.pack("!i", PROTOCOL_3) + b"user\x00" + user.encode() + b"\x00database\x00lake\x00\x00"
    sock.sendall(struct.pack("!i", len(body) + 4) + body)


def fields(body: bytes) -> dict[str, str]:
    """The fields of an ErrorResponse body: {'C': sqlstate, 'M': message, ...}."""
    out = {}
    for part in body.rstrip(b"\x00").split(b"\x00"):
        if part:
            out[part[:1].decode()] = part[1:].decode()
    return out


def scram_sign_in(
    sock: socket.socket, user: str, token: str, *, reset_after_proof: bool = False
) -> list[tuple[bytes, int | None]]:
    """Sign in with SCRAM-SHA-256; the (kind, auth code) of every message up to ReadyForQuery or an
    error. Asserts the server's final signature proves it knows the verifier. `reset_after_proof`:
    close with a TCP reset right after sending the proof, reading no answer (an aborted client)."""
    startup(sock, user)
    seen: list[tuple[bytes, int | None]] = []
    kind, body = message(sock)
    seen.append((kind, struct.unpack("!i", body[:4])[0] if kind == b"R" else None))
    if seen[-1] != (b"R", 10):
        return seen
    assert body[4:] == b"SCRAM-SHA-256\x00\x00"
    nonce = base64.b64encode(secrets.token_bytes(18)).decode()
    first_bare = f"n=,r={nonce}"
    first = ("n,," + first_bare).encode()
    send(sock, b"p", b"SCRAM-SHA-256\x00" + struct.pack("!i", len(first)) + first)
    kind, body = message(sock)
    seen.append((kind, struct.unpack("!i", body[:4])[0] if kind == b"R" else None))
    if seen[-1] != (b"R", 11):
        return seen
    server_first = body[4:].decode()
    parts = dict(p.split("=", 1) for p in server_first.split(","))
    assert parts["r"].startswith(nonce) and len(parts["r"]) > len(nonce)
    salted = hashlib.pbkdf2_hmac("sha256", token.encode(), base64.b64decode(parts["s"]), int(parts["i"]))
    client_key = hmac.new(salted, b"Client Key", hashlib.sha256).digest()
    stored = hashlib.sha256(client_key).digest()
    without_proof = f"c=biws,r={parts['r']}"
    auth = f"{first_bare},{server_first},{without_proof}".encode()
    proof = bytes(a ^ b for a, b in zip(client_key, hmac.new(stored, auth, hashlib.sha256).digest(), strict=True))
    send(sock, b"p", f"{without_proof},p={base64.b64encode(proof).decode()}".encode())
    if reset_after_proof:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.close()
        return seen
    while True:
        kind, body = message(sock)
        seen.append((kind, struct.unpack("!i", body[:4])[0] if kind == b"R" else None))
        if kind == b"R" and seen[-1][1] == 12:
            server_key = hmac.new(salted, b"Server Key", hashlib.sha256).digest()
            expected = b"v=" + base64.b64encode(hmac.new(server_key, auth, hashlib.sha256).digest())
            assert body[4:] == expected, "the server's SCRAM signature does not prove it holds the verifier"
        if kind in (b"Z", b"E"):
            if kind == b"E":
                seen[-1] = (b"E", None)
                seen.append((fields(body)["C"].encode(), None))
            return seen
