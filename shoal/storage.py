"""File access for local paths and object-store URIs through one interface (pyarrow.fs).

Both the driver (listing, ledgers) and Spark executors (reading change files, writing
extraction results) use this, so a path that works in one works in the other.

`s3://` (and `s3a://`) URIs go to an S3-compatible store configured by `[storage]`.
`configure()` exports that configuration as the settings' own environment variables
(SHOAL_STORAGE__*), which Spark passes to Python workers (spark.executorEnv on a cluster),
so every process builds the same client without settings being shipped around.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import posixpath
import stat
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyarrow import fs as pafs

from shoal.exceptions import SourceError

if TYPE_CHECKING:
    from shoal.config import StorageSettings

S3_ENV = {
    "endpoint": "SHOAL_STORAGE__ENDPOINT",
    "region": "SHOAL_STORAGE__REGION",
    "access_key": "SHOAL_STORAGE__ACCESS_KEY",
    "secret_key": "SHOAL_STORAGE__SECRET_KEY",
    "path_style": "SHOAL_STORAGE__PATH_STYLE",
}
_s3_cache: dict[tuple, pafs.S3FileSystem] = {}
_s3_lock = threading.Lock()


def configure(storage: StorageSettings) -> dict[str, str]:
    """Export the object-store settings to this process's environment; returns what was set."""
    env = {S3_ENV["region"]: storage.region, S3_ENV["path_style"]: "true" if storage.path_style else "false"}
    if storage.endpoint:
        env[S3_ENV["endpoint"]] = storage.endpoint
    if storage.access_key:
        env[S3_ENV["access_key"]] = storage.access_key.get_secret_value()
    if storage.secret_key:
        env[S3_ENV["secret_key"]] = storage.secret_key.get_secret_value()
    os.environ.update(env)
    return env


def _s3() -> pafs.S3FileSystem:
    opts = tuple(os.environ.get(v) for v in S3_ENV.values())
    with _s3_lock:
        if opts not in _s3_cache:
            endpoint, region, access, secret, path_style = opts
            kw: dict = {"region": region or "us-east-1"}
            if endpoint:
                scheme, _, host = endpoint.partition("://")
                kw["endpoint_override"] = host or scheme
                kw["scheme"] = scheme if host else "https"
            if access and secret:
                kw["access_key"], kw["secret_key"] = access, secret
            kw["force_virtual_addressing"] = (path_style or "true").lower() != "true"
            _s3_cache[opts] = pafs.S3FileSystem(**kw)
        return _s3_cache[opts]


def is_remote(uri: str) -> bool:
    return "://" in uri and not uri.startswith("file://")


@dataclass(frozen=True)
class FileEntry:
    uri: str  # absolute path or URI, readable with open_input()
    relative: str  # path below the listed root, '/'-separated
    size: int
    mtime: float | None = None  # seconds since the epoch, where the store reports it


def filesystem(uri: str) -> tuple[pafs.FileSystem, str]:
    if uri.startswith(("s3://", "s3a://")):
        return _s3(), uri.split("://", 1)[1].rstrip("/")
    try:
        return pafs.FileSystem.from_uri(uri if "://" in uri else posixpath.abspath(os.path.expanduser(uri)))
    except Exception as exc:  # pyarrow raises several types for bad URIs
        raise SourceError(f"cannot open {uri}: {exc}") from exc


def list_files(
    root: str, suffixes: tuple[str, ...] = (), *, skipped: list[tuple[str, str]] | None = None
) -> list[FileEntry]:
    """All files below `root` whose name ends with one of `suffixes` (case-insensitive; empty: all).

    On local disks symbolic links below `root` are never followed (a link could bring any
    file the process can read into the lake); they are left out and, when `skipped` is given,
    listed there as (relative path, reason)."""
    if "://" not in root or root.startswith("file://"):
        return _list_local(root.removeprefix("file://"), suffixes, skipped)
    fs, base = _remote_root(root)
    prefix = _scheme(root)
    out = []
    for entry in fs.get_file_info(pafs.FileSelector(base, recursive=True)):
        if entry.type != pafs.FileType.File:
            continue
        rel = posixpath.relpath(entry.path, base)
        if any(part.startswith(".") for part in rel.split("/")):
            continue  # hidden files and in-progress uploads
        if not suffixes or entry.base_name.lower().endswith(suffixes):
            mtime = entry.mtime.timestamp() if entry.mtime is not None else None
            out.append(FileEntry(prefix + entry.path, rel, entry.size or 0, mtime))
    return out


def _list_local(root: str, suffixes: tuple[str, ...], skipped: list[tuple[str, str]] | None) -> list[FileEntry]:
    base = _local_root(root)
    out = list(_walk_local(base, base, suffixes, skipped))
    out.sort(key=lambda e: e.relative)
    return out


def _local_root(root: str) -> str:
    base = os.path.realpath(os.path.expanduser(root))  # the root itself may be a link
    if not os.path.exists(base):
        raise SourceError(f"source {root} does not exist")
    if not os.path.isdir(base):
        raise SourceError(f"source {root} is not a folder", hint="pass the folder holding the change files")
    return base


