"""Short-lived bearer tokens for the Iceberg REST catalog, derived from a Shoal API token.

A client signs in with OAuth2 client credentials (client_secret = the principal's Shoal
token) and gets `shoalrest_<token id>.<expiry>.<HMAC>`. The long-lived secret then travels
once, not on every request; the bearer names only the token id, so each request re-checks
that token (revoked or expired ends every bearer derived from it) and re-reads the
principal's grants. Nothing here is stored: the HMAC key is derived from the deployment's
signing key.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import time

from shoal.config import Settings
from shoal.governance import AuthError, Principal, Principals
from shoal.governance.keys import derived_key
from shoal.governance.principals import token_id

_BEARER = re.compile(r"^shoalrest_([0-9a-f]{16})\.([0-9]{10})\.([0-9a-f]{64})$")
PREFIX = "shoalrest_"


def _sign(settings: Settings, tid: str, expires: int) -> str:
    return hmac.new(
        derived_key(settings, "iceberg-rest-bearer"), f"{tid}\n{expires}".encode(), hashlib.sha256
    ).hexdigest()


def issue(settings: Settings, tid: str, lifetime_s: int) -> str:
    """A bearer for the token with this id (authenticated by the caller)."""
    expires = int(time.time()) + lifetime_s
    return f"{PREFIX}{tid}.{expires}.{_sign(settings, tid, expires)}"


def principal_of(settings: Settings, principals: Principals, bearer: str, *, client: str | None) -> Principal:
    """The principal a bearer (derived, or a Shoal API token itself) speaks for, or AuthError."""
    if not bearer.startswith(PREFIX):
        return principals.authenticate(bearer, client=client)  # a Shoal token used directly
    m = _BEARER.match(bearer)
    if not m:
        raise AuthError("malformed bearer token")
    tid, expires = m.group(1), int(m.group(2))
    if not hmac.compare_digest(_sign(settings, tid, expires).encode(), m.group(3).encode()):
        raise AuthError("invalid bearer token")
    if expires < time.time():
        raise AuthError("bearer token expired; sign in again")
    return principals.token_principal(tid)


def token_id_of(bearer: str) -> str | None:
    m = _BEARER.match(bearer)
    return m.group(1) if m else token_id(bearer)
