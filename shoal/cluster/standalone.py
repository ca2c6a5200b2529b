"""A Spark standalone cluster on this machine for development: `shoal cluster up/down/status`.

The master and workers are Spark's own daemons, started from the pyspark wheel's
`spark-class` (the wheel has no sbin/ scripts). They run in their own sessions, so they
outlive the command that started them; their pids, URLs and logs live in
`<workspace>/cluster/`. Point Shoal at the cluster with `[spark] master = "spark://HOST:PORT"`
(`shoal cluster up` prints it); production clusters are started by their own tooling.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx

from shoal.config import Settings
from shoal.exceptions import DependencyError, ShoalError

if TYPE_CHECKING:
    from collections.abc import Callable


class ClusterError(ShoalError):
    """The development cluster could not be started, reached or stopped."""


@dataclass
class ClusterState:
    master_url: str
    webui_url: str
    pids: list[int]
    workers: int
    cores_per_worker: int
    memory_per_worker: str
    started_at: float
    log_dir: str
    alive_workers: int = 0
    running: bool = False
    problems: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _dir(settings: Settings) -> Path:
    d = settings.workspace_dir / "cluster"
    d.mkdir(parents=True, exist_ok=True)
    return d


def _state_file(settings: Settings) -> Path:
    return _dir(settings) / "cluster.json"


def spark_home() -> Path:
    import pyspark

    home = Path(pyspark.__file__).parent
    if not (home / "bin" / "spark-class").is_file():
        raise DependencyError(f"{home}/bin/spark-class is missing", hint="reinstall pyspark==3.5.9")
    return home


def _alive(pid: int) -> bool:
    try:  # reap it first when it is our own child (a zombie still answers kill 0)
        if os.waitpid(pid, os.WNOHANG)[0] == pid:
            return False
    except ChildProcessError:
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _port_free(host: str, port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex((host, port)) != 0


def _free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def master_json(webui_url: str) -> dict[str, Any]:
    r = httpx.get(webui_url.rstrip("/") + "/json/", timeout=5)
    r.raise_for_status()
    return r.json()


def status(settings: Settings) -> ClusterState | None:
    """The recorded cluster, with how many workers the master reports alive; None if none was started."""
    path = _state_file(settings)
    if not path.is_file():
        return None
    state = ClusterState(**{k: v for k, v in json.loads(path.read_text()).items() if k in ClusterState.__annotations__})
    dead = [p for p in state.pids if not _alive(p)]
    state.problems = [f"process {p} is gone (see {state.log_dir})" for p in dead]
    try:
        info = master_json(state.webui_url)
        state.alive_workers = _alive_count(info)
        state.running = info.get("status") == "ALIVE"
        if state.alive_workers < state.workers:
            state.problems.append(
                f"{state.alive_workers} of {state.workers} workers alive (replace the lost ones: shoal cluster up)"
            )
    except (httpx.HTTPError, ValueError) as exc:
        state.running = False
        state.problems.append(f"master web UI {state.webui_url} unreachable: {exc}")
    return state


def up(
    settings: Settings,
    *,
    workers: int | None = None,
    say: Callable[[str], None] = lambda _m: None,
    timeout: float = 120,
) -> ClusterState:
    """Start a master and `workers` workers; wait until the master sees them all alive.

    On a running master it starts the workers missing from `workers` (default: the recorded
    count), so a lost worker is replaced and more can be added."""
    current = status(settings)
    if current is not None and current.running:
        return _add_workers(settings, current, workers or current.workers, say, timeout)
    if current is not None:
        down(settings)
    c = settings.cluster
    n = workers or c.workers
    for port in (c.port, c.webui_port):
        if not _port_free(c.host, port):
            raise ClusterError(
                f"port {port} on {c.host} is taken", hint="set [cluster] port / webui_port to free ports"
            )
    log_dir = _dir(settings) / "logs"
    log_dir.mkdir(exist_ok=True)
    master_url = f"spark://{c.host}:{c.port}"
    webui_url = f"http://{c.host}:{c.webui_port}"
    master = [_spark_class(), "org.apache.spark.deploy.master.Master", "--host", c.host, "--port", str(c.port)]
    proc = _launch(settings, "master", master + ["--webui-port", str(c.webui_port)], say)
    _wait(lambda: not _port_free(c.host, c.port), timeout, f"the master on {master_url}", log_dir, proc)
    state = ClusterState(
        master_url, webui_url, [proc.pid], n, c.worker_cores, c.worker_memory, time.time(), str(log_dir)
    )
    return _add_workers(settings, state, n, say, timeout)


def _add_workers(
    settings: Settings, state: ClusterState, n: int, say: Callable[[str], None], timeout: float
) -> ClusterState:
    """Start workers until `n` are alive on the master; record their pids."""
    missing = n - state.alive_workers
    logs = Path(state.log_dir)
    first = 1 + len(list(logs.glob("worker-*.log")))  # a new name: old logs and work folders stay
    for i in range(first, first + max(missing, 0)):
        proc = _launch(settings, f"worker-{i}", _worker_command(settings, i, state.master_url), say)
        state.pids.append(proc.pid)
    state.pids = [p for p in state.pids if _alive(p)]
    state.workers = max(n, state.alive_workers)
    _state_file(settings).write_text(json.dumps(state.to_dict(), indent=1))

    def all_alive() -> bool:
        try:
            info = master_json(state.webui_url)
        except (httpx.HTTPError, ValueError):
            return False
        return _alive_count(info) >= n

    _wait(all_alive, timeout, f"{n} workers to register with {state.master_url}", logs)
    say(f"cluster up: {state.master_url} with {n} workers (web UI {state.webui_url})")
    return status(settings) or state


def _alive_count(info: dict[str, Any]) -> int:
    return sum(1 for w in info.get("workers", []) if w.get("state") == "ALIVE")


def _spark_class() -> str:
    return str(spark_home() / "bin" / "spark-class")


def _worker_command(settings: Settings, i: int, master_url: str) -> list[str]:
    c = settings.cluster
    worker = [_spark_class(), "org.apache.spark.deploy.worker.Worker", "--host", c.host]
    worker += ["--cores", str(c.worker_cores), "--memory", c.worker_memory, "--webui-port", str(_free_port(c.host))]
    return worker + ["--work-dir", str(_dir(settings) / "work" / f"worker-{i}"), master_url]


def _launch(settings: Settings, name: str, cmd: list[str], say: Callable[[str], None]) -> subprocess.Popen:
    """One daemon in a session of its own (it outlives this command), logging to logs/NAME.log."""
    env = {
        **os.environ,
        "SPARK_HOME": str(spark_home()),
        "SPARK_LOCAL_IP": settings.cluster.host,
        "SPARK_WORKER_DIR": str(_dir(settings) / "work"),
        # Executors run Python on this interpreter (the one with Shoal and its models).
        "PYSPARK_PYTHON": sys.executable,
    }
    with open(_dir(settings) / "logs" / f"{name}.log", "ab") as log:
        proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    say(f"started {name} (pid {proc.pid})")
    return proc


def _wait(
    check: Callable[[], bool], timeout: float, what: str, log_dir: Path, proc: subprocess.Popen | None = None
) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if proc is not None and proc.poll() is not None:
            raise ClusterError(f"{what} exited with code {proc.returncode}", hint=f"see the logs in {log_dir}")
        if time.monotonic() > deadline:
            raise ClusterError(f"timed out after {timeout:g} s waiting for {what}", hint=f"see the logs in {log_dir}")
        time.sleep(0.5)


def down(settings: Settings, *, say: Callable[[str], None] = lambda _m: None) -> int:
    """Stop the recorded master and workers (TERM, then KILL after 15 s); returns how many were running."""
    path = _state_file(settings)
    if not path.is_file():
        return 0
    pids = json.loads(path.read_text()).get("pids", [])
    running = [p for p in pids if _alive(p)]
    for pid in reversed(running):  # workers first, then the master
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGTERM)
    deadline = time.monotonic() + 15
    while any(_alive(p) for p in running) and time.monotonic() < deadline:
        time.sleep(0.2)
    for pid in running:
        if _alive(pid):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
    path.unlink()
    say(f"stopped {len(running)} process(es)")
    return len(running)