def _walk_local(
    base: str, start: str, suffixes: tuple[str, ...], skipped: list[tuple[str, str]] | None
) -> Iterator[FileEntry]:
    """Files below `start` (a folder inside `base`), paths relative to `base`; links never followed."""
    for folder, dirs, files in os.walk(start, followlinks=False):
        rel_folder = os.path.relpath(folder, base)
        dirs.sort()
        for d in list(dirs):
            rel = posixpath.normpath(posixpath.join(rel_folder, d))
            if d.startswith("."):
                dirs.remove(d)  # hidden folders
            elif os.path.islink(os.path.join(folder, d)):
                dirs.remove(d)
                if skipped is not None:
                    skipped.append((rel, "symbolic link to a folder (not followed)"))
        for name in sorted(files):
            rel = posixpath.normpath(posixpath.join(rel_folder, name))
            if name.startswith("."):
                continue  # hidden files and in-progress uploads
            path = os.path.join(folder, name)
            try:
                st = os.lstat(path)
            except OSError:
                continue  # vanished while listing
            if stat.S_ISLNK(st.st_mode):
                if skipped is not None:
                    skipped.append((rel, "symbolic link (not followed)"))
                continue
            if not stat.S_ISREG(st.st_mode):
                continue  # sockets, fifos, devices
            if not suffixes or name.lower().endswith(suffixes):
                yield FileEntry(path, rel, st.st_size, st.st_mtime)


def list_level(root: str, below: str = "") -> tuple[list[FileEntry], list[str], list[tuple[str, str]]]:
    """One level of a listing, no deeper: the files directly in `root`/`below`, the folders
    there (relative to `root`), and what was left out as (relative path, reason).

    With `iter_files` this splits a big listing: the caller lists the top levels and hands
    each folder to a worker. Hidden names are left out; local links are never followed."""
    files: list[FileEntry] = []
    folders: list[str] = []
    skipped: list[tuple[str, str]] = []
    if not is_remote(root):
        base = _local_root(root.removeprefix("file://"))
        start = os.path.join(base, below) if below else base
        with os.scandir(start) as it:
            for d in sorted(it, key=lambda d: d.name):
                rel = posixpath.join(below, d.name) if below else d.name
                if d.name.startswith("."):
                    continue
                if d.is_symlink():
                    what = "symbolic link to a folder" if d.is_dir() else "symbolic link"
                    skipped.append((rel, f"{what} (not followed)"))
                elif d.is_dir(follow_symlinks=False):
                    folders.append(rel)
                elif d.is_file(follow_symlinks=False):
                    st = d.stat(follow_symlinks=False)
                    files.append(FileEntry(d.path, rel, st.st_size, st.st_mtime))
        return files, folders, skipped
    fs, base = _remote_root(root)
    prefix = _scheme(root)
    listed = fs.get_file_info(pafs.FileSelector(posixpath.join(base, below) if below else base, recursive=False))
    for entry in sorted(listed, key=lambda e: e.path):
        rel = posixpath.relpath(entry.path, base)
        if entry.base_name.startswith("."):
            continue
        if entry.type == pafs.FileType.Directory:
            folders.append(rel)
        elif entry.type == pafs.FileType.File:
            mtime = entry.mtime.timestamp() if entry.mtime is not None else None
            files.append(FileEntry(prefix + entry.path, rel, entry.size or 0, mtime))
    return files, folders, skipped


def iter_files(root: str, below: str, *, skipped: list[tuple[str, str]] | None = None) -> Iterator[FileEntry]:
    """Every file in folder `below` of `root` and its sub-folders, paths relative to `root`
    (the rules of `list_files`). Meant for a worker: it lists one folder of a big source."""
    if not is_remote(root):
        base = _local_root(root.removeprefix("file://"))
        start = os.path.join(base, below)
        if os.path.islink(start) or not os.path.isdir(start):
            raise SourceError(f"{start} is no longer a folder")
        yield from _walk_local(base, start, (), skipped)
        return
    fs, base = _remote_root(root)
    prefix = _scheme(root)
    for entry in fs.get_file_info(pafs.FileSelector(posixpath.join(base, below), recursive=True)):
        rel = posixpath.relpath(entry.path, base)
        if entry.type == pafs.FileType.File and not any(part.startswith(".") for part in rel.split("/")):
            mtime = entry.mtime.timestamp() if entry.mtime is not None else None
            yield FileEntry(prefix + entry.path, rel, entry.size or 0, mtime)


def _remote_root(root: str) -> tuple[pafs.FileSystem, str]:
    fs, base = filesystem(root)
    info = fs.get_file_info(base)
    if info.type == pafs.FileType.NotFound:
        raise SourceError(f"source {root} does not exist")
    if info.type != pafs.FileType.Directory:
        raise SourceError(f"source {root} is not a folder", hint="pass the folder holding the change files")
    return fs, base


