"""The record of change files already applied to a table (exactly-once bookkeeping).

Each batch writes a new immutable ledger file (all files applied so far) next to the
warehouse, then commits its data with the ledger's location in the snapshot summary
(`shoal.state.cdc-ledger`). The table's current snapshot therefore always names the
ledger that matches its data: a batch that crashed before its commit left only an
unreferenced ledger file behind, and its files count as not applied.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from pyspark.sql import SparkSession

from shoal import storage
from shoal.config import Settings
from shoal.lake.tables import STATE_PREFIX, TableName, latest_state

STATE_KEY = "cdc-ledger"
SUMMARY_KEY = STATE_PREFIX + STATE_KEY


def load(spark: SparkSession, table: TableName) -> dict[str, dict[str, Any]]:
    """Applied files of `table`: name -> {size, batch_id, applied_at}."""
    uri = latest_state(spark, table, STATE_KEY)
    if uri is None:
        return {}
    return json.loads(storage.read_bytes(uri))["files"]


def write(settings: Settings, table: TableName, applied: dict[str, dict[str, Any]], batch_id: str) -> str:
    """Write the ledger holding `applied`; returns its URI for the snapshot summary."""
    uri = storage.join(
        settings.warehouse_uri, "_shoal", "cdc-ledgers", table.namespace, table.name, f"ledger-{batch_id}.json"
    )
    doc = {
        "table": str(table),
        "batch_id": batch_id,
        "written_at": datetime.now(UTC).isoformat(),
        "files": applied,
    }
    storage.write_bytes(uri, json.dumps(doc, sort_keys=True).encode())
    return uri
