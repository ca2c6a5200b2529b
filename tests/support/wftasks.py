"""Callables that test state machines run through `shoal:python` (importable as `wftasks:NAME`)."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

_lock = threading.Lock()
_active = {"now": 0, "max": 0}


def echo(payload: Any) -> Any:
    return payload


def add(payload: dict[str, Any]) -> dict[str, Any]:
    return {"sum": payload["a"] + payload["b"]}


def fail_until(payload: dict[str, Any]) -> dict[str, Any]:
    """Fails with ValueError until it has been called `succeed_on` times (counted in a file)."""
    counter = Path(payload["counter"])
    calls = int(counter.read_text()) + 1 if counter.exists() else 1
    counter.write_text(str(calls))
    if calls < payload["succeed_on"]:
        raise ValueError(f"call {calls} fails")
    return {"calls": calls}


def boom(payload: Any) -> Any:
    raise RuntimeError("boom: the task broke")


def sleep(payload: dict[str, Any]) -> dict[str, Any]:
    time.sleep(payload.get("seconds", 1))
    return {"slept": payload.get("seconds", 1)}


def track(payload: dict[str, Any]) -> dict[str, Any]:
    """Records how many calls run at the same time."""
    with _lock:
        _active["now"] += 1
        _active["max"] = max(_active["max"], _active["now"])
    time.sleep(payload.get("seconds", 0.2))
    with _lock:
        _active["now"] -= 1
    if payload.get("fail"):
        raise ValueError(f"item {payload.get('item')} fails")
    return {"item": payload.get("item")}


def reset_tracking() -> None:
    _active.update(now=0, max=0)


def max_concurrency() -> int:
    return _active["max"]


def mark(payload: dict[str, Any]) -> dict[str, Any]:
    """Appends the state's label to a log file (to see which states ran, across processes)."""
    with open(payload["log"], "a") as fh:
        fh.write(payload["label"] + "\n")
    if payload.get("sleep"):
        time.sleep(payload["sleep"])
    return {"marked": payload["label"]}


def big(payload: Any) -> str:
    return "x" * 300_000


def slow_first(payload: dict[str, Any]) -> dict[str, Any]:
    """Hangs on its first call (so a test can kill the process there); later calls return at once."""
    counter = Path(payload["counter"])
    calls = int(counter.read_text()) + 1 if counter.exists() else 1
    counter.write_text(str(calls))
    if calls == 1:
        time.sleep(120)
    return {"calls": calls}


def fail_later(payload: dict[str, Any]) -> Any:
    """Fails after a while, as a Spark job cancelled because a sibling branch failed does."""
    time.sleep(payload.get("seconds", 0.5))
    raise LookupError("job group cancelled")


def interrupt_first(payload: dict[str, Any]) -> dict[str, Any]:
    """Interrupts the run (as Ctrl-C does) on its first call; later calls return at once."""
    counter = Path(payload["counter"])
    calls = int(counter.read_text()) + 1 if counter.exists() else 1
    counter.write_text(str(calls))
    if calls == 1:
        raise KeyboardInterrupt
    return {"calls": calls, "seen": payload.get("seen")}
