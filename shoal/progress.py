"""Progress of long work, reported through the `say` callback that long-running functions take.

`say(message)` reports a step ("merging into the table"). `count(say, phase, done, total)`
reports how far a counted phase is (files hashed, Spark tasks finished): a caller that draws
bars (the CLI) implements `Meter.count`; any other `say` (a workflow's log, a test's list) gets
a plain step line, as it always has. The library never knows who listens.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

Say = Callable[[str], None]


@runtime_checkable
class Meter(Protocol):
    """A `say` callback that can also show counts (a progress bar, periodic log lines)."""

    def __call__(self, message: str) -> None: ...

    def count(self, phase: str, done: int, total: int | None, unit: str, item: str | None = None) -> None: ...


def count(say: Say, phase: str, done: int, total: int | None, *, unit: str = "items", item: str | None = None) -> None:
    """`done` of `total` `unit` finished in `phase`; `item` is the one being worked on, if any."""
    if total == 0:
        return  # nothing to count: no bar, no line
    if isinstance(say, Meter):
        say.count(phase, done, total, unit, item)
    elif item is not None:
        say(f"{phase} {min(done + 1, total or done + 1)}/{total}: {item}")  # "hashing 3/10: a.txt"
    else:
        say(f"{phase}: {done}/{total} {unit}")


class spark_tasks:
    """Counts the Spark tasks of this thread's jobs while the block runs, as phase `phase`.

    Only a Meter is told (a plain `say` would get a line a second). Jobs are those of the
    calling thread's job tags or job group when it has some (the warm engine and workflow
    branches run several commands on one SparkContext), else every active job. Tasks of every
    stage seen are summed, so the count only grows while new stages start.
    """

    def __init__(self, spark: Any, say: Say, phase: str, *, every_s: float = 0.5) -> None:
        self.say, self.phase, self.every_s = say, phase, every_s
        self.enabled = isinstance(say, Meter)
        self.stop = threading.Event()
        self.thread: threading.Thread | None = None
        self.stages: dict[int, tuple[int, int]] = {}
        if self.enabled:
            sc = spark.sparkContext
            self.tracker = sc.statusTracker()
            # Local properties are per thread: read them here, in the thread that runs the jobs.
            tags = sc.getLocalProperty("spark.job.tags") or ""
            self.tags = [t for t in tags.split(",") if t]
            self.group = sc.getLocalProperty("spark.jobGroup.id")

    def _active_stages(self) -> list[int]:
        active = set(self.tracker.getActiveStageIds())
        if not self.tags and not self.group:
            return sorted(active)
        jobs: set[int] = set()
        if self.tags:
            jtracker = self.tracker._jtracker
            for tag in self.tags:
                jobs.update(jtracker.getJobIdsForTag(tag))
        else:
            jobs.update(self.tracker.getJobIdsForGroup(self.group))
        mine: set[int] = set()
        for job in jobs & set(self.tracker.getActiveJobsIds()):
            info = self.tracker.getJobInfo(job)
            if info is not None:
                mine.update(info.stageIds)
        return sorted(active & mine)

    def poll(self) -> None:
        for sid in self._active_stages():
            info = self.tracker.getStageInfo(sid)
            if info is not None and info.numTasks:
                self.stages[sid] = (info.numCompletedTasks, info.numTasks)
        if self.stages:
            done = sum(d for d, _ in self.stages.values())
            total = sum(t for _, t in self.stages.values())
            count(self.say, self.phase, done, total, unit="tasks")

    def _run(self) -> None:
        while not self.stop.wait(self.every_s):
            try:
                self.poll()
            except Exception:  # noqa: BLE001 - progress must never fail the work it reports on
                return

    def __enter__(self) -> spark_tasks:
        if self.enabled:
            self.thread = threading.Thread(target=self._run, name="shoal-progress", daemon=True)
            self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.thread is None:
            return
        self.stop.set()
        self.thread.join(2)
        if exc[0] is None and self.stages:  # the stages ended: every task of them is done
            total = sum(t for _, t in self.stages.values())
            count(self.say, self.phase, total, total, unit="tasks")
