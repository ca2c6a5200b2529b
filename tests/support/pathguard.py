"""Refuses any write or delete outside the test run's own folders (stdlib only).

A test once exercised a file-deleting path that deleted a system file on the machine running it.
Every Python process of the suite (pytest's workers, and through `site/sitecustomize.py` every
Python child they start: CLI subprocesses, servers, Spark's Python workers) installs this audit
hook. A write (open for writing, create, truncate), a delete, a rename, a chmod or a link outside
the allowed roots raises PermissionError before it happens and is recorded, so the test that
caused it fails even where the error was caught and swallowed.

The allowed roots: the run's temporary root (`TEST_PATH_GUARD_ROOT`, made fresh by tests/conftest.py
and handed to everything as TMPDIR), the user's cache folder (models
assembled from split packages), the repository's test-artifacts/, Python's own `__pycache__`
folders and a few device files. Set TEST_PATH_GUARD=record to log without refusing (to list
what a change would break), or =off to leave it out.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterable
from typing import Any

WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND

# Audit event -> positions of the paths it changes (os.remove is also raised for os.unlink).
CHANGING_EVENTS: dict[str, tuple[int, ...]] = {
    "os.remove": (0,),
    "os.rmdir": (0,),
    "os.rename": (0, 1),
    "os.truncate": (0,),
    "os.mkdir": (0,),
    "os.chmod": (0,),
    "os.chown": (0,),
    "os.link": (1,),
    "os.symlink": (1,),
    "os.utime": (0,),
    "shutil.rmtree": (0,),
    "shutil.copyfile": (1,),
    "shutil.copymode": (1,),
    "shutil.copystat": (1,),
}
# Event -> position of its dir_fd argument (relative paths are resolved against it).
DIR_FD_AT = {
    "os.remove": 1,
    "os.rmdir": 1,
    "os.mkdir": 2,
    "os.chmod": 2,
    "os.chown": 3,
    "os.utime": 3,
    "shutil.rmtree": 1,
}
DEVICE_FILES = ("/dev/null", "/dev/tty", "/dev/shm/", "/dev/fd/", "/proc/self/", "/dev/pts/")


class PathGuardError(PermissionError):
    """A write or delete outside the test run's folders."""


class PathGuard:
    """Decides whether an audited file operation stays inside `roots`."""

    def __init__(self, roots: Iterable[str], log: str | None = None, enforce: bool = True) -> None:
        """`log`: a file each refusal is appended to (None: the current worker's, see log_path)."""
        self.roots = tuple(os.path.join(os.path.realpath(r), "") for r in roots if r)
        self.log = log
        self.enforce = enforce
        self.violations: list[str] = []
        self._local = threading.local()  # the log write below is itself audited

    def allowed(self, path: str) -> bool:
        if path.startswith(DEVICE_FILES) or path in DEVICE_FILES:
            return True
        real = _real(path)
        if f"{os.sep}__pycache__{os.sep}" in real:
            return True
        return any(real.startswith(root) or real + os.sep == root for root in self.roots)

    def offending(self, event: str, args: tuple[Any, ...]) -> str | None:
        """The path this event would change outside the roots, or None."""
        if event == "open":
            path, mode, flags = args[0], args[1], args[2]
            writes = (isinstance(mode, str) and any(c in mode for c in "wax+")) or bool((flags or 0) & WRITE_FLAGS)
            paths = [path] if writes else []
            dir_fd = None
        elif event in CHANGING_EVENTS:
            paths = [args[i] for i in CHANGING_EVENTS[event] if i < len(args)]
            at = DIR_FD_AT.get(event)
            dir_fd = args[at] if at is not None and at < len(args) else None
        else:
            return None
        for p in paths:
            if isinstance(p, bytes):
                p = os.fsdecode(p)
            if not isinstance(p, str):  # a file descriptor: opened (and checked) before
                continue
            if not os.path.isabs(p) and isinstance(dir_fd, int) and dir_fd >= 0:
                p = os.path.join(os.readlink(f"/proc/self/fd/{dir_fd}"), p)
            if not self.allowed(os.path.abspath(p)):
                return p
        return None

    def hook(self, event: str, args: tuple[Any, ...]) -> None:
        if event != "open" and event not in CHANGING_EVENTS or getattr(self._local, "busy", False):
            return
        self._local.busy = True
        try:
            bad = self.offending(event, args)
            if bad is None:
                return
            what = f"{event} {bad!r} (pid {os.getpid()}: {' '.join(sys.argv[:3])})"
            self.violations.append(what)
            log = self.log or log_path()
            if log:
                with open(log, "a") as f:
                    f.write(what + "\n")
        finally:
            self._local.busy = False
        if self.enforce:
            raise PathGuardError(f"test path guard: {what} is outside the test run's folders {list(self.roots)}")


def _real(path: str) -> str:
    """`path` with symbolic links resolved as far as it exists (the rest kept as written)."""
    head, tail = path, ""
    while head and not os.path.lexists(head):
        head, name = os.path.split(head)
        tail = os.path.join(name, tail) if tail else name
        if head == os.sep:
            break
    real = os.path.realpath(head) if head else head
    return os.path.join(real, tail) if tail else real


def roots_from_env(env: dict[str, str] | os._Environ[str] = os.environ) -> list[str]:
    home = os.path.expanduser("~")
    return [
        env.get("TEST_PATH_GUARD_ROOT", ""),
        env.get("TEST_PATH_GUARD_ARTIFACTS", ""),
        env.get("SHOAL_TEST_ARTIFACTS", ""),  # the console tests' screenshots, where set
        os.path.join(home, ".cache"),
    ]


def log_path() -> str | None:
    """The refusals log of the current pytest worker (children inherit PYTEST_XDIST_WORKER)."""
    root = os.environ.get("TEST_PATH_GUARD_ROOT")
    return os.path.join(root, f"guard-{os.environ.get('PYTEST_XDIST_WORKER', 'main')}.log") if root else None


def install_from_env() -> PathGuard | None:
    """Install the hook in this process as the environment says (None when the guard is off)."""
    installed: PathGuard | None = getattr(sys, "_shoal_path_guard", None)
    if installed is not None:  # sitecustomize already did (a hook cannot be removed or replaced)
        return installed
    mode = os.environ.get("TEST_PATH_GUARD", "off")
    if mode == "off" or not os.environ.get("TEST_PATH_GUARD_ROOT"):
        return None
    guard = PathGuard(roots_from_env(), enforce=mode != "record")
    sys.addaudithook(guard.hook)
    sys._shoal_path_guard = guard  # type: ignore[attr-defined]
    return guard
