"""The Iceberg REST catalog routes (apache/iceberg open-api/rest-catalog-open-api.yaml), governed.

Tables live in the lake's own catalog database (the Iceberg JDBC catalog Spark writes),
opened with PyIceberg's SqlCatalog: a commit goes through its `commit_table`, which checks
the client's requirements against the current metadata and swaps the metadata pointer only
if nobody committed in between (Iceberg's optimistic concurrency; a lost race is a 409).

Every request is signed in (a bearer from /v1/oauth/tokens, or a Shoal API token) and
re-checked: the token must still be active and the grants are read anew. Governance names
tables DATABASE.TABLE, so only single-level namespaces are served to non-admins.
"""

from __future__ import annotations

import base64
import json
import logging
import time
from typing import Any
from urllib.parse import parse_qs, unquote_plus

from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from pydantic import TypeAdapter, ValidationError

from shoal.config import Settings
from shoal.exceptions import DependencyError
from shoal.governance import AuditLog, AuthError, Governance, GovernanceError, Principal, Principals
from shoal.governance.grants import IDENTIFIER
from shoal.governance.throttle import Throttled
from shoal.iceberg_rest import bearer, policy

VIA = "iceberg-rest"
MAX_JSON_DEPTH = 100  # deeper is refused (a schema of ~30 nested structs fits)
log = logging.getLogger(__name__)
PG_POINTER = (
    "an engine that reads the files itself cannot apply column, row or mask restrictions; "
    "query this table through Shoal's governed PostgreSQL endpoint instead (shoal serve --pg; docs/bi.md)"
)
ENDPOINTS = [
    "GET /v1/{prefix}/namespaces",
    "POST /v1/{prefix}/namespaces",
    "GET /v1/{prefix}/namespaces/{namespace}",
    "HEAD /v1/{prefix}/namespaces/{namespace}",
    "DELETE /v1/{prefix}/namespaces/{namespace}",
    "GET /v1/{prefix}/namespaces/{namespace}/tables",
    "POST /v1/{prefix}/namespaces/{namespace}/tables",
    "GET /v1/{prefix}/namespaces/{namespace}/tables/{table}",
    "HEAD /v1/{prefix}/namespaces/{namespace}/tables/{table}",
    "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}",
    "DELETE /v1/{prefix}/namespaces/{namespace}/tables/{table}",
    "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}/metrics",
]


class RestError(Exception):
    """An error in the specification's shape: {"error": {"message", "type", "code"}}."""

    def __init__(self, code: int, kind: str, message: str) -> None:
        super().__init__(message)
        self.code, self.kind, self.message = code, kind, message


def _error(code: int, kind: str, message: str) -> JSONResponse:
    return JSONResponse({"error": {"message": message, "type": kind, "code": code}}, status_code=code)


def open_catalog(settings: Settings) -> Any:
    """PyIceberg's SqlCatalog over the lake's catalog database (same name as Spark's catalog)."""
    try:
        from pyiceberg.catalog.sql import SqlCatalog
    except ModuleNotFoundError as exc:
        raise DependencyError(
            "the Iceberg REST catalog needs PyIceberg", hint="pip install 'shoal[iceberg-rest]'"
        ) from exc

    class GovernedSqlCatalog(SqlCatalog):
        """FileIO from the catalog's own properties only: a table's properties (`py-io-impl`,
        `s3.endpoint`, keys) never choose the class the server imports or where it connects."""

        def _load_file_io(self, properties: Any = None, location: str | None = None) -> Any:
            from pyiceberg.io import load_file_io

            return load_file_io(dict(self.properties), location)

    props = {"uri": settings.catalog_sqlalchemy_uri, "warehouse": settings.warehouse_uri}
    props.update(_storage_props(settings, secrets=True))
    return GovernedSqlCatalog(settings.catalog.name, **props)


