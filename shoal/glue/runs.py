"""The record of Glue job runs in the catalog database: one row per run, written as it starts
and completed as it ends, so a run that failed (or whose process died: RUNNING forever) shows."""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import Column, DateTime, Float, MetaData, String, Table, Text, insert, select, update

from shoal.config import Settings
from shoal.lake import database

metadata = MetaData()
runs = Table(
    "shoal_glue_runs",
    metadata,
    Column("run_id", String(64), primary_key=True),
    Column("job_name", String(255), nullable=False, index=True),
    Column("script", Text, nullable=False),
    Column("status", String(16), nullable=False),
    Column("bookmark_option", String(32), nullable=False),
    Column("started_at", DateTime, nullable=False),
    Column("stopped_at", DateTime),
    Column("duration_s", Float),
    Column("error", Text),
    Column("summary", Text),
)

RUNNING, SUCCEEDED, FAILED = "RUNNING", "SUCCEEDED", "FAILED"


def started(settings: Settings, run_id: str, job_name: str, script: str, bookmark_option: str) -> None:
    engine = database.engine(settings, metadata)
    with engine.begin() as conn:
        conn.execute(
            insert(runs).values(
                run_id=run_id,
                job_name=job_name,
                script=script,
                status=RUNNING,
                bookmark_option=bookmark_option,
                started_at=database.utcnow(),
            )
        )


def finished(
    settings: Settings, run_id: str, status: str, duration_s: float, *, error: str | None = None, summary: Any = None
) -> None:
    engine = database.engine(settings, metadata)
    with engine.begin() as conn:
        conn.execute(
            update(runs)
            .where(runs.c.run_id == run_id)
            .values(
                status=status,
                stopped_at=database.utcnow(),
                duration_s=duration_s,
                error=error,
                summary=json.dumps(summary, default=str) if summary is not None else None,
            )
        )


def history(settings: Settings, job_name: str | None = None, limit: int = 50) -> list[dict[str, Any]]:
    """Runs, newest first."""
    engine = database.engine(settings, metadata)
    q = select(runs).order_by(runs.c.started_at.desc()).limit(limit)
    if job_name:
        q = q.where(runs.c.job_name == job_name)
    with engine.connect() as conn:
        rows = conn.execute(q).all()
    return [
        {
            "run_id": r.run_id,
            "job_name": r.job_name,
            "script": r.script,
            "status": r.status,
            "bookmark_option": r.bookmark_option,
            "started_at": r.started_at.isoformat() + "Z",
            "duration_s": r.duration_s,
            "error": r.error,
        }
        for r in rows
    ]
