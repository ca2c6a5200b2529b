"""The SQLite catalog shared by the JVM (Iceberg's JDBC catalog) and Python (workflow store).

Issue 19: in a process started on an existing catalog, a state machine running
`DROP TABLE IF EXISTS nothere` and later `DROP TABLE default.x` failed with
SQLITE_BUSY_SNAPSHOT. Iceberg's start-up check left a ResultSet open, so its pooled
connection kept the WAL snapshot of start-up; the workflow store's events, written in
between, made that connection's next write impossible. A fresh catalog never showed it
(the check finds nothing and finishes), hence two processes here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

MACHINE = {
    "Comment": "Drop a table that is not there, then one that is: writes to the catalog in between",
    "StartAt": "Drop missing table",
    "States": {
        "Drop missing table": {
            "Type": "Task",
            "Resource": "arn:aws:states:::athena:startQueryExecution.sync",
            "Parameters": {"QueryString": "DROP TABLE IF EXISTS nothere", "WorkGroup": "primary"},
            "ResultPath": None,
            "Next": "Wait a moment",
        },
        "Wait a moment": {"Type": "Wait", "Seconds": 1, "Next": "Drop lake table"},
        "Drop lake table": {
            "Type": "Task",
            "Resource": "arn:aws:states:::athena:startQueryExecution.sync",
            "Parameters": {"QueryString": "DROP TABLE default.x", "WorkGroup": "primary"},
            "ResultSelector": {"State.$": "$.QueryExecution.Status.State"},
            "ResultPath": "$.dropped",
            "Next": "Create it again",
        },
        "Create it again": {
            "Type": "Task",
            "Resource": "arn:aws:states:::athena:startQueryExecution.sync",
            "Parameters": {"QueryString": "CREATE TABLE default.x AS SELECT 2 AS a", "WorkGroup": "primary"},
            "ResultSelector": {"State.$": "$.QueryExecution.Status.State"},
            "ResultPath": "$.created",
            "End": True,
        },
    },
}


def shoal(args: list[str], workspace: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SHOAL_")}
    env.update({"SHOAL_WORKSPACE": str(workspace), "SHOAL_SPARK__SHUFFLE_PARTITIONS": "2"})
    return subprocess.run(
        [sys.executable, "-m", "shoal.cli.console", *args], env=env, capture_output=True, text=True, timeout=400
    )


def test_drop_after_workflow_events_in_a_process_started_on_an_existing_catalog(tmp_path):
    workspace = tmp_path / "ws"
    first = shoal(["sql", "--dialect", "athena", "CREATE TABLE default.x AS SELECT 1 AS a"], workspace)
    assert first.returncode == 0, first.stderr[-3000:]
    definition = tmp_path / "drop-tables.asl.json"
    definition.write_text(json.dumps(MACHINE))
    second = shoal(["workflow", "run", str(definition), "--json"], workspace)
    record = json.loads(second.stdout)
    assert record["status"] == "SUCCEEDED", (record["error"], record["cause"])
    assert record["output"]["dropped"] == {"State": "SUCCEEDED"}
    assert record["output"]["created"] == {"State": "SUCCEEDED"}
    rows = shoal(["sql", "SELECT a FROM default.x", "-f", "json"], workspace)
    assert rows.returncode == 0, rows.stderr[-3000:]
    assert json.loads(rows.stdout) == [{"a": 2}]
