"""The suite's path guard (tests/support/pathguard.py) refuses writes and deletes outside the run's
folders, in pytest's own processes and in every Python process they start."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from tests.support import pathguard

SITE = Path(__file__).parent / "support" / "site"

CHILD = textwrap.dedent(
    """
    import os, shutil, sys
    allowed, outside = sys.argv[1], sys.argv[2]
    refused = []
    def attempt(name, fn):
        try:
            fn()
        except PermissionError as exc:
            refused.append(name)
    attempt("write", lambda: open(os.path.join(outside, "new.txt"), "w").write("x"))
    attempt("append", lambda: open(os.path.join(outside, "canary.txt"), "a").write("x"))
    attempt("os.open", lambda: os.open(os.path.join(outside, "new2.txt"), os.O_CREAT | os.O_WRONLY))
    attempt("remove", lambda: os.remove(os.path.join(outside, "canary.txt")))
    attempt("rmtree", lambda: shutil.rmtree(os.path.join(outside, "dir")))
    attempt("rename", lambda: os.rename(os.path.join(outside, "canary.txt"), os.path.join(allowed, "moved")))
    attempt("relative", lambda: (os.chdir(outside), os.unlink("canary.txt")))
    attempt("dir_fd", lambda: os.unlink("canary.txt", dir_fd=os.open(outside, os.O_RDONLY)))
    attempt("symlink escape", lambda: open(os.path.join(allowed, "link", "canary.txt"), "w"))
    os.chdir(allowed)
    open(os.path.join(allowed, "inside.txt"), "w").write("ok")  # inside: allowed
    os.remove(os.path.join(allowed, "inside.txt"))
    assert open(os.path.join(outside, "canary.txt")).read() == "canary"  # reading is never refused
    print(",".join(refused))
    """
)


def test_a_child_python_process_is_refused_every_write_and_delete_outside_the_roots(tmp_path: Path) -> None:
    allowed, outside = tmp_path / "allowed", tmp_path / "outside"
    allowed.mkdir()
    (outside / "dir").mkdir(parents=True)
    canary = outside / "canary.txt"
    canary.write_text("canary")
    (outside / "dir" / "keep.txt").write_text("keep")
    (allowed / "link").symlink_to(outside)  # a link inside the roots that points outside them
    env = {
        **os.environ,
        "TEST_PATH_GUARD_ROOT": str(allowed),
        "TEST_PATH_GUARD": "enforce",
        "PYTHONPATH": str(SITE),
        "PYTEST_XDIST_WORKER": "selftest",
    }
    env.pop("TEST_PATH_GUARD_ARTIFACTS", None)
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(allowed), str(outside)], env=env, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().split(",") == [
        "write",
        "append",
        "os.open",
        "remove",
        "rmtree",
        "rename",
        "relative",
        "dir_fd",
        "symlink escape",
    ]
    # Nothing outside changed, and every refusal is in the worker's log (which fails the test).
    assert canary.read_text() == "canary" and (outside / "dir" / "keep.txt").read_text() == "keep"
    assert sorted(p.name for p in outside.iterdir()) == ["canary.txt", "dir"]
    log = (allowed / "guard-selftest.log").read_text().splitlines()
    assert len(log) == 9 and all(str(outside) in line for line in log), log


def test_record_mode_logs_without_refusing(tmp_path: Path) -> None:
    allowed, outside = tmp_path / "allowed", tmp_path / "outside"
    allowed.mkdir()
    outside.mkdir()
    env = {**os.environ, "TEST_PATH_GUARD_ROOT": str(allowed), "TEST_PATH_GUARD": "record", "PYTHONPATH": str(SITE)}
    env["PYTEST_XDIST_WORKER"] = "rec"
    code = f"open({str(outside / 'made.txt')!r}, 'w').write('x')"
    subprocess.run([sys.executable, "-c", code], env=env, check=True, timeout=60)
    assert (outside / "made.txt").read_text() == "x"
    assert "made.txt" in (allowed / "guard-rec.log").read_text()


def test_this_run_is_guarded_and_its_decisions_hold() -> None:
    """The suite runs under the guard (scripts/test.sh and plain pytest alike), and the guard it
    installed refuses system paths while allowing the run's root, caches and bytecode."""
    guard = sys._shoal_path_guard  # type: ignore[attr-defined]
    assert guard.enforce and os.environ["TEST_PATH_GUARD"] == "enforce"
    root = os.environ["TEST_PATH_GUARD_ROOT"]
    assert os.environ["TMPDIR"] == root
    assert str(SITE) in os.environ["PYTHONPATH"].split(os.pathsep)
    # Decisions only: nothing below is attempted.
    assert guard.offending("os.remove", ("/etc/hostname", None)) == "/etc/hostname"
    assert guard.offending("shutil.rmtree", ("/usr/lib", None)) == "/usr/lib"
    assert guard.offending("open", ("/etc/passwd", "a", 0)) == "/etc/passwd"
    assert guard.offending("open", ("/etc/passwd", "r", os.O_RDONLY)) is None
    assert guard.offending("os.rename", (os.path.join(root, "a"), "/usr/local/bin/x", None, None)) == "/usr/local/bin/x"
    assert guard.offending("open", (os.path.join(root, "w", "x.txt"), "w", 0)) is None
    assert guard.offending("open", ("/usr/lib/python3/__pycache__/m.cpython-311.pyc", None, os.O_WRONLY)) is None
    assert guard.offending("os.remove", (os.path.expanduser("~/.cache/shoal/models/x"), None)) is None
    assert guard.offending("open", (os.path.join(root, "..", "escape.txt"), "w", 0)) is not None
    assert pathguard.log_path() is not None and pathguard.log_path().startswith(root)
