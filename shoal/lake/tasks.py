"""Work items to Spark tasks, balanced by size (extraction's objects, CDC's change files)."""

from __future__ import annotations

import heapq
from collections.abc import Hashable
from typing import TypeVar

K = TypeVar("K", bound=Hashable)

TASKS_PER_CORE = 8


def balance(sizes: list[tuple[K, int | None]], cores: int, item_cost: int) -> tuple[dict[K, int], int]:
    """The task of each item, and the task count.

    Many more tasks than cores (but never more than items), each filled largest item first into
    the lightest task (longest-processing-time first), so task 0 holds the biggest item and
    starts first and a run does not end on one task still working through several big ones.
    `item_cost`: what one item costs on top of its bytes (opening it, a parser's start-up), so
    a thousand tiny items spread over the tasks instead of one task each.
    """
    count = max(1, min(len(sizes), max(1, cores) * TASKS_PER_CORE))
    heap = [(0, task) for task in range(count)]
    tasks: dict[K, int] = {}
    for key, size in sorted(sizes, key=lambda s: (-(s[1] or 0), str(s[0]))):
        load, task = heapq.heappop(heap)
        tasks[key] = task
        heapq.heappush(heap, (load + (size or 0) + item_cost, task))
    return tasks, count
