"""Glue job benchmark: the AWS CDC reference script through `shoal glue run`, against baselines.

Everything runs in this one process on the same generated files (absolute times drift 2-3x
between runs on shared machines; ratios within a run do not):

1. first run: the Glue script (docs/examples/glue/iceberg_cdc.py) over a full load and
   K-1 change files vs `shoal cdc apply` of the same files (the native path);
2. incremental run after one more change file: with the job bookmark (reads 1 file) vs the
   same script with bookmarks disabled (reads every file again).

Both tables must end up equal; the script exits non-zero when they do not.

    python benchmarks/glue.py                          # 200k rows, 10 change files of 20k
    python benchmarks/glue.py --rows 50000 --files 4 --changes 5000 --json
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from datetime import datetime, timedelta
from pathlib import Path

from shoal.catalog.crawl import crawl
from shoal.cdc import ApplyOptions, apply_changes
from shoal.config import load_settings
from shoal.glue import bookmarks, run_script
from shoal.spark import get_spark

SCRIPT = Path(__file__).parent.parent / "docs" / "examples" / "glue" / "iceberg_cdc.py"
HEADER = "op,product_id,category,product_name,quantity_available,last_update_time\n"
BASE = datetime(2022, 3, 1)


def write_load(folder: Path, rows: int) -> None:
    stamp = BASE.strftime("%Y-%m-%d %H:%M:%S")
    with open(folder / "LOAD00000001.csv", "w") as f:
        f.write(HEADER)
        for i in range(rows):
            f.write(f"I,{i},cat{i % 10},product{i},{i % 100},{stamp}\n")


def write_changes(folder: Path, index: int, rows: int, total: int) -> None:
    """Updates of existing keys and new inserts, one distinct timestamp per row (no ties)."""
    start = BASE + timedelta(days=index + 1)
    name = start.strftime("%Y%m%d-%H%M%S") + "0000.csv"
    with open(folder / name, "w") as f:
        f.write(HEADER)
        for j in range(rows):
            stamp = (start + timedelta(seconds=j)).strftime("%Y-%m-%d %H:%M:%S")
            if j % 5 == 0:
                key = total + index * rows + j  # a new product
                f.write(f"I,{key},cat{key % 10},product{key},{j % 100},{stamp}\n")
            else:
                key = (index * 7919 + j * 104729) % total
                f.write(f"U,{key},cat{key % 10},product{key},{(j + index) % 100},{stamp}\n")


def timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=200_000, help="rows in the full load")
    ap.add_argument("--files", type=int, default=10, help="change files")
    ap.add_argument("--changes", type=int, default=20_000, help="rows per change file")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    root = Path(tempfile.mkdtemp(prefix="shoal-glue-bench-"))
    try:
        settings = load_settings(workspace=root / "ws", spark={"shuffle_partitions": 4})
        spark = get_spark(settings)
        raw = root / "raw"
        raw.mkdir()
        write_load(raw, args.rows)
        for i in range(args.files - 1):
            write_changes(raw, i, args.changes, args.rows)
        crawl(spark, settings, str(raw), "bench.raw_csv_input")
        spark.sql(
            "CREATE TABLE bench.iceberg_output (product_id bigint, category string, product_name string, "
            "quantity_available bigint, last_update_time timestamp) USING iceberg"
        )
        job_args = ["--iceberg_job_catalog_warehouse", "s3://unused", "--database_name", "bench"]
        opts = ApplyOptions(table="bench.by_cdc_apply", keys=["product_id"], sequence="last_update_time")

        def glue(option: str) -> None:
            run_script(settings, str(SCRIPT), "bench-cdc", job_args, bookmark_option=option)

        glue_first = timed(lambda: glue(bookmarks.ENABLE))
        cdc_first = timed(lambda: apply_changes(spark, settings, str(raw), opts))
        write_changes(raw, args.files - 1, args.changes, args.rows)
        glue_bookmarked = timed(lambda: glue(bookmarks.ENABLE))
        glue_everything = timed(lambda: glue(bookmarks.DISABLE))
        apply_changes(spark, settings, str(raw), opts)

        cols = "product_id, category, product_name, quantity_available, last_update_time"
        diff = spark.sql(
            f"(SELECT {cols} FROM bench.iceberg_output EXCEPT SELECT {cols} FROM bench.by_cdc_apply) UNION ALL "
            f"(SELECT {cols} FROM bench.by_cdc_apply EXCEPT SELECT {cols} FROM bench.iceberg_output)"
        ).count()
        result = {
            "rows": args.rows,
            "change_files": args.files,
            "rows_per_change_file": args.changes,
            "table_rows": spark.table("bench.iceberg_output").count(),
            "rows_differing_from_cdc_apply": diff,
            "first_run_s": {"glue_script": round(glue_first, 2), "cdc_apply": round(cdc_first, 2)},
            "first_run_glue_vs_cdc_apply": round(glue_first / cdc_first, 2),
            "incremental_run_s": {"bookmark": round(glue_bookmarked, 2), "no_bookmark": round(glue_everything, 2)},
            "incremental_no_bookmark_vs_bookmark": round(glue_everything / glue_bookmarked, 2),
        }
        if args.json:
            print(json.dumps(result, indent=2))
        else:
            for k, v in result.items():
                print(f"{k:40} {v}")
        if diff:
            raise SystemExit(f"the Glue job's table differs from cdc apply's in {diff} rows")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
