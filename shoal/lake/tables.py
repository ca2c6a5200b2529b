"""Table names, snapshots, state pointers and maintenance for Iceberg tables."""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from pyspark.sql import SparkSession

from shoal.exceptions import ShoalError, TableNotFoundError

if TYPE_CHECKING:
    from shoal.progress import Say

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

# Snapshot summary keys with this prefix are state pointers (for example the CDC ledger).
# The newest value along the current snapshot's ancestry is the state; `maintain` pins
# it into a table property before expiring snapshots so expiry can never lose it.
STATE_PREFIX = "shoal.state."


@dataclass(frozen=True)
class TableName:
    namespace: str
    name: str

    @classmethod
    def parse(cls, text: str) -> TableName:
        parts = text.strip().split(".")
        if len(parts) != 2 or not all(_IDENT.match(p) for p in parts):
            raise ShoalError(
                f"invalid table name {text!r}",
                hint="use NS.TABLE with letters, digits and underscores, e.g. inventory.products",
            )
        return cls(parts[0].lower(), parts[1].lower())

    @property
    def sql(self) -> str:
        return f"`{self.namespace}`.`{self.name}`"

    def qualified(self, catalog: str) -> str:
        return f"{catalog}.{self.namespace}.{self.name}"

    def metadata(self, table: str) -> str:
        """A metadata table such as snapshots or history."""
        return f"{self.sql}.`{table}`"

    def sibling(self, suffix: str) -> TableName:
        return TableName(self.namespace, self.name + suffix)

    def __str__(self) -> str:
        return f"{self.namespace}.{self.name}"


def table_exists(spark: SparkSession, table: TableName) -> bool:
    return bool(spark.catalog.tableExists(str(table)))


def require_table(spark: SparkSession, table: TableName) -> None:
    if not table_exists(spark, table):
        raise TableNotFoundError(
            f"table {table} does not exist", hint='list tables with: shoal sql "SHOW TABLES IN <namespace>"'
        )


def table_properties(spark: SparkSession, table: TableName) -> dict[str, str]:
    return {r.key: r.value for r in spark.sql(f"SHOW TBLPROPERTIES {table.sql}").collect()}


def set_properties(spark: SparkSession, table: TableName, props: dict[str, str]) -> None:
    if not props:
        return
    items = ", ".join(f"{_sql_string(k)} = {_sql_string(v)}" for k, v in props.items())
    spark.sql(f"ALTER TABLE {table.sql} SET TBLPROPERTIES ({items})")


