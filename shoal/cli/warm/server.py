"""The warm engine: runs `shoal` commands for one workspace in a process whose SparkSession
and Python workers are already up.

Each client connection is one command, run by the CLI's own code (console.main) in a thread
of its own, so output, exit codes and --json are those of an in-process run by construction:

- Output: the client passes its stdin/stdout/stderr descriptors; `sys.stdout`/`sys.stderr`/
  `sys.stdin` and the CLI's rich consoles are routed per command (a context variable, which
  threads the command starts inherit), never swapped process-wide.
- Spark: each command gets a session of its own from a pool (`newSession()`: its own temp
  views, SQL settings and current database) on the one SparkContext, reset when handed back.
- Process-wide state a command reads (current folder, SHOAL_* and display variables) is set
  per command; commands whose folder and variables differ run one after the other, commands
  that agree run at the same time.
- A command whose settings would build a different Spark (another workspace, another
  catalog, other spark.* settings) is refused: the client then runs it in its own process.
- A client that disappears mid-command: its descriptors are pointed at /dev/null and its
  Spark jobs cancelled (job tag); the engine carries on.
- Access: the socket is 0600 in a 0700 folder, and each peer's uid is checked (SO_PEERCRED).
"""

from __future__ import annotations

import argparse
import contextvars
import json
import os
import signal
import socket
import sys
import threading
import time
import traceback
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from shoal.cli.warm.client import (
    PROTOCOL,
    parse_root,
    peer_uid,
    recv_message,
    same_owner,
    send_message,
    socket_path,
)

_current: contextvars.ContextVar[_Command | None] = contextvars.ContextVar("shoal_engine_command", default=None)
# Sessions kept warm besides the root one: two commands at once start with no wait.
POOL_WARM = 2
# Requests wait at most this long for the go-ahead after "ready" (a client that hangs there).
GO_TIMEOUT_S = 30.0
# How often the engine checks its reasons to stop (its JVM, its owner, its workspace).
CHECK_EVERY_S = 0.5
# A new engine waits this long for the workspace's lock: an engine that is stopping (its
# owner was killed) still holds it for a moment.
CLAIM_WAIT_S = 30.0
LOCK_NAME = "engine.lock"


def engine_dir(workspace: Path) -> Path:
    return workspace / "engine"


# ---- per-command routing of process-wide objects ------------------------------------------------


@dataclass
class _Command:
    id: str
    argv: list[str]
    prog: str
    cwd: str
    env: dict[str, str]
    fds: list[int]
    stdin: Any = None
    stdout: Any = None
    stderr: Any = None
    consoles: dict[str, Any] = field(default_factory=dict)
    state: dict[str, object] = field(default_factory=lambda: {"config": None, "json": False})
    lock: threading.Lock = field(default_factory=threading.Lock)
    finished: bool = False
    cancelled: bool = False


class _StreamRouter:
    """Stands in for sys.stdout/err/in: the running command's stream, else the engine's own."""

    def __init__(self, name: str, fallback: Any) -> None:
        self._name = name
        self._fallback = fallback

    def _target(self) -> Any:
        cmd = _current.get()
        target = getattr(cmd, self._name) if cmd is not None else None
        return self._fallback if target is None else target

    def write(self, text: str) -> int:
        return self._target().write(text)

    def flush(self) -> None:
        self._target().flush()

    def isatty(self) -> bool:
        return self._target().isatty()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._target(), name)

    def __iter__(self) -> Iterator[str]:
        return iter(self._target())


class _ConsoleRouter:
    """Stands in for shoal.cli.output.out/err: the running command's console."""

    def __init__(self, name: str, fallback: Any) -> None:
        self._name = name
        self._fallback = fallback

    def routed_console(self) -> Any:
        """The running command's console itself (rich's Live needs one: `with console:`)."""
        cmd = _current.get()
        console = cmd.consoles.get(self._name) if cmd is not None else None
        return self._fallback if console is None else console

    def __getattr__(self, name: str) -> Any:
        return getattr(self.routed_console(), name)


