"""What a commit to an Iceberg table needs, decided from the updates it carries.

Deny by default: every update action is listed here with what it needs, and an action not
listed is refused. Appends need INSERT; schema, partition, sort-order and property changes
need ALTER; anything that removes or rewrites data (overwrite, delete, replace snapshots,
rollbacks, expiring snapshots, moving refs) needs the table's owner or an admin, as
governed SQL allows non-admins only INSERT INTO. Statistics files name paths that snapshot
expiry later deletes, so setting or removing them is for the owner (or an admin) too. Moving
the table (a location, or the properties that place its files elsewhere) is for admins only,
and so is every table property outside a short allowlist (SAFE_PROPERTIES): PyIceberg imports
classes named by properties (`py-io-impl`, `write.py-location-provider.impl`) and points its
FileIO by them (`s3.endpoint`, keys), so an unknown property is code or a redirect until
shown otherwise.

The client's word is not taken for what a snapshot does: an "append" by someone who is not
the owner is checked against the files (check_append): it must build on the current
snapshot, bring a new manifest list, keep every live data file, and add only data files.

Files a commit adds must lie under the table's own location: otherwise a principal who may
append to one table could publish another table's data files in it and read them there.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

ALTER_ACTIONS = {
    "add-schema",
    "set-current-schema",
    "add-spec",
    "set-default-spec",
    "add-sort-order",
    "set-default-sort-order",
}
# Statistics files are deleted by snapshot expiry: the owner's (or an admin's) to name.
STATISTICS_ACTIONS = {
    "set-statistics",
    "remove-statistics",
    "set-partition-statistics",
    "remove-partition-statistics",
}
OWNER_ACTIONS = STATISTICS_ACTIONS | {
    "remove-snapshots",
    "remove-snapshot-ref",
    "upgrade-format-version",
    "remove-partition-specs",
    "remove-schemas",
}
ADMIN_ACTIONS = {"set-location", "assign-uuid"}
# Properties that move where a table's files go: only admins set them.
PLACEMENT_PROPERTIES = {
    "location",
    "write.data.path",
    "write.metadata.path",
    "write.object-storage.path",
    "write.folder-storage.path",
}
# Table properties a non-admin may set or remove (with ALTER), or give a table they create.
# Everything else (`*.impl`, `py-*`, `s3.*`, `gcs.*`, `adls.*`, `client.*`, `hadoop.*`,
# `format-version`, paths, ...) is for admins only: PyIceberg and other engines act on them.
SAFE_PROPERTIES = {
    "comment",
    "write.format.default",
    "write.parquet.compression-codec",
    "write.parquet.compression-level",
    "write.parquet.row-group-size-bytes",
    "write.parquet.page-size-bytes",
    "write.target-file-size-bytes",
    "write.metadata.delete-after-commit.enabled",
    "write.metadata.previous-versions-max",
    "write.distribution-mode",
    "write.delete.mode",
    "write.update.mode",
    "write.merge.mode",
}
SAFE_PROPERTY_PREFIXES = ("history.expire.", "commit.retry.", "read.split.")
# A user's own key: lower-case letters, digits and _ only (no dots, no dashes), e.g. team_owner.
_USER_KEY = re.compile(r"^[a-z][a-z0-9_]{0,63}$")
RESERVED_USER_KEYS = {"location", "owner", "provider", "uuid"}


def safe_property(key: str) -> bool:
    """Whether a non-admin may set or remove this table property."""
    if key in SAFE_PROPERTIES or key.startswith(SAFE_PROPERTY_PREFIXES) and "impl" not in key:
        return True
    return bool(_USER_KEY.match(key)) and key not in RESERVED_USER_KEYS


def unsafe_properties(keys: Iterable[str]) -> list[str]:
    return sorted(k for k in keys if not safe_property(k))


def executable_properties(properties: dict[str, str]) -> list[str]:
    """Properties PyIceberg would import a class from, were the server to act on them."""
    return sorted(k for k in properties if k.lower().endswith(".impl") or k.lower().startswith("py-"))


@dataclass
class Needs:
    privileges: set[str] = field(default_factory=set)  # table privileges (INSERT, ALTER)
    owner: list[str] = field(default_factory=list)  # why the owner (or an admin) is needed
    admin: list[str] = field(default_factory=list)  # why an admin is needed
    unknown: list[str] = field(default_factory=list)


def needs(updates: Iterable[Any]) -> Needs:
    out = Needs()
    added: set[int] = set()
    for u in updates:
        action = getattr(u, "action", None)
        if action == "add-snapshot":
            op = u.snapshot.summary.operation.value if u.snapshot.summary else "unknown"
            added.add(u.snapshot.snapshot_id)
            if op == "append":
                out.privileges.add("INSERT")
            else:
                out.owner.append(f"a {op} snapshot")
        elif action == "set-snapshot-ref":
            # Pointing main at the snapshot this very commit appends is part of the append;
            # any other move (rollback, branches, tags) changes which data readers see.
            if not (u.ref_name == "main" and u.snapshot_id in added and u.type == "branch"):
                out.owner.append(f"moving ref {u.ref_name}")
        elif action in ("set-properties", "remove-properties"):
            keys = set(u.updates) if action == "set-properties" else set(u.removals)
            unsafe = unsafe_properties(keys)
            if unsafe:
                out.admin.append(f"setting {', '.join(unsafe)}")
            out.privileges.add("ALTER")
        elif action in ALTER_ACTIONS:
            out.privileges.add("ALTER")
        elif action in OWNER_ACTIONS:
            out.owner.append(str(action))
        elif action in ADMIN_ACTIONS:
            out.admin.append(str(action))
        else:
            out.unknown.append(str(action))
    return out


def _norm(path: str) -> str:
    for scheme in ("file://", "file:"):
        if path.startswith(scheme):
            return "/" + path.removeprefix(scheme).lstrip("/")
    return path


def outside_location(location: str, paths: Iterable[str]) -> list[str]:
    """The paths that are not under the table location (after file: normalisation, no '..')."""
    root = _norm(location).rstrip("/") + "/"
    return [p for p in paths if not _norm(p).startswith(root) or "/../" in _norm(p) or _norm(p).endswith("/..")]


class OutsideLocation(Exception):
    """A commit names a file outside its table's location."""

    def __init__(self, path: str) -> None:
        super().__init__(path)
        self.path = path