def _sql_string(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _ancestry(spark: SparkSession, table: TableName) -> list[Any]:
    """Snapshots on the current branch, newest first."""
    return spark.sql(
        f"""SELECT s.snapshot_id, s.parent_id, s.operation, s.summary, s.committed_at, h.is_current_ancestor
            FROM {table.metadata("history")} h JOIN {table.metadata("snapshots")} s
              ON h.snapshot_id = s.snapshot_id
            ORDER BY h.made_current_at DESC, s.committed_at DESC"""
    ).collect()


def current_snapshot(spark: SparkSession, table: TableName) -> tuple[int | None, dict[str, str]]:
    rows = [r for r in _ancestry(spark, table) if r.is_current_ancestor]
    if not rows:
        return None, {}
    return int(rows[0].snapshot_id), dict(rows[0].summary or {})


def latest_state(spark: SparkSession, table: TableName, key: str) -> str | None:
    """The newest value of state pointer `key` (summary key STATE_PREFIX + key)."""
    full = STATE_PREFIX + key
    for row in _ancestry(spark, table):
        if row.is_current_ancestor and row.summary and full in row.summary:
            return row.summary[full]
    return table_properties(spark, table).get(full)


def all_states(spark: SparkSession, table: TableName, key: str) -> list[str]:
    """Every value of state pointer `key` still referenced: by any snapshot or the table."""
    full = STATE_PREFIX + key
    values = [r.summary[full] for r in _ancestry(spark, table) if r.summary and full in r.summary]
    pinned = table_properties(spark, table).get(full)
    return values + ([pinned] if pinned else [])


def pin_state(spark: SparkSession, table: TableName) -> dict[str, str]:
    """Copy every state pointer's newest value into table properties."""
    pinned: dict[str, str] = {}
    for row in reversed(_ancestry(spark, table)):  # oldest first: newer values win
        if row.is_current_ancestor and row.summary:
            pinned.update({k: v for k, v in row.summary.items() if k.startswith(STATE_PREFIX)})
    current = table_properties(spark, table)
    changed = {k: v for k, v in pinned.items() if current.get(k) != v}
    set_properties(spark, table, changed)
    return pinned


def history(spark: SparkSession, table: TableName) -> list[dict[str, Any]]:
    """Snapshots oldest first, with the change files each CDC batch applied."""
    require_table(spark, table)
    out = []
    for r in reversed(_ancestry(spark, table)):
        summary = dict(r.summary or {})
        files = json.loads(summary["shoal.cdc.files"]) if "shoal.cdc.files" in summary else []
        out.append(
            {
                "snapshot_id": int(r.snapshot_id),
                "parent_id": int(r.parent_id) if r.parent_id is not None else None,
                "committed_at": r.committed_at.astimezone(UTC).isoformat(),
                "operation": r.operation,
                "is_current_ancestor": bool(r.is_current_ancestor),
                "files": files,
                "added_records": int(summary.get("added-records", 0)),
                "deleted_records": int(summary.get("deleted-records", 0)),
                "total_records": int(summary["total-records"]) if "total-records" in summary else None,
                "summary": {k: v for k, v in summary.items() if k.startswith("shoal.") and k != "shoal.cdc.files"},
            }
        )
    return out


def maintain(
    spark: SparkSession,
    table: TableName,
    *,
    catalog: str,
    retention_hours: float,
    retain_last: int,
    orphan_min_age_hours: float,
    target_file_size_mb: int,
    say: Say | None = None,
) -> dict[str, Any]:
    """Compact data and delete files, expire old snapshots, remove orphan files."""
    require_table(spark, table)
    if orphan_min_age_hours < 24:
        # Iceberg refuses shorter intervals: a file younger than that may belong to a
        # commit still in flight.
        raise ShoalError("orphan-file minimum age must be at least 24 hours", hint="use --orphan-min-age-hours 24")
    say = say or (lambda _msg: None)
    ident = f"{table.namespace}.{table.name}"
    result: dict[str, Any] = {"table": str(table)}
    t0 = time.monotonic()

    say("compacting data files")
    target = str(target_file_size_mb * 1024 * 1024)
    row = spark.sql(
        f"""CALL {catalog}.system.rewrite_data_files(table => '{ident}',
            options => map('delete-file-threshold', '1', 'target-file-size-bytes', '{target}'))"""
    ).collect()[0]
    result["data_files_rewritten"] = int(row["rewritten_data_files_count"])
    result["data_files_added"] = int(row["added_data_files_count"])

    say("compacting delete files")
    row = spark.sql(
        f"CALL {catalog}.system.rewrite_position_delete_files(table => '{ident}', options => map('rewrite-all', 'true'))"
    ).collect()[0]
    result["delete_files_rewritten"] = int(row["rewritten_delete_files_count"])

    say("rewriting manifests")
    spark.sql(f"CALL {catalog}.system.rewrite_manifests(table => '{ident}')").collect()

    say("pinning state and expiring snapshots")
    pin_state(spark, table)
    cutoff = datetime.now(UTC) - timedelta(hours=retention_hours)
    row = spark.sql(
        f"""CALL {catalog}.system.expire_snapshots(table => '{ident}',
            older_than => TIMESTAMP '{cutoff:%Y-%m-%d %H:%M:%S.%f}', retain_last => {int(retain_last)})"""
    ).collect()[0]
    result["snapshots_expired"] = int(row["deleted_manifest_lists_count"])
    result["expired_files_deleted"] = (
        int(row["deleted_data_files_count"])
        + int(row["deleted_position_delete_files_count"])
        + int(row["deleted_equality_delete_files_count"])
    )

    say("removing orphan files")
    orphan_cutoff = datetime.now(UTC) - timedelta(hours=orphan_min_age_hours)
    rows = spark.sql(
        f"""CALL {catalog}.system.remove_orphan_files(table => '{ident}',
            older_than => TIMESTAMP '{orphan_cutoff:%Y-%m-%d %H:%M:%S.%f}')"""
    ).collect()
    result["orphan_files_removed"] = len(rows)
    result["snapshot_id"] = current_snapshot(spark, table)[0]
    result["seconds"] = round(time.monotonic() - t0, 3)
    return result