def _threads_inherit_context() -> None:
    """Threads started by a command (progress spinners, workflow branches) run in its context,
    as Python 3.14's thread_inherit_context does, so their output reaches the same client."""
    if getattr(threading.Thread, "_shoal_inherits", False):
        return
    init, bootstrap = threading.Thread.__init__, threading.Thread._bootstrap_inner  # type: ignore[attr-defined]

    def __init__(self: threading.Thread, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        self._shoal_context = contextvars.copy_context()  # type: ignore[attr-defined]

    def _bootstrap_inner(self: threading.Thread) -> None:
        ctx = getattr(self, "_shoal_context", None)
        if ctx is None:
            bootstrap(self)
        else:
            ctx.run(bootstrap, self)

    threading.Thread.__init__ = __init__  # type: ignore[method-assign]
    threading.Thread._bootstrap_inner = _bootstrap_inner  # type: ignore[attr-defined]
    threading.Thread._shoal_inherits = True  # type: ignore[attr-defined]


def install_routing() -> None:
    """Route the CLI's process-wide objects per command (the run itself, --config and --json,
    is a context variable in shoal.cli.context already); before the CLI modules are imported."""
    from shoal.cli import output

    if not isinstance(sys.stdout, _StreamRouter):
        sys.stdin = _StreamRouter("stdin", sys.stdin)
        sys.stdout = _StreamRouter("stdout", sys.stdout)
        sys.stderr = _StreamRouter("stderr", sys.stderr)
    if not isinstance(output.out, _ConsoleRouter):
        output.out = _ConsoleRouter("out", output.out)  # type: ignore[assignment]
        output.err = _ConsoleRouter("err", output.err)  # type: ignore[assignment]
    _threads_inherit_context()


# ---- process-wide folder and environment, one setting at a time -----------------------------------


class _Gate:
    """Commands that need the same folder and variables run together; others wait their turn."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._key: tuple | None = None
        self._active = 0
        self._engine_env = {k: v for k, v in os.environ.items() if _forwarded(k)}

    @contextmanager
    def enter(self, cwd: str, env: dict[str, str], gone: Any) -> Iterator[None]:
        key = (cwd, tuple(sorted(env.items())))
        with self._cond:
            while self._active and self._key != key:
                if gone():
                    raise ConnectionAbortedError("client left while waiting")
                self._cond.wait(0.2)
            if self._key != key:
                os.chdir(cwd)
                for name in [k for k in os.environ if _forwarded(k)]:
                    del os.environ[name]
                os.environ.update(env)
                self._key = key
            self._active += 1
        try:
            yield
        finally:
            with self._cond:
                self._active -= 1
                self._cond.notify_all()


def _forwarded(name: str) -> bool:
    from shoal.cli.warm.client import DISPLAY_ENV

    return (name.upper().startswith("SHOAL_") and name.upper() != "SHOAL_ENGINE") or name in DISPLAY_ENV


# ---- sessions ---------------------------------------------------------------------------------------


class _SessionPool:
    """Sessions of the one SparkContext, each used by one command at a time."""

    def __init__(self, root: Any, catalog: str) -> None:
        self._root = root
        self._free: list[Any] = []
        self._lock = threading.Lock()
        self.created = 0
        self._catalog = root._jsparkSession.sessionState().catalogManager().catalog(catalog)
        self._catalog_name = catalog

    def _new(self) -> Any:
        session = self._root.newSession()
        cm = session._jsparkSession.sessionState().catalogManager()
        # One Iceberg catalog (one JDBC pool) for all sessions: a catalog per session means
        # several SQLite connections in this JVM, and their commits failed with
        # SQLITE_BUSY_SNAPSHOT (measured). CatalogManager has no public way to add one.
        field_ = cm.getClass().getDeclaredField("catalogs")
        field_.setAccessible(True)
        field_.get(cm).put(self._catalog_name, self._catalog)
        session._shoal_home = (cm.currentCatalog().name(), list(cm.currentNamespace()))
        self.created += 1
        return session

    def warm(self, n: int) -> None:
        sessions = [self._new() for _ in range(n)]
        for s in sessions:
            s.sql("SHOW NAMESPACES").collect()  # opens the session's catalog connection
        with self._lock:
            self._free.extend(sessions)

    def acquire(self) -> Any:
        with self._lock:
            session = self._free.pop() if self._free else None
        return self._new() if session is None else session

    def release(self, session: Any) -> None:
        if self._reset(session):
            with self._lock:
                self._free.append(session)

    @staticmethod
    def _reset(session: Any) -> bool:
        """Back to a fresh session's state; False (drop it) when that cannot be done."""
        try:
            js = session._jsparkSession
            js.sessionState().catalog().clearTempTables()
            session.sql("RESET")
            cm = js.sessionState().catalogManager()
            return (cm.currentCatalog().name(), list(cm.currentNamespace())) == session._shoal_home
        except Exception:  # noqa: BLE001 - a session we cannot reset is not reused
            return False


# ---- the engine ------------------------------------------------------------------------------------


class Engine:
    def __init__(
        self,
        config: str | None,
        *,
        owner_pid: int | None = None,
        owner_fd: int | None = None,
        idle_timeout_s: float = 0.0,
    ) -> None:
        from shoal.config import load_settings

        self.config = config
        # Its lifetime: the process that started it (`shoal serve`), an idle time, the workspace.
        # The owner holds the write end of a pipe whose read end is `owner_fd`: EOF there means
        # the owner has ended, however it ended (a pid alone misses a killed owner its parent
        # has not reaped yet: a zombie still answers kill(pid, 0)).
        self.owner_pid = owner_pid
        self.owner_fd = owner_fd
        self.idle_timeout_s = idle_timeout_s
        self.last_active = time.monotonic()
        self.stop_reason: str | None = None
        self.settings = load_settings(config)
        self.workspace = self.settings.workspace_dir
        self.socket_path = socket_path(self.workspace)
        self.started_at = time.time()
        self.requests = 0
        self.refused = 0
        self.active: dict[str, _Command] = {}
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._listener: socket.socket | None = None
        self._socket_inode: int | None = None
        self._lock_fd: int | None = None
        self.spark: Any = None
        self.gate = _Gate()

    # -- start-up --------------------------------------------------------------------------------
    def start(self) -> None:
        from shoal.private import private_dir, private_file
        from shoal.spark import get_spark, spark_conf

        private_dir(engine_dir(self.workspace))
        private_dir(self.socket_path.parent)
        self.claim()
        if _answers(self.socket_path):
            raise SystemExit(f"an engine already serves {self.workspace} ({self.socket_path})")
        install_routing()
        from shoal.cli import console  # noqa: F401 - import the commands now, not in the first request

        self.spark = get_spark(self.settings)
        self.conf = spark_conf(self.settings)
        sc = self.spark.sparkContext
        sc.setInterruptOnCancel(True)
        # Warm what a first command would otherwise pay for: the catalog connection, the
        # Python worker daemon, the planner's first query.
        self.spark.sql("SHOW NAMESPACES").collect()
        sc.parallelize(range(4), 2).map(lambda x: x + 1).collect()
        self.pool = _SessionPool(self.spark, self.settings.catalog.name)
        self.pool.warm(POOL_WARM)
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        with suppress(FileNotFoundError):
            self.socket_path.unlink()  # stale: nobody answered on it above
        old = os.umask(0o177)  # the socket is created 0600: no window where others may connect
        try:
            listener.bind(str(self.socket_path))
        finally:
            os.umask(old)
        os.chmod(self.socket_path, 0o600)
        self._socket_inode = self.socket_path.stat().st_ino
        listener.listen(64)
        self._listener = listener
        pid_file = private_file(engine_dir(self.workspace) / "engine.pid")
        pid_file.write_text(f"{os.getpid()}\n")
        print(f"shoal engine {os.getpid()} serving {self.workspace} on {self.socket_path}", flush=True)

    def claim(self, wait_s: float = CLAIM_WAIT_S) -> None:
        """Hold the workspace's engine lock for this process's life: two engines never serve
        one workspace (the kernel drops the lock when the process ends, kill -9 included)."""
        import fcntl

        from shoal.private import private_file

        fd = os.open(private_file(engine_dir(self.workspace) / LOCK_NAME), os.O_RDWR | os.O_CREAT, 0o600)
        deadline = time.monotonic() + wait_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    os.close(fd)
                    raise SystemExit(f"an engine already serves {self.workspace} (it holds {LOCK_NAME})") from None
                time.sleep(0.25)
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._lock_fd = fd

    # -- serving ---------------------------------------------------------------------------------
    def serve_forever(self) -> None:
        assert self._listener is not None
        self._listener.settimeout(CHECK_EVERY_S)
        checked = time.monotonic()
        while not self._stopping.is_set():
            conn = None
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                pass
            except OSError:
                if self._stopping.is_set():
                    break
                raise
            if conn is not None:
                threading.Thread(target=self._handle, args=(conn,), name="shoal-engine-client", daemon=True).start()
            if time.monotonic() - checked >= CHECK_EVERY_S:  # also while connections keep coming
                checked = time.monotonic()
                reason = self._reason_to_stop()
                if reason is not None:
                    self.stop_reason = reason
                    print(f"engine: stopping: {reason}", file=sys.__stderr__, flush=True)
                    break
        self._shutdown()

    def stop(self) -> None:
        self._stopping.set()

    def _reason_to_stop(self) -> str | None:
        """Why an engine nobody will use, or that cannot work, should end (checked twice a second)."""
        if self.jvm_down() is not None:
            return self.jvm_down()
        if not self.workspace.is_dir() or not self.socket_path.exists():
            # Nobody can reach it any more, and a new engine may serve a new workspace there.
            return f"its workspace {self.workspace} or socket is gone"
        if (self.owner_pid is not None and not _pid_alive(self.owner_pid)) or _closed(self.owner_fd):
            return f"the process that started it ({self.owner_pid}) has ended"
        if self.idle_timeout_s > 0 and not self.active:
            idle = time.monotonic() - self.last_active
            if idle >= self.idle_timeout_s:
                return f"idle for {idle:.0f} s (idle timeout {self.idle_timeout_s:g} s)"
        return None

    def jvm_down(self) -> str | None:
        """Why this engine's JVM cannot run commands (None: it runs, or is not started yet)."""
        from shoal.spark import jvm_down

        if self.spark is None:
            return None
        reason = jvm_down(self.spark)
        return None if reason is None else f"its Spark JVM died ({reason.removeprefix('the Spark JVM ')})"

    def _shutdown(self, grace_s: float = 30.0) -> None:
        if self._listener is not None:
            self._listener.close()
        with suppress(OSError):
            # Only our own socket: a new engine may have bound that path since.
            if self.socket_path.stat().st_ino == self._socket_inode:
                self.socket_path.unlink()
        deadline = time.monotonic() + grace_s
        while self.active and time.monotonic() < deadline:
            time.sleep(0.1)
        for cmd in list(self.active.values()):
            self._cancel(cmd)
        with suppress(FileNotFoundError):
            (engine_dir(self.workspace) / "engine.pid").unlink()
        from shoal.spark import stop_spark

        if self.jvm_down() is None:  # a dead JVM has nothing to stop
            with suppress(Exception):
                stop_spark()

    def status(self) -> dict[str, Any]:
        import pyspark

        from shoal.spark import jvm_process

        down = self.jvm_down()
        proc = jvm_process(self.spark)
        return {
            # An engine whose JVM died answers (for a moment, until it ends) but runs nothing.
            "running": down is None,
            **({"reason": down} if down else {}),
            "pid": os.getpid(),
            "jvm_pid": None if proc is None else proc.pid,
            "workspace": str(self.workspace),
            "socket": str(self.socket_path),
            "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.started_at)),
            "uptime_s": round(time.time() - self.started_at, 1),
            "requests": self.requests,
            "refused": self.refused,
            "active": len(self.active),
            "sessions": self.pool.created,
            "spark_version": pyspark.__version__,
            "master": self.settings.spark.master,
        }

    def _handle(self, conn: socket.socket) -> None:
        fds: list[int] = []
        self.last_active = time.monotonic()
        try:
            if not same_owner(peer_uid(conn)):
                return  # deny by default: not a word to another user
            conn.settimeout(GO_TIMEOUT_S)
            data, fds, _flags, _addr = socket.recv_fds(conn, 65536, 3)
            if not data:
                return
            msg = recv_message(conn, data)
            if msg is None or msg.get("v") != PROTOCOL:
                send_message(conn, {"ready": False, "reason": "protocol version mismatch"})
                return
            op = msg.get("op")
            if op == "status":
                send_message(conn, self.status())
            elif op == "stop":
                send_message(conn, {"stopping": True, "pid": os.getpid()})
                self.stop()
            elif op == "run" and len(fds) == 3:
                owned, fds = fds, []
                self._run(conn, msg, owned)  # closes them, whatever happens
            else:
                send_message(conn, {"ready": False, "reason": f"bad request {op!r}"})
        except (OSError, ValueError) as exc:
            print(f"engine: connection dropped: {exc}", file=sys.__stderr__, flush=True)
        finally:
            for fd in fds:
                with suppress(OSError):
                    os.close(fd)
            # shutdown, not only close: the command's watcher thread is blocked reading this
            # socket, which keeps it open after close(); the client would wait forever.
            with suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
            conn.close()
            self.last_active = time.monotonic()  # idle time counts from the end of the last command

    def _run(self, conn: socket.socket, msg: dict[str, Any], fds: list[int]) -> None:
        argv, env = msg.get("argv"), msg.get("env")
        if not (isinstance(argv, list) and all(isinstance(a, str) for a in argv) and isinstance(env, dict)):
            send_message(conn, {"ready": False, "reason": "malformed request"})
            for fd in fds:
                os.close(fd)
            return
        cmd = _Command(
            id=uuid.uuid4().hex[:12],
            argv=argv,
            prog=str(msg.get("prog") or "shoal"),
            cwd=str(msg.get("cwd") or "/"),
            env={str(k): str(v) for k, v in env.items() if _forwarded(str(k))},
            fds=fds,
        )
        streams_open = False
        try:
            with self.gate.enter(cmd.cwd, cmd.env, lambda: _client_gone(conn)):
                reason = self.jvm_down() or self._refusal(cmd)
                if reason:
                    with self._lock:
                        self.refused += 1
                    print(f"engine: refused {cmd.argv[:1]}: {reason}", file=sys.__stderr__, flush=True)
                    send_message(conn, {"ready": False, "reason": reason})
                    return
                send_message(conn, {"ready": True, "id": cmd.id})
                go = recv_message(conn)
                if not go or not go.get("go"):
                    return  # the client fell back to running it itself
                conn.settimeout(None)
                self._open_streams(cmd, msg.get("encoding"))
                streams_open = True
                with self._lock:
                    self.requests += 1
                    self.active[cmd.id] = cmd
                watcher = threading.Thread(target=self._watch, args=(conn, cmd), daemon=True)
                watcher.start()
                session, code = None, 1
                try:
                    session = self.pool.acquire()
                    code = self._execute(cmd, session)
                except Exception as exc:  # noqa: BLE001 - the client hears why, the engine goes on
                    self._tell_failed(cmd, exc)
                finally:
                    self._finish(cmd, streams_open)
                    streams_open = False
                    if not cmd.cancelled:
                        with suppress(OSError):
                            send_message(conn, {"exit": code})
                    if session is not None:
                        self.pool.release(session)  # after the answer: the client need not wait
        except ConnectionAbortedError:
            return
        finally:
            self._finish(cmd, streams_open)

    def _finish(self, cmd: _Command, streams_open: bool) -> None:
        """The command is over: its descriptors are closed (the caller's pipes reach EOF)."""
        with cmd.lock:
            if cmd.finished:
                return
            cmd.finished = True
        self.active.pop(cmd.id, None)
        if streams_open:
            _close_streams(cmd)
        else:
            for fd in cmd.fds:
                with suppress(OSError):
                    os.close(fd)

    def _refusal(self, cmd: _Command) -> str | None:
        """Why this engine must not run the command (None: it may)."""
        from shoal.config import load_settings
        from shoal.spark import spark_conf

        config, _no_engine, _words = parse_root(cmd.argv)
        if config is not None:
            config = str((Path(cmd.cwd) / Path(config).expanduser()).resolve())
        try:
            settings = load_settings(config)
            if settings.workspace_dir != self.workspace:
                return f"this engine serves {self.workspace}, not {settings.workspace_dir}"
            if _comparable(spark_conf(settings)) != _comparable(self.conf):
                return "the command's Spark settings differ from the engine's (restart it: shoal engine stop/start)"
        except Exception as exc:  # noqa: BLE001 - the command itself reports it, in the client
            return f"settings do not load here: {type(exc).__name__}"
        return None

    def _open_streams(self, cmd: _Command, encoding: Any) -> None:
        from shoal.cli import output

        (in_enc, in_err), (out_enc, out_err), (err_enc, err_err) = _encodings(encoding)
        fd_in, fd_out, fd_err = cmd.fds
        # Buffering as the interpreter sets it up: stdout line-buffered on a terminal only,
        # stderr always line-buffered.
        cmd.stdin = open(fd_in, encoding=in_enc, errors=in_err, closefd=True)  # noqa: SIM115
        cmd.stdout = open(fd_out, "w", encoding=out_enc, errors=out_err, closefd=True)  # noqa: SIM115
        cmd.stdout.reconfigure(line_buffering=os.isatty(fd_out))
        cmd.stderr = open(fd_err, "w", encoding=err_enc, errors=err_err, closefd=True)  # noqa: SIM115
        cmd.stderr.reconfigure(line_buffering=True)
        env = dict(os.environ)
        cmd.consoles = {
            "out": output.make_console(cmd.stdout, file=cmd.stdout, environ=_terminal_env(env, cmd.fds, fd_out)),
            "err": output.make_console(
                cmd.stderr, stderr=True, file=cmd.stderr, environ=_terminal_env(env, cmd.fds, fd_err)
            ),
        }

    def _execute(self, cmd: _Command, session: Any) -> int:
        from shoal.cli import console
        from shoal.spark import command_session

        _current.set(cmd)
        sc = self.spark.sparkContext
        tag = f"shoal-engine-{cmd.id}"
        code = 0
        with command_session(session):
            try:
                sc.addJobTag(tag)
                sc.setInterruptOnCancel(True)  # a thread-local property, like the tag
                console.main(cmd.argv, cmd.prog)
            except SystemExit as exc:
                code = _exit_code(exc.code, cmd)
            except BaseException:  # noqa: BLE001 - in process this would print a traceback, exit 1
                with suppress(Exception):
                    cmd.stderr.write(traceback.format_exc())
                code = 1
            finally:
                with suppress(Exception):
                    sc.removeJobTag(tag)
                for stream in (cmd.stdout, cmd.stderr):
                    with suppress(Exception):
                        stream.flush()
        if self.jvm_down() is not None:
            self._tell_failed(cmd, None)
            return code or 1
        return code

    def _tell_failed(self, cmd: _Command, exc: BaseException | None) -> None:
        """The command could not run or finish in this engine: say why on the client's stderr."""
        from shoal.cli.warm.manage import log_file

        why = self.jvm_down() or f"{type(exc).__name__}: {exc}".splitlines()[0]
        with suppress(Exception):
            cmd.stderr.write(
                f"error: the warm engine for {self.workspace} could not run this command: {why}\n"
                f"  hint: run it again (the engine is stopping; the command then runs in its own"
                f" process); see {log_file(self.workspace)}\n"
            )
            cmd.stderr.flush()

    def _watch(self, conn: socket.socket, cmd: _Command) -> None:
        """The client sends nothing after "go": a readable socket means it went away."""
        with suppress(OSError):
            conn.recv(1)
        with cmd.lock:
            if cmd.finished:
                return
            cmd.cancelled = True
            _silence(cmd)
        print(f"engine: command {cmd.id} cancelled (client gone): {cmd.argv[:1]}", file=sys.__stderr__, flush=True)
        # Again until the command ends: a job it submits after a cancel (it was still planning,
        # or it goes on to its next step) is cancelled in its turn.
        while not cmd.finished:
            self._cancel(cmd)
            time.sleep(0.5)

    def _cancel(self, cmd: _Command) -> None:
        with suppress(Exception):
            self.spark.sparkContext.cancelJobsWithTag(f"shoal-engine-{cmd.id}")


def _comparable(conf: dict[str, str]) -> dict[str, str]:
    # Whether Iceberg creates its catalog tables depends on whether they exist yet, not on
    # the settings: a workspace created by the engine itself says "false" from then on.
    return {k: v for k, v in conf.items() if not k.endswith(".jdbc.init-catalog-tables")}


def _encodings(value: Any) -> list[tuple[str, str]]:
    """The client's (encoding, errors) for stdin, stdout and stderr; UTF-8/strict when unknown."""
    items = value if isinstance(value, list) and len(value) == 3 else [None] * 3
    pairs = []
    for item in items:
        enc, errs = item if isinstance(item, list) and len(item) == 2 else (None, None)
        pairs.append((enc if isinstance(enc, str) else "utf-8", errs if isinstance(errs, str) else "strict"))
    return pairs


def _exit_code(code: object, cmd: _Command) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    with suppress(Exception):
        cmd.stderr.write(f"{code}\n")  # sys.exit("message"), as the interpreter prints it
    return 1


def _terminal_env(env: dict[str, str], fds: list[int], fd: int) -> dict[str, str]:
    """The environment the command's console reads: in process, rich asks the terminal (its
    stdin, stdout or stderr) for a size the engine's own streams cannot give."""
    if "COLUMNS" in env or not os.isatty(fd):
        return env
    for candidate in fds:
        try:
            size = os.get_terminal_size(candidate)
        except OSError:
            continue
        return {**env, "COLUMNS": str(size.columns), "LINES": env.get("LINES", str(size.lines))}
    return env


def _silence(cmd: _Command) -> None:
    """Point a gone client's descriptors at /dev/null: whatever the command still writes is
    dropped, and nothing surfaces later on the terminal it came from."""
    null = os.open(os.devnull, os.O_RDWR)
    try:
        for fd in cmd.fds:
            with suppress(OSError):
                os.dup2(null, fd)
    finally:
        os.close(null)


def _close_streams(cmd: _Command) -> None:
    for stream in (cmd.stdout, cmd.stderr, cmd.stdin):
        if stream is not None:
            with suppress(Exception):
                stream.close()


def _client_gone(conn: socket.socket) -> bool:
    """Whether the client closed its end (it sends nothing while it waits for "ready")."""
    import select

    try:
        # select first: on a socket with a timeout, recv would wait that long for data.
        readable, _, _ = select.select([conn], [], [], 0)
        return bool(readable) and conn.recv(1, socket.MSG_PEEK) == b""
    except OSError:
        return True


def _closed(fd: int | None) -> bool:
    """Whether the write end of the owner's pipe is gone (EOF on `fd`)."""
    import select

    if fd is None:
        return False
    try:
        readable, _, _ = select.select([fd], [], [], 0)
        return bool(readable) and os.read(fd, 1) == b""
    except OSError:
        return True


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process now holds the number: not ours, but alive
    return True


def _answers(path: Path) -> bool:
    from shoal.cli.warm.client import control_at

    return control_at(path, "status") is not None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m shoal.cli.warm.server", description="Run the warm engine.")
    parser.add_argument("--config", help="Path of shoal.toml (as `shoal --config`).")
    parser.add_argument("--owner-pid", type=int, help="Stop when this process ends (`shoal serve` passes its own).")
    parser.add_argument("--owner-fd", type=int, help="Stop at EOF on this inherited pipe (its owner has ended).")
    parser.add_argument(
        "--idle-timeout", type=float, default=0.0, help="Stop after this many seconds without a command (0: never)."
    )
    args = parser.parse_args(argv)
    if args.idle_timeout < 0:
        parser.error("--idle-timeout must be 0 (never) or more seconds")
    from shoal.spark import run_in_utc, set_role

    run_in_utc()  # before its JVM starts: the engine collects every delegated command's rows
    set_role("engine")
    engine = Engine(args.config, owner_pid=args.owner_pid, owner_fd=args.owner_fd, idle_timeout_s=args.idle_timeout)
    engine.start()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: engine.stop())
    engine.serve_forever()
    print(json.dumps({"stopped": os.getpid(), "reason": engine.stop_reason or "asked to stop"}), flush=True)
    return 1 if engine.jvm_down() is not None else 0


if __name__ == "__main__":
    sys.exit(main())
