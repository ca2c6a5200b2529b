"""The record of change files already applied to a table (exactly-once bookkeeping).

Each batch writes a new immutable ledger file (all files applied so far) next to the
warehouse, then commits its data with the ledger's location in the snapshot summary
(`shoal.state.cdc-ledger`). The table's current snapshot therefore always names the
ledger that matches its data: a batch that crashed before its commit left only an
unreferenced ledger file behind, and its files count as not applied.
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from typing import Any

from pyspark.sql import SparkSession

from shoal import storage
from shoal.config import Settings
from shoal.lake.tables import STATE_PREFIX, TableName, all_states, latest_state

STATE_KEY = "cdc-ledger"
SUMMARY_KEY = STATE_PREFIX + STATE_KEY


def latest_state_uri(spark: SparkSession, table: TableName) -> str | None:
    """The ledger the table's current state refers to."""
    return latest_state(spark, table, STATE_KEY)


def load(spark: SparkSession, table: TableName) -> dict[str, dict[str, Any]]:
    """Applied files of `table`: name -> {size, batch_id, applied_at}."""
    uri = latest_state_uri(spark, table)
    if uri is None:
        return {}
    return json.loads(storage.read_bytes(uri))["files"]


def _folder(settings: Settings, table: TableName) -> str:
    return storage.join(settings.warehouse_uri, "_shoal", "cdc-ledgers", table.namespace, table.name)


def prune(spark: SparkSession, settings: Settings, table: TableName, *, min_age_hours: float) -> int:
    """Delete ledger files no snapshot or table property refers to any more.

    Each batch writes a full ledger, so old ones pile up; run after snapshot expiry. Files
    younger than `min_age_hours` are kept: one may belong to a batch still committing.
    """
    folder = _folder(settings, table)
    if not storage.exists(folder):
        return 0
    referenced = set(all_states(spark, table, STATE_KEY))
    cutoff = time.time() - min_age_hours * 3600
    removed = 0
    for entry in storage.list_files(folder, (".json",)):
        if entry.uri in referenced or entry.mtime is None or entry.mtime > cutoff:
            continue
        storage.delete(entry.uri)
        removed += 1
    return removed


def write(settings: Settings, table: TableName, applied: dict[str, dict[str, Any]], batch_id: str) -> str:
    """Write the ledger holding `applied`; returns its URI for the snapshot summary."""
    uri = storage.join(_folder(settings, table), f"ledger-{batch_id}.json")
    doc = {
        "table": str(table),
        "batch_id": batch_id,
        "written_at": datetime.now(UTC).isoformat(),
        "files": applied,
    }
    storage.write_bytes(uri, json.dumps(doc, sort_keys=True).encode())
    return uri
