"""What keeps a Shoal process on a Spark cluster from waiting for ever, and Ctrl-C to one line.

On a standalone cluster a job waits silently when no executor runs its tasks: the cluster's
cores are held by other applications (none ever came), or every executor was lost with its
worker. A watchdog thread per process sees jobs with tasks to run, none running and none
finished; after `[spark] executor_wait_s` (no executor yet) or `stall_timeout_s` (executors
lost) it cancels them with a reason that carries a token. `explain` turns whatever exception
the command then ends in back into the Shoal error, naming the workers and what to do.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import signal
import threading
import time
from typing import TYPE_CHECKING, Any

from shoal.cluster.standalone import ClusterError, master_json
from shoal.config import Settings
from shoal.exceptions import ShoalError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

_TOKEN = re.compile(r"shoal-stall-(\d+)")
_stalls: dict[int, ClusterError] = {}
_interrupted = threading.Event()


def webui_url(settings: Settings, master: str) -> str:
    """The master's web UI: the one `shoal cluster up` recorded for this master, else the
    master's host at `[cluster] webui_port`."""
    recorded = settings.workspace_dir / "cluster" / "cluster.json"
    with contextlib.suppress(OSError, ValueError):
        state = json.loads(recorded.read_text())
        if state.get("master_url") == master:
            return str(state["webui_url"])
    host = master.removeprefix("spark://").split(",")[0].rsplit(":", 1)[0]
    return f"http://{host}:{settings.cluster.webui_port}"


def describe(settings: Settings, master: str) -> str:
    """The cluster's state in one sentence: workers (dead ones named), cores, who holds them."""
    url = webui_url(settings, master)
    try:
        info = master_json(url)
    except Exception as exc:  # noqa: BLE001 - any failure to read it is the state to report
        return f"the master's web UI {url} does not answer ({type(exc).__name__})"
    workers = info.get("workers", [])
    alive = [w for w in workers if w.get("state") == "ALIVE"]
    dead = [f"{w.get('id')} ({w.get('host')}:{w.get('port')}) {w.get('state')}" for w in workers if w not in alive]
    apps = [f"{a.get('name')} {a.get('id')} holds {a.get('cores')} cores" for a in info.get("activeapps", [])]
    text = f"{master} has {len(alive)} alive workers"
    text += f" ({', '.join(dead)})" if dead else ""
    text += f", {info.get('coresused', 0)} of {info.get('cores', 0)} cores"
    text += f" and {info.get('memoryused', 0)} of {info.get('memory', 0)} MB in use"
    return text + (": " + "; ".join(apps) if apps else "")


