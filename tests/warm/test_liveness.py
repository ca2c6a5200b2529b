"""A JVM killed under `shoal serve` and under its warm engine (issue 43): the servers say
"unavailable" within seconds, clients fail fast with the reason, serve exits for its service
manager to restart it; an engine never outlives its serve, and two never serve one workspace."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import psycopg
import pytest

from shoal.cli.warm import client
from tests.support.servers import free_port

# ---- no Spark: the engine's lifetime and its workspace lock -------------------------------------------


def test_two_engines_never_serve_one_workspace(tmp_path, monkeypatch):
    from shoal.cli.warm.server import Engine

    monkeypatch.setenv("SHOAL_WORKSPACE", str(tmp_path / "ws"))
    monkeypatch.delenv("SHOAL_CONFIG", raising=False)
    (tmp_path / "ws" / "engine").mkdir(parents=True)
    first, second = Engine(None), Engine(None)
    first.claim(wait_s=0)
    with pytest.raises(SystemExit, match="an engine already serves"):
        second.claim(wait_s=0.5)
    assert first._lock_fd is not None
    os.close(first._lock_fd)  # as the kernel does when the first engine's process ends
    second.claim(wait_s=0)
    assert second._lock_fd is not None
    os.close(second._lock_fd)


_LOOP = """
import socket, sys
from shoal.cli.warm.server import Engine
from shoal.private import private_dir
engine = Engine(None, owner_pid=int(sys.argv[1]), owner_fd=int(sys.argv[2]))
private_dir(engine.socket_path.parent)
listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
listener.bind(str(engine.socket_path))
listener.listen(4)
engine._listener = listener
print("serving", flush=True)
engine.serve_forever()
print("stopped:", engine.stop_reason, flush=True)
"""


def test_engine_ends_with_an_owner_killed_and_not_yet_reaped(tmp_path):
    """A killed serve whose parent has not reaped it is a zombie: kill(pid, 0) still succeeds,
    so the engine watches a pipe only its owner holds, not the pid alone."""
    read_end, write_end = os.pipe()
    owner = subprocess.Popen(["sleep", "120"], pass_fds=(write_end,))
    os.close(write_end)
    (tmp_path / "ws").mkdir()
    env = {**os.environ, "SHOAL_WORKSPACE": str(tmp_path / "ws")}
    env.pop("SHOAL_CONFIG", None)
    args = [sys.executable, "-c", _LOOP, str(owner.pid), str(read_end)]
    loop = subprocess.Popen(
        args, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, pass_fds=(read_end,)
    )
    os.close(read_end)
    try:
        assert loop.stdout is not None and loop.stdout.readline().strip() == "serving"
        os.kill(owner.pid, signal.SIGKILL)  # not waited for: a zombie
        killed = time.monotonic()
        out = loop.communicate(timeout=30)[0]
        assert time.monotonic() - killed < 5, out
        assert f"the process that started it ({owner.pid}) has ended" in out
    finally:
        for p in (owner, loop):
            p.kill()
            p.wait()


# ---- real JVMs: serve --pg with its engine -------------------------------------------------------------


def _children(pid: int) -> list[int]:
    kids: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        kids += [int(k) for k in (task / "children").read_text().split()]
    return kids


def _java_child(pid: int) -> int:
    """The JVM a process started (its direct child running java): serve and its engine are this
    test's, so is their JVM."""
    for kid in _children(pid):
        cmdline = Path(f"/proc/{kid}/cmdline").read_bytes().split(b"\0")
        if cmdline and cmdline[0].endswith(b"/java"):
            return kid
    raise AssertionError(f"no JVM under serve {pid}")


def _wait(check, timeout: float, what: str, proc: subprocess.Popen | None = None):
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"serve exited ({proc.returncode}) while waiting for {what}: {proc.communicate()}")
        assert time.monotonic() < deadline, f"no {what} within {timeout} s"
        time.sleep(0.2)


def _health(url: str) -> int | None:
    try:
        return httpx.get(f"{url}/healthz", timeout=5).status_code
    except httpx.TransportError:
        return None


@pytest.fixture
def served(tmp_path):
    """`shoal serve --pg` on a workspace of its own (its JVM and its engine's are the test's)."""
    ws = tmp_path / "ws"
    env = {k: v for k, v in os.environ.items() if not k.startswith("SHOAL_")}
    env |= {"SHOAL_WORKSPACE": str(ws), "SHOAL_SPARK__MASTER": "local[2]", "SHOAL_SPARK__SHUFFLE_PARTITIONS": "2"}
    env |= {"SHOAL_SERVER__UNAVAILABLE_EXIT_S": "4"}
    env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).parents[2]), env.get("PYTHONPATH", "")])
    port, pg_port = free_port(), free_port()
    cmd = [sys.executable, "-m", "shoal", "serve", "--port", str(port), "--pg", "--pg-port", str(pg_port)]
    proc = subprocess.Popen(cmd, env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        yield proc, env, ws, f"http://127.0.0.1:{port}", pg_port
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=60)


@pytest.mark.slow
def test_jvm_killed_under_the_engine_then_under_serve(served, tmp_path):
    proc, env, ws, url, pg_port = served
    _wait(lambda: _health(url) == 200, 180, "healthy serve", proc)
    engine = _wait(lambda: client.control(ws, "status"), 180, "engine beside serve", proc)
    assert engine["running"] and engine["jvm_pid"] == _java_child(engine["pid"])

    # The engine's JVM dies under a running command: the client fails at once and says why.
    slow = "SELECT count(*) FROM range(0, 300000) a CROSS JOIN range(0, 300000) b WHERE a.id + b.id < 0"
    sql = [sys.executable, "-m", "shoal", "sql", slow]
    cmd = subprocess.Popen(sql, env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _wait(lambda: (client.control(ws, "status") or {}).get("active"), 60, "the command in the engine")
    time.sleep(1)
    os.kill(_java_child(engine["pid"]), signal.SIGKILL)
    _, err = cmd.communicate(timeout=30)
    assert cmd.returncode == 1 and "could not run this command: its Spark JVM died" in err, err
    status = subprocess.run(
        [sys.executable, "-m", "shoal", "engine", "status", "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert status.returncode == 3 and json.loads(status.stdout)["running"] is False, status
    _wait(lambda: client.control(ws, "status") is None, 10, "the engine's end")

    # Serve's own JVM dies: "unavailable" within 5 s on both endpoints, then exit 75.
    os.kill(_java_child(proc.pid), signal.SIGKILL)
    killed = time.monotonic()
    _wait(lambda: _health(url) == 503, 5, "/healthz 503")
    with pytest.raises(psycopg.OperationalError, match="the database system is not accepting connections"):
        psycopg.connect(host="127.0.0.1", port=pg_port, user="x", dbname="lake", sslmode="require", connect_timeout=5)
    assert time.monotonic() - killed < 5
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 75, err
    assert "exiting with code 75 so that the service manager restarts it" in err
