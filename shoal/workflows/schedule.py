"""Schedules and file-arrival triggers, and the scheduler that runs them durably.

Expressions: the cloud forms `cron(min hour day-of-month month day-of-week year)` and
`rate(N unit)`, and the 5-field Unix form. croniter computes the slots; the cloud form is
translated into it (`?` -> `*`, day-of-week 1-7 = SUN-SAT -> 0-6, `6L` -> `L5`), and its
year field filters slots.

Durability: before an execution starts, its slot (a time, or a file's path+size+mtime) is
inserted into `shoal_schedule_fires` with the execution id, under a unique key. A slot can
therefore be claimed once only, whatever restarts or second schedulers do; a claim whose
execution never started (a crash in between) is started with the same id when the
scheduler comes back. Slots missed while the scheduler was down follow the misfire
policy (`[workflows] misfire_policy`).
"""

from __future__ import annotations

import builtins
import datetime as dt
import json
import re
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from croniter import croniter
from sqlalchemy import (
    Boolean,
    Column,
    DateTime,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    delete,
    insert,
    select,
    update,
)
from sqlalchemy.exc import IntegrityError

from shoal.config import Settings
from shoal.lake import database
from shoal.lake.database import utcnow
from shoal.workflows.errors import WorkflowError
from shoal.workflows.store import executions

state_tables = MetaData()
schedules = Table(
    "shoal_schedules",
    state_tables,
    Column("name", String(200), primary_key=True),
    Column("workflow", String(200), nullable=False),
    Column("kind", String(16), nullable=False),  # cron | rate | files
    Column("expression", Text, nullable=False),
    Column("input", Text),
    Column("enabled", Boolean, nullable=False),
    Column("notify_topic", String(200)),
    Column("created_at", DateTime, nullable=False),
    Column("last_slot", DateTime),
)
fires = Table(
    "shoal_schedule_fires",
    state_tables,
    Column("schedule", String(200), nullable=False),
    Column("slot", String(1000), nullable=False),
    Column("execution_id", String(64), nullable=False),
    Column("fired_at", DateTime, nullable=False),
    UniqueConstraint("schedule", "slot", name="uq_schedule_slot"),
)

_RATE = re.compile(r"^rate\(\s*(\d+)\s+(minute|minutes|hour|hours|day|days)\s*\)$", re.I)
_CLOUD_CRON = re.compile(r"^cron\((.*)\)$", re.I)
_UNITS = {"minute": 60, "hour": 3600, "day": 86400}
_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,200}$")


# ---- expressions -------------------------------------------------------------------------------


