"""Job bookmarks: what each Glue job's sources have already read, in the catalog database.

One row per (job name, transformation_ctx), as in AWS Glue. The state of a file source is
the set of files read so far, each with its size and modification time: a later run reads
files not listed, and files whose size or time changed. A run collects new states while
it reads and `Job.commit()` writes them all in one transaction, so a run that fails
before its commit leaves the bookmark where it was.
"""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import Column, DateTime, MetaData, String, Table, Text, delete, select

from shoal.config import Settings
from shoal.lake import database

metadata = MetaData()
bookmarks = Table(
    "shoal_glue_bookmarks",
    metadata,
    Column("job_name", String(255), primary_key=True),
    Column("transformation_ctx", String(255), primary_key=True),
    Column("state", Text, nullable=False),
    Column("run_id", String(64), nullable=False),
    Column("updated_at", DateTime, nullable=False),
)

ENABLE, PAUSE, DISABLE = "job-bookmark-enable", "job-bookmark-pause", "job-bookmark-disable"
OPTIONS = (ENABLE, PAUSE, DISABLE)


def load(settings: Settings, job_name: str) -> dict[str, dict[str, Any]]:
    """transformation_ctx -> committed state of every source of `job_name`."""
    engine = database.engine(settings, metadata)
    with engine.connect() as conn:
        rows = conn.execute(select(bookmarks).where(bookmarks.c.job_name == job_name)).all()
    return {r.transformation_ctx: json.loads(r.state) for r in rows}


def commit(settings: Settings, job_name: str, run_id: str, states: dict[str, dict[str, Any]]) -> None:
    """Persist the states a run collected, all or none."""
    if not states:
        return
    engine = database.engine(settings, metadata)
    with engine.begin() as conn:
        for ctx, state in states.items():
            database.upsert(
                conn,
                bookmarks,
                {"job_name": job_name, "transformation_ctx": ctx},
                {"state": json.dumps(state, sort_keys=True), "run_id": run_id, "updated_at": database.utcnow()},
            )


def show(settings: Settings, job_name: str) -> list[dict[str, Any]]:
    engine = database.engine(settings, metadata)
    with engine.connect() as conn:
        rows = conn.execute(
            select(bookmarks).where(bookmarks.c.job_name == job_name).order_by(bookmarks.c.transformation_ctx)
        ).all()
    out = []
    for r in rows:
        state = json.loads(r.state)
        out.append(
            {
                "transformation_ctx": r.transformation_ctx,
                "files": len(state.get("files", {})),
                "run_id": r.run_id,
                "updated_at": r.updated_at.isoformat() + "Z",
            }
        )
    return out


def reset(settings: Settings, job_name: str) -> int:
    """Forget every bookmark of `job_name` (the next run reads everything); returns rows removed."""
    engine = database.engine(settings, metadata)
    with engine.begin() as conn:
        return conn.execute(delete(bookmarks).where(bookmarks.c.job_name == job_name)).rowcount
