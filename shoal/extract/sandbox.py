"""Run objects' extractor chains in a forked child under a time limit and a memory cap.

Parsers read untrusted bytes: one may hang, exhaust memory or crash the interpreter. The
child inherits the models already loaded in the worker (fork shares them copy-on-write), so
isolation costs one fork per worker (and one more after each failure), not a model load.
Results stream back step by step: when the child is killed, the steps it finished are kept.
"""

from __future__ import annotations

import contextlib
import faulthandler
import multiprocessing
import os
import resource
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from typing import Any

from shoal.config import ExtractSettings
from shoal.extract.base import Context, Extraction, ExtractionRefused, ExtractionSkipped, ObjectInfo
from shoal.extract.router import Router

_fork = multiprocessing.get_context("fork")


def threads_running() -> int:
    """This process's operating-system threads (Python's, the JVM gateway's, a model runtime's)."""
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return 1


def safe_context() -> Any:
    """fork while this process is single-threaded, else a fresh interpreter (ExecContext): a fork
    copies only the calling thread, so a lock another thread held (malloc's, a model runtime's)
    stays locked in the child and a parser there can hang or crash (one did: SIGSEGV on an HTML
    file in a process running onnxruntime and py4j threads). multiprocessing's forkserver and
    spawn would run the caller's main script again in the child; an exec'd child does not."""
    return _fork if threads_running() <= 1 else ExecContext()


class _ExecProcess:
    """A sandbox child started as `python -c` with its end of the pipe as an inherited socket,
    answering the calls Sandbox makes of a multiprocessing Process."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.popen: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        fd = self.sock.fileno()
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}  # the caller's imports
        code = "import sys; from shoal.extract.sandbox import exec_child; exec_child(int(sys.argv[1]))"
        self.popen = subprocess.Popen([sys.executable, "-c", code, str(fd)], pass_fds=(fd,), env=env)

    def is_alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def join(self, timeout: float | None = None) -> None:
        if self.popen is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.popen.wait(timeout)

    def kill(self) -> None:
        if self.popen is not None:
            self.popen.kill()

    @property
    def exitcode(self) -> int | None:
        return None if self.popen is None else self.popen.poll()  # -N: killed by signal N, as Process


class ExecContext:
    """Pipe and Process for a sandbox child in a fresh interpreter (the router follows as the
    first message: its settings and extractor classes, pickled)."""

    def Pipe(self, duplex: bool = True) -> tuple[Connection, socket.socket]:
        ours, theirs = socket.socketpair()
        return Connection(ours.detach()), theirs

    def Process(self, target: Any, args: tuple[Any, ...], daemon: bool = True) -> _ExecProcess:
        return _ExecProcess(args[0])


def exec_child(fd: int) -> None:
    """The entry point of an exec'd sandbox child: the router, then objects, on `fd`."""
    conn = Connection(fd)
    try:
        router = conn.recv()
        conn.send(("ready", None))
    except (EOFError, OSError):
        os._exit(0)
    _serve(conn, router)


@dataclass
class StepResult:
    extractor: str
    status: str  # ok | error | skipped | timeout
    error: str | None = None
    extraction: Extraction | None = None
    duration_ms: int = 0


def _vm_bytes() -> int:
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        return 0


