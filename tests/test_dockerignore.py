"""The image's build context (the repository root, see deploy/Dockerfile) leaves out history,
local environments, workspaces and test output, and keeps every file the build needs."""

from __future__ import annotations

import fnmatch
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _patterns() -> list[str]:
    lines = (ROOT / ".dockerignore").read_text(encoding="utf-8").splitlines()
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]


def _ignored(path: str, patterns: list[str]) -> bool:
    """Docker matches a pattern against the path and each of its parents, from the context's
    root (Go filepath.Match); `**/` at the start matches at any depth."""
    parts = path.split("/")
    from_root = {"/".join(parts[:j]) for j in range(1, len(parts) + 1)}
    anywhere = {"/".join(parts[i:j]) for i in range(len(parts)) for j in range(i + 1, len(parts) + 1)}
    for p in patterns:
        if p.startswith("**/"):
            if any(fnmatch.fnmatchcase(c, p.removeprefix("**/")) for c in anywhere):
                return True
        elif any(fnmatch.fnmatchcase(c, p.lstrip("/")) for c in from_root):
            return True
    return False


def test_context_leaves_out_history_environments_and_workspaces() -> None:
    patterns = _patterns()
    for path in (
        ".git/config",
        ".venv/bin/python",
        ".venv-duckdb/x",
        "demo-workspace/catalog.db",
        "bench-workspace/a",
        "test-artifacts/r.xml",
        ".shoal/catalog.db",
        "shoal/__pycache__/a.pyc",
    ):
        assert _ignored(path, patterns), f".dockerignore lets {path} into the image"


def test_context_keeps_what_the_build_needs() -> None:
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    needed = [p for p in tracked if p.startswith(("shoal/", "scripts/", "deploy/", "examples/")) or "/" not in p]
    needed = [p for p in needed if p not in (".gitignore", ".dockerignore")]
    assert "pyproject.toml" in needed and "scripts/setup.sh" in needed
    patterns = _patterns()
    dropped = [p for p in needed if _ignored(p, patterns)]
    assert not dropped, f".dockerignore drops files the image needs: {dropped[:10]}"