def _storage_props(settings: Settings, *, secrets: bool) -> dict[str, str]:
    """FileIO settings for an S3 warehouse; `secrets` adds the server's own keys (never sent)."""
    if not settings.warehouse_uri.startswith(("s3://", "s3a://")):
        return {}
    st = settings.storage
    out = {"s3.region": st.region, "client.region": st.region}
    if st.endpoint:
        out["s3.endpoint"] = st.endpoint
    out["s3.path-style-access"] = "true" if st.path_style else "false"
    out["s3.force-virtual-addressing"] = "false" if st.path_style else "true"
    if secrets and st.access_key and st.secret_key:
        out["s3.access-key-id"] = st.access_key.get_secret_value()
        out["s3.secret-access-key"] = st.secret_key.get_secret_value()
    return out


def _namespace(raw: str) -> tuple[str, ...]:
    # Levels are joined by the unit separator (%1F) in paths and query parameters.
    parts = tuple(raw.split("\x1f"))
    if not all(parts):
        raise RestError(400, "BadRequestException", f"invalid namespace {raw!r}")
    return parts


def create_app(settings: Settings, *, catalog: Any | None = None) -> FastAPI:  # noqa: C901 - the route table: each nested handler counts toward it
    app = FastAPI(title="Shoal Iceberg REST catalog", docs_url=None, redoc_url=None, openapi_url=None)
    cat = catalog if catalog is not None else open_catalog(settings)
    principals = Principals(settings)
    gov = Governance(settings)
    audit = AuditLog(settings)
    lifetime = settings.server.iceberg_rest_token_s
    max_session = settings.server.iceberg_rest_session_s
    max_body = settings.server.iceberg_rest_max_body_bytes
    s3 = settings.warehouse_uri.startswith(("s3://", "s3a://"))

    # ---- errors -----------------------------------------------------------------------------
    @app.exception_handler(RestError)
    async def _rest_error(_r: Request, exc: RestError) -> JSONResponse:
        return _error(exc.code, exc.kind, exc.message)

    @app.exception_handler(RequestValidationError)
    async def _invalid(_r: Request, exc: RequestValidationError) -> JSONResponse:
        return _error(400, "BadRequestException", f"invalid request: {str(exc).splitlines()[0]}")

    @app.exception_handler(ValidationError)
    async def _invalid_body(_r: Request, exc: ValidationError) -> JSONResponse:
        errors = exc.errors()
        if not errors:
            return _error(400, "BadRequestException", f"invalid request body: {exc}")
        where = ".".join(str(p) for p in errors[0]["loc"]) or "?"
        return _error(400, "BadRequestException", f"invalid request body at {where}: {errors[0]['msg']}")

    def failed(exc: Exception, who: Principal, action: str, resource: str, client: str | None) -> Exception:
        """A create or commit that did not finish: RestErrors were answered (and refusals audited)
        already; anything else is audited as an error and answered in the spec's shape, without
        a traceback. Input errors (bad JSON, invalid updates) are 400s, also audited."""
        if isinstance(exc, RestError):
            if exc.code in (400, 413):
                audit.record(who.name, action, resource, False, reason=exc.message[:200], via=VIA, client=client)
            return exc
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
        code, kind = next(
            ((c, k) for t, (c, k) in known.items() if isinstance(exc, t)), (500, "ServiceFailureException")
        )
        reason = f"{'error' if code == 500 else 'invalid'}: {type(exc).__name__}"
        audit.record(who.name, action, resource, False, reason=reason, via=VIA, client=client)
        if code == 500:
            log.error("Iceberg REST %s on %s failed", action, resource, exc_info=exc)
            return RestError(500, kind, f"{action} failed on the server ({type(exc).__name__}); see the server log")
        first = str(exc).splitlines()[0] if str(exc) else kind
        return RestError(code, kind, first[:500])

    # ---- sign-in ----------------------------------------------------------------------------
    def client_of(request: Request) -> str | None:
        return request.client.host if request.client else None

    def signed_in(request: Request) -> Principal:
        header = request.headers.get("authorization", "")
        scheme, _, value = header.partition(" ")
        client = client_of(request)
        if scheme.lower() != "bearer" or not value.strip():
            raise RestError(401, "NotAuthorizedException", "sign in: send Authorization: Bearer <token>")
        try:
            return bearer.principal_of(settings, principals, value.strip(), client=client)
        except Throttled as exc:
            audit.record("anonymous", "iceberg.auth", None, False, reason="throttled", via=VIA, client=client)
            raise RestError(429, "TooManyRequestsException", exc.hint or "too many failed sign-ins") from None
        except (AuthError, GovernanceError) as exc:
            audit.record(
                "anonymous", "iceberg.auth", None, False, reason=str(exc).splitlines()[0], via=VIA, client=client
            )
            raise RestError(401, "NotAuthorizedException", str(exc).splitlines()[0]) from None

    @app.post("/v1/oauth/tokens")
    async def oauth_tokens(request: Request) -> JSONResponse:
        # OAuth2 client credentials: client_secret is the principal's Shoal API token.
        raw = await _body(request, max_body)
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
        return await _run(sign_in, form, client_of(request))  # database work off the event loop

    def sign_in(form: dict[str, str], client: str | None) -> JSONResponse:
        grant = form.get("grant_type", "")
        try:
            signed_in_at = int(time.time())
            if grant == "client_credentials":
                who = principals.authenticate(form.get("client_secret", ""), client=client)
                tid = bearer.token_id_of(form.get("client_secret", ""))
            elif grant == "urn:ietf:params:oauth:grant-type:token-exchange":
                # Refresh: a still valid bearer (or token) for a fresh bearer of the same token,
                # which keeps the first sign-in time: past iceberg_rest_session_s, sign in again.
                subject = form.get("subject_token", "")
                who = bearer.principal_of(settings, principals, subject, client=client)
                tid = bearer.token_id_of(subject)
                signed_in_at = bearer.signed_in_at(subject) or signed_in_at
                if time.time() - signed_in_at > max_session:
                    raise AuthError("this sign-in is too old to refresh; sign in again with the client secret")
            else:
                return JSONResponse(
                    {"error": "unsupported_grant_type", "error_description": "use grant_type=client_credentials"},
                    status_code=400,
                )
            if form.get("client_id") and form["client_id"] != who.name:
                raise AuthError("client_id does not match the token's user")
            assert tid is not None
        except Throttled as exc:
            audit.record("anonymous", "iceberg.login", None, False, reason="throttled", via=VIA, client=client)
            return JSONResponse(
                {"error": "invalid_client", "error_description": exc.hint or "throttled"}, status_code=429
            )
        except (AuthError, GovernanceError) as exc:
            reason = str(exc).splitlines()[0]
            # Nobody is signed in: the claimed id is only a claim (and of any length).
            claimed = {"claimed_id": form["client_id"][:64]} if form.get("client_id") else {}
            audit.record("anonymous", "iceberg.login", None, False, reason=reason, via=VIA, client=client, **claimed)
            return JSONResponse({"error": "invalid_client", "error_description": reason}, status_code=401)
        audit.record(who.name, "iceberg.login", None, True, via=VIA, client=client)
        token = bearer.issue(settings, tid, lifetime, signed_in_at=signed_in_at, max_s=max_session)
        return JSONResponse(
            {
                "access_token": token,
                "token_type": "bearer",
                "expires_in": min(lifetime, signed_in_at + max_session - int(time.time())),
                "issued_token_type": "urn:ietf:params:oauth:token-type:access_token",
            },
            headers={"Cache-Control": "no-store"},
        )

    @app.get("/v1/config")
    def config(_who: Principal = Depends(signed_in)) -> dict[str, Any]:
        return {"defaults": {}, "overrides": {}, "endpoints": ENDPOINTS}

    # ---- what a principal may see -------------------------------------------------------------
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

    def readable(who: Principal, ns: tuple[str, ...], name: str) -> bool:
        if who.is_admin:
            return True
        full = table_name(ns, name)
        return full is not None and "SELECT" in gov.privileges(who, full)

    def database_grant(who: Principal, db: str, privileges: set[str]) -> bool:
        return any(
            g.target_kind == "DATABASE" and g.target == db.lower() and g.privilege in privileges
            for g in gov.grants_for(who)
        )

    def namespace_visible(who: Principal, ns: tuple[str, ...]) -> bool:
        if who.is_admin:
            return cat.namespace_exists(ns)
        if len(ns) != 1 or not IDENTIFIER.match(ns[0]) or ns[0] != ns[0].lower() or not cat.namespace_exists(ns):
            return False  # nested (or mixed-case) namespaces have no governance name: deny by default
        if database_grant(who, ns[0], {"SELECT", "ALL"}):
            return True
        return any(readable(who, ns, t[-1]) for t in cat.list_tables(ns))

    def no_namespace(ns: tuple[str, ...]) -> RestError:
        return RestError(404, "NoSuchNamespaceException", f"Namespace does not exist: {'.'.join(ns)}")

    def no_table(ns: tuple[str, ...], name: str) -> RestError:
        # The same answer whether the table is missing or unreadable: listing reveals no more.
        return RestError(404, "NoSuchTableException", f"Table does not exist: {'.'.join((*ns, name))}")

    # ---- namespaces ---------------------------------------------------------------------------
    @app.get("/v1/namespaces")
    def list_namespaces(parent: str | None = None, who: Principal = Depends(signed_in)) -> dict[str, Any]:
        base = _namespace(parent) if parent else ()
        if base and not namespace_visible(who, base):
            raise no_namespace(base)
        found = [tuple(n) for n in cat.list_namespaces(base)]
        return {"namespaces": [list(n) for n in found if namespace_visible(who, n)]}

    @app.post("/v1/namespaces")
    async def create_namespace(request: Request, who: Principal = Depends(signed_in)) -> dict[str, Any]:
        body = await _json(request, max_body)
        ns = tuple(body.get("namespace") or ())
        if not ns or not all(isinstance(p, str) and p for p in ns):
            raise RestError(400, "BadRequestException", "namespace: a non-empty list of names is required")
        if not who.is_admin:
            audit.record(who.name, "iceberg.create_namespace", ".".join(ns), False, reason="admins only", via=VIA)
            raise RestError(403, "ForbiddenException", f"{who.name} may not create namespaces (admins only)")
        props = {str(k): str(v) for k, v in (body.get("properties") or {}).items()}
        cat.create_namespace(ns, props)
        audit.record(who.name, "iceberg.create_namespace", ".".join(ns), True, via=VIA)
        return {"namespace": list(ns), "properties": props}

    @app.get("/v1/namespaces/{namespace}")
    def load_namespace(namespace: str, who: Principal = Depends(signed_in)) -> dict[str, Any]:
        ns = _namespace(namespace)
        if not namespace_visible(who, ns):
            raise no_namespace(ns)
        return {"namespace": list(ns), "properties": cat.load_namespace_properties(ns)}

    @app.head("/v1/namespaces/{namespace}")
    def namespace_exists(namespace: str, who: Principal = Depends(signed_in)) -> Response:
        return Response(status_code=204 if namespace_visible(who, _namespace(namespace)) else 404)

    @app.delete("/v1/namespaces/{namespace}")
    def drop_namespace(namespace: str, who: Principal = Depends(signed_in)) -> Response:
        ns = _namespace(namespace)
        if not who.is_admin:
            audit.record(who.name, "iceberg.drop_namespace", ".".join(ns), False, reason="admins only", via=VIA)
            raise RestError(403, "ForbiddenException", f"{who.name} may not drop namespaces (admins only)")
        cat.drop_namespace(ns)
        audit.record(who.name, "iceberg.drop_namespace", ".".join(ns), True, via=VIA)
        return Response(status_code=204)

    # ---- tables -------------------------------------------------------------------------------
    @app.get("/v1/namespaces/{namespace}/tables")
    def list_tables(namespace: str, who: Principal = Depends(signed_in)) -> dict[str, Any]:
        ns = _namespace(namespace)
        if not namespace_visible(who, ns):
            raise no_namespace(ns)
        names = [t[-1] for t in cat.list_tables(ns)]
        return {
            "identifiers": [{"namespace": list(ns), "name": t} for t in sorted(names) if readable(who, ns, t)],
            "next-page-token": None,
        }

    def load_for(who: Principal, ns: tuple[str, ...], name: str, action: str, client: str | None) -> Any:
        """The table, if this principal may read all of it (audited when refused)."""
        from pyiceberg.exceptions import NoSuchTableError

        resource = ".".join((*ns, name))
        if not readable(who, ns, name):
            audit.record(who.name, action, resource, False, reason="no SELECT on the table", via=VIA, client=client)
            raise no_table(ns, name)
        try:
            table = cat.load_table((*ns, name))
        except NoSuchTableError:
            audit.record(who.name, action, resource, False, reason="no such table", via=VIA, client=client)
            raise no_table(ns, name) from None
        if not who.is_admin:
            full = table_name(ns, name)
            assert full is not None
            columns = [f.name for f in table.schema().fields]
            if not gov.access(who, full, columns).whole_table:
                reason = "SELECT is restricted (columns, rows or masks)"
                audit.record(who.name, action, resource, False, reason=reason, via=VIA, client=client)
                raise RestError(403, "ForbiddenException", f"{who.name} may read only part of {full}: {PG_POINTER}")
        return table

    def load_result(table: Any, request: Request) -> dict[str, Any]:
        out: dict[str, Any] = {
            "metadata-location": table.metadata_location,
            "metadata": json.loads(table.metadata.model_dump_json()),
            "config": _storage_props(settings, secrets=False),
        }
        if s3 and "vended-credentials" in request.headers.get("x-iceberg-access-delegation", ""):
            # Said plainly: no scoped credentials are vended (docs/engines.md); the client needs its own.
            out["config"]["shoal.vended-credentials"] = "unsupported; configure the client with its own S3 keys"
        return out

    @app.get("/v1/namespaces/{namespace}/tables/{table}")
    def load_table(namespace: str, table: str, request: Request, who: Principal = Depends(signed_in)) -> dict[str, Any]:
        ns, client = _namespace(namespace), client_of(request)
        tbl = load_for(who, ns, table, "iceberg.load", client)
        snap = tbl.metadata.current_snapshot_id
        audit.record(who.name, "iceberg.load", ".".join((*ns, table)), True, via=VIA, client=client, snapshot=snap)
        return load_result(tbl, request)

    @app.head("/v1/namespaces/{namespace}/tables/{table}")
    def table_exists(namespace: str, table: str, who: Principal = Depends(signed_in)) -> Response:
        ns = _namespace(namespace)
        ok = readable(who, ns, table) and cat.table_exists((*ns, table))
        return Response(status_code=204 if ok else 404)

    @app.post("/v1/namespaces/{namespace}/tables/{table}/metrics")
    def metrics(namespace: str, table: str, _who: Principal = Depends(signed_in)) -> Response:
        return Response(status_code=204)  # scan/commit reports: accepted, not kept

    @app.post("/v1/namespaces/{namespace}/tables")
    async def create_table(namespace: str, request: Request, who: Principal = Depends(signed_in)) -> dict[str, Any]:
        ns = _namespace(namespace)
        try:
            body = await _json(request, max_body)
            return await _run(create_sync, who, ns, body, request)
        except Exception as exc:  # noqa: BLE001 - every failure becomes the REST error `failed` maps it to, and is audited
            raise failed(exc, who, "iceberg.create", ".".join(ns), client_of(request)) from None

    def create_sync(who: Principal, ns: tuple[str, ...], body: dict[str, Any], request: Request) -> dict[str, Any]:
        from pyiceberg.partitioning import PartitionSpec
        from pyiceberg.schema import Schema
        from pyiceberg.table.sorting import SortOrder

        client = client_of(request)
        name = body.get("name")
        if not isinstance(name, str) or not name:
            raise RestError(400, "BadRequestException", "name: the table name is required")
        resource = ".".join((*ns, name))

        def refuse(reason: str) -> RestError:
            audit.record(who.name, "iceberg.create", resource, False, reason=reason, via=VIA, client=client)
            return RestError(403, "ForbiddenException", f"{who.name} may not create {resource}: {reason}")

        if body.get("stage-create"):
            raise RestError(406, "UnsupportedOperationException", "staged creates (CREATE TABLE AS) are not served")
        properties = {str(k): str(v) for k, v in (body.get("properties") or {}).items()}
        if not who.is_admin:
            full = table_name(ns, name)
            if full is None or full != resource:
                raise refuse("names must be one lower-case DATABASE and TABLE (letters, digits, _)")
            if not database_grant(who, ns[0], {"ALL"}):
                raise refuse(f"creating tables needs ALL on database {ns[0]}")
            if body.get("location"):
                raise refuse("only admins choose a table's location")
            unsafe = policy.unsafe_properties(properties)
            if unsafe:
                raise refuse(f"only admins set {', '.join(unsafe)}")
        schema = Schema.model_validate(body.get("schema") or {})
        kwargs: dict[str, Any] = {"schema": schema, "properties": properties}
        if body.get("partition-spec"):
            kwargs["partition_spec"] = PartitionSpec.model_validate(body["partition-spec"])
        if body.get("write-order"):
            kwargs["sort_order"] = SortOrder.model_validate(body["write-order"])
        if body.get("location"):
            kwargs["location"] = body["location"]
        tbl = cat.create_table((*ns, name), **kwargs)
        audit.record(who.name, "iceberg.create", resource, True, via=VIA, client=client, properties=sorted(properties))
        return load_result(tbl, request)

    requirements_adapter: TypeAdapter[Any] | None = None
    updates_adapter: TypeAdapter[Any] | None = None

    @app.post("/v1/namespaces/{namespace}/tables/{table}")
    async def commit(
        namespace: str, table: str, request: Request, who: Principal = Depends(signed_in)
    ) -> dict[str, Any]:
        nonlocal requirements_adapter, updates_adapter
        from pyiceberg.table.update import TableRequirement, TableUpdate

        if requirements_adapter is None or updates_adapter is None:
            requirements_adapter = TypeAdapter(tuple[TableRequirement, ...])
            updates_adapter = TypeAdapter(tuple[TableUpdate, ...])
        ns, client = _namespace(namespace), client_of(request)
        try:
            body = await _json(request, max_body)
            requirements = _parse(requirements_adapter, body.get("requirements") or [], "requirements")
            updates = _parse(updates_adapter, body.get("updates") or [], "updates")
            actions = [u.action for u in updates]
            return await _run(commit_sync, who, ns, table, requirements, updates, actions, client)
        except Exception as exc:  # noqa: BLE001 - every failure becomes the REST error `failed` maps it to, and is audited
            raise failed(exc, who, "iceberg.commit", ".".join((*ns, table)), client) from None

    def commit_sync(
        who: Principal,
        ns: tuple[str, ...],
        name: str,
        requirements: Any,
        updates: Any,
        actions: list[str],
        client: str | None,
    ) -> dict[str, Any]:
        from pyiceberg.exceptions import CommitFailedException

        resource = ".".join((*ns, name))
        tbl = load_for(who, ns, name, "iceberg.commit", client)  # a commit answers with the whole metadata

        # What the audit keeps besides the actions: property keys and statistics paths, never values.
        detail: dict[str, Any] = {"actions": actions}
        keys = sorted(
            {k for u in updates if u.action == "set-properties" for k in u.updates}
            | {k for u in updates if u.action == "remove-properties" for k in u.removals}
        )
        if keys:
            detail["properties"] = keys
        if policy.statistics_paths(updates):
            detail["statistics"] = policy.statistics_paths(updates)

        def refuse(reason: str) -> RestError:
            audit.record(who.name, "iceberg.commit", resource, False, reason=reason, via=VIA, client=client, **detail)
            return RestError(403, "ForbiddenException", f"{who.name} may not commit to {resource}: {reason}")

        need = policy.needs(updates)
        if need.unknown:
            raise refuse(f"update action(s) {', '.join(need.unknown)} are not served")
        if not who.is_admin:
            full = table_name(ns, name)
            assert full is not None
            if need.admin:
                raise refuse(f"{'; '.join(need.admin)} is for admins only")
            if need.owner and gov.owner(full) != who.name:
                raise refuse(f"{'; '.join(need.owner)} needs the table's owner or an admin")
            missing = sorted(need.privileges - gov.privileges(who, full))
            if missing:
                raise refuse(f"needs {' and '.join(missing)} on {full}")
            executable = policy.executable_properties(tbl.metadata.properties)
            if executable:  # committing would make PyIceberg import them: an admin removes them first
                raise refuse(f"the table carries {', '.join(executable)}; an admin must remove it first")
        # Manifests the current snapshot already has are the table's; every other one is read.
        current = tbl.metadata.current_snapshot()
        known = {m.manifest_path for m in current.manifests(tbl.io)} if current else set()
        owner = who.is_admin or gov.owner(table_name(ns, name) or "") == who.name
        try:  # the client's requirements first: a writer that lost a race gets its 409 and retries
            for requirement in requirements:
                requirement.validate(tbl.metadata)
        except CommitFailedException as exc:
            audit.record(
                who.name, "iceberg.commit", resource, False, reason=f"conflict: {exc}", via=VIA, client=client, **detail
            )
            raise RestError(409, "CommitFailedException", str(exc)) from None
        try:
            policy.check_statistics(updates, tbl.metadata.location)
            policy.check_added_files(updates, tbl.io, tbl.metadata.location, known)
            if not owner and "add-snapshot" in actions:  # the "append" label is checked against the files
                policy.check_append(updates, tbl.io, tbl.metadata)
                # ...against this version of the table: should another commit land first, the
                # swap fails (409) rather than drop that commit's files.
                from pyiceberg.table.update import AssertRefSnapshotId

                current_id = tbl.metadata.current_snapshot_id
                pin = {"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": current_id}
                requirements = (*requirements, AssertRefSnapshotId.model_validate(pin))
        except policy.OutsideLocation as exc:
            raise refuse(f"files outside the table's location: {exc.path}") from None
        except policy.NotAnAppend as exc:
            raise refuse(f"not an append: {exc}; removing or replacing data needs the table's owner") from None
        except (OSError, ValueError) as exc:
            raise refuse(f"the files this commit adds cannot be read: {str(exc).splitlines()[0]}") from None
        try:
            resp = cat.commit_table(tbl, requirements, updates)
        except CommitFailedException as exc:
            audit.record(
                who.name,
                "iceberg.commit",
                resource,
                False,
                reason=f"conflict: {exc}",
                via=VIA,
                client=client,
                **detail,
            )
            raise RestError(409, "CommitFailedException", str(exc)) from None
        snap = resp.metadata.current_snapshot_id
        audit.record(who.name, "iceberg.commit", resource, True, via=VIA, client=client, snapshot=snap, **detail)
        return {"metadata-location": resp.metadata_location, "metadata": json.loads(resp.metadata.model_dump_json())}

    @app.delete("/v1/namespaces/{namespace}/tables/{table}")
    def drop_table(
        namespace: str,
        table: str,
        request: Request,
        purgeRequested: bool = False,
        who: Principal = Depends(signed_in),  # the spec's name
    ) -> Response:
        ns, client = _namespace(namespace), client_of(request)
        resource = ".".join((*ns, table))
        if not readable(who, ns, table):
            audit.record(
                who.name, "iceberg.drop", resource, False, reason="no SELECT on the table", via=VIA, client=client
            )
            raise no_table(ns, table)
        full = table_name(ns, table)
        if not who.is_admin and (full is None or "DROP" not in gov.privileges(who, full)):
            audit.record(who.name, "iceberg.drop", resource, False, reason="no DROP", via=VIA, client=client)
            raise RestError(403, "ForbiddenException", f"{who.name} may not drop {resource}: needs DROP")
        if purgeRequested:
            raise RestError(406, "UnsupportedOperationException", "purge is not served: drop without purge")
        cat.drop_table((*ns, table))
        audit.record(who.name, "iceberg.drop", resource, True, via=VIA, client=client)
        return Response(status_code=204)

    _map_pyiceberg_errors(app)
    return app


