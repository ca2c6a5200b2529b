"""Short-lived bearer tokens for the Iceberg REST catalog, derived from a Shoal API token.

A client signs in with OAuth2 client credentials (client_secret = the principal's Shoal
token) and gets `shoalrest_<token id>.<expiry>.<sign-in time>.<HMAC>`. The long-lived secret then travels
once, not on every request; the bearer names only the token id, so each request re-checks
that token (revoked or expired ends every bearer derived from it) and re-reads the
principal's grants. The sign-in time stays the same through refreshes (token exchange), so
a bearer cannot be renewed forever without the secret. Nothing here is stored: the HMAC key is derived from the deployment's
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

_BEARER = re.compile(r"^shoalrest_([0-9a-f]{16})\.([0-9]{10})\.([0-9]{10})\.([0-9a-f]{64})$")
PREFIX = "shoalrest_"


def _sign(settings: Settings, tid: str, expires: int, signed_in: int) -> str:
    return hmac.new(
        derived_key(settings, "iceberg-rest-bearer"), f"{tid}\n{expires}\n{signed_in}".encode(), hashlib.sha256
    ).hexdigest()


def issue(
    settings: Settings, tid: str, lifetime_s: int, *, signed_in_at: int | None = None, max_s: int | None = None
) -> str:
    """A bearer for the token with this id (authenticated by the caller), signed in at
    `signed_in_at` (now by default); it never outlives `max_s` after that sign-in."""
    now = int(time.time())
    signed_in = now if signed_in_at is None else signed_in_at
    expires = now + lifetime_s
    if max_s is not None:
        expires = min(expires, signed_in + max_s)
    return f"{PREFIX}{tid}.{expires}.{signed_in}.{_sign(settings, tid, expires, signed_in)}"


def principal_of(settings: Settings, principals: Principals, bearer: str, *, client: str | None) -> Principal:
    """The principal a bearer (derived, or a Shoal API token itself) speaks for, or AuthError."""
    if not bearer.startswith(PREFIX):
        return principals.authenticate(bearer, client=client)  # a Shoal token used directly
    m = _BEARER.match(bearer)
    if not m:
        raise AuthError("malformed bearer token")
    tid, expires, signed_in = m.group(1), int(m.group(2)), int(m.group(3))
    if not hmac.compare_digest(_sign(settings, tid, expires, signed_in).encode(), m.group(4).encode()):
        raise AuthError("invalid bearer token")
    if expires < time.time():
        raise AuthError("bearer token expired; sign in again")
    return principals.token_principal(tid)


def token_id_of(bearer: str) -> str | None:
    m = _BEARER.match(bearer)
    return m.group(1) if m else token_id(bearer)


def signed_in_at(bearer: str) -> int | None:
    """When the sign-in behind a bearer happened (None for a Shoal token: that is a sign-in)."""
    m = _BEARER.match(bearer)
    return int(m.group(3)) if m else None
