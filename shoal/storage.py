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
import os
import posixpath
import stat
import threading
import uuid
from dataclasses import dataclass

from pyarrow import fs as pafs

from shoal.exceptions import SourceError

S3_ENV = {
    "endpoint": "SHOAL_STORAGE__ENDPOINT",
    "region": "SHOAL_STORAGE__REGION",
    "access_key": "SHOAL_STORAGE__ACCESS_KEY",
    "secret_key": "SHOAL_STORAGE__SECRET_KEY",
    "path_style": "SHOAL_STORAGE__PATH_STYLE",
}
_s3_cache: dict[tuple, pafs.S3FileSystem] = {}
_s3_lock = threading.Lock()


def configure(storage) -> dict[str, str]:  # storage: config.StorageSettings
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
    fs, base = filesystem(root)
    info = fs.get_file_info(base)
    if info.type == pafs.FileType.NotFound:
        raise SourceError(f"source {root} does not exist")
    if info.type != pafs.FileType.Directory:
        raise SourceError(f"source {root} is not a folder", hint="pass the folder holding the change files")
    prefix = root.split("://", 1)[0].replace("s3a", "s3") + "://"
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
    base = os.path.realpath(os.path.expanduser(root))  # the root itself may be a link
    if not os.path.exists(base):
        raise SourceError(f"source {root} does not exist")
    if not os.path.isdir(base):
        raise SourceError(f"source {root} is not a folder", hint="pass the folder holding the change files")
    out: list[FileEntry] = []
    for folder, dirs, files in os.walk(base, followlinks=False):
        rel_folder = os.path.relpath(folder, base)
        for d in list(dirs):
            rel = posixpath.normpath(posixpath.join(rel_folder, d))
            if d.startswith("."):
                dirs.remove(d)  # hidden folders
            elif os.path.islink(os.path.join(folder, d)):
                dirs.remove(d)
                if skipped is not None:
                    skipped.append((rel, "symbolic link to a folder (not followed)"))
        for name in files:
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
                out.append(FileEntry(path, rel, st.st_size, st.st_mtime))
    out.sort(key=lambda e: e.relative)
    return out


def read_bytes(uri: str) -> bytes:
    fs, path = filesystem(uri)
    with fs.open_input_stream(path) as f:
        return f.read()


def write_bytes(uri: str, data: bytes) -> None:
    fs, path = filesystem(uri)
    fs.create_dir(posixpath.dirname(path), recursive=True)
    with fs.open_output_stream(path) as f:
        f.write(data)


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


def open_input(uri: str, *, follow_links: bool = True):
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


def copy(src: str, dst: str, *, chunk: int = 8 << 20, follow_links: bool = True) -> None:
    """Copy a file between any two stores; written to a temporary name, then moved into place."""
    fs, path = filesystem(dst)
    fs.create_dir(posixpath.dirname(path), recursive=True)
    tmp = posixpath.join(posixpath.dirname(path), "." + posixpath.basename(path) + ".part")
    with open_input(src, follow_links=follow_links) as fin, fs.open_output_stream(tmp) as fout:
        while block := fin.read(chunk):
            fout.write(block)
    fs.move(tmp, path)
