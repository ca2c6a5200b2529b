"""A small pure-Python reference model of CDC batch semantics, for property tests.

An event is (key, seq, op, file_order, line, value). The table state maps key -> (seq, value).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Event:
    key: int
    seq: int
    op: str
    file_order: int
    line: int
    value: str


def latest(events: list[Event]) -> dict[int, Event]:
    out: dict[int, Event] = {}
    for e in events:
        cur = out.get(e.key)
        if cur is None or (e.seq, e.file_order, e.line) > (cur.seq, cur.file_order, cur.line):
            out[e.key] = e
    return out


def action(event: Event, state: dict[int, tuple[int, str]], tombstones: dict[int, int] | None = None) -> str:
    cur = state.get(event.key)
    if cur is None:
        deleted_at = (tombstones or {}).get(event.key)
        if deleted_at is not None and event.seq < deleted_at:
            return "stale"  # older than the delete that removed the key
        return "missing_delete" if event.op == "D" else "insert"
    if event.seq < cur[0]:
        return "stale"
    return "delete" if event.op == "D" else "update"


def apply(
    state: dict[int, tuple[int, str]], events: list[Event], tombstones: dict[int, int]
) -> dict[int, tuple[int, str]]:
    """One batch; `tombstones` (key -> sequence of its latest delete) is updated in place."""
    new = dict(state)
    for key, e in latest(events).items():
        a = action(e, state, tombstones)
        if a in ("insert", "update"):
            new[key] = (e.seq, e.value)
        elif a == "delete":
            del new[key]
        if a in ("delete", "missing_delete"):
            tombstones[key] = max(tombstones.get(key, e.seq), e.seq)
    return new
