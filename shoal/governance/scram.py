"""SCRAM-SHA-256 verifiers for API tokens (RFC 5802 / RFC 7677, as PostgreSQL stores them).

A verifier is `SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:<ServerKey>` (base64 parts), the
same text PostgreSQL keeps in pg_authid. It lets a server check a client's SCRAM proof without
ever holding the secret, and a leaked verifier cannot be replayed as a proof.

Every verifier of one user shares one salt, derived from the deployment's key and the user's
name: the server must send the salt before it knows which of the user's tokens the client
holds, and then checks the proof against each of them. Unknown users get a salt from the same
derivation, so the reply does not tell whether a user exists. 4096 iterations (PostgreSQL's
default) suffice because tokens carry 256 random bits: the iteration count only slows guessing
of low-entropy passwords, which never get a verifier (see docs/bi.md).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from dataclasses import dataclass

from shoal.config import Settings

ITERATIONS = 4096
PREFIX = "SCRAM-SHA-256"


@dataclass(frozen=True)
class Verifier:
    iterations: int
    salt: bytes
    stored_key: bytes
    server_key: bytes

    def __str__(self) -> str:
        b64 = _b64
        return f"{PREFIX}${self.iterations}:{b64(self.salt)}${b64(self.stored_key)}:{b64(self.server_key)}"


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def user_salt(settings: Settings, name: str) -> bytes:
    from shoal.governance.keys import derived_key

    return hmac.new(derived_key(settings, "pg-scram-salt"), name.encode("utf-8"), hashlib.sha256).digest()[:16]


def make_verifier(secret: str, salt: bytes, iterations: int = ITERATIONS) -> Verifier:
    # Tokens are ASCII, so SASLprep leaves them as they are.
    salted = hashlib.pbkdf2_hmac("sha256", secret.encode("utf-8"), salt, iterations)
    client_key = hmac.new(salted, b"Client Key", hashlib.sha256).digest()
    server_key = hmac.new(salted, b"Server Key", hashlib.sha256).digest()
    return Verifier(iterations, salt, hashlib.sha256(client_key).digest(), server_key)


def parse_verifier(text: str | None) -> Verifier | None:
    """The stored text back as a Verifier; None for a missing or malformed one."""
    try:
        assert text is not None
        prefix, head, keys = text.split("$")
        iterations, salt = head.split(":")
        stored, server = keys.split(":")
        if prefix != PREFIX:
            return None
        d = base64.b64decode
        return Verifier(int(iterations), d(salt, validate=True), d(stored, validate=True), d(server, validate=True))
    except (AssertionError, ValueError):
        return None


def proof_matches(verifier: Verifier, auth_message: bytes, proof: bytes) -> bool:
    """Whether a ClientProof was made from the secret behind this verifier (constant time)."""
    if len(proof) != len(verifier.stored_key):
        return False
    signature = hmac.new(verifier.stored_key, auth_message, hashlib.sha256).digest()
    client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
    return hmac.compare_digest(hashlib.sha256(client_key).digest(), verifier.stored_key)


def server_signature(verifier: Verifier, auth_message: bytes) -> bytes:
    return hmac.new(verifier.server_key, auth_message, hashlib.sha256).digest()
