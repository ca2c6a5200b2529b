"""Commits to a table (`POST .../tables/{table}`): the client's requirements and updates,
checked against governance and the table's files, then swapped in by PyIceberg's commit_table."""

from __future__ import annotations

import functools
import json
from typing import Any

from fastapi import Depends, Request
from pydantic import TypeAdapter

from shoal.governance import Principal
from shoal.iceberg_rest import policy
from shoal.iceberg_rest.common import VIA, RestError, namespace_of, parse, read_json, run_sync
from shoal.iceberg_rest.context import Rest
from shoal.iceberg_rest.routes import signed_in
from shoal.routing import Routes

routes = Routes()


@functools.cache
def _adapters() -> tuple[TypeAdapter[Any], TypeAdapter[Any]]:
    """Validators of requirements and updates (built on first use: PyIceberg's models are many)."""
    from pyiceberg.table.update import TableRequirement, TableUpdate

    return TypeAdapter(tuple[TableRequirement, ...]), TypeAdapter(tuple[TableUpdate, ...])


@routes.post("/v1/namespaces/{namespace}/tables/{table}")
async def commit(
    r: Rest, namespace: str, table: str, request: Request, who: Principal = Depends(signed_in)
) -> dict[str, Any]:
    requirements_adapter, updates_adapter = _adapters()
    ns, client = namespace_of(namespace), r.client_of(request)
    try:
        body = await read_json(request, r.max_body)
        requirements = parse(requirements_adapter, body.get("requirements") or [], "requirements")
        updates = parse(updates_adapter, body.get("updates") or [], "updates")
        actions = [u.action for u in updates]
        return await run_sync(commit_sync, r, who, ns, table, requirements, updates, actions, client)
    except Exception as exc:  # noqa: BLE001 - every failure becomes the REST error `failed` maps it to, and is audited
        raise r.failed(exc, who, "iceberg.commit", ".".join((*ns, table)), client) from None


class _Commit:
    """One commit's audit: what it records besides the actions are property keys and statistics
    paths, never values."""

    def __init__(self, r: Rest, who: Principal, resource: str, updates: Any, actions: list[str], client: str | None):
        self.r, self.who, self.resource, self.client = r, who, resource, client
        self.detail: dict[str, Any] = {"actions": actions}
        keys = sorted(
            {k for u in updates if u.action == "set-properties" for k in u.updates}
            | {k for u in updates if u.action == "remove-properties" for k in u.removals}
        )
        if keys:
            self.detail["properties"] = keys
        if policy.statistics_paths(updates):
            self.detail["statistics"] = policy.statistics_paths(updates)

    def record(self, ok: bool, **extra: Any) -> None:
        self.r.audit.record(
            self.who.name, "iceberg.commit", self.resource, ok, via=VIA, client=self.client, **extra, **self.detail
        )

    def refuse(self, reason: str) -> RestError:
        self.record(False, reason=reason)
        return RestError(403, "ForbiddenException", f"{self.who.name} may not commit to {self.resource}: {reason}")

    def conflict(self, exc: Exception) -> RestError:
        self.record(False, reason=f"conflict: {exc}")
        return RestError(409, "CommitFailedException", str(exc))


def _check_governance(r: Rest, c: _Commit, ns: tuple[str, ...], name: str, tbl: Any, updates: Any) -> None:
    need = policy.needs(updates)
    if need.unknown:
        raise c.refuse(f"update action(s) {', '.join(need.unknown)} are not served")
    if c.who.is_admin:
        return
    full = r.table_name(ns, name)
    assert full is not None
    if need.admin:
        raise c.refuse(f"{'; '.join(need.admin)} is for admins only")
    if need.owner and r.gov.owner(full) != c.who.name:
        raise c.refuse(f"{'; '.join(need.owner)} needs the table's owner or an admin")
    missing = sorted(need.privileges - r.gov.privileges(c.who, full))
    if missing:
        raise c.refuse(f"needs {' and '.join(missing)} on {full}")
    executable = policy.executable_properties(tbl.metadata.properties)
    if executable:  # committing would make PyIceberg import them: an admin removes them first
        raise c.refuse(f"the table carries {', '.join(executable)}; an admin must remove it first")


def _check_files(c: _Commit, tbl: Any, updates: Any, actions: list[str], owner: bool, requirements: Any) -> Any:
    """The files the commit adds, checked; the requirements to commit with (a non-owner's
    append is pinned to the snapshot it was checked against)."""
    # Manifests the current snapshot already has are the table's; every other one is read.
    current = tbl.metadata.current_snapshot()
    known = {m.manifest_path for m in current.manifests(tbl.io)} if current else set()
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
        raise c.refuse(f"files outside the table's location: {exc.path}") from None
    except policy.NotAnAppend as exc:
        raise c.refuse(f"not an append: {exc}; removing or replacing data needs the table's owner") from None
    except (OSError, ValueError) as exc:
        raise c.refuse(f"the files this commit adds cannot be read: {str(exc).splitlines()[0]}") from None
    return requirements


def commit_sync(
    r: Rest,
    who: Principal,
    ns: tuple[str, ...],
    name: str,
    requirements: Any,
    updates: Any,
    actions: list[str],
    client: str | None,
) -> dict[str, Any]:
    from pyiceberg.exceptions import CommitFailedException

    tbl = r.load_for(who, ns, name, "iceberg.commit", client)  # a commit answers with the whole metadata
    c = _Commit(r, who, ".".join((*ns, name)), updates, actions, client)
    _check_governance(r, c, ns, name, tbl, updates)
    owner = who.is_admin or r.gov.owner(r.table_name(ns, name) or "") == who.name
    try:  # the client's requirements first: a writer that lost a race gets its 409 and retries
        for requirement in requirements:
            requirement.validate(tbl.metadata)
    except CommitFailedException as exc:
        raise c.conflict(exc) from None
    requirements = _check_files(c, tbl, updates, actions, owner, requirements)
    try:
        resp = r.cat.commit_table(tbl, requirements, updates)
    except CommitFailedException as exc:
        raise c.conflict(exc) from None
    c.record(True, snapshot=resp.metadata.current_snapshot_id)
    return {"metadata-location": resp.metadata_location, "metadata": json.loads(resp.metadata.model_dump_json())}
