"""Run one object's extractor chain in a forked child under a time limit and a memory cap.

Parsers read untrusted bytes: one may hang, exhaust memory or crash the interpreter. The
child inherits the models already loaded in the worker (fork shares them copy-on-write), so
isolation costs a fork per object, not a model load. Results stream back step by step:
when the child is killed, the steps it finished are kept.
"""

from __future__ import annotations

import faulthandler
import multiprocessing
import os
import resource
import signal
import time
from dataclasses import dataclass

from shoal.config import ExtractSettings
from shoal.extract.base import Context, Extraction, ExtractionRefused, ExtractionSkipped, ObjectInfo
from shoal.extract.router import Router

_fork = multiprocessing.get_context("fork")


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


def _child(conn, obj: ObjectInfo, data: bytes, chain: list[str], router: Router) -> None:
    settings = router.settings
    try:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        faulthandler.disable()  # a parser's crash is reported by the parent, not dumped to the log
        limit = _vm_bytes() + (settings.memory_mb << 20)
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        ctx = Context(obj, data, settings)
        blocked: str | None = None
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
            except RecursionError:
                step = StepResult(name, "error", "document nesting too deep (recursion limit)")
            except Exception as exc:  # any parser failure is this object's error, never the job's
                step = StepResult(name, "error", f"{type(exc).__name__}: {exc}"[:2000])
            else:
                ctx.text.extend(result.text)
                ctx.properties.update(result.properties)
                step = StepResult(name, "ok", None, result)
            step.duration_ms = int((time.monotonic() - t0) * 1000)
            if step.status != "ok" and ext.stage == "extract":
                blocked = f"{name} {step.status}"
            conn.send(("step", step))
        conn.send(("done",))
    except BaseException:  # noqa: BLE001 - the parent reports a child that dies without "done"
        pass
    finally:
        conn.close()
        os._exit(0)


def run_isolated(obj: ObjectInfo, data: bytes, chain: list[str], router: Router) -> list[StepResult]:
    settings: ExtractSettings = router.settings
    parent, child = _fork.Pipe(duplex=False)
    proc = _fork.Process(target=_child, args=(child, obj, data, chain, router), daemon=True)
    proc.start()
    child.close()
    results: dict[str, StepResult] = {}
    current: str | None = None
    started = time.monotonic()
    deadline = started + settings.timeout_s
    finished = False
    failure: tuple[str, str] | None = None
    try:
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                failure = ("timeout", f"time limit of {settings.timeout_s:g} s exceeded")
                break
            if parent.poll(min(remaining, 0.5)):
                try:
                    msg = parent.recv()
                except (EOFError, OSError):
                    failure = ("error", _death_reason(proc, settings))
                    break
                if msg[0] == "start":
                    current = msg[1]
                    step_start = time.monotonic()
                elif msg[0] == "step":
                    results[msg[1].extractor] = msg[1]
                    current = None
                elif msg[0] == "done":
                    finished = True
                    break
            elif not proc.is_alive() and not parent.poll():
                failure = ("error", _death_reason(proc, settings))
                break
    finally:
        if proc.is_alive():
            proc.kill()
        proc.join(5)
        parent.close()
    if not finished and failure is not None:
        status, reason = failure
        for name in chain:
            if name in results:
                continue
            if name == current:
                ms = int((time.monotonic() - step_start) * 1000)
                results[name] = StepResult(name, status, reason, None, ms)
            else:
                results[name] = StepResult(name, "skipped", f"not run: an earlier step failed ({reason})")
    return [results[n] for n in chain]


def _death_reason(proc, settings: ExtractSettings) -> str:
    proc.join(1)
    code = proc.exitcode
    if code is not None and code < 0:
        sig = signal.Signals(-code).name
        hint = f" (memory cap {settings.memory_mb} MiB?)" if sig in ("SIGKILL", "SIGSEGV", "SIGABRT") else ""
        return f"extractor process died with {sig}{hint}"
    return f"extractor process exited unexpectedly (code {code})"
