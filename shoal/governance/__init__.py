"""Governance: principals, grants (table, column, row, cell, mask, tag), governed SQL, audit.

Public API: `Principals`, `Governance` (grants, tags, owners, evaluation), `GovernedSql`,
`AuditLog`, and the errors `GovernanceError`, `AuthError`, `AccessDenied`.
"""

from shoal.governance.audit import AuditLog
from shoal.governance.errors import AccessDenied, AuthError, GovernanceError
from shoal.governance.grants import Governance, Grant, TableAccess
from shoal.governance.principals import ADMIN, EVERYONE, Principal, Principals
from shoal.governance.sql import GovernedSql

__all__ = [
    "ADMIN",
    "EVERYONE",
    "AccessDenied",
    "AuditLog",
    "AuthError",
    "Governance",
    "GovernanceError",
    "GovernedSql",
    "Grant",
    "Principal",
    "Principals",
    "TableAccess",
]
