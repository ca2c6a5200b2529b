"""Local files and folders readable by their owner only.

The workspace holds the catalog database, secrets, every table's files and the search
index: nobody else on the machine may read them. Existing installs are tightened on use.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from shoal.config import Settings


def private_dir(path: Path) -> Path:
    """Create `path` (and missing parents) as 0700; tighten it when it already exists."""
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    _tighten(path, 0o700)
    return path


def scratch_path(settings: Settings, name: str) -> Path:
    """`<workspace>/tmp/<name>`: where Shoal's scratch files go instead of the system temp
    folder, which other users can list and, for files made with a loose umask, read."""
    return settings.workspace_dir / "tmp" / name


def scratch_dir(settings: Settings, name: str) -> Path:
    """`scratch_path`, created 0700 (the workspace and its tmp folder too)."""
    private_dir(settings.workspace_dir)
    private_dir(settings.workspace_dir / "tmp")
    return private_dir(scratch_path(settings, name))


def private_file(path: Path) -> Path:
    """Create an empty `path` as 0600 unless it exists; tighten it when it does."""
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    except FileExistsError:
        _tighten(path, 0o600)
    return path


def _tighten(path: Path, mode: int) -> None:
    try:
        st = path.stat()
        if st.st_uid == os.getuid() and st.st_mode & 0o077:
            path.chmod(mode)
    except OSError:
        pass  # not ours to change (a shared mount): leave it as the operator set it
