"""Console sign-in: the cookie names and the CSRF comparison. The session store itself is
governance's (shoal.governance.sessions), so token revocation, password changes and principal
removal end sessions from the CLI as well as from here."""

from __future__ import annotations

import hmac

from shoal.governance.sessions import Session, Sessions

COOKIE = "shoal_session"
LOGIN_COOKIE = "shoal_login_csrf"  # double-submit token for the sign-in form (no session yet)


def same(a: str | None, b: str | None) -> bool:
    return bool(a) and bool(b) and hmac.compare_digest(str(a), str(b))


__all__ = ["COOKIE", "LOGIN_COOKIE", "Session", "Sessions", "same"]
