"""CDC merge benchmark: `shoal cdc apply` vs PyIceberg `Table.upsert` vs a plain Iceberg append.

All three run in this one process on the same generated batch, each against its own copy
of the same base table, so the printed ratios are comparable (absolute times drift 2-3x
between runs on shared machines; ratios within a run do not).

    python benchmarks/cdc_merge.py                       # 5M-row table, 1M changes
    python benchmarks/cdc_merge.py --rows 500000 --changes 100000 --json
    python benchmarks/cdc_merge.py --format dms-parquet --modes merge-on-read   # another source

With `--format` the batch is written as that tool writes it (DMS Parquet with `Op`, Debezium
JSON envelopes one per line) and the floor appends the same files read by Spark.

Targets (issue #2): apply within 2x of the plain append; at least 3x faster than PyIceberg.
Issue #21: peak driver RSS (JVM + Python) under 4 GB at the default scale; reported per step.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
from memory import peak_rss_mb, reset_peak_rss
from pyspark.sql import functions as F

from shoal.cdc import ApplyOptions, apply_changes
from shoal.config import load_settings
from shoal.spark import get_spark

CATEGORIES = np.array([f"cat{i:02d}" for i in range(10)])
BASE_TS = np.datetime64("2022-03-01T00:00:00", "us")


def create_base(spark, n: int) -> None:
    """The base table, generated inside the JVM (fast), copied per contender below."""
    spark.sql("DROP TABLE IF EXISTS bench.base")
    spark.sql(
        f"""CREATE TABLE bench.base USING iceberg AS
            SELECT id AS product_id,
                   concat('cat', lpad(CAST(id % 10 AS string), 2, '0')) AS category,
                   concat('product ', id) AS name,
                   (id * 7) % 1000 AS quantity,
                   CAST(id % 10000 AS double) / 100.0 AS price,
                   TIMESTAMP '2022-03-01 00:00:00' AS updated_at
            FROM range({n})"""
    )


def copy_base(spark, table: str, mode: str) -> None:
    spark.sql(f"DROP TABLE IF EXISTS {table}")
    spark.sql(
        f"""CREATE TABLE {table} USING iceberg PARTITIONED BY (category, bucket(16, product_id))
            TBLPROPERTIES ('format-version' = '2', 'write.delete.mode' = '{mode}',
                           'write.update.mode' = '{mode}', 'write.merge.mode' = '{mode}')
            AS SELECT * FROM bench.base"""
    )


def change_rows(n_rows: int, n_changes: int, seed: int = 42) -> pa.Table:
    """70% updates, 15% inserts, 10% deletes, 5% repeated events for keys already changed."""
    rng = np.random.default_rng(seed)
    n_upd, n_ins, n_del = int(n_changes * 0.70), int(n_changes * 0.15), int(n_changes * 0.10)
    n_dup = n_changes - n_upd - n_ins - n_del
    existing = rng.choice(n_rows, size=n_upd + n_del, replace=False)
    upd, dele = existing[:n_upd], existing[n_upd:]
    ins = np.arange(n_rows, n_rows + n_ins)
    dup = rng.choice(upd, size=n_dup)
    ids = np.concatenate([upd, ins, dele, dup]).astype(np.int64)
    ops = np.array(["U"] * n_upd + ["I"] * n_ins + ["D"] * n_del + ["U"] * n_dup)
    secs = np.concatenate([rng.integers(3600, 86400, n_upd + n_ins + n_del), np.full(n_dup, 90000)])
    ts = BASE_TS + secs.astype("timedelta64[s]")
    return pa.table(
        {
            "op": ops,
            "product_id": ids,
            "category": CATEGORIES[(ids + 1) % 10],  # every update also moves partition
            "name": pa.array([f"product {i} v2" for i in ids]),
            "quantity": rng.integers(0, 1000, len(ids)).astype(np.int64),
            "price": rng.integers(0, 10_000, len(ids)).astype(np.float64) / 100.0,
            "updated_at": pa.array(ts, pa.timestamp("us")),
        }
    )


def _debezium_lines(part: pa.Table) -> list[str]:
    """Debezium JSON envelopes (schemas.enable=true) for the rows of `part`."""
    fields = [
        {"type": "int64", "optional": False, "field": "product_id"},
        {"type": "string", "optional": True, "field": "category"},
        {"type": "string", "optional": True, "field": "name"},
        {"type": "int64", "optional": True, "field": "quantity"},
        {"type": "double", "optional": True, "field": "price"},
        {"type": "int64", "optional": True, "name": "io.debezium.time.MicroTimestamp", "field": "updated_at"},
    ]
    schema = {
        "type": "struct",
        "name": "bench.products.Envelope",
        "fields": [
            {"type": "struct", "optional": True, "field": "before", "fields": fields},
            {"type": "struct", "optional": True, "field": "after", "fields": fields},
            {"type": "struct", "field": "source", "fields": [{"type": "int64", "field": "ts_ms"}]},
            {"type": "string", "field": "op"},
        ],
    }
    head = json.dumps(schema)
    micros = pc.cast(part["updated_at"], pa.int64()).to_pylist()
    lines = []
    for r, us in zip(part.drop_columns(["op", "updated_at"]).to_pylist(), micros, strict=True):
        lines.append(r | {"updated_at": us})
    ops = part["op"].to_pylist()
    out = []
    for op, row, us in zip(ops, lines, micros, strict=True):
        payload = {
            "before": row if op == "D" else None,
            "after": None if op == "D" else row,
            "source": {"ts_ms": us // 1000},
            "op": {"I": "c", "U": "u", "D": "d"}[op],
        }
        out.append('{"schema": ' + head + ', "payload": ' + json.dumps(payload) + "}")
    return out


def write_change_files(changes: pa.Table, folder: Path, files: int, fmt: str = "dms-csv") -> None:
    folder.mkdir(parents=True, exist_ok=True)
    per = -(-changes.num_rows // files)
    for i in range(files):
        part = changes.slice(i * per, per)
        if fmt == "dms-parquet":
            pq.write_table(
                part.rename_columns(["Op", *part.column_names[1:]]), folder / f"20220302-{1134010000 + i}.parquet"
            )
            continue
        if fmt == "debezium-json":
            name = f"bench.products+0+{i * per:010d}.json"
            (folder / name).write_text("\n".join(_debezium_lines(part)) + "\n")
            continue
        opts = pacsv.WriteOptions(include_header=True, quoting_style="needed")
        part = part.set_column(6, "updated_at", pc.strftime(part["updated_at"], "%Y-%m-%d %H:%M:%S"))
        pacsv.write_csv(part, folder / f"20220302-{1134010000 + i}.csv", opts)


def timed(fn) -> tuple[float, object]:
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=5_000_000)
    ap.add_argument("--changes", type=int, default=1_000_000)
    ap.add_argument("--files", type=int, default=8, help="change files the batch is split into")
    ap.add_argument("--workspace", type=Path, default=None, help="kept if given; a temp folder otherwise")
    ap.add_argument("--skip-pyiceberg", action="store_true")
    ap.add_argument(
        "--pyiceberg-max-changes",
        type=int,
        default=50_000,
        help="PyIceberg upsert runs on at most this many changes of the batch (it takes hours on 1M); "
        "its rows/s is compared with Shoal's",
    )
    ap.add_argument("--format", default="dms-csv", choices=["dms-csv", "dms-parquet", "debezium-json"])
    ap.add_argument("--modes", default="merge-on-read,copy-on-write", help="row-level write modes to time")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    workspace = args.workspace or Path(tempfile.mkdtemp(prefix="shoal-bench-"))
    settings = load_settings(workspace=workspace / "lake", spark={"driver_memory": "4g"})
    spark = get_spark(settings)
    spark.sql("CREATE NAMESPACE IF NOT EXISTS bench")
    log = (lambda *_: None) if args.json else print

    log(f"generating {args.rows:,} base rows and {args.changes:,} changes ...")
    create_base(spark, args.rows)
    changes = change_rows(args.rows, args.changes)
    src = workspace / "changes"
    write_change_files(changes, src, args.files, args.format)
    results: dict[str, dict] = {}

    # 1. The floor: read the same change files with Spark and append them.
    copy_base(spark, "bench.append_floor", "merge-on-read")
    schema = "op string, product_id bigint, category string, name string, quantity bigint, price double, updated_at timestamp"

    def append() -> None:
        if args.format == "dms-parquet":
            df = spark.read.parquet(str(src)).drop("Op")
        elif args.format == "debezium-json":
            row = "product_id:bigint,category:string,name:string,quantity:bigint,price:double,updated_at:bigint"
            df = spark.read.json(str(src), schema=f"payload struct<after:struct<{row}>>")
            df = df.select("payload.after.*").where("product_id IS NOT NULL")
            df = df.withColumn("updated_at", F.timestamp_micros("updated_at"))
        else:
            df = spark.read.csv(str(src), header=True, schema=schema).drop("op")
        df.writeTo("bench.append_floor").append()

    reset_peak_rss(spark)
    secs, _ = timed(append)
    results["iceberg_append"] = {"seconds": secs, "peak_rss": peak_rss_mb(spark)}
    log(f"plain Iceberg append:       {secs:8.2f} s")

    # 2. Shoal, in both row-level write modes. A tiny warm-up batch first, so neither mode
    #    pays the one-off start of Spark's Python workers (a CLI call pays it once, ~5 s).
    warm = workspace / "warmup"
    write_change_files(change_rows(100, 10), warm, 1)
    secs, _ = timed(
        lambda: apply_changes(
            spark, settings, str(warm), ApplyOptions(table="bench.warmup", keys=["product_id"], sequence="updated_at")
        )
    )
    results["warmup"] = {"seconds": secs, "changes": 10}
    log(f"warm-up apply (10 changes):  {secs:8.2f} s")

    for mode in args.modes.split(","):
        table = f"bench.shoal_{mode.replace('-', '_')}"
        copy_base(spark, table, mode)
        seq = "" if args.format == "debezium-json" else "updated_at"
        opts = ApplyOptions(table=table, keys=["product_id"], sequence=seq, format=args.format, op_column="Op")
        t0 = time.perf_counter()

        def step(msg: str, t0: float = t0) -> None:
            log(f"    {time.perf_counter() - t0:7.2f} s  {msg}")

        reset_peak_rss(spark)
        secs, res = timed(lambda opts=opts: apply_changes(spark, settings, str(src), opts, say=step))
        results[f"shoal_{mode}"] = {"seconds": secs, "result": res.to_dict(), "peak_rss": peak_rss_mb(spark)}
        log(
            f"shoal cdc apply ({mode}): {secs:8.2f} s  ({res.inserted:,} ins, {res.updated:,} upd, {res.deleted:,} del)"
        )

    # 3. PyIceberg upsert on the same batch (deduplicated: upsert needs unique keys; deletes
    #    are a separate delete call because upsert has no delete operation).
    if not args.skip_pyiceberg:
        from pyiceberg.catalog.sql import SqlCatalog
        from pyiceberg.expressions import In
        from pyiceberg.transforms import BucketTransform, IdentityTransform

        cat = SqlCatalog(settings.catalog.name, uri=settings.catalog_sqlalchemy_uri, warehouse=settings.warehouse_uri)
        ident = "bench.pyiceberg_upsert"
        if cat.table_exists(ident):
            cat.drop_table(ident)
        base = cat.load_table("bench.base").scan().to_arrow()
        base_arrow = base.cast(base.schema.set(0, pa.field("product_id", pa.int64(), nullable=False)))
        tbl = cat.create_table(ident, schema=base_arrow.schema)
        with tbl.update_spec() as spec:
            spec.add_field("category", IdentityTransform(), "category")
            spec.add_field("product_id", BucketTransform(16), "product_id_bucket")
        tbl.append(base_arrow)
        del base, base_arrow

        sample = changes.slice(0, min(args.pyiceberg_max_changes, changes.num_rows))

        def upsert() -> None:
            df = sample.to_pandas()
            df = df.sort_values(["product_id", "updated_at"], kind="stable").drop_duplicates("product_id", keep="last")
            deletes = df[df.op == "D"].product_id.tolist()
            upserts = pa.Table.from_pandas(df[df.op != "D"].drop(columns=["op"]), preserve_index=False)
            upserts = upserts.set_column(5, "updated_at", pc.assume_timezone(upserts["updated_at"], "UTC"))
            upserts = upserts.cast(tbl.schema().as_arrow())
            tbl.upsert(upserts, join_cols=["product_id"])
            if deletes:
                tbl.delete(In("product_id", deletes))

        secs, _ = timed(upsert)
        results["pyiceberg_upsert"] = {"seconds": secs, "changes": sample.num_rows}
        log(f"PyIceberg upsert + delete:  {secs:8.2f} s  (on {sample.num_rows:,} of the changes)")

    floor = results["iceberg_append"]["seconds"]
    best_mode = min(args.modes.split(","), key=lambda m: results[f"shoal_{m}"]["seconds"])
    summary = {
        "rows": args.rows,
        "changes": args.changes,
        "rows_per_second": {
            k: round(v.get("changes", args.changes) / v["seconds"]) for k, v in results.items() if k != "warmup"
        },
        "apply_vs_append": {m: round(results[f"shoal_{m}"]["seconds"] / floor, 2) for m in args.modes.split(",")},
        "faster_mode": best_mode,
    }
    if "pyiceberg_upsert" in results:
        rps = summary["rows_per_second"]
        summary["pyiceberg_vs_apply"] = {
            m: round(rps[f"shoal_{m}"] / rps["pyiceberg_upsert"], 2) for m in args.modes.split(",")
        }
    summary["seconds"] = {k: round(v["seconds"], 2) for k, v in results.items()}
    summary["peak_driver_rss_mb"] = {k: v["peak_rss"] for k, v in results.items() if "peak_rss" in v}
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        print("\nrows/s:", json.dumps(summary["rows_per_second"]))
        print("shoal apply / plain append (target <= 2):", json.dumps(summary["apply_vs_append"]))
        if "pyiceberg_vs_apply" in summary:
            print(
                "shoal apply speed-up over PyIceberg upsert, rows/s (target >= 3):",
                json.dumps(summary["pyiceberg_vs_apply"]),
            )
        print("faster row-level mode:", best_mode)
        print("peak driver RSS, MB (JVM since each step's start; Python over the run):")
        for k, v in summary["peak_driver_rss_mb"].items():
            print(f"    {k:28s} {json.dumps(v)}")
    if args.workspace is None:
        shutil.rmtree(workspace, ignore_errors=True)


if __name__ == "__main__":
    main()