class Watchdog(threading.Thread):
    """Cancels this application's jobs when they had tasks to run and ran none for too long."""

    def __init__(self, spark: SparkSession, settings: Settings, every_s: float = 1.0) -> None:
        super().__init__(name="shoal-stall-watchdog", daemon=True)
        self.settings, self.every_s = settings, every_s
        self.sc = spark.sparkContext
        self.master = str(self.sc.master)
        self.seen: set[str] = set()  # executors ("host:port") this application ever had
        self.last: tuple[Any, ...] = ()
        self.since = time.monotonic()

    def run(self) -> None:
        while self.sc._jsc is not None:  # PySpark clears it when the session stops
            time.sleep(self.every_s)
            with contextlib.suppress(Exception):  # a watchdog must never fail the work it watches
                self.check()

    def _executors(self) -> set[str]:
        infos = self.sc._jsc.sc().statusTracker().getExecutorInfos()
        found = {f"{e.host()}:{e.port()}" for e in infos}
        return found - {self.sc._jsc.sc().env().blockManager().blockManagerId().hostPort()}

    def check(self) -> None:
        tracker = self.sc.statusTracker()
        jobs = sorted(tracker.getActiveJobsIds())
        executors = self._executors()
        lost = sorted(set(self.seen) - executors)
        self.seen |= executors
        stages = [s for s in (tracker.getStageInfo(i) for i in tracker.getActiveStageIds()) if s is not None]
        running = sum(s.numActiveTasks for s in stages)
        progress = (tuple(jobs), tuple(sorted((s.stageId, s.numCompletedTasks, s.numFailedTasks) for s in stages)))
        now = time.monotonic()
        if not jobs or running or progress != self.last:
            self.last, self.since = progress, now
            return
        never = not self.seen
        limit = self.settings.spark.executor_wait_s if never else self.settings.spark.stall_timeout_s
        if limit and now - self.since > limit:
            waiting = sum(s.numTasks - s.numCompletedTasks for s in stages)
            self._cancel(jobs, self._error(never, limit, waiting, lost))
            self.since = now

    def _error(self, never: bool, limit: float, waiting: int, lost: list[str]) -> ClusterError:
        state = describe(self.settings, self.master)
        if never:
            conf = self.sc.getConf()
            cores, memory = conf.get("spark.cores.max", "no cap"), conf.get("spark.executor.memory", "1g")
            return ClusterError(
                f"no executor from {self.master} within {limit:g} s ({waiting} tasks waiting; this process"
                f" asks for spark.cores.max {cores}, {memory} executors): {state}",
                hint="free cores (stop an application holding them), add workers (shoal cluster up --workers N),"
                " or lower [spark.cores_max] of the other processes; [spark] executor_wait_s sets this wait",
            )
        gone = f"; executors lost on {', '.join(lost)}" if lost else ""
        return ClusterError(
            f"Spark made no progress for {limit:g} s ({waiting} tasks waiting, none running){gone}: {state}",
            hint="replace the lost worker (shoal cluster up starts the missing ones; elsewhere restart it on its"
            " host) or free cores, then run the command again: Iceberg commits are all or nothing, so nothing"
            " half-written stays; [spark] stall_timeout_s sets this wait",
        )

    def _cancel(self, jobs: list[int], error: ClusterError) -> None:
        token = len(_stalls) + 1
        _stalls[token] = error
        for job in jobs:
            with contextlib.suppress(Exception):
                self.sc._jsc.sc().cancelJob(job, f"shoal-stall-{token}: {error.args[0]}")


def watch(spark: SparkSession, settings: Settings) -> None:
    """Start the watchdog (cluster masters only) and make Ctrl-C end jobs and the command quietly."""
    if str(spark.sparkContext.master).startswith("spark://"):
        Watchdog(spark, settings).start()
    if threading.current_thread() is threading.main_thread():
        sc = spark.sparkContext

        def on_interrupt(_signum: int, _frame: Any) -> None:
            _interrupted.set()
            # Py4J logs the interrupted call's traceback (on its loggers and the root logger).
            logging.getLogger("py4j").setLevel(logging.CRITICAL + 1)
            # Not here: a Py4J call from the handler re-enters the main thread's connection
            # (PySpark's own handler does, and prints its tracebacks). A thread has its own.
            _cancelling.append(threading.Thread(target=_quiet_cancel, args=(sc,), daemon=True))
            _cancelling[-1].start()
            raise KeyboardInterrupt

        if not any(isinstance(f, _QuietInterrupt) for f in logging.getLogger().filters):
            logging.getLogger().addFilter(_QuietInterrupt())
        signal.signal(signal.SIGINT, on_interrupt)


_cancelling: list[threading.Thread] = []


def _quiet_cancel(sc: Any) -> None:
    """Silence the JVM (its shutdown logs errors about cut transfers), then cancel every job."""
    with contextlib.suppress(Exception):
        sc.setLogLevel("OFF")
    with contextlib.suppress(Exception):
        sc.cancelAllJobs()


def settle(timeout: float = 5) -> None:
    """Wait (a bounded time) for Ctrl-C's cancel to reach the JVM before the process exits."""
    for thread in _cancelling:
        thread.join(timeout)


class _QuietInterrupt(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not (_interrupted.is_set() and "while sending command" in str(record.msg))


def explain(exc: BaseException) -> ShoalError | None:
    """The Shoal error behind `exc` when the watchdog cancelled its job, or None."""
    for text in (str(exc), str(getattr(exc, "__cause__", "") or "")):
        found = _TOKEN.search(text)
        if found and int(found.group(1)) in _stalls:
            return _stalls[int(found.group(1))]
    return None


def interrupted() -> bool:
    """Whether Ctrl-C (SIGINT) reached this process after Spark started."""
    return _interrupted.is_set()
