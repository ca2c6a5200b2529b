"""Workflows, executions, event history and resume checkpoints in the catalog database.

Every state entered or exited, every retry and failure is an event row written as it
happens, so a killed process leaves an exact record. A checkpoint per scope (the top
level, each Parallel branch, each Map iteration) holds the next state and its input;
resume restarts each unfinished scope there and reuses the output of finished ones. The
workflow variables a scope has assigned (`Assign`) are checkpointed with it, in the same
transaction, in a table of their own (catalogs created before variables gain it as is).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import socket
import threading
from dataclasses import dataclass
from typing import Any

from sqlalchemy import (
    Boolean,
    Column,
    DateTime,
    Float,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    delete,
    func,
    insert,
    select,
    update,
)

from shoal.config import Settings
from shoal.lake import database
from shoal.lake.database import utcnow as now
from shoal.workflows.errors import WorkflowError

state_tables = MetaData()

workflows = Table(
    "shoal_workflows",
    state_tables,
    Column("name", String(200), primary_key=True),
    Column("definition", Text, nullable=False),
    Column("source", Text),
    Column("version", Integer, nullable=False),
    Column("updated_at", DateTime, nullable=False),
)
executions = Table(
    "shoal_executions",
    state_tables,
    Column("id", String(64), primary_key=True),
    Column("workflow", String(200), nullable=False, index=True),
    Column("name", String(200)),
    Column("status", String(16), nullable=False),
    Column("definition", Text, nullable=False),
    Column("input", Text),
    Column("output", Text),
    Column("error", Text),
    Column("cause", Text),
    Column("started_at", DateTime, nullable=False),
    Column("stopped_at", DateTime),
    Column("duration_s", Float),
    Column("host", String(255)),
    Column("pid", Integer),
    Column("trigger", Text),
    # A stop asked for by another process ({"error", "cause", "by"} as JSON); the running
    # interpreter polls it (migration 0003 added it to catalogs of release 0.1.0).
    Column("stop_requested", Text),
)
events = Table(
    "shoal_events",
    state_tables,
    Column("execution_id", String(64), primary_key=True),
    Column("seq", Integer, primary_key=True),
    Column("ts", DateTime, nullable=False),
    Column("type", String(64), nullable=False),
    Column("state", String(200)),
    Column("scope", Text),
    Column("detail", Text),
)
checkpoints = Table(
    "shoal_checkpoints",
    state_tables,
    Column("execution_id", String(64), primary_key=True),
    Column("scope", String(500), primary_key=True),
    Column("next_state", String(200)),
    Column("input", Text),
    Column("done", Boolean, nullable=False),
    Column("output", Text),
)
checkpoint_variables = Table(
    "shoal_checkpoint_variables",
    state_tables,
    Column("execution_id", String(64), primary_key=True),
    Column("scope", String(500), primary_key=True),
    Column("variables", Text, nullable=False),
)

RUNNING, SUCCEEDED, FAILED, TIMED_OUT, ABORTED = "RUNNING", "SUCCEEDED", "FAILED", "TIMED_OUT", "ABORTED"


def _dump(value: Any) -> str:
    return json.dumps(value, default=str, separators=(",", ":"))


@dataclass
class ExecutionRecord:
    id: str
    workflow: str
    name: str | None
    status: str
    definition: dict[str, Any]
    input: Any
    output: Any
    error: str | None
    cause: str | None
    started_at: dt.datetime
    stopped_at: dt.datetime | None
    duration_s: float | None
    host: str | None
    pid: int | None
    trigger: Any

    def to_dict(self, *, full: bool = False) -> dict[str, Any]:
        out = {
            "execution_id": self.id,
            "workflow": self.workflow,
            "name": self.name,
            "status": self.status,
            "started_at": self.started_at.isoformat() + "Z",
            "stopped_at": self.stopped_at.isoformat() + "Z" if self.stopped_at else None,
            "duration_s": round(self.duration_s, 3) if self.duration_s is not None else None,
            "error": self.error,
            "cause": self.cause,
        }
        if full:
            out.update(input=self.input, output=self.output, trigger=self.trigger)
        return out


class Store:
    def __init__(self, settings: Settings) -> None:
        self.engine = database.engine(settings, state_tables)
        self._seq: dict[str, int] = {}
        self._lock = threading.Lock()

    # ---- workflows ------------------------------------------------------------------------
    def register(self, name: str, definition: dict[str, Any], source: str | None) -> int:
        with self.engine.begin() as conn:
            row = conn.execute(
                select(workflows.c.version, workflows.c.definition).where(workflows.c.name == name)
            ).first()
            text = _dump(definition)
            if row is None:
                conn.execute(
                    insert(workflows).values(name=name, definition=text, source=source, version=1, updated_at=now())
                )
                return 1
            if row.definition == text:
                # Same definition from another file: remember where it now lives.
                conn.execute(update(workflows).where(workflows.c.name == name).values(source=source))
                return row.version
            conn.execute(
                update(workflows)
                .where(workflows.c.name == name)
                .values(definition=text, source=source, version=row.version + 1, updated_at=now())
            )
            return row.version + 1

    def workflow(self, name: str) -> dict[str, Any] | None:
        with self.engine.connect() as conn:
            row = conn.execute(select(workflows).where(workflows.c.name == name)).first()
        if row is None:
            return None
        return {
            "name": row.name,
            "definition": json.loads(row.definition),
            "source": row.source,
            "version": row.version,
        }

    def list_workflows(self) -> list[dict[str, Any]]:
        last = (
            select(executions.c.workflow, func.max(executions.c.started_at).label("last_run"))
            .group_by(executions.c.workflow)
            .subquery()
        )
        q = (
            select(workflows.c.name, workflows.c.version, workflows.c.source, workflows.c.updated_at, last.c.last_run)
            .outerjoin(last, last.c.workflow == workflows.c.name)
            .order_by(workflows.c.name)
        )
        with self.engine.connect() as conn:
            return [
                {
                    "name": r.name,
                    "version": r.version,
                    "source": r.source,
                    "updated_at": r.updated_at.isoformat() + "Z",
                    "last_run": r.last_run.isoformat() + "Z" if r.last_run else None,
                }
                for r in conn.execute(q)
            ]

    # ---- executions -----------------------------------------------------------------------
    def create_execution(
        self, execution_id: str, workflow: str, name: str | None, definition: dict[str, Any], input_: Any, trigger: Any
    ) -> None:
        with self.engine.begin() as conn:
            conn.execute(
                insert(executions).values(
                    id=execution_id,
                    workflow=workflow,
                    name=name,
                    status=RUNNING,
                    definition=_dump(definition),
                    input=_dump(input_),
                    started_at=now(),
                    host=socket.gethostname(),
                    pid=os.getpid(),
                    trigger=_dump(trigger) if trigger is not None else None,
                )
            )
        self._seq[execution_id] = 0

    def claim(self, execution_id: str) -> None:
        """Take over an execution for resuming (this process becomes its owner)."""
        with self.engine.begin() as conn:
            conn.execute(
                update(executions)
                .where(executions.c.id == execution_id)
                .values(
                    status=RUNNING,
                    host=socket.gethostname(),
                    pid=os.getpid(),
                    stopped_at=None,
                    error=None,
                    cause=None,
                    stop_requested=None,
                )
            )
            last = conn.execute(select(func.max(events.c.seq)).where(events.c.execution_id == execution_id)).scalar()
        self._seq[execution_id] = last or 0

    def request_stop(self, execution_id: str, *, by: str, error: str | None = None, cause: str | None = None) -> str:
        """Ask a running execution to stop (as Step Functions' StopExecution): the interpreter that
        runs it cancels its states and records ABORTED. An execution whose process is gone is
        marked ABORTED at once. Returns the status after the request."""
        record = self.execution(execution_id)
        if record.status != RUNNING:
            raise WorkflowError(
                f"execution {execution_id} is {record.status}, not RUNNING; there is nothing to stop",
                hint="only running executions can be stopped",
            )
        request = {"error": error or "States.Aborted", "cause": cause or f"stopped by {by}", "by": by}
        with self.engine.begin() as conn:
            conn.execute(
                update(executions)
                .where(executions.c.id == record.id, executions.c.status == RUNNING)
                .values(stop_requested=_dump(request))
            )
        if not owner_alive(record) and record.host == socket.gethostname():
            self.event(record.id, "ExecutionAborted", error=request["error"], cause=request["cause"])
            self.finish(record.id, ABORTED, error=request["error"], cause=request["cause"])
            return ABORTED
        return RUNNING

    def stop_request(self, execution_id: str) -> dict[str, Any] | None:
        with self.engine.connect() as conn:
            raw = conn.execute(select(executions.c.stop_requested).where(executions.c.id == execution_id)).scalar()
        return json.loads(raw) if raw else None

    def finish(
        self, execution_id: str, status: str, *, output: Any = None, error: str | None = None, cause: str | None = None
    ) -> None:
        with self.engine.begin() as conn:
            started = conn.execute(select(executions.c.started_at).where(executions.c.id == execution_id)).scalar()
            stopped = now()
            conn.execute(
                update(executions)
                .where(executions.c.id == execution_id)
                .values(
                    status=status,
                    output=_dump(output) if status == SUCCEEDED else None,
                    error=error,
                    cause=cause,
                    stopped_at=stopped,
                    duration_s=(stopped - started).total_seconds() if started else None,
                )
            )

    def execution(self, execution_id: str) -> ExecutionRecord:
        with self.engine.connect() as conn:
            row = conn.execute(select(executions).where(executions.c.id == execution_id)).first()
            if row is None:
                rows = conn.execute(select(executions).where(executions.c.id.like(f"{execution_id}%")).limit(2)).all()
                if len(rows) == 1 and len(execution_id) >= 6:
                    row = rows[0]
        if row is None:
            raise WorkflowError(f"no execution {execution_id!r}", hint="list them with `shoal workflow executions`")
        return _record(row)

    def list_executions(
        self, workflow: str | None = None, status: str | None = None, limit: int = 50
    ) -> list[ExecutionRecord]:
        q = select(executions).order_by(executions.c.started_at.desc()).limit(limit)
        if workflow:
            q = q.where(executions.c.workflow == workflow)
        if status:
            q = q.where(executions.c.status == status.upper())
        with self.engine.connect() as conn:
            return [_record(r) for r in conn.execute(q)]

    # ---- events and checkpoints -----------------------------------------------------------
    def event(self, execution_id: str, type_: str, *, state: str | None = None, scope: str = "", **detail: Any) -> None:
        with self._lock:
            if execution_id not in self._seq:
                with self.engine.connect() as conn:
                    self._seq[execution_id] = (
                        conn.execute(
                            select(func.max(events.c.seq)).where(events.c.execution_id == execution_id)
                        ).scalar()
                        or 0
                    )
            seq = self._seq[execution_id] + 1
            self._seq[execution_id] = seq
            with self.engine.begin() as conn:
                conn.execute(
                    insert(events).values(
                        execution_id=execution_id,
                        seq=seq,
                        ts=now(),
                        type=type_,
                        state=state,
                        scope=scope,
                        detail=_dump(detail) if detail else None,
                    )
                )

    def history(self, execution_id: str) -> list[dict[str, Any]]:
        with self.engine.connect() as conn:
            rows = conn.execute(
                select(events).where(events.c.execution_id == execution_id).order_by(events.c.seq)
            ).all()
        return [
            {
                "id": r.seq,
                "timestamp": r.ts.isoformat() + "Z",
                "type": r.type,
                "state": r.state,
                "scope": r.scope or "",
                **(json.loads(r.detail) if r.detail else {}),
            }
            for r in rows
        ]

    def checkpoint(
        self,
        execution_id: str,
        scope: str,
        *,
        next_state: str | None,
        input_: Any = None,
        done: bool = False,
        output: Any = None,
        variables: dict[str, Any] | None = None,
    ) -> None:
        """Where `scope` stands; `variables`: those the scope has assigned so far (None: none yet)."""
        values = {
            "next_state": next_state,
            "input": _dump(input_) if not done else None,
            "done": done,
            "output": _dump(output) if done else None,
        }
        key = {"execution_id": execution_id, "scope": scope}
        with self._lock, self.engine.begin() as conn:
            database.upsert(conn, checkpoints, key, values)
            # A scope's variables only ever grow, so a scope with none has never written a row.
            if variables and not done:
                database.upsert(conn, checkpoint_variables, key, {"variables": _dump(variables)})

    def checkpoint_of(self, execution_id: str, scope: str) -> dict[str, Any] | None:
        with self.engine.connect() as conn:
            row = conn.execute(
                select(checkpoints).where(checkpoints.c.execution_id == execution_id, checkpoints.c.scope == scope)
            ).first()
            variables = conn.execute(
                select(checkpoint_variables.c.variables).where(
                    checkpoint_variables.c.execution_id == execution_id, checkpoint_variables.c.scope == scope
                )
            ).scalar()
        if row is None:
            return None
        return {
            "next_state": row.next_state,
            "input": json.loads(row.input) if row.input is not None else None,
            "done": row.done,
            "output": json.loads(row.output) if row.output is not None else None,
            "variables": json.loads(variables) if variables is not None else {},
        }

    def clear_checkpoints(self, execution_id: str, scope_prefix: str) -> None:
        """Forget the inner scopes of a Parallel/Map state that starts afresh (loops re-enter)."""
        with self._lock, self.engine.begin() as conn:
            for table in (checkpoints, checkpoint_variables):
                conn.execute(
                    delete(table).where(table.c.execution_id == execution_id, table.c.scope.like(scope_prefix + "%"))
                )


def _record(row: Any) -> ExecutionRecord:
    return ExecutionRecord(
        id=row.id,
        workflow=row.workflow,
        name=row.name,
        status=row.status,
        definition=json.loads(row.definition),
        input=json.loads(row.input) if row.input else None,
        output=json.loads(row.output) if row.output else None,
        error=row.error,
        cause=row.cause,
        started_at=row.started_at,
        stopped_at=row.stopped_at,
        duration_s=row.duration_s,
        host=row.host,
        pid=row.pid,
        trigger=json.loads(row.trigger) if row.trigger else None,
    )


def owner_alive(record: ExecutionRecord) -> bool:
    """Whether the process that runs `record` is still alive (only knowable on its own host)."""
    if record.host != socket.gethostname() or not record.pid:
        return False
    if record.pid == os.getpid():
        return True
    try:
        os.kill(record.pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie (killed child not yet reaped) is dead for our purposes.
    try:
        with open(f"/proc/{record.pid}/stat") as fh:
            return fh.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return True
