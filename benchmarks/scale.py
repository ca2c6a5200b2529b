"""Scale-out: the CDC merge on 1 vs 2 workers, local disk vs S3, in one run.

The benchmark starts its own servers on loopback: a Spark standalone cluster with two
workers (`shoal cluster up`) and, for the S3 runs, SeaweedFS. Each configuration runs in a
fresh process (a SparkSession's master and storage are fixed at start), on the same
generated base table and change batch (benchmarks/cdc_merge.py), with the catalog in SQLite.
"1 worker" caps the application at one executor core (spark.cores.max=1) on the same
cluster, so both runs see the same JVMs and only the parallelism differs.

    python benchmarks/scale.py [--rows 500000] [--changes 100000] [--json]

Ratios are printed against "1 worker, local disk", measured in the same run.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the loopback SeaweedFS helper the tests use (tests.support.servers)
sys.path.insert(0, str(ROOT / "benchmarks"))


def one(cfg: dict) -> dict:
    """Run in a child process: base table + change files + one timed `apply_changes`."""
    from cdc_merge import change_rows, copy_base, create_base, write_change_files

    from shoal import storage
    from shoal.cdc import ApplyOptions, apply_changes
    from shoal.config import load_settings
    from shoal.spark import get_spark

    overrides: dict = {
        "workspace": cfg["workspace"],
        "spark": {
            "master": cfg["master"],
            "shuffle_partitions": 4,
            "conf": {"spark.cores.max": str(cfg["cores"]), "spark.executor.cores": "1", "spark.executor.memory": "2g"},
        },
    }
    if cfg.get("s3"):
        s3 = cfg["s3"]
        overrides["warehouse"] = f"s3://{s3['bucket']}/warehouse-{cfg['label']}"
        overrides["storage"] = {
            "endpoint": s3["endpoint"],
            "access_key": s3["access_key"],
            "secret_key": s3["secret_key"],
        }
    settings = load_settings(**overrides)
    spark = get_spark(settings)
    spark.sql("CREATE NAMESPACE IF NOT EXISTS bench")
    create_base(spark, cfg["rows"])
    copy_base(spark, "bench.target", "merge-on-read")
    local = Path(cfg["workspace"]) / "changes"
    write_change_files(change_rows(cfg["rows"], cfg["changes"]), local, 8)
    source = str(local)
    if cfg.get("s3"):  # the change files land in the bucket too
        source = f"s3://{cfg['s3']['bucket']}/changes-{cfg['label']}"
        for f in sorted(local.iterdir()):
            storage.copy(str(f), f"{source}/{f.name}")
    warm = Path(cfg["workspace"]) / "warm"
    write_change_files(change_rows(100, 10), warm, 1)
    apply_changes(
        spark, settings, str(warm), ApplyOptions(table="bench.warm", keys=["product_id"], sequence="updated_at")
    )
    t0 = time.perf_counter()
    res = apply_changes(
        spark, settings, source, ApplyOptions(table="bench.target", keys=["product_id"], sequence="updated_at")
    )
    secs = time.perf_counter() - t0
    return {"label": cfg["label"], "seconds": round(secs, 2), "changes": res.rows_read, "committed": res.committed}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=500_000)
    ap.add_argument("--changes", type=int, default=100_000)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--one", help=argparse.SUPPRESS)  # internal: a child run's JSON config
    args = ap.parse_args()
    if args.one:
        print("RESULT " + json.dumps(one(json.loads(args.one))))
        return

    from shoal import cluster
    from shoal.config import load_settings
    from tests.support.servers import free_port, seaweedfs

    log = (lambda *_: None) if args.json else (lambda m: print(m, file=sys.stderr))
    with tempfile.TemporaryDirectory(prefix="shoal-scale-") as tmp:
        tmp_path = Path(tmp)
        cl_settings = load_settings(
            workspace=tmp_path / "cluster-ws",
            cluster={"port": free_port(), "webui_port": free_port(), "workers": 2, "worker_memory": "3g"},
        )
        log("starting a 2-worker Spark cluster and SeaweedFS")
        state = cluster.up(cl_settings)
        (tmp_path / "s3").mkdir()
        try:
            with seaweedfs(tmp_path / "s3") as s3:
                s3cfg = {
                    "endpoint": s3.endpoint,
                    "access_key": s3.access_key,
                    "secret_key": s3.secret_key,
                    "bucket": s3.bucket,
                }
                runs = []
                for label, cores, use_s3 in (
                    ("1 worker, local disk", 1, False),
                    ("2 workers, local disk", 2, False),
                    ("1 worker, S3", 1, True),
                    ("2 workers, S3", 2, True),
                ):
                    slug = label.replace(" ", "-").replace(",", "")
                    cfg = {
                        "label": slug,
                        "workspace": str(tmp_path / slug),
                        "master": state.master_url,
                        "cores": cores,
                        "rows": args.rows,
                        "changes": args.changes,
                        "s3": s3cfg if use_s3 else None,
                    }
                    log(f"{label}: applying {args.changes:,} changes to {args.rows:,} rows ...")
                    env = {k: v for k, v in os.environ.items() if not k.startswith("SHOAL_")}
                    done = subprocess.run(
                        [sys.executable, __file__, "--one", json.dumps(cfg)],
                        capture_output=True,
                        text=True,
                        env=env,
                        timeout=3600,
                    )
                    line = next((x for x in done.stdout.splitlines() if x.startswith("RESULT ")), None)
                    if line is None:
                        raise SystemExit(f"{label} failed:\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}")
                    result = json.loads(line[7:]) | {"label": label}
                    runs.append(result)
                    log(f"  {result['seconds']:.1f} s")
        finally:
            cluster.down(cl_settings)
    base = runs[0]["seconds"]
    for r in runs:
        r["ratio_vs_1_worker_local"] = round(r["seconds"] / base, 2)
        r["changes_per_s"] = round(r["changes"] / r["seconds"])
    report = {"rows": args.rows, "changes": args.changes, "runs": runs}
    if args.json:
        print(json.dumps(report, indent=2))
        return
    print(f"CDC apply, {args.changes:,} changes into {args.rows:,} rows (merge-on-read), Spark standalone cluster:")
    for r in runs:
        print(
            f"  {r['label']:24s} {r['seconds']:7.1f} s  {r['changes_per_s']:>7,} changes/s  x{r['ratio_vs_1_worker_local']:.2f}"
        )


if __name__ == "__main__":
    main()