async def _body(request: Request, limit: int) -> bytes:
    """The request body, refused (413) past `limit` bytes, before all of it is read."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise RestError(413, "RequestTooLargeException", f"the request body is larger than {limit} bytes")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise RestError(413, "RequestTooLargeException", f"the request body is larger than {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def _depth(value: Any) -> int:
    """How deeply a parsed JSON value nests (iteratively: no recursion to exhaust)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        v, d = stack.pop()
        if isinstance(v, dict):
            v = list(v.values())
        if isinstance(v, list):
            deepest = max(deepest, d)
            stack.extend((x, d + 1) for x in v if isinstance(x, (dict, list)))
    return deepest


async def _json(request: Request, limit: int) -> dict[str, Any]:
    try:
        body = json.loads(await _body(request, limit) or b"{}")
    except RecursionError:
        raise RestError(400, "BadRequestException", "the request body nests too deeply") from None
    except ValueError as exc:
        raise RestError(400, "BadRequestException", f"the request body is not JSON: {exc}") from None
    if not isinstance(body, dict):
        raise RestError(400, "BadRequestException", "the request body must be a JSON object")
    if _depth(body) > MAX_JSON_DEPTH:
        raise RestError(400, "BadRequestException", f"the request body nests deeper than {MAX_JSON_DEPTH} levels")
    return body


