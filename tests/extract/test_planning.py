"""Size-aware task planning for `shoal extract` (issue 35): no Spark, the plan alone."""

from __future__ import annotations

from shoal.extract.job import OBJECT_COST_BYTES, plan_tasks


def test_big_files_spread_and_first() -> None:
    sizes = [(f"big{i}", 50 << 20) for i in range(3)] + [(f"small{i:03d}", 10 << 10) for i in range(240)]
    tasks, count = plan_tasks(sizes, cores=2)
    assert count == 16  # more tasks than cores: a slow task is one of many
    assert sorted(tasks) == sorted(s for s, _ in sizes)
    assert len({tasks[f"big{i}"] for i in range(3)}) == 3  # never two big files in one task
    assert tasks["big0"] == 0  # the biggest starts first
    loads = [0] * count
    for object_id, size in sizes:
        loads[tasks[object_id]] += size + OBJECT_COST_BYTES
    small_loads = [load for t, load in enumerate(loads) if t not in {tasks[f"big{i}"] for i in range(3)}]
    assert max(small_loads) - min(small_loads) <= (10 << 10) + OBJECT_COST_BYTES  # the rest evenly filled


def test_few_objects_one_task_each_and_unknown_sizes() -> None:
    tasks, count = plan_tasks([("a", None), ("b", 5), ("c", 0)], cores=2)
    assert count == 3 and sorted(tasks.values()) == [0, 1, 2]
    assert plan_tasks([], cores=2) == ({}, 1)
