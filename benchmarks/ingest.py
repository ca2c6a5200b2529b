"""Ingest in Spark tasks vs one file after another on the driver, in one run (issue 24).

A synthetic source of N small files in F folders (or any existing folder / `s3://` prefix
with --source) is measured three ways:
  * baseline: the driver alone, one file after another, hashing each and copying it into a
    scratch folder (what `shoal ingest` did before its per-file work moved into tasks);
  * shoal ingest: listing, hashing, sniffing and copying in Spark tasks, the metadata
    commits included;
  * shoal ingest again: nothing new (the no-op re-run).
Ratios are against the baseline of the same run. The baseline counts the per-file work
only (no table creation, no Iceberg commits), so on small local files the ratio shows the
fixed cost of Spark's jobs and commits (measured 2026-11-23 on 2 heavily shared cores, 400
files of 1 KB: baseline 0.25 s, ingest 135 s with the tables' creation, no-op re-run 29 s).
Against an object store, where each file costs round trips, the tasks' parallelism is what
pays; run it there with --source s3://bucket/prefix.

    python benchmarks/ingest.py [--files 2000] [--folders 20] [--source URI] [--json]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import tempfile
import time
from pathlib import Path

from shoal import storage
from shoal.config import load_settings
from shoal.ingest import ingest
from shoal.spark import get_spark


def make_source(root: Path, files: int, folders: int) -> None:
    for i in range(files):
        folder = root / f"folder-{i % folders:03d}" / f"sub-{i % 7}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"note-{i:06d}.txt").write_text(f"Note {i}: shipment {i * 7919 % 10007} left the dock.\n" * 20)


def driver_one_by_one(source: str, scratch: Path) -> int:
    done = 0
    for entry in storage.list_files(source):
        digest = hashlib.sha256()
        with storage.open_input(entry.uri) as f:
            while block := f.read(8 << 20):
                digest.update(block)
        storage.copy(entry.uri, str(scratch / digest.hexdigest()))
        done += 1
    return done


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=2000)
    ap.add_argument("--folders", type=int, default=20)
    ap.add_argument("--source", help="an existing folder or s3:// prefix instead of synthetic files")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="shoal-bench-ingest-"))
    try:
        source = args.source
        if not source:
            make_source(work / "source", args.files, args.folders)
            source = str(work / "source")
        settings = load_settings(workspace=work / "ws")
        spark = get_spark(settings)
        (work / "scratch").mkdir()
        t = time.perf_counter()
        n = driver_one_by_one(source, work / "scratch")
        baseline = time.perf_counter() - t
        t = time.perf_counter()
        first = ingest(spark, settings, source, source_name="bench")
        spread = time.perf_counter() - t
        t = time.perf_counter()
        again = ingest(spark, settings, source, source_name="bench")
        noop = time.perf_counter() - t
        out = {
            "files": n,
            "cores": spark.sparkContext.defaultParallelism,
            "baseline_driver_s": round(baseline, 2),
            "ingest_in_tasks_s": round(spread, 2),
            "reingest_noop_s": round(noop, 2),
            "ratio_ingest_vs_baseline": round(spread / baseline, 2),
            "ratio_noop_vs_baseline": round(noop / baseline, 2),
            "hash_tasks": first.hash_tasks,
            "new": first.count("new") + first.count("duplicate"),
            "unchanged_on_rerun": again.count("unchanged") + again.count("duplicate"),
        }
        print(json.dumps(out) if args.json else "\n".join(f"{k}: {v}" for k, v in out.items()))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
