"""One writer per table at a time: an advisory lock file in the workspace.

Iceberg's optimistic commits keep the table itself consistent, but two CDC batches
racing on one table would each read the same ledger; the lock serialises them.
"""

from __future__ import annotations

import fcntl
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from shoal.exceptions import ShoalError


@contextmanager
def table_lock(workspace: Path, table: str, *, timeout_s: float = 600) -> Iterator[None]:
    lock_dir = workspace / "locks"
    lock_dir.mkdir(parents=True, exist_ok=True)
    path = lock_dir / f"{table}.lock"
    with open(path, "w") as handle:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise ShoalError(
                        f"table {table} is locked by another Shoal process ({path})",
                        hint="wait for the other run to finish",
                    ) from None
                time.sleep(0.2)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
