"""Starting, finding and stopping a workspace's warm engine (used by `shoal engine` and `shoal serve`)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from shoal.cli.warm.client import control, engine_disabled, socket_path
from shoal.config import Settings
from shoal.exceptions import ShoalError


class EngineError(ShoalError):
    """The warm engine could not be started or stopped."""


def log_file(workspace: Path) -> Path:
    return workspace / "engine" / "engine.log"


def status(settings: Settings) -> dict[str, Any]:
    ws = settings.workspace_dir
    answer = control(ws, "status")
    if answer is None:
        return {"running": False, "workspace": str(ws), "socket": str(socket_path(ws))}
    return answer


def spawn(
    settings: Settings, config: Path | None, *, owner_pid: int | None = None, idle_timeout_s: float = 0.0
) -> subprocess.Popen:
    """Start the engine in its own session (it outlives this command), logging to the workspace.
    It stops when `owner_pid` ends, after `idle_timeout_s` without a command (0: never), or when
    its workspace is deleted. With an owner, it also gets the read end of a pipe whose write end
    only this process holds: when this process ends, killed or not, the engine reads EOF."""
    from shoal.private import private_dir, private_file

    ws = settings.workspace_dir
    private_dir(ws / "engine")
    log = private_file(log_file(ws))
    cmd = [sys.executable, "-m", "shoal.cli.warm.server"]
    if config is not None:
        cmd += ["--config", str(config)]
    owner_r = owner_w = -1
    if owner_pid is not None:
        owner_r, owner_w = os.pipe()  # both ends non-inheritable: no other child keeps them open
        cmd += ["--owner-pid", str(owner_pid), "--owner-fd", str(owner_r)]
    if idle_timeout_s:
        cmd += ["--idle-timeout", str(idle_timeout_s)]
    env = {k: v for k, v in os.environ.items() if k != "SHOAL_ENGINE"}
    try:
        with open(log, "ab") as out:
            proc = subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=out,
                env=env,
                cwd=os.getcwd(),
                start_new_session=True,
                pass_fds=(owner_r,) if owner_r >= 0 else (),
            )
    finally:
        if owner_r >= 0:
            os.close(owner_r)
    # The write end stays open for this process's life (closed by stop_beside_serve).
    proc.owner_fd = owner_w  # type: ignore[attr-defined]
    return proc


def wait_ready(settings: Settings, proc: subprocess.Popen, timeout_s: float) -> dict[str, Any]:
    """The engine's status once it answers; EngineError if it exits or takes too long."""
    ws = settings.workspace_dir
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        answer = control(ws, "status")
        if answer is not None and answer.get("pid") == proc.pid:
            return answer
        if proc.poll() is not None:
            raise EngineError(
                f"the engine exited with code {proc.returncode} while starting",
                hint=f"see {log_file(ws)}",
            )
        time.sleep(0.25)
    raise EngineError(
        f"the engine did not answer within {timeout_s:.0f} s (pid {proc.pid} still starting)",
        hint=f"see {log_file(ws)}; check again with `shoal engine status`",
    )


def stop(settings: Settings, timeout_s: float = 60.0) -> dict[str, Any] | None:
    """Ask the engine to stop and wait until it has; None when none was running."""
    ws = settings.workspace_dir
    answer = control(ws, "stop")
    if answer is None:
        return None
    pid = int(answer.get("pid") or 0)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not _alive(pid):
            return {"stopped": True, "pid": pid, "workspace": str(ws)}
        time.sleep(0.2)
    raise EngineError(
        f"the engine (pid {pid}) is still finishing commands after {timeout_s:.0f} s",
        hint=f"wait, or end it with `kill {pid}`",
    )


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # our own child that exited but was not reaped yet
        done, _ = os.waitpid(pid, os.WNOHANG)
        return done == 0
    except ChildProcessError:
        return True


def start_beside_serve(settings: Settings, config: Path | None) -> subprocess.Popen | None:
    """`shoal serve` starts an engine for its workspace unless one runs (or SHOAL_ENGINE=off);
    it does not wait for it: commands run in process until it answers."""
    if engine_disabled():
        return None
    answer = control(settings.workspace_dir, "status")
    if answer is not None and answer.get("running"):
        return None  # one whose JVM died answers "not running": a new one waits for its lock

    # Owned by this serve: it ends with serve even when serve is killed without a chance to stop it.
    return spawn(settings, config, owner_pid=os.getpid())


def stop_beside_serve(proc: subprocess.Popen | None) -> None:
    if proc is None:
        return
    owner_fd = getattr(proc, "owner_fd", -1)
    if owner_fd >= 0:
        os.close(owner_fd)  # the engine reads EOF: its owner is done with it
        proc.owner_fd = -1  # type: ignore[attr-defined]
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
