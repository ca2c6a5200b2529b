"""Sign-in (`/v1/oauth/tokens`: OAuth2 client credentials and token exchange) and `/v1/config`."""

from __future__ import annotations

import base64
import time
from typing import Any
from urllib.parse import parse_qs, unquote_plus

from fastapi import Depends, Request
from fastapi.responses import JSONResponse

from shoal.governance import AuthError, GovernanceError, Principal
from shoal.governance.throttle import Throttled
from shoal.iceberg_rest import bearer
from shoal.iceberg_rest.common import ENDPOINTS, VIA, read_body, run_sync
from shoal.iceberg_rest.context import Rest
from shoal.iceberg_rest.routes import signed_in
from shoal.routing import Routes

routes = Routes()


@routes.post("/v1/oauth/tokens")
async def oauth_tokens(r: Rest, request: Request) -> JSONResponse:
    # OAuth2 client credentials: client_secret is the principal's Shoal API token.
    raw = await read_body(request, r.max_body)
    form = {k: v[0] for k, v in parse_qs(raw.decode(errors="replace")).items()}
    scheme, _, value = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() == "basic" and "client_secret" not in form:
        # client_secret_basic (RFC 6749 2.3.1), which DuckDB uses: base64 of "id:secret".
        try:
            cid, _, secret = base64.b64decode(value.strip(), validate=True).decode().partition(":")
        except (ValueError, UnicodeDecodeError):
            cid, secret = "", ""
        form.setdefault("client_id", unquote_plus(cid))
        form["client_secret"] = unquote_plus(secret)
    return await run_sync(sign_in, r, form, r.client_of(request))  # database work off the event loop


def _principal(r: Rest, form: dict[str, str], client: str | None) -> tuple[Principal, str, int] | None:
    """(who, token id, first sign-in time) for a supported grant; None for another grant."""
    grant = form.get("grant_type", "")
    signed_in_at = int(time.time())
    if grant == "client_credentials":
        who = r.principals.authenticate(form.get("client_secret", ""), client=client)
        tid = bearer.token_id_of(form.get("client_secret", ""))
    elif grant == "urn:ietf:params:oauth:grant-type:token-exchange":
        # Refresh: a still valid bearer (or token) for a fresh bearer of the same token,
        # which keeps the first sign-in time: past iceberg_rest_session_s, sign in again.
        subject = form.get("subject_token", "")
        who = bearer.principal_of(r.settings, r.principals, subject, client=client)
        tid = bearer.token_id_of(subject)
        signed_in_at = bearer.signed_in_at(subject) or signed_in_at
        if time.time() - signed_in_at > r.max_session:
            raise AuthError("this sign-in is too old to refresh; sign in again with the client secret")
    else:
        return None
    if form.get("client_id") and form["client_id"] != who.name:
        raise AuthError("client_id does not match the token's user")
    assert tid is not None
    return who, tid, signed_in_at


def sign_in(r: Rest, form: dict[str, str], client: str | None) -> JSONResponse:
    try:
        found = _principal(r, form, client)
        if found is None:
            return JSONResponse(
                {"error": "unsupported_grant_type", "error_description": "use grant_type=client_credentials"},
                status_code=400,
            )
    except Throttled as exc:
        r.audit.record("anonymous", "iceberg.login", None, False, reason="throttled", via=VIA, client=client)
        return JSONResponse({"error": "invalid_client", "error_description": exc.hint or "throttled"}, status_code=429)
    except (AuthError, GovernanceError) as exc:
        reason = str(exc).splitlines()[0]
        # Nobody is signed in: the claimed id is only a claim (and of any length).
        claimed = {"claimed_id": form["client_id"][:64]} if form.get("client_id") else {}
        r.audit.record("anonymous", "iceberg.login", None, False, reason=reason, via=VIA, client=client, **claimed)
        return JSONResponse({"error": "invalid_client", "error_description": reason}, status_code=401)
    who, tid, signed_in_at = found
    r.audit.record(who.name, "iceberg.login", None, True, via=VIA, client=client)
    token = bearer.issue(r.settings, tid, r.lifetime, signed_in_at=signed_in_at, max_s=r.max_session)
    return JSONResponse(
        {
            "access_token": token,
            "token_type": "bearer",
            "expires_in": min(r.lifetime, signed_in_at + r.max_session - int(time.time())),
            "issued_token_type": "urn:ietf:params:oauth:token-type:access_token",
        },
        headers={"Cache-Control": "no-store"},
    )


@routes.get("/v1/config")
def config(r: Rest, _who: Principal = Depends(signed_in)) -> dict[str, Any]:
    return {"defaults": {}, "overrides": {}, "endpoints": ENDPOINTS}