def _parse(adapter: TypeAdapter[Any], value: Any, what: str) -> Any:
    """Validate one part of a request body; a refusal names where, e.g. updates[0].action."""
    try:
        return adapter.validate_python(value)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = what + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in first["loc"])
        raise RestError(400, "BadRequestException", f"invalid {where}: {first['msg']}") from None


async def _run(fn: Any, *args: Any) -> Any:
    from starlette.concurrency import run_in_threadpool

    return await run_in_threadpool(fn, *args)


def _map_pyiceberg_errors(app: FastAPI) -> None:
    from pyiceberg import exceptions as e

    mapping: list[tuple[type[Exception], int, str]] = [
        (e.NoSuchTableError, 404, "NoSuchTableException"),
        (e.NoSuchNamespaceError, 404, "NoSuchNamespaceException"),
        (e.TableAlreadyExistsError, 409, "AlreadyExistsException"),
        (e.NamespaceAlreadyExistsError, 409, "AlreadyExistsException"),
        (e.NamespaceNotEmptyError, 409, "NamespaceNotEmptyException"),
        (e.CommitFailedException, 409, "CommitFailedException"),
        (ValueError, 400, "BadRequestException"),
    ]
    for cls, code, kind in mapping:

        def handler(_r: Request, exc: Exception, code: int = code, kind: str = kind) -> JSONResponse:
            return _error(code, kind, str(exc).splitlines()[0] if str(exc) else kind)

        app.add_exception_handler(cls, handler)
