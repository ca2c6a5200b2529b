"""Admission control for serve's query endpoints (the HTTP API and the PostgreSQL endpoint).

At most `[server] max_concurrent_queries` queries run on the process's Spark at once, one
principal at most `max_concurrent_queries_per_principal` of them: one user's scans cannot take
every slot, so another user's point lookup starts at once. Up to `query_queue_size` more wait,
each at most `query_queue_timeout_s`; beyond that a query is refused at once with a clear error
(HTTP 429 / SQLSTATE 53300; a wait that times out: HTTP 503 / SQLSTATE 57014), never left to
wait without end. A freed slot goes to the waiting principal with the fewest queries running
(then the longest waiting). Inside Spark each principal's jobs run in a FAIR scheduler pool of
its own (`spark_pool`), so running queries share the cores by principal, not by job count.
"""

from __future__ import annotations

import collections
import itertools
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from shoal.config import Settings
from shoal.exceptions import ShoalError


class Overloaded(ShoalError):
    """A query was not admitted: the queue was full (`timed_out` False) or its wait ended."""

    def __init__(self, message: str, *, timed_out: bool, retry_after: int, hint: str) -> None:
        super().__init__(message, hint=hint)
        self.timed_out = timed_out
        self.retry_after = retry_after


class Admission:
    def __init__(self, slots: int, per_principal: int, queue: int, timeout_s: float) -> None:
        self.slots, self.per_principal, self.queue, self.timeout_s = slots, per_principal, queue, timeout_s
        self._cond = threading.Condition()
        self._running: collections.Counter[str] = collections.Counter()
        self._waiting: list[tuple[int, str]] = []  # (arrival, principal)
        self._arrivals = itertools.count()

    @contextmanager
    def enter(self, principal: str, cancelled: Callable[[], bool] | None = None) -> Iterator[None]:
        """Run the block in a slot; Overloaded when none comes in time, or (checked a few times
        a second) once `cancelled()` says the client gave up waiting (a CancelRequest)."""
        with self._cond:
            self._wait(principal, cancelled)
        try:
            yield
        finally:
            with self._cond:
                self._running[principal] -= 1
                if not self._running[principal]:
                    del self._running[principal]
                self._cond.notify_all()

    def status(self) -> dict[str, Any]:
        with self._cond:
            return {"running": sum(self._running.values()), "waiting": len(self._waiting)}

    def _may_run(self, principal: str) -> bool:
        return sum(self._running.values()) < self.slots and self._running[principal] < self.per_principal

    def _take(self, principal: str) -> None:
        self._running[principal] += 1

    def _next(self) -> tuple[int, str] | None:
        """The waiter a free slot goes to: fewest queries running, then first come."""
        ready = [w for w in self._waiting if self._may_run(w[1])]
        return min(ready, key=lambda w: (self._running[w[1]], w[0])) if ready else None

    def _wait(self, principal: str, cancelled: Callable[[], bool] | None) -> None:
        me = (next(self._arrivals), principal)
        self._waiting.append(me)
        deadline = time.monotonic() + self.timeout_s
        try:
            if self._next() != me and len(self._waiting) > self.queue:
                raise Overloaded(
                    f"too many queries: {sum(self._running.values())} running and {self.queue} waiting",
                    timed_out=False,
                    retry_after=1,
                    hint="try again in a moment ([server] max_concurrent_queries, query_queue_size)",
                )
            while self._next() != me:
                left = deadline - time.monotonic()
                if cancelled is not None and cancelled():
                    raise Overloaded(
                        "the query was canceled while it waited for a slot", timed_out=True, retry_after=1, hint=""
                    )
                if left <= 0:
                    raise Overloaded(
                        f"the query waited {self.timeout_s:g} s for a slot and was canceled",
                        timed_out=True,
                        retry_after=max(1, round(self.timeout_s)),
                        hint="the server is busy: try again later ([server] query_queue_timeout_s)",
                    )
                self._cond.wait(min(left, 0.25))
            self._take(principal)
        finally:
            self._waiting.remove(me)
            self._cond.notify_all()  # the next waiter may be ready now


_shared: dict[tuple[int, int, int, float], Admission] = {}
_shared_lock = threading.Lock()


def admission(settings: Settings) -> Admission:
    """The process's admission control: the HTTP API and the PostgreSQL endpoint share it."""
    s = settings.server
    key = (
        s.max_concurrent_queries,
        s.max_concurrent_queries_per_principal,
        s.query_queue_size,
        s.query_queue_timeout_s,
    )
    with _shared_lock:
        if key not in _shared:
            _shared[key] = Admission(*key)
        return _shared[key]


def spark_pool(principal: str) -> str:
    """The FAIR scheduler pool of a principal's jobs (created by Spark on first use, weight 1)."""
    return f"principal:{principal}"
