"""What every REST catalog route shares: the catalog, governance, the audit, sign-in, and what a
principal may see (the route modules in resources/ take it as their first argument)."""

from __future__ import annotations

import json
import logging
from typing import Any

from fastapi import Request
from pydantic import ValidationError

from shoal.config import Settings
from shoal.governance import AuditLog, AuthError, Governance, GovernanceError, Principal, Principals
from shoal.governance.grants import IDENTIFIER
from shoal.governance.throttle import Throttled
from shoal.iceberg_rest import bearer
from shoal.iceberg_rest.common import PG_POINTER, VIA, RestError
from shoal.pyiceberg_catalog import storage_props

log = logging.getLogger("shoal.iceberg_rest.app")


class Rest:
    def __init__(self, settings: Settings, cat: Any) -> None:
        self.settings = settings
        self.cat = cat
        self.principals = Principals(settings)
        self.gov = Governance(settings)
        self.audit = AuditLog(settings)
        self.lifetime = settings.server.iceberg_rest_token_s
        self.max_session = settings.server.iceberg_rest_session_s
        self.max_body = settings.server.iceberg_rest_max_body_bytes
        self.s3 = settings.warehouse_uri.startswith(("s3://", "s3a://"))

    # ---- sign-in ----------------------------------------------------------------------------
    @staticmethod
    def client_of(request: Request) -> str | None:
        return request.client.host if request.client else None

    def signed_in(self, request: Request) -> Principal:
        header = request.headers.get("authorization", "")
        scheme, _, value = header.partition(" ")
        client = self.client_of(request)
        if scheme.lower() != "bearer" or not value.strip():
            raise RestError(401, "NotAuthorizedException", "sign in: send Authorization: Bearer <token>")
        try:
            return bearer.principal_of(self.settings, self.principals, value.strip(), client=client)
        except Throttled as exc:
            self.audit.record("anonymous", "iceberg.auth", None, False, reason="throttled", via=VIA, client=client)
            raise RestError(429, "TooManyRequestsException", exc.hint or "too many failed sign-ins") from None
        except (AuthError, GovernanceError) as exc:
            reason = str(exc).splitlines()[0]
            self.audit.record("anonymous", "iceberg.auth", None, False, reason=reason, via=VIA, client=client)
            raise RestError(401, "NotAuthorizedException", str(exc).splitlines()[0]) from None

    # ---- failures -----------------------------------------------------------------------------
    def failed(self, exc: Exception, who: Principal, action: str, resource: str, client: str | None) -> Exception:
        """A create or commit that did not finish: RestErrors were answered (and refusals audited)
        already; anything else is audited as an error and answered in the spec's shape, without
        a traceback. Input errors (bad JSON, invalid updates) are 400s, also audited."""
        if isinstance(exc, RestError):
            if exc.code in (400, 413):
                self.audit.record(who.name, action, resource, False, reason=exc.message[:200], via=VIA, client=client)
            return exc
        code, kind = _classify(exc)
        reason = f"{'error' if code == 500 else 'invalid'}: {type(exc).__name__}"
        self.audit.record(who.name, action, resource, False, reason=reason, via=VIA, client=client)
        if code == 500:
            log.error("Iceberg REST %s on %s failed", action, resource, exc_info=exc)
            return RestError(500, kind, f"{action} failed on the server ({type(exc).__name__}); see the server log")
        first = str(exc).splitlines()[0] if str(exc) else kind
        return RestError(code, kind, first[:500])

    # ---- what a principal may see -------------------------------------------------------------
    @staticmethod
    def table_name(ns: tuple[str, ...], name: str) -> str | None:
        """The governance name DATABASE.TABLE, or None where governance cannot name it."""
        # Lower case only: grants name tables in lower case, and a mixed-case table (which only
        # an admin can make) must not be reached through a grant on its lower-case twin.
        if (
            len(ns) == 1
            and IDENTIFIER.match(ns[0])
            and IDENTIFIER.match(name)
            and f"{ns[0]}.{name}" == f"{ns[0]}.{name}".lower()
        ):
            return f"{ns[0]}.{name}"
        return None

    def discoverable(self, who: Principal, ns: tuple[str, ...], name: str) -> bool:
        """Whether the table shows in listings: the rule every face applies (Governance.discoverable)."""
        if who.is_admin:
            return True
        full = self.table_name(ns, name)
        return full is not None and self.gov.discoverable(who, full)

    def readable(self, who: Principal, ns: tuple[str, ...], name: str) -> bool:
        if who.is_admin:
            return True
        full = self.table_name(ns, name)
        return full is not None and "SELECT" in self.gov.privileges(who, full)

    def database_grant(self, who: Principal, db: str, privileges: set[str]) -> bool:
        return any(
            g.target_kind == "DATABASE" and g.target == db.lower() and g.privilege in privileges
            for g in self.gov.grants_for(who)
        )

    def namespace_visible(self, who: Principal, ns: tuple[str, ...]) -> bool:
        cat = self.cat
        if who.is_admin:
            return bool(cat.namespace_exists(ns))
        if len(ns) != 1 or not IDENTIFIER.match(ns[0]) or ns[0] != ns[0].lower() or not cat.namespace_exists(ns):
            return False  # nested (or mixed-case) namespaces have no governance name: deny by default
        if self.database_grant(who, ns[0], {"SELECT", "ALL"}):
            return True
        return any(self.discoverable(who, ns, t[-1]) for t in cat.list_tables(ns))

    @staticmethod
    def no_namespace(ns: tuple[str, ...]) -> RestError:
        return RestError(404, "NoSuchNamespaceException", f"Namespace does not exist: {'.'.join(ns)}")

    @staticmethod
    def no_table(ns: tuple[str, ...], name: str) -> RestError:
        # The same answer whether the table is missing or unreadable: listing reveals no more.
        return RestError(404, "NoSuchTableException", f"Table does not exist: {'.'.join((*ns, name))}")

    def load_for(self, who: Principal, ns: tuple[str, ...], name: str, action: str, client: str | None) -> Any:
        """The table, if this principal may read all of it (audited when refused)."""
        from pyiceberg.exceptions import NoSuchTableError

        resource = ".".join((*ns, name))
        if not self.readable(who, ns, name):
            self.audit.record(
                who.name, action, resource, False, reason="no SELECT on the table", via=VIA, client=client
            )
            raise self.no_table(ns, name)
        try:
            table = self.cat.load_table((*ns, name))
        except NoSuchTableError:
            self.audit.record(who.name, action, resource, False, reason="no such table", via=VIA, client=client)
            raise self.no_table(ns, name) from None
        if not who.is_admin:
            full = self.table_name(ns, name)
            assert full is not None
            columns = [f.name for f in table.schema().fields]
            if not self.gov.access(who, full, columns).whole_table:
                reason = "SELECT is restricted (columns, rows or masks)"
                self.audit.record(who.name, action, resource, False, reason=reason, via=VIA, client=client)
                raise RestError(403, "ForbiddenException", f"{who.name} may read only part of {full}: {PG_POINTER}")
        return table

    def load_result(self, table: Any, request: Request) -> dict[str, Any]:
        out: dict[str, Any] = {
            "metadata-location": table.metadata_location,
            "metadata": json.loads(table.metadata.model_dump_json()),
            "config": storage_props(self.settings, secrets=False),
        }
        if self.s3 and "vended-credentials" in request.headers.get("x-iceberg-access-delegation", ""):
            # Said plainly: no scoped credentials are vended (docs/engines.md); the client needs its own.
            out["config"]["shoal.vended-credentials"] = "unsupported; configure the client with its own S3 keys"
        return out


def _classify(exc: Exception) -> tuple[int, str]:
    """The HTTP status and the spec's error type of a failure that is not a RestError."""
    from pyiceberg.exceptions import (
        CommitFailedException,
        NoSuchNamespaceError,
        NoSuchTableError,
        TableAlreadyExistsError,
    )

    known: dict[type[Exception], tuple[int, str]] = {
        CommitFailedException: (409, "CommitFailedException"),
        TableAlreadyExistsError: (409, "AlreadyExistsException"),
        NoSuchTableError: (404, "NoSuchTableException"),
        NoSuchNamespaceError: (404, "NoSuchNamespaceException"),
        ValidationError: (400, "BadRequestException"),
        ValueError: (400, "BadRequestException"),
    }
    return next(((c, k) for t, (c, k) in known.items() if isinstance(exc, t)), (500, "ServiceFailureException"))