def _run_chain(
    conn: Connection,
    obj: ObjectInfo,
    data: bytes,
    chain: list[str],
    router: Router,
    prior: Sequence[Extraction] = (),
) -> bool:
    """Run one object's chain, streaming each step to the parent. False: this child must retire.

    `prior`: the extractions of steps a dead child finished, when this child goes on after it.
    """
    settings = router.settings
    ctx = Context(obj, data, settings)
    for x in prior:
        ctx.text.extend(x.text)
        ctx.properties.update(x.properties)
    blocked: str | None = None
    healthy = True
    for name in chain:
        ext = router.extractors[name]
        conn.send(("start", name))
        t0 = time.monotonic()
        if blocked is not None:
            conn.send(("step", StepResult(name, "skipped", f"no text: {blocked}")))
            continue
        try:
            result = ext.run(ctx)
        except ExtractionSkipped as exc:
            step = StepResult(name, "skipped", str(exc))
        except ExtractionRefused as exc:
            step = StepResult(name, "error", f"refused: {exc}")
        except MemoryError:
            step = StepResult(name, "error", f"memory limit of {settings.memory_mb} MiB exceeded")
            healthy = False  # the heap may be fragmented: start the next object in a fresh child
        except RecursionError:
            step = StepResult(name, "error", "document nesting too deep (recursion limit)")
        except Exception as exc:  # noqa: BLE001 - any parser failure is this object's error, never the job's
            step = StepResult(name, "error", f"{type(exc).__name__}: {exc}"[:2000])
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # noqa: BLE001 - a library's sys.exit() must not end the child
            step = StepResult(name, "error", f"the parser tried to exit ({type(exc).__name__}: {exc})"[:2000])
            healthy = False  # its clean-up may have run: start the next object in a fresh child
        else:
            ctx.text.extend(result.text)
            ctx.properties.update(result.properties)
            step = StepResult(name, "ok", None, result)
        step.duration_ms = int((time.monotonic() - t0) * 1000)
        if step.status != "ok" and ext.stage == "extract" and not ext.optional:
            blocked = f"{name} {step.status}"
        conn.send(("step", step))
    conn.send(("done", healthy))
    return healthy


def _serve(conn: Connection, router: Router) -> None:
    """The child's loop: objects in, step results out, until the parent closes the pipe."""
    try:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        faulthandler.disable()  # a parser's crash is reported by the parent, not dumped to the log
        limit = _vm_bytes() + (router.settings.memory_mb << 20)
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        while True:
            try:
                obj, data, chain, prior = conn.recv()
            except EOFError:
                break
            if not _run_chain(conn, obj, data, chain, router, prior):
                break
    except BaseException:  # noqa: BLE001 - the parent reports a child that dies mid-object
        pass
    finally:
        conn.close()
        os._exit(0)