@dataclass
class Timing:
    kind: str  # cron | rate
    cron: str | None = None
    years: set[int] | None = None
    every_s: int | None = None

    def slots(self, after: dt.datetime, until: dt.datetime, anchor: dt.datetime) -> Iterator[dt.datetime]:
        """Slot times in (after, until]."""
        if self.kind == "rate":
            assert self.every_s
            k = max(0, int((after - anchor).total_seconds() // self.every_s))
            while True:
                t = anchor + dt.timedelta(seconds=k * self.every_s)
                if t > until:
                    return
                if t > after:
                    yield t
                k += 1
        it = croniter(self.cron, after)
        while True:
            t = it.get_next(dt.datetime)
            if t > until:
                return
            if self.years is None or t.year in self.years:
                yield t
            elif self.years and t.year > max(self.years):
                return


def parse_timing(expr: str) -> Timing:
    text = expr.strip()
    m = _RATE.match(text)
    if m:
        n, unit = int(m.group(1)), m.group(2).lower().rstrip("s")
        if n <= 0:
            raise WorkflowError(f"invalid schedule {expr!r}: the rate must be positive")
        return Timing("rate", every_s=n * _UNITS[unit])
    m = _CLOUD_CRON.match(text)
    if m:
        fields = m.group(1).split()
        if len(fields) != 6:
            raise WorkflowError(
                f"invalid schedule {expr!r}: cron() takes 6 fields (minutes hours day-of-month month day-of-week year)",
                hint="e.g. cron(0 0 1 * ? *) runs at midnight UTC on the first of each month",
            )
        minute, hour, dom, month, dow, year = fields
        if dom != "?" and dow != "?":
            raise WorkflowError(f"invalid schedule {expr!r}: one of day-of-month and day-of-week must be '?'")
        cron = " ".join([minute, hour, "*" if dom == "?" else dom, month, "*" if dow == "?" else _cloud_dow(dow, expr)])
        years = None if year in ("*", "?") else _years(year, expr)
    else:
        if len(text.split()) != 5:
            raise WorkflowError(
                f"invalid schedule {expr!r}",
                hint="use cron(min hour dom month dow year), rate(N minutes|hours|days) or a 5-field cron expression",
            )
        cron, years = text, None
    if not croniter.is_valid(cron):
        raise WorkflowError(f"invalid schedule {expr!r}: {cron!r} is not a cron expression Shoal can evaluate")
    return Timing("cron", cron=cron, years=years)


def _cloud_dow(field: str, expr: str) -> str:
    if field == "*":
        return "*"
    if field == "L":
        return "6"  # the cloud form's bare L is the last day of the week, Saturday

    def shift(m: re.Match[str]) -> str:
        n = int(m.group(0))
        if not 1 <= n <= 7:
            raise WorkflowError(f"invalid schedule {expr!r}: day-of-week numbers are 1-7 (SUN-SAT)")
        return str(n - 1)

    last = re.fullmatch(r"(\d)L", field)
    if last:
        return "L" + shift(re.match(r"\d", last.group(1)))  # type: ignore[arg-type]
    if "#" in field:
        day, nth = field.split("#", 1)
        return re.sub(r"\d", shift, day) + "#" + nth
    return re.sub(r"(?<![/\d])\d+", shift, field)


def _years(field: str, expr: str) -> set[int]:
    out: set[int] = set()
    for part in field.split(","):
        if re.fullmatch(r"\d{4}", part):
            out.add(int(part))
        elif re.fullmatch(r"\d{4}-\d{4}", part):
            a, b = map(int, part.split("-"))
            out.update(range(a, b + 1))
        else:
            raise WorkflowError(f"invalid schedule {expr!r}: year field {field!r} (use YYYY, YYYY-YYYY or lists)")
    return out


# ---- schedule records ------------------------------------------------------------------------


class Schedules:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.engine = database.engine(settings, state_tables)

    def add(
        self,
        name: str,
        workflow: str,
        *,
        cron: str | None = None,
        on_new_files: str | None = None,
        input_: Any = None,
        notify_topic: str | None = None,
    ) -> dict[str, Any]:
        if not _NAME.match(name):
            raise WorkflowError(f"invalid schedule name {name!r}", hint="use letters, digits, '.', '_' and '-'")
        if (cron is None) == (on_new_files is None):
            raise WorkflowError("give exactly one of --cron EXPR and --on-new-files PREFIX")
        if cron is not None:
            timing = parse_timing(cron)
            kind, expression = timing.kind, cron.strip()
        else:
            kind, expression = "files", _prefix(on_new_files or "")
        with self.engine.begin() as conn:
            if conn.execute(select(schedules.c.name).where(schedules.c.name == name)).first():
                raise WorkflowError(
                    f"schedule {name!r} already exists", hint=f"remove it first: shoal schedule remove {name}"
                )
            now = utcnow()
            conn.execute(
                insert(schedules).values(
                    name=name,
                    workflow=workflow,
                    kind=kind,
                    expression=expression,
                    input=json.dumps(input_) if input_ is not None else None,
                    enabled=True,
                    notify_topic=notify_topic,
                    created_at=now,
                    last_slot=now,
                )
            )
        return self.get(name)

    def get(self, name: str) -> dict[str, Any]:
        with self.engine.connect() as conn:
            row = conn.execute(select(schedules).where(schedules.c.name == name)).first()
        if row is None:
            raise WorkflowError(f"no schedule named {name!r}", hint="list them with `shoal schedule list`")
        return _schedule(row)

    def list(self) -> list[dict[str, Any]]:
        with self.engine.connect() as conn:
            rows = conn.execute(select(schedules).order_by(schedules.c.name)).all()
        out = [_schedule(r) for r in rows]
        now = utcnow()
        for s in out:
            if s["kind"] in ("cron", "rate") and s["enabled"]:
                timing = parse_timing(s["expression"])
                nxt = next(timing.slots(now, now + dt.timedelta(days=400), s["_created"]), None)
                s["next_run"] = nxt.isoformat() + "Z" if nxt else None
        return out

    def remove(self, name: str) -> None:
        self.get(name)
        with self.engine.begin() as conn:
            conn.execute(delete(schedules).where(schedules.c.name == name))
            conn.execute(delete(fires).where(fires.c.schedule == name))

    def set_enabled(self, name: str, enabled: bool) -> None:
        self.get(name)
        with self.engine.begin() as conn:
            values: dict[str, Any] = {"enabled": enabled}
            if enabled:
                values["last_slot"] = utcnow()  # a paused schedule does not catch up on resume
            conn.execute(update(schedules).where(schedules.c.name == name).values(**values))

    # ---- claims ----------------------------------------------------------------------------
    def claim(self, schedule: str, slots: builtins.list[str], execution_id: str) -> builtins.list[str]:
        """Insert each slot's claim; returns the slots this caller won (the others were taken)."""
        won = []
        for slot in slots:
            try:
                with self.engine.begin() as conn:
                    conn.execute(
                        insert(fires).values(schedule=schedule, slot=slot, execution_id=execution_id, fired_at=utcnow())
                    )
                won.append(slot)
            except IntegrityError:
                continue
        return won

    def advance(self, name: str, last_slot: dt.datetime) -> None:
        with self.engine.begin() as conn:
            conn.execute(update(schedules).where(schedules.c.name == name).values(last_slot=last_slot))

    def orphan_claims(self) -> builtins.list[dict[str, Any]]:
        """Claims whose execution never started (the scheduler died in between)."""
        q = (
            select(fires.c.schedule, fires.c.execution_id, fires.c.slot)
            .outerjoin(executions, executions.c.id == fires.c.execution_id)
            .where(executions.c.id.is_(None))
        )
        with self.engine.connect() as conn:
            rows = conn.execute(q).all()
        grouped: dict[str, dict[str, Any]] = {}
        for r in rows:
            g = grouped.setdefault(
                r.execution_id, {"schedule": r.schedule, "execution_id": r.execution_id, "slots": []}
            )
            g["slots"].append(r.slot)
        return list(grouped.values())

    def fired(self, name: str) -> builtins.list[dict[str, Any]]:
        with self.engine.connect() as conn:
            rows = conn.execute(select(fires).where(fires.c.schedule == name).order_by(fires.c.fired_at)).all()
        return [
            {"slot": r.slot, "execution_id": r.execution_id, "fired_at": r.fired_at.isoformat() + "Z"} for r in rows
        ]


def _prefix(prefix: str) -> str:
    if not prefix:
        raise WorkflowError("--on-new-files needs a folder or path prefix")
    prefix = prefix.removeprefix("file://")
    if prefix.startswith("s3a://"):
        prefix = "s3://" + prefix.removeprefix("s3a://")
    if "://" in prefix:
        if not prefix.startswith("s3://") or not prefix.removeprefix("s3://").strip("/"):
            raise WorkflowError(
                f"--on-new-files {prefix}: watch a local folder or an S3 prefix (s3://BUCKET/PREFIX)",
                hint="S3 URIs use the store configured in [storage]",
            )
        return prefix
    return str(Path(prefix).expanduser().resolve()) + ("/" if prefix.endswith("/") else "")


def _schedule(row: Any) -> dict[str, Any]:
    return {
        "name": row.name,
        "workflow": row.workflow,
        "kind": row.kind,
        "expression": row.expression,
        "input": json.loads(row.input) if row.input else None,
        "enabled": row.enabled,
        "notify_topic": row.notify_topic,
        "last_slot": row.last_slot.isoformat() + "Z" if row.last_slot else None,
        "_created": row.created_at,
        "_last": row.last_slot,
    }


# ---- the scheduler -----------------------------------------------------------------------------


@dataclass
class Fired:
    schedule: str
    execution_id: str
    slots: list[str]


Starter = Callable[[str, Any, str, str | None, str], None]  # workflow, input, execution_id, topic, schedule


class Scheduler:
    """Polls schedules and triggers; starts executions on a thread pool."""

    def __init__(
        self, settings: Settings, start: Starter, *, say: Callable[[str], None] = lambda _m: None, workers: int = 4
    ) -> None:
        self.settings = settings
        self.records = Schedules(settings)
        self.start = start
        self.say = say
        self.pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="shoal-schedule")
        self.futures: list[Any] = []
        self.fired: list[Fired] = []
        self.stop = threading.Event()

    def recover(self) -> None:
        for orphan in self.records.orphan_claims():
            schedule = next((s for s in self.records.list() if s["name"] == orphan["schedule"]), None)
            if schedule is None:
                continue
            self.say(f"{orphan['schedule']}: starting {orphan['execution_id']}, claimed before a restart")
            self._launch(schedule, orphan["execution_id"], orphan["slots"], _slot_input(schedule, orphan["slots"]))

    def tick(self, now: dt.datetime | None = None) -> list[Fired]:
        now = now or utcnow()
        fired: list[Fired] = []
        for schedule in self.records.list():
            if not schedule["enabled"]:
                continue
            try:
                if schedule["kind"] == "files":
                    fired += self._files(schedule)
                else:
                    fired += self._timed(schedule, now)
            except Exception as exc:  # noqa: BLE001 - one broken schedule must not stop the others
                self.say(f"{schedule['name']}: {exc}")
        return fired

    def _timed(self, schedule: dict[str, Any], now: dt.datetime) -> list[Fired]:
        from shoal.workflows.interpreter import new_execution_id

        timing = parse_timing(schedule["expression"])
        due = list(timing.slots(schedule["_last"], now, schedule["_created"]))
        if not due:
            return []
        policy = self.settings.workflows.misfire_policy
        grace = dt.timedelta(seconds=self.settings.workflows.misfire_grace_s)
        on_time = dt.timedelta(seconds=max(2 * self.settings.workflows.poll_s, 60))
        if policy == "skip":
            chosen = [t for t in due if now - t <= on_time]
        elif policy == "fire_once":
            chosen = [due[-1]] if now - due[-1] <= grace else []
        else:
            chosen = [t for t in due if now - t <= grace][-100:]
        out = []
        for slot in chosen:
            key = slot.isoformat() + "Z"
            execution_id = new_execution_id(schedule["workflow"])
            if self.records.claim(schedule["name"], [key], execution_id):
                out.append(self._launch(schedule, execution_id, [key], _slot_input(schedule, [key])))
        self.records.advance(schedule["name"], due[-1])
        skipped = len(due) - len(chosen)
        if skipped:
            self.say(f"{schedule['name']}: {skipped} missed slot(s) not run (misfire policy {policy})")
        return out

    def _files(self, schedule: dict[str, Any]) -> list[Fired]:
        from shoal.workflows.interpreter import new_execution_id

        settle = self.settings.workflows.settle_s
        now = time.time()
        found = []
        for path, size, mtime, mtime_ns in _arrived(self.settings, schedule["expression"]):
            if now - mtime < settle:
                continue  # still being written
            found.append(
                {
                    "path": path,
                    "size": size,
                    "modified": dt.datetime.fromtimestamp(mtime, dt.UTC).isoformat(),
                    "_key": f"{path}|{size}|{mtime_ns}",
                }
            )
        if not found:
            return []
        execution_id = new_execution_id(schedule["workflow"])
        won: set[str] = set(self.records.claim(schedule["name"], [str(f["_key"]) for f in found], execution_id))
        new = [{k: v for k, v in f.items() if k != "_key"} for f in found if f["_key"] in won]
        if not new:
            return []
        return [
            self._launch(
                schedule,
                execution_id,
                sorted(won),
                {**(schedule["input"] or {}), "trigger": "new_files", "prefix": schedule["expression"], "files": new},
            )
        ]

    def _launch(self, schedule: dict[str, Any], execution_id: str, slots: list[str], input_: Any) -> Fired:
        self.say(f"{schedule['name']}: starting {schedule['workflow']} as {execution_id}")
        future = self.pool.submit(
            self.start, schedule["workflow"], input_, execution_id, schedule["notify_topic"], schedule["name"]
        )
        self.futures.append(future)
        fired = Fired(schedule["name"], execution_id, slots)
        self.fired.append(fired)
        return fired

    def run(self, *, once: bool = False) -> None:
        self.recover()
        while not self.stop.is_set():
            self.tick()
            if once:
                break
            self.stop.wait(self.settings.workflows.poll_s)
        self.wait()

    def wait(self) -> None:
        for f in self.futures:
            f.result()
        self.pool.shutdown(wait=True)


def _slot_input(schedule: dict[str, Any], slots: list[str]) -> dict[str, Any]:
    if schedule["kind"] == "files":
        files = [{"path": s.split("|")[0]} for s in slots]
        return {**(schedule["input"] or {}), "trigger": "new_files", "prefix": schedule["expression"], "files": files}
    return {**(schedule["input"] or {}), "trigger": "schedule", "schedule": schedule["name"], "slot": slots[0]}


def _arrived(settings: Settings, prefix: str) -> Iterator[tuple[str, int, float, int]]:
    """(path or URI, size, mtime in seconds, mtime in ns) of each file under the prefix."""
    if "://" not in prefix:
        for path in _files_under(prefix):
            try:
                st = path.stat()
            except OSError:
                continue  # gone since it was listed
            yield str(path), st.st_size, st.st_mtime, st.st_mtime_ns
        return
    yield from _objects_under(settings, prefix)


def _objects_under(settings: Settings, prefix: str) -> Iterator[tuple[str, int, float, int]]:
    """Objects whose URI starts with `prefix` (s3://BUCKET/KEYPREFIX), from the [storage] store.

    A prefix that names no object yet is no error: the folder appears with its first file."""
    from pyarrow import fs as pafs

    from shoal import storage

    storage.configure(settings.storage)
    client, _ = storage.filesystem(prefix)
    wanted = prefix.removeprefix("s3://")  # BUCKET/KEYPREFIX
    folder = wanted.rstrip("/") if wanted.endswith("/") or "/" not in wanted else wanted.rsplit("/", 1)[0]
    try:
        entries = client.get_file_info(pafs.FileSelector(folder, recursive=True, allow_not_found=True))
    except OSError as exc:
        raise WorkflowError(f"cannot list {prefix}: {exc}", hint="check the [storage] endpoint and keys") from exc
    for entry in sorted(entries, key=lambda e: e.path):
        if entry.type != pafs.FileType.File or not entry.path.startswith(wanted):
            continue
        if any(part.startswith(".") for part in entry.path.split("/")[1:]):
            continue  # hidden objects and in-progress uploads
        mtime_ns = int(entry.mtime_ns or 0)
        yield f"s3://{entry.path}", int(entry.size or 0), mtime_ns / 1e9, mtime_ns


def _files_under(prefix: str) -> Iterator[Path]:
    p = Path(prefix)
    if p.is_dir():
        yield from sorted(f for f in p.rglob("*") if f.is_file() and not f.name.startswith("."))
        return
    parent = p.parent
    if parent.is_dir():
        yield from sorted(
            f for f in parent.rglob("*") if f.is_file() and str(f).startswith(prefix) and not f.name.startswith(".")
        )
