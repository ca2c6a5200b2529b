"""External tables' definitions in the catalog database, and the helpers the SQL runners share.

Below `shoal.sql.external` (the runner) and `shoal.sql.athena_statements` (Athena's own
statements, run by the runner), which both use them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import Boolean, Column, DateTime, MetaData, String, Table, Text, delete, select, update

from shoal.config import Settings
from shoal.exceptions import SqlError, first_line
from shoal.lake import database

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

state_tables = MetaData()
external_tables = Table(
    "shoal_external_tables",
    state_tables,
    Column("name", String(300), primary_key=True),
    Column("columns", Text, nullable=False),
    Column("partition_columns", Text, nullable=False),
    Column("format", String(32), nullable=False),
    Column("location", Text, nullable=False),
    Column("options", Text, nullable=False),
    Column("repaired", Boolean, nullable=False),
    Column("created_at", DateTime, nullable=False),
    Column("ddl", Text),
)

SESSION_CATALOG = "spark_catalog"


@dataclass
class ExternalTable:
    name: str  # db.table, lower case
    columns: list[tuple[str, str]]
    partition_columns: list[tuple[str, str]]
    format: str
    location: str
    options: dict[str, str]
    repaired: bool = False

    @property
    def spark_name(self) -> str:
        db, table = self.name.split(".")
        return f"{SESSION_CATALOG}.`{db}`.`{table}`"

    def spark_ddl(self) -> str:
        cols = ", ".join(f"`{n}` {t}" for n, t in self.columns + self.partition_columns)
        ddl = f"CREATE TABLE IF NOT EXISTS {self.spark_name} ({cols}) USING {self.format}"
        if self.options:
            ddl += " OPTIONS (" + ", ".join(f"'{_q(k)}' = '{_q(v)}'" for k, v in self.options.items()) + ")"
        if self.partition_columns:
            ddl += " PARTITIONED BY (" + ", ".join(f"`{n}`" for n, _ in self.partition_columns) + ")"
        return ddl + f" LOCATION '{_q(self.location)}'"


def _q(text: str) -> str:
    return str(text).replace("\\", "\\\\").replace("'", "\\'")


class Registry:
    """External table definitions in the catalog database."""

    def __init__(self, settings: Settings) -> None:
        self.engine = database.engine(settings, state_tables)

    def get(self, name: str) -> ExternalTable | None:
        with self.engine.connect() as conn:
            row = conn.execute(select(external_tables).where(external_tables.c.name == name.lower())).first()
        if row is None:
            return None
        return ExternalTable(
            name=row.name,
            columns=[tuple(c) for c in json.loads(row.columns)],
            partition_columns=[tuple(c) for c in json.loads(row.partition_columns)],
            format=row.format,
            location=row.location,
            options=json.loads(row.options),
            repaired=row.repaired,
        )

    def names(self) -> set[str]:
        with self.engine.connect() as conn:
            return {r.name for r in conn.execute(select(external_tables.c.name))}

    def list(self) -> list[dict[str, Any]]:
        with self.engine.connect() as conn:
            rows = conn.execute(select(external_tables).order_by(external_tables.c.name)).all()
        return [
            {
                "name": r.name,
                "format": r.format,
                "location": r.location,
                "partition_columns": [c[0] for c in json.loads(r.partition_columns)],
                "repaired": r.repaired,
            }
            for r in rows
        ]

    def put(self, table: ExternalTable) -> None:
        values = {
            "columns": json.dumps(table.columns),
            "partition_columns": json.dumps(table.partition_columns),
            "format": table.format,
            "location": table.location,
            "options": json.dumps(table.options),
            "repaired": table.repaired,
            "created_at": database.utcnow(),
            "ddl": table.spark_ddl(),
        }
        with self.engine.begin() as conn:
            database.upsert(conn, external_tables, {"name": table.name}, values)

    def mark_repaired(self, name: str) -> None:
        with self.engine.begin() as conn:
            conn.execute(update(external_tables).where(external_tables.c.name == name).values(repaired=True))

    def remove(self, name: str) -> None:
        with self.engine.begin() as conn:
            conn.execute(delete(external_tables).where(external_tables.c.name == name))


def _is_empty(settings: Settings, location: str) -> bool:
    """Whether no file lies under `location` (a local folder or an s3:// prefix)."""
    if "://" not in location:
        return not Path(location).exists() or not any(Path(location).iterdir())
    if not location.startswith(("s3://", "s3a://")):
        raise SqlError(f"external_location {location}: only local folders and s3:// locations are supported")
    from pyarrow import fs as pafs

    from shoal import storage

    storage.configure(settings.storage)
    client, key = storage.filesystem(location)
    try:
        found = client.get_file_info(pafs.FileSelector(key, recursive=True, allow_not_found=True))
    except OSError as exc:
        raise SqlError(f"cannot list external_location {location}: {exc}") from exc
    return not any(e.type == pafs.FileType.File for e in found)


def run_df(spark: SparkSession, sql: str) -> DataFrame:
    try:
        return spark.sql(sql)
    except Exception as exc:
        raise SqlError(first_line(exc)) from exc


def table_location(location: str) -> str:
    """A LOCATION as Spark needs it: local paths absolute (file:// dropped), URIs as given."""
    if location.startswith("file://"):
        return location.removeprefix("file://")
    if "://" not in location:
        return str(Path(location).expanduser().resolve())
    return location