class Sandbox:
    """A forked child that extracts objects one at a time, replaced whenever one goes wrong.

    Forking once per worker (not per object) keeps the lazy state parsers build on first use
    (font tables, templates, compiled patterns) warm across objects. The child is replaced
    after a timeout, a crash, a memory error, or `RECYCLE_AFTER` objects (bounding leaks).
    """

    RECYCLE_AFTER = 500
    EXEC_START_S = 120  # an exec'd child's imports, on a loaded machine

    def __init__(self, router: Router, context: Any = None) -> None:
        self.router = router
        self.context = context or _fork  # Spark's workers fork to share the models loaded there
        self.proc: Any = None  # a forked Process while running
        self.conn: Any = None  # its end of the Pipe
        self.served = 0

    def _start(self) -> None:
        self.close()
        parent, child = self.context.Pipe(duplex=True)
        self.proc = self.context.Process(target=_serve, args=(child, self.router), daemon=True)
        self.proc.start()
        child.close()
        self.conn, self.served = parent, 0
        if isinstance(self.context, ExecContext):
            parent.send(self.router)
            # Wait for its imports: a dead or stuck start shows as the first step's failure.
            if parent.poll(self.EXEC_START_S):
                with contextlib.suppress(EOFError, OSError):
                    parent.recv()

    def _retired(self) -> bool:
        return self.proc is None or not self.proc.is_alive() or self.served >= self.RECYCLE_AFTER

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
        if self.proc is not None:
            if self.proc.is_alive():
                self.proc.join(0.2)
            if self.proc.is_alive():
                self.proc.kill()
            self.proc.join(5)
        self.proc = self.conn = None

    def run(self, obj: ObjectInfo, data: bytes, chain: list[str]) -> list[StepResult]:
        """Each step's result. When the child dies in a step later steps do not depend on (an
        enricher, an optional analyser), a fresh child goes on with the rest of the chain."""
        results: dict[str, StepResult] = {}
        limit = max(self.router.extractors[n].time_limit(self.router.settings) for n in chain)
        if self._retired():
            self._start()  # before the clock starts: an exec'd child's start-up is not the object's time
        deadline = time.monotonic() + limit
        todo = list(chain)
        while todo:
            done = self._run(obj, data, todo, results, deadline, limit)
            todo = [n for n in todo if n not in results]
            if done or not todo:
                break
        return [results[n] for n in chain]

    def _run(
        self,
        obj: ObjectInfo,
        data: bytes,
        chain: list[str],
        results: dict[str, StepResult],
        deadline: float,
        limit: float,
    ) -> bool:
        """Run `chain` in the child, adding to `results`. False: the child died in a step that
        blocks nothing after it, and the steps still missing from `results` may run elsewhere."""
        settings: ExtractSettings = self.router.settings
        if self._retired():
            self._start()
        proc, conn = self.proc, self.conn
        assert proc is not None and conn is not None
        self.served += 1
        current: str | None = None
        step_start = time.monotonic()
        failure: tuple[str, str] | None = None
        prior = [r.extraction for r in results.values() if r.status == "ok" and r.extraction is not None]
        try:
            conn.send((obj, data, chain, prior))
        except (BrokenPipeError, OSError):
            failure = ("error", _death_reason(proc, settings))
        while failure is None:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                failure = ("timeout", f"time limit of {limit:g} s exceeded")
                break
            if conn.poll(min(remaining, 0.5)):
                try:
                    msg = conn.recv()
                except (EOFError, OSError):
                    failure = ("error", _death_reason(proc, settings))
                    break
                if msg[0] == "start":
                    current, step_start = msg[1], time.monotonic()
                elif msg[0] == "step":
                    results[msg[1].extractor] = msg[1]
                    current = None
                elif msg[0] == "done":
                    if not msg[1]:
                        self.close()  # the child retires after this object
                    break
            elif not proc.is_alive() and not conn.poll():
                failure = ("error", _death_reason(proc, settings))
                break
        if failure is None:
            return True
        self.close()  # killed or dead: the next object (or the rest of this chain) gets a fresh child
        status, reason = failure
        if current is not None and current not in results:
            ms = int((time.monotonic() - step_start) * 1000)
            results[current] = StepResult(current, status, reason, None, ms)
            dead = self.router.extractors[current]
            if status == "error" and (dead.stage != "extract" or dead.optional) and time.monotonic() < deadline:
                return False  # nothing after it reads its output: go on in a fresh child
        for name in chain:
            if name not in results:
                results[name] = StepResult(name, "skipped", f"not run: an earlier step failed ({reason})")
        return True


_sandboxes: dict[int, Sandbox] = {}


def run_isolated(
    obj: ObjectInfo, data: bytes, chain: list[str], router: Router, context: Any = None
) -> list[StepResult]:
    """Extract one object in this process's sandbox child for `router` (started on first use;
    `context`: the multiprocessing start method's context, fork when None)."""
    box = _sandboxes.get(id(router))
    if box is None or box.router is not router:
        box = _sandboxes[id(router)] = Sandbox(router, context)
    return box.run(obj, data, chain)


def close_isolated(router: Router) -> None:
    """Stop the sandbox child started for `router`, if any (callers that make a router per call)."""
    box = _sandboxes.pop(id(router), None)
    if box is not None:
        box.close()


def _death_reason(proc: BaseProcess, settings: ExtractSettings) -> str:
    proc.join(1)
    code = proc.exitcode
    if code is not None and code < 0:
        sig = signal.Signals(-code).name
        hint = f" (memory cap {settings.memory_mb} MiB?)" if sig in ("SIGKILL", "SIGSEGV", "SIGABRT") else ""
        return f"extractor process died with {sig}{hint}"
    return f"extractor process exited unexpectedly (code {code})"