def _read_manifest_list(io: Any, path: str) -> list[Any]:
    """The manifests a client's manifest list names, as written there. Not Snapshot.manifests():
    PyIceberg caches ManifestFile objects by path, so a list that carries a known manifest
    with other content or sequence numbers would be read as the cached original."""
    from pyiceberg.manifest import read_manifest_list

    return list(read_manifest_list(io.new_input(path)))


def check_added_files(updates: Iterable[Any], io: Any, location: str, known_manifests: set[str]) -> None:
    """Raise OutsideLocation for the first file an update adds outside the table: its manifest
    list, each manifest the table does not already have (whatever snapshot id it claims), and
    every data and delete file those name. Each file is checked before it is read, so a
    commit cannot make the server open files elsewhere (another table's, or the host's)."""

    def inside(path: str) -> None:
        if outside_location(location, [path]):
            raise OutsideLocation(path)

    for u in updates:
        if getattr(u, "action", None) != "add-snapshot":
            continue
        snap = u.snapshot
        inside(snap.manifest_list)
        for manifest in _read_manifest_list(io, snap.manifest_list):
            if manifest.manifest_path in known_manifests:
                continue  # carried over from the table's current snapshot
            inside(manifest.manifest_path)
            for entry in manifest.fetch_manifest_entry(io, discard_deleted=False):
                inside(entry.data_file.file_path)


