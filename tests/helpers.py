from __future__ import annotations

from pathlib import Path

from shoal.cdc import ApplyOptions, ApplyResult, apply_changes
from shoal.config import Settings

HEADER = ["op", "product_id", "category", "name", "quantity", "updated_at"]


def write_csv(folder: Path, name: str, rows: list[list[object]], header: list[str] | None = HEADER) -> Path:
    lines = [",".join(header)] if header else []
    lines += [",".join("" if v is None else str(v) for v in row) for row in rows]
    path = folder / name
    path.write_text("\n".join(lines) + "\n")
    return path


def apply(settings: Settings, source: Path, table: str, **kw: object) -> ApplyResult:
    opts = {"keys": ["product_id"], "sequence": "updated_at"} | kw
    return apply_changes(settings, str(source), ApplyOptions(table=table, **opts))  # type: ignore[arg-type]


def rows(spark, sql: str) -> list[tuple]:
    return [tuple(r) for r in spark.sql(sql).collect()]