def _scheme(root: str) -> str:
    return root.split("://", 1)[0].replace("s3a", "s3") + "://"


def read_bytes(uri: str) -> bytes:
    fs, path = filesystem(uri)
    with fs.open_input_stream(path) as f:
        return f.read()


def write_bytes(uri: str, data: bytes) -> None:
    fs, path = filesystem(uri)
    fs.create_dir(posixpath.dirname(path), recursive=True)
    with fs.open_output_stream(path) as f:
        f.write(data)


@contextlib.contextmanager
def _staged_output(uri: str) -> Iterator[pa.NativeFile]:
    """An output stream for `uri` that readers see whole or not at all: written under a
    hidden unique name beside it, moved into place when the block ends (a rename on disk, one
    object copy on S3). If the block fails, the staged file is removed and `uri` untouched."""
    fs, path = filesystem(uri)
    parent, name = posixpath.split(path)
    fs.create_dir(parent, recursive=True)
    tmp = posixpath.join(parent, f".{name}.{uuid.uuid4().hex[:8]}.part")
    try:
        with fs.open_output_stream(tmp) as out:
            yield out
        fs.move(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            fs.delete_file(tmp)
        raise


def write_bytes_atomic(uri: str, data: bytes) -> None:
    """Write `data` at `uri` so that readers see the whole file or none (see _staged_output)."""
    with _staged_output(uri) as out:
        out.write(data)


def delete(uri: str) -> None:
    fs, path = filesystem(uri)
    fs.delete_file(path)


def exists(uri: str) -> bool:
    fs, path = filesystem(uri)
    return fs.get_file_info(path).type != pafs.FileType.NotFound


def size(uri: str) -> int | None:
    """The file's size in bytes, or None when there is no file at `uri`."""
    fs, path = filesystem(uri)
    info = fs.get_file_info(path)
    return info.size if info.type == pafs.FileType.File else None


def join(base: str, *parts: str) -> str:
    return posixpath.join(base, *parts)


def open_input(uri: str, *, follow_links: bool = True) -> Any:
    """A readable binary stream (for hashing or copying large files without loading them).

    `follow_links=False` refuses a local path that is (or became, since it was listed) a
    symbolic link or not a regular file."""
    if not follow_links and "://" not in uri:
        fd = os.open(os.path.expanduser(uri), os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise SourceError(f"{uri} is not a regular file")
        return os.fdopen(fd, "rb")
    fs, path = filesystem(uri)
    return fs.open_input_stream(path)


def staging_sibling(uri: str) -> str:
    """A hidden, unique folder beside `uri` to write a replacement into before it is swapped in."""
    parent, name = posixpath.split(uri.rstrip("/"))
    return posixpath.join(parent, f".{name}.staging-{uuid.uuid4().hex[:8]}")


def remove_folder(uri: str) -> None:
    """Delete a folder and everything below it; a folder that is not there is fine."""
    fs, path = filesystem(uri)
    if fs.get_file_info(path).type != pafs.FileType.NotFound:
        fs.delete_dir(path)


def replace_folder(staged: str, target: str) -> int:
    """Move every file of the complete folder `staged` into `target`, then delete the files of
    `target` the new set did not replace; returns the number of files moved.

    Object stores have no atomic folder rename, so this is the order that never loses data:
    until the staged folder is complete the previous output stays untouched, and during the
    swap readers may briefly see old and new files together, never an empty folder."""
    fs, src = filesystem(staged)
    _, dst = filesystem(target)
    selector = pafs.FileSelector(dst, recursive=True, allow_not_found=True)
    old = {e.path for e in fs.get_file_info(selector) if e.type == pafs.FileType.File}
    moved = set()
    for entry in fs.get_file_info(pafs.FileSelector(src, recursive=True)):
        if entry.type != pafs.FileType.File:
            continue
        dest = posixpath.join(dst, posixpath.relpath(entry.path, src))
        fs.create_dir(posixpath.dirname(dest), recursive=True)
        fs.move(entry.path, dest)
        moved.add(dest)
    for path in sorted(old - moved):
        fs.delete_file(path)
    with contextlib.suppress(FileNotFoundError, OSError):
        fs.delete_dir(src)  # object stores have no folders left once their files moved
    return len(moved)


def copy(src: str, dst: str, *, chunk: int = 8 << 20, follow_links: bool = True, sha256: str | None = None) -> None:
    """Copy a file between any two stores; written to a temporary name, then moved into place.

    With `sha256`, the bytes copied must have that digest: a source that changed since it was
    hashed is refused (SourceError) and nothing is left at `dst`."""
    digest = hashlib.sha256()
    with _staged_output(dst) as fout, open_input(src, follow_links=follow_links) as fin:
        while block := fin.read(chunk):
            digest.update(block)
            fout.write(block)
        if sha256 is not None and digest.hexdigest() != sha256:
            raise SourceError(f"{src} changed while it was being ingested (its content no longer matches its hash)")