def statistics_paths(updates: Iterable[Any]) -> list[str]:
    """The files set-statistics and set-partition-statistics name (snapshot expiry deletes them)."""
    out: list[str] = []
    for u in updates:
        action = getattr(u, "action", None)
        if action == "set-statistics":
            out.append(u.statistics.statistics_path)
        elif action == "set-partition-statistics":
            out.append(u.partition_statistics.statistics_path)
    return out


def check_statistics(updates: Iterable[Any], location: str) -> None:
    """Raise OutsideLocation for a statistics file outside the table."""
    for path in statistics_paths(updates):
        if outside_location(location, [path]):
            raise OutsideLocation(path)


class NotAnAppend(Exception):
    """A snapshot labelled "append" that removes, replaces or deletes data."""


def _live_data_files(snapshot: Any, io: Any) -> set[str]:
    from pyiceberg.manifest import ManifestContent

    live: set[str] = set()
    for manifest in snapshot.manifests(io):
        if manifest.content == ManifestContent.DATA:
            live.update(e.data_file.file_path for e in manifest.fetch_manifest_entry(io, discard_deleted=True))
    return live


def check_append(updates: Iterable[Any], io: Any, metadata: Any) -> None:
    """Raise NotAnAppend unless each "append" snapshot really only adds data to the current one.

    It must name the current snapshot as its parent and bring a manifest list no snapshot of the
    table has; every data file live now must stay live; manifests it does not carry over from
    the current snapshot must hold data (not deletes), with entries ADDED by this snapshot or
    EXISTING ones that are live now (Java clients merge manifests). Paths are checked first
    (check_added_files), so nothing read here lies outside the table."""
    from pyiceberg.manifest import DataFileContent, ManifestContent, ManifestEntryStatus

    snaps = [u.snapshot for u in updates if getattr(u, "action", None) == "add-snapshot"]
    if not snaps:
        return
    if len(snaps) > 1:
        raise NotAnAppend("one append snapshot per commit")
    snap = snaps[0]
    current = metadata.current_snapshot()
    current_id = current.snapshot_id if current else None
    if snap.parent_snapshot_id != current_id:
        raise NotAnAppend(f"an append must build on the current snapshot {current_id}, not {snap.parent_snapshot_id}")
    if any(s.manifest_list == snap.manifest_list for s in metadata.snapshots):
        raise NotAnAppend("an append must bring a new manifest list, not an existing snapshot's")
    now = {m.manifest_path: m for m in current.manifests(io)} if current else {}
    carried = set(now)
    live_now = _live_data_files(current, io) if current else set()
    live_after: set[str] = set()
    for manifest in _read_manifest_list(io, snap.manifest_list):
        entries = manifest.fetch_manifest_entry(io, discard_deleted=False)
        if manifest.manifest_path in carried:
            was = now[manifest.manifest_path]
            same = ("content", "sequence_number", "min_sequence_number", "added_snapshot_id")
            if any(getattr(manifest, k) != getattr(was, k) for k in same):
                raise NotAnAppend(f"an append carries manifests over unchanged: {manifest.manifest_path}")
            if manifest.content == ManifestContent.DATA:
                live_after.update(e.data_file.file_path for e in entries if e.status != ManifestEntryStatus.DELETED)
            continue
        if manifest.content != ManifestContent.DATA:
            raise NotAnAppend(f"an append adds no delete manifests: {manifest.manifest_path}")
        for e in entries:
            path = e.data_file.file_path
            if e.data_file.content != DataFileContent.DATA:
                raise NotAnAppend(f"an append adds no delete files: {path}")
            added = e.status == ManifestEntryStatus.ADDED and e.snapshot_id == snap.snapshot_id
            carried_over = e.status == ManifestEntryStatus.EXISTING and path in live_now
            if not (added or carried_over):
                raise NotAnAppend(f"an append has no {e.status.name} entry for {path}")
            live_after.add(path)
    dropped = sorted(live_now - live_after)
    if dropped:
        raise NotAnAppend(f"an append must keep every live data file; it drops {len(dropped)}, e.g. {dropped[0]}")
