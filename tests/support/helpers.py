from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from shoal.cdc import ApplyOptions, ApplyResult, apply_changes
from shoal.cli import console
from shoal.config import Settings
from shoal.spark import get_spark

HEADER = ["op", "product_id", "category", "name", "quantity", "updated_at"]


def write_csv(folder: Path, name: str, rows: list[list[object]], header: list[str] | None = HEADER) -> Path:
    lines = [",".join(header)] if header else []
    lines += [",".join("" if v is None else str(v) for v in row) for row in rows]
    path = folder / name
    path.write_text("\n".join(lines) + "\n")
    return path


# The three-row full load most CDC tests start from (product 101-103, loaded at FULL_LOAD_AT).
FULL_LOAD_AT = "2022-03-01 10:00:00"


def write_full_load(source: Path) -> Path:
    return write_csv(
        source,
        "LOAD00000001.csv",
        [
            [None, 101, "tools", "hammer", 10, FULL_LOAD_AT],
            [None, 102, "tools", "saw", 5, FULL_LOAD_AT],
            [None, 103, "garden", "rake", 7, FULL_LOAD_AT],
        ],
    )


def product_state(spark, table: str) -> list[tuple]:
    """The product table's rows, ordered, as the CDC tests compare them."""
    return rows(spark, f"SELECT product_id, category, name, quantity FROM {table} ORDER BY product_id")


def apply(settings: Settings, source: Path, table: str, **kw: object) -> ApplyResult:
    opts = {"keys": ["product_id"], "sequence": "updated_at"} | kw
    return apply_changes(get_spark(settings), settings, str(source), ApplyOptions(table=table, **opts))  # type: ignore[arg-type]


def rows(spark, sql: str) -> list[tuple]:
    return [tuple(r) for r in spark.sql(sql).collect()]


def run_cli(args: list[str], capsys, monkeypatch) -> tuple[int, str, str]:
    monkeypatch.setattr(sys, "argv", ["shoal", *args])
    code = 0
    try:
        console.main()
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def shoal_process(args: list[str], env: dict[str, str], **kw) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "shoal.cli.console", *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **kw,
    )
