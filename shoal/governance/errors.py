"""Governance errors: a refused request says what was refused and why, never more."""

from __future__ import annotations

from shoal.exceptions import ShoalError


class GovernanceError(ShoalError):
    """A principal, grant, tag or token request is invalid."""


class AuthError(ShoalError):
    """Credentials are missing, wrong, expired or revoked."""

    exit_code = 3


class AccessDenied(ShoalError):
    """The principal lacks a privilege, or the request is never allowed (file reads, SET, ...)."""

    exit_code = 4


class NotFound(GovernanceError):
    """No such thing for this principal: what exists but may not be seen is answered alike."""
