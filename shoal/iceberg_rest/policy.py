"""What a commit to an Iceberg table needs, decided from the updates it carries.

Deny by default: every update action is listed here with what it needs, and an action not
listed is refused. Appends need INSERT; schema, partition, sort-order and property changes
need ALTER; anything that removes or rewrites data (overwrite, delete, replace snapshots,
rollbacks, expiring snapshots, moving refs) needs the table's owner or an admin, as
governed SQL allows non-admins only INSERT INTO. Moving the table (a location, or the
properties that place its files elsewhere) is for admins only.

Files a commit adds must lie under the table's own location: otherwise a principal who may
append to one table could publish another table's data files in it and read them there.
"""

from __future__ import annotations

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
    "set-statistics",
    "remove-statistics",
    "set-partition-statistics",
    "remove-partition-statistics",
}
OWNER_ACTIONS = {
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
            placed = sorted(k for k in keys if k.lower() in PLACEMENT_PROPERTIES)
            if placed:
                out.admin.append(f"setting {', '.join(placed)}")
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
        for manifest in snap.manifests(io):
            if manifest.manifest_path in known_manifests:
                continue  # carried over from the table's current snapshot
            inside(manifest.manifest_path)
            for entry in manifest.fetch_manifest_entry(io, discard_deleted=False):
                inside(entry.data_file.file_path)
