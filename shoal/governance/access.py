"""Raw objects leave the lake only through access points, and access requests become grants.

An access point names a raw-zone prefix (and optionally object tags), the principals it
serves and, optionally, the client networks allowed; it is always read-only. A read is
checked here, whether it comes with a token or with a signed URL: the principal (still)
belongs to the access point, the client address is in range, and the path, once resolved
(symlinks included), stays inside the raw zone and under the prefix. Signed URLs carry an
HMAC-SHA256 over access point, path, expiry and principal, with a key kept in the
workspace (mode 0600) or given in `[governance] signing_key`.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import ipaddress
import json
import re
import time
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import quote

from sqlalchemy import delete, insert, select, update

from shoal import storage
from shoal.config import Settings
from shoal.governance.audit import AuditLog
from shoal.governance.errors import AccessDenied, GovernanceError, NotFound
from shoal.governance.grants import Governance
from shoal.governance.keys import signing_key
from shoal.governance.principals import Principal, Principals
from shoal.governance.store import access_points, access_requests
from shoal.governance.store import access_tables as state_tables
from shoal.governance.throttle import Throttled, client_key
from shoal.lake import database
from shoal.lake.database import utcnow

_NAME = re.compile(r"^[a-z0-9][a-z0-9-]{1,62}$")


@dataclass(frozen=True)
class RawObject:
    """A raw object a read may return: its URI, file name and size; `local` when on local disk."""

    uri: str
    name: str
    size: int
    local: Path | None = None


class RawAccess:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.engine = database.engine(settings, state_tables)
        self.principals = Principals(settings)
        self.audit = AuditLog(settings)

    @property
    def raw_root(self) -> str:
        return storage.join(self.settings.warehouse_uri, "raw")

    # ---- access points ----------------------------------------------------------------------
    def create(
        self,
        by: Principal,
        name: str,
        *,
        prefix: str = "",
        principals: list[str],
        tags: dict[str, str] | None = None,
        cidrs: list[str] | None = None,
    ) -> dict[str, Any]:
        if not by.is_admin:
            raise AccessDenied(f"{by.name} may not create access points (admins only)")
        if not _NAME.match(name):
            raise GovernanceError(
                f"invalid access point name {name!r}", hint="lower-case letters, digits and '-', 2-63 characters"
            )
        if not principals:
            raise GovernanceError("an access point needs at least one --principal (deny by default)")
        for p in principals:
            self.principals.get_row(p)
        for c in cidrs or []:
            try:
                ipaddress.ip_network(c, strict=False)
            except ValueError as exc:
                raise GovernanceError(f"invalid network {c!r}: {exc}") from exc
        clean = _clean_path(prefix, allow_empty=True)
        with self.engine.begin() as conn:
            if conn.execute(select(access_points.c.name).where(access_points.c.name == name)).first():
                raise GovernanceError(f"access point {name!r} already exists")
            conn.execute(
                insert(access_points).values(
                    name=name,
                    prefix=clean,
                    tags=json.dumps(tags) if tags else None,
                    principals=json.dumps(sorted(set(principals))),
                    cidrs=json.dumps(cidrs) if cidrs else None,
                    created_by=by.name,
                    created_at=utcnow(),
                )
            )
        self.audit.record(by.name, "access_point.create", name, True)
        return self.get(name)

    def delete(self, by: Principal, name: str) -> None:
        if not by.is_admin:
            raise AccessDenied(f"{by.name} may not delete access points (admins only)")
        self.get(name)
        with self.engine.begin() as conn:
            conn.execute(delete(access_points).where(access_points.c.name == name))
        self.audit.record(by.name, "access_point.delete", name, True)

    def get(self, name: str) -> dict[str, Any]:
        with self.engine.connect() as conn:
            row = conn.execute(select(access_points).where(access_points.c.name == name)).first()
        if row is None:
            raise GovernanceError(f"no access point named {name!r}")
        return _ap(row)

    def list(self, principal: Principal | None = None) -> list[dict[str, Any]]:
        with self.engine.connect() as conn:
            rows = [_ap(r) for r in conn.execute(select(access_points).order_by(access_points.c.name))]
        if principal is None or principal.is_admin:
            return rows
        return [r for r in rows if principal.identities & set(r["principals"])]

    # ---- reads ------------------------------------------------------------------------------
    def resolve(
        self, principal: Principal, name: str, path: str, *, client: str | None = None, via: str = "token"
    ) -> RawObject:
        """The object a read may return, or AccessDenied (audited either way)."""
        resource = f"{name}:{path}"
        try:
            target = self._check(principal, name, path, client)
        except (AccessDenied, GovernanceError) as exc:
            self.audit.record(
                principal.name, "raw.read", resource, False, reason=str(exc).splitlines()[0], via=via, client=client
            )
            raise AccessDenied(str(exc).splitlines()[0]) from exc
        self.audit.record(principal.name, "raw.read", resource, True, via=via, client=client, bytes=target.size)
        return target

    def _check(self, principal: Principal, name: str, path: str, client: str | None) -> RawObject:
        try:
            ap = self.get(name)
        except GovernanceError:
            raise AccessDenied(f"no access point {name!r} for {principal.name}") from None
        if not (principal.is_admin or principal.identities & set(ap["principals"])):
            raise AccessDenied(f"{principal.name} may not use access point {name}")
        if ap["cidrs"]:
            try:
                addr = ipaddress.ip_address(client or "")
            except ValueError:
                raise AccessDenied("the client address is unknown and the access point limits networks") from None
            if not any(addr in ipaddress.ip_network(c, strict=False) for c in ap["cidrs"]):
                raise AccessDenied(f"client {client} is outside the networks of access point {name}")
        rel = _clean_path(path)
        if ap["prefix"] and not (rel == ap["prefix"] or rel.startswith(ap["prefix"].rstrip("/") + "/")):
            raise AccessDenied(f"{rel} is outside the prefix of access point {name}")
        if storage.is_remote(self.raw_root):
            # Object stores have no symlinks or '..': the cleaned key under the raw prefix is the object.
            uri = storage.join(self.raw_root, rel)
            size = storage.size(uri)
            if size is None:
                raise AccessDenied(f"no readable object {rel} under access point {name}")
            target = RawObject(uri, PurePosixPath(rel).name, size)
        else:
            root = Path(self.raw_root).resolve()
            local = (root / rel).resolve()  # follows symlinks: the result must still be inside the raw zone
            if not local.is_relative_to(root) or not local.is_file():
                raise AccessDenied(f"no readable object {rel} under access point {name}")
            # The prefix (and tags below) were checked on the name asked for; a symlink inside
            # the zone could point elsewhere in it. The object read must be the object named.
            if local.relative_to(root).as_posix() != rel:
                raise AccessDenied(f"{rel} is a link; access points serve the objects themselves")
            target = RawObject(str(local), local.name, local.stat().st_size, local)
        if ap["tags"] and not self._tags_match(rel, ap["tags"]):
            raise AccessDenied(f"{rel} lacks the tags access point {name} requires")
        return target

    def _tags_match(self, rel: str, required: dict[str, str]) -> bool:
        from shoal.lake import metadata as lake_metadata
        from shoal.spark import get_spark

        spark = get_spark(self.settings)
        lake_metadata.ensure_tables(spark, ("object_index",))
        rows = spark.sql(
            f"SELECT tags FROM {lake_metadata.table('object_index')} WHERE raw_path = :p",
            args={"p": storage.join(self.raw_root, rel)},
        ).collect()
        tags = dict(rows[0]["tags"] or {}) if rows else {}
        return bool(rows) and all(tags.get(k) == v for k, v in required.items())

    # ---- signed URLs --------------------------------------------------------------------------
    def sign(
        self, principal: Principal, name: str, path: str, *, expires_in: int = 900, client: str | None = None
    ) -> dict[str, Any]:
        limit = self.settings.governance.signed_url_max_s
        if not 1 <= expires_in <= limit:
            raise GovernanceError(f"expires_in must be between 1 and {limit} seconds")
        self.resolve(principal, name, path, client=client, via="sign")  # only what the signer may read
        rel = _clean_path(path)
        expires = int(time.time()) + expires_in
        sig = self._signature(name, rel, expires, principal.name)
        url = f"/raw/{quote(name)}/{quote(rel)}?expires={expires}&principal={quote(principal.name)}&signature={sig}"
        return {"url": url, "expires_at": dt.datetime.fromtimestamp(expires, dt.UTC).isoformat()}

    def verify(
        self, name: str, path: str, *, expires: int, principal_name: str, signature: str, client: str | None = None
    ) -> RawObject:
        throttle = self.principals.throttle
        key = client_key(client, "signed-url")
        try:
            throttle.check(key)
        except Throttled:
            self.audit.record(
                principal_name, "raw.read", f"{name}:{path}", False, reason="throttled", via="signed-url", client=client
            )
            raise
        try:
            rel = _clean_path(path)
        except GovernanceError as exc:
            raise AccessDenied(str(exc)) from exc
        # Bytes: compare_digest refuses non-ASCII str, and a signature is attacker-controlled text.
        good = hmac.compare_digest(
            self._signature(name, rel, expires, principal_name).encode(), (signature or "").encode()
        )
        if not good or expires < time.time():
            if not good:
                throttle.fail(key)
            self.audit.record(
                principal_name,
                "raw.read",
                f"{name}:{rel}",
                False,
                reason="expired signature" if good else "bad signature",
                via="signed-url",
                client=client,
            )
            raise AccessDenied("this link has expired" if good else "invalid signature")
        try:
            principal = self.principals.principal(principal_name)
        except GovernanceError:
            raise AccessDenied("invalid signature") from None
        return self.resolve(principal, name, rel, client=client, via="signed-url")

    def _signature(self, name: str, rel: str, expires: int, principal: str) -> str:
        msg = f"{name}\n{rel}\n{expires}\n{principal}".encode()
        return hmac.new(self._key(), msg, hashlib.sha256).hexdigest()

    def _key(self) -> bytes:
        return signing_key(self.settings)


def _clean_path(path: str, *, allow_empty: bool = False) -> str:
    """A relative path with no '..', no absolute root, no NUL and no backslashes."""
    if path is None or "\x00" in path or "\\" in path:
        raise GovernanceError("invalid path")
    p = PurePosixPath(path.strip())
    if p.is_absolute() or any(part == ".." for part in p.parts):
        raise AccessDenied(f"path {path!r} must stay inside the raw zone (no '..', no absolute paths)")
    clean = "/".join(part for part in p.parts if part not in ("", "."))
    if not clean and not allow_empty:
        raise GovernanceError("an object path is required")
    return clean


def _ap(row: Any) -> dict[str, Any]:
    return {
        "name": row.name,
        "prefix": row.prefix,
        "tags": json.loads(row.tags) if row.tags else {},
        "principals": json.loads(row.principals),
        "cidrs": json.loads(row.cidrs) if row.cidrs else [],
        "read_only": True,
        "created_by": row.created_by,
        "created_at": row.created_at.isoformat() + "Z",
    }


class AccessRequests:
    """`shoal access request TABLE --reason ...`; owners (or admins) approve, which grants SELECT."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.engine = database.engine(settings, state_tables)
        self.gov = Governance(settings)
        self.audit = AuditLog(settings)

    def request(self, principal: Principal, table: str, reason: str) -> dict[str, Any]:
        from shoal.governance.grants import table_key

        name = ".".join(table_key(table))
        if len(reason.strip()) < 5:
            raise GovernanceError("give a reason (at least a few words) for the owner")
        with self.engine.begin() as conn:
            rid = database.inserted_id(
                conn.execute(
                    insert(access_requests).values(
                        principal=principal.name,
                        table_name=name,
                        privilege="SELECT",
                        reason=reason.strip()[:2000],
                        status="pending",
                        created_at=utcnow(),
                    )
                )
            )
        self.audit.record(principal.name, "access.request", name, True, request_id=rid)
        return self.get(rid)

    def get(self, request_id: int) -> dict[str, Any]:
        with self.engine.connect() as conn:
            row = conn.execute(select(access_requests).where(access_requests.c.id == request_id)).first()
        if row is None:
            raise GovernanceError(f"no access request {request_id}")
        return _req(row)

    def list(self, principal: Principal, status: str | None = None) -> list[dict[str, Any]]:
        q = select(access_requests).order_by(access_requests.c.id.desc())
        if status:
            q = q.where(access_requests.c.status == status)
        with self.engine.connect() as conn:
            rows = [_req(r) for r in conn.execute(q)]
        if principal.is_admin:
            return rows
        return [r for r in rows if r["principal"] == principal.name or self.gov.owner(r["table"]) == principal.name]

    def decide(self, by: Principal, request_id: int, *, approve: bool, note: str | None = None) -> dict[str, Any]:
        """Approve or reject a pending request: its table's owner or an admin only.

        Authorisation comes first, and every request the caller may not decide (someone else's
        table, their own request, an id that does not exist) gets the same answer, so deciding
        cannot be used to learn which requests exist, for which table, or in which state."""
        with self.engine.connect() as conn:
            row = conn.execute(select(access_requests).where(access_requests.c.id == request_id)).first()
        req = _req(row) if row is not None else None
        if req is None or not (by.is_admin or self.gov.owner(req["table"]) == by.name):
            # The audit names the id only: the table is what the caller must not learn (admins
            # reading the log can look the request up).
            self.audit.record(
                by.name,
                "access.decide",
                None,
                False,
                reason="no such request for this principal",
                request_id=request_id,
            )
            raise NotFound(f"no access request {request_id}", hint="list yours with `shoal access list`")
        if req["status"] != "pending":
            raise GovernanceError(f"request {request_id} is already {req['status']}")
        grant_id = None
        if approve:
            grant_id = self.gov.grant(by, "SELECT", "TABLE", req["table"], req["principal"]).id
        with self.engine.begin() as conn:
            conn.execute(
                update(access_requests)
                .where(access_requests.c.id == request_id)
                .values(
                    status="approved" if approve else "rejected",
                    decided_by=by.name,
                    decision_note=note,
                    grant_id=grant_id,
                    decided_at=utcnow(),
                )
            )
        self.audit.record(
            by.name,
            "access.approve" if approve else "access.reject",
            req["table"],
            True,
            request_id=request_id,
            grant_id=grant_id,
        )
        return self.get(request_id)


def _req(row: Any) -> dict[str, Any]:
    return {
        "id": row.id,
        "principal": row.principal,
        "table": row.table_name,
        "privilege": row.privilege,
        "reason": row.reason,
        "status": row.status,
        "decided_by": row.decided_by,
        "note": row.decision_note,
        "grant_id": row.grant_id,
        "created_at": row.created_at.isoformat() + "Z",
        "decided_at": row.decided_at.isoformat() + "Z" if row.decided_at else None,
    }
