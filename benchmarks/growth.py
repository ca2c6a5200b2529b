"""Growth: how the cost of a no-op and of a small increment grows with the lake (issue 24).

Measured in one run, one SparkSession, each size in a lake of its own (SQLite catalog and
local warehouse, registered in the session as catalog `growth_<label>`):

  * `extract` with 0 and with 100 new objects over catalogs of --objects objects;
  * `cdc apply` with no new file and with one small new file after --files applied files;
  * `search-index` with no new chunk and with 100 new chunks over --chunks indexed chunks;
  * (for information, no target) `ingest` of the 100 new files into a source of that size.

How a lake reaches its size, fairly and fast:
  * objects: a seed of real text files goes through the real `ingest`, `run_extract` and
    `search-index`; then the seed's rows in every `shoal.*` table are copied, through Spark
    DataFrames, into as many objects as the size asks (new object id, sha256 and source path
    per copy; every other column as the real run wrote it, so no schema is written here).
    The lake then holds N extracted objects with their text, extraction records, index rows
    and paths, written in one append per table (a compacted lake: few data files).
  * chunks: the seed's rows in the search index's `chunks` and `objects` tables are copied the
    same way (copies keep the seed's text, so its digest still matches, and get the seed's
    vector plus noise, so the HNSW graph is not built over duplicates); the HNSW and keyword
    indexes are then built by the index's own code. Only the seed is embedded by the model;
    the 100 new chunks of each timed run are embedded for real (`[search]` model and backend).
  * applied CDC files: --files small change files (3 inserts, 1 update, 1 delete each) are
    applied with the real `apply_changes` in batches of --files-per-apply files (one commit
    each), so the ledger, the table, its snapshots and its tombstones hold them all.
The new objects are real text files, ingested and extracted by the real code. Text routes to
the `text` extractor only (`[extract] routes`), so the timed work is the lake bookkeeping,
not the NLP enrichers (whose cost per new object does not depend on the lake).

Times are medians of --reps runs (each increment run brings new work; the no-op extract, decided
from table metadata in milliseconds, runs at least 15 times when --reps is above 1). Target: for every
operation the time at the largest size is at most 2x the time at the smallest.

    python benchmarks/growth.py                  # the issue's sizes (takes a long while)
    python benchmarks/growth.py --quick          # 1k/10k objects, 10/100 files, 1k/10k chunks
    python benchmarks/growth.py --objects 10000,100000 --files 10,1000 --only extract,cdc --json
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import random
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

TARGET = 2.0
NOOP_REPS = 15  # runs of the no-op extract per size (at least), where --reps asks for more than one
SOURCE = "docs"  # seed, copies and new files share one source, as a growing folder would
ROUTES = {"text/plain": ["text"]}
QUICK = {"objects": [1_000, 10_000], "files": [10, 100], "chunks": [1_000, 10_000]}
ISSUE = {"objects": [10_000, 100_000, 1_000_000], "files": [10, 1_000, 10_000], "chunks": [10_000, 100_000]}
OPERATIONS = (  # name, axis, key in a size's measurements, has a target
    ("extract, no new object", "objects", "extract_noop", True),
    ("extract, catch-up after the copy (info)", "objects", "extract_catchup", False),
    ("extract, {new} new objects", "objects", "extract_new", True),
    ("ingest, {new} new files (info)", "objects", "ingest_new", False),
    ("cdc apply, no new file", "files", "cdc_noop", True),
    ("cdc apply, 1 new file", "files", "cdc_one", True),
    ("search-index, no new chunk", "chunks", "search_noop", True),
    ("search-index, {new} new chunks", "chunks", "search_new", True),
)


@dataclass
class Config:
    objects: list[int] = field(default_factory=lambda: list(ISSUE["objects"]))
    files: list[int] = field(default_factory=lambda: list(ISSUE["files"]))
    chunks: list[int] = field(default_factory=lambda: list(ISSUE["chunks"]))
    new: int = 100
    reps: int = 3
    seed: int = 20
    files_per_apply: int = 1_000
    only: tuple[str, ...] = ("extract", "cdc", "search")
    warmup: bool = True


# ---- lakes ------------------------------------------------------------------------------------
def open_lake(spark, root: Path, label: str):
    """Settings of a fresh lake under root/label, its catalog registered in this session and made current."""
    from shoal.config import load_settings
    from shoal.private import private_dir
    from shoal.spark import catalog_conf, renew_catalog_connections

    # A session keeps each catalog it has loaded: every lake gets a name never used before.
    name = f"growth_{uuid.uuid4().hex[:8]}_{label.replace('-', '_')}"
    settings = load_settings(workspace=root / label, catalog={"name": name}, extract={"routes": ROUTES})
    private_dir(settings.workspace_dir)
    private_dir(Path(settings.warehouse_uri))
    for key, value in catalog_conf(settings).items():
        spark.conf.set(key, value)
    spark.catalog.setCurrentCatalog(settings.catalog.name)
    renew_catalog_connections(spark, settings)
    return settings


def _search_benchmark() -> Any:
    """benchmarks/search.py (its text generator), loaded by path: `search` is no package name here."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("search_benchmark", Path(__file__).resolve().parent / "search.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def write_texts(folder: Path, n: int, tag: str, rng: random.Random) -> None:
    """n small text files (about 80 words: one search chunk each), unique by their tag line."""
    text = _search_benchmark().text
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        (folder / f"{tag}-{i:05d}.txt").write_text(f"{tag} {i}\n{text(rng, 80)}\n")


def copy_rows(spark, seed_ids: list[str], copies: int) -> None:
    """Append `copies` copies of the seed objects' rows to every metadata table holding them."""
    from pyspark.sql import functions as F

    from shoal.lake import metadata

    if copies <= 0:
        return
    ids = metadata.id_frame(spark, seed_ids)
    existing = {r.tableName for r in spark.sql(f"SHOW TABLES IN `{metadata.NAMESPACE}`").collect()}
    n = spark.range(1, copies + 1, 1, max(2, copies * len(seed_ids) // 250_000)).withColumnRenamed("id", "_copy")
    for name in metadata.SCHEMAS:
        if name not in existing:
            continue
        table = metadata.table(name).sql
        rows = spark.table(table).join(ids, "object_id", "left_semi")
        if rows.isEmpty():
            continue
        copy = F.col("_copy").cast("string")
        changed = {"object_id": F.md5(F.concat_ws("#", "object_id", copy))}
        for col, expr in (
            ("sha256", F.sha2(F.concat_ws("#", "sha256", copy), 256)),
            ("source_path", F.concat(F.lit("copy"), copy, F.lit("/"), F.col("source_path"))),
            (
                "parent_object_id",
                F.when(F.col("parent_object_id").isNotNull(), F.md5(F.concat_ws("#", "parent_object_id", copy))),
            ),
        ):
            if col in rows.columns:
                changed[col] = expr
        out = rows.crossJoin(n).select(*[changed.get(c, F.col(c)).alias(c) for c in rows.columns])
        out.writeTo(table).append()


def copy_id(object_id: str, copy: int) -> str:
    """The id copy_rows gives copy `copy` of an object (Spark's md5 of 'id#copy')."""
    return hashlib.md5(f"{object_id}#{copy}".encode()).hexdigest()


def copy_chunks(settings, seed_ids: list[str], copies: int) -> None:
    """Copy the seed objects' chunks into the search index, as copy_rows copied their rows."""
    from shoal.search.index import SearchIndex

    index = SearchIndex(settings)
    rng = np.random.default_rng(7)
    with index.connect() as conn:
        cols = [r[1] for r in conn.execute("PRAGMA table_info(chunks)") if r[1] != "chunk_id"]
        marks = ",".join("?" * len(cols))
        seed = ",".join("?" * len(seed_ids))
        chunks = conn.execute(f"SELECT {', '.join(cols)} FROM chunks WHERE object_id IN ({seed})", seed_ids).fetchall()
        objects = conn.execute(
            f"SELECT object_id, digest, model, chunks FROM objects WHERE object_id IN ({seed})", seed_ids
        ).fetchall()
        oid, path, vec = cols.index("object_id"), cols.index("source_path"), cols.index("vector")
        for start in range(1, copies + 1, 1_000):
            batch = []
            for c in range(start, min(copies, start + 999) + 1):
                for row in chunks:
                    v = np.frombuffer(row[vec], dtype=np.float32) + rng.normal(0, 0.05, len(row[vec]) // 4).astype(
                        np.float32
                    )
                    r = list(row)
                    r[oid], r[path], r[vec] = (
                        copy_id(row[oid], c),
                        f"copy{c}/{row[path]}",
                        (v / np.linalg.norm(v)).tobytes(),
                    )
                    batch.append(r)
            conn.executemany(f"INSERT INTO chunks ({', '.join(cols)}) VALUES ({marks})", batch)
            conn.executemany(
                "INSERT INTO objects (object_id, digest, model, chunks) VALUES (?, ?, ?, ?)",
                [(copy_id(o[0], c), *o[1:]) for c in range(start, min(copies, start + 999) + 1) for o in objects],
            )
    index.rebuild_ann()
    index.rebuild_keywords()


# ---- the operations, as the CLI calls them -----------------------------------------------------
def ingest_folder(spark, settings, folder: Path) -> list[str]:
    from shoal.ingest import ingest

    result = ingest(spark, settings, str(folder), source_name=SOURCE)
    errors = [f for f in result.files if f.status == "error"]
    if errors:
        raise SystemExit(f"ingest failed: {errors[0]}")
    return result.new_object_ids


def extract(spark, settings) -> Any:
    from shoal.extract import run_extract

    return run_extract(spark, settings)


def search_index(spark, settings) -> Any:
    from shoal.search.index import SearchIndex

    s = settings.search
    return SearchIndex(settings).update(spark, model=s.model, size=s.chunk_size, overlap=s.chunk_overlap)


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


# ---- one lake per size -------------------------------------------------------------------------
def object_lake(spark, root: Path, n: int, cfg: Config, *, time_extract: bool, time_search: bool, log) -> dict:
    """A lake of n extracted objects (and n indexed chunks if time_search): the timings at that size."""
    label = f"objects-{n}"
    t0 = time.perf_counter()
    settings = open_lake(spark, root, label)
    rng = random.Random(n)
    work = root / label / "incoming"
    seed = min(cfg.seed, n)
    write_texts(work / "seed", seed, "seed", rng)
    seed_ids = ingest_folder(spark, settings, work / "seed")
    extract(spark, settings)
    if time_search:
        search_index(spark, settings)
    copies = -(-n // seed) - 1
    log(f"  {label}: seed ready ({time.perf_counter() - t0:.0f} s); copying {seed} seed objects {copies:,} times")
    copy_rows(spark, seed_ids, copies)
    if time_search:
        copy_chunks(settings, seed_ids, copies)
    log(f"  {label}: lake ready ({time.perf_counter() - t0:.0f} s)")
    out: dict[str, Any] = {}
    from shoal.lake import metadata

    out["lake_objects"] = spark.table(metadata.table("objects").sql).count()
    if time_extract:
        # The copies were appended behind the extraction mark (no real run adds objects that
        # way), so the first extract reads them all once to move the mark: a catch-up, reported
        # apart, not a no-op. A lake that grows through ingest + extract never pays it.
        s, res = timed(lambda: extract(spark, settings))
        if res.objects:
            raise SystemExit(f"{label}: the catch-up extract found {res.objects} objects to do")
        out["extract_catchup"] = s
        secs = []
        # A no-op is decided from table metadata in milliseconds: more runs keep its median steady.
        for _ in range(max(cfg.reps, NOOP_REPS) if cfg.reps > 1 else cfg.reps):
            s, res = timed(lambda: extract(spark, settings))
            if res.objects:
                raise SystemExit(f"{label}: the no-op extract found {res.objects} objects to do")
            secs.append(s)
        out["extract_noop"] = statistics.median(secs)
    if time_search:
        secs = []
        for _ in range(cfg.reps):
            s, res = timed(lambda: search_index(spark, settings))
            if res.objects_indexed or res.objects_removed or res.objects_unchanged != out["lake_objects"]:
                raise SystemExit(f"{label}: the no-op search-index did work (copied chunks not recognised): {res}")
            secs.append(s)
        out["search_noop"] = statistics.median(secs)
        out["lake_chunks"] = res.chunks_total
    ingest_s, extract_s, search_s = [], [], []
    for r in range(cfg.reps):
        write_texts(work / f"new-{r}", cfg.new, f"new{r}", rng)
        s, ids = timed(lambda r=r: ingest_folder(spark, settings, work / f"new-{r}"))
        ingest_s.append(s)
        s, res = timed(lambda: extract(spark, settings))
        if res.objects != cfg.new or len(ids) != cfg.new:
            raise SystemExit(f"{label}: extract did {res.objects} objects, {len(ids)} were ingested, not {cfg.new}")
        extract_s.append(s)
        if time_search:
            s, res = timed(lambda: search_index(spark, settings))
            if res.objects_indexed != cfg.new or res.chunks_added != cfg.new:
                raise SystemExit(f"{label}: search-index embedded {res.chunks_added} chunks, not {cfg.new}")
            search_s.append(s)
    out["ingest_new"] = statistics.median(ingest_s)
    if time_extract:
        out["extract_new"] = statistics.median(extract_s)
    if time_search:
        out["search_new"] = statistics.median(search_s)
        out["lake_chunks_after"] = res.chunks_total
    return out


def change_file(folder: Path, i: int) -> None:
    """Change file i: inserts keys 3i..3i+2, updates key 3(i-1), deletes key 3(i-2)+1."""
    lines = ["op,product_id,name,quantity,updated_at"]
    ts = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(1_704_067_200 + i))
    lines += [f"I,{3 * i + k},product {3 * i + k},{(i * 7 + k) % 1000},{ts}" for k in range(3)]
    if i >= 1:
        lines.append(f"U,{3 * (i - 1)},product {3 * (i - 1)} v2,{i % 1000},{ts}")
    if i >= 2:
        lines.append(f"D,{3 * (i - 2) + 1},,,{ts}")
    (folder / f"changes-{i:07d}.csv").write_text("\n".join(lines) + "\n")


def cdc_lake(spark, root: Path, files: int, cfg: Config, log) -> dict:
    from shoal.cdc import ApplyOptions, apply_changes, file_status

    label = f"files-{files}"
    settings = open_lake(spark, root, label)
    source = root / label / "changes"
    source.mkdir(parents=True)
    opts = ApplyOptions(table="growth.products", keys=["product_id"], sequence="updated_at")
    applies = 0
    for start in range(0, files, cfg.files_per_apply):
        for i in range(start, min(files, start + cfg.files_per_apply)):
            change_file(source, i)
        apply_changes(spark, settings, str(source), opts)
        applies += 1
    log(f"  {label}: {files:,} files applied in {applies} commits")
    out: dict[str, Any] = {
        "applied_files": len(file_status(spark, settings, opts.table)["applied"]),
        "applies": applies,
    }
    secs = []
    for _ in range(cfg.reps):
        s, res = timed(lambda: apply_changes(spark, settings, str(source), opts))
        if res.files_applied:
            raise SystemExit(f"{label}: the no-op apply applied {res.files_applied}")
        secs.append(s)
    out["cdc_noop"] = statistics.median(secs)
    secs = []
    for r in range(cfg.reps):
        change_file(source, files + r)
        s, res = timed(lambda: apply_changes(spark, settings, str(source), opts))
        if len(res.files_applied) != 1 or not res.committed:
            raise SystemExit(f"{label}: applying one new file applied {res.files_applied}")
        secs.append(s)
    out["cdc_one"] = statistics.median(secs)
    return out


# ---- the run -----------------------------------------------------------------------------------
def run(spark, cfg: Config, root: Path, log: Callable[[str], None] = lambda _m: None) -> dict:
    """Every size of every operation; restores the session's current catalog afterwards."""
    previous = spark.catalog.currentCatalog()
    sizes: dict[int, dict[str, Any]] = {}
    cdc: dict[int, dict[str, Any]] = {}
    started = time.perf_counter()
    try:
        if cfg.warmup:  # Python workers, the embedding model and the JIT warm before any timing
            log("warm-up lake")
            tiny = Config(objects=[20], files=[2], chunks=[20], new=5, reps=1, seed=10, files_per_apply=2)
            if "extract" in cfg.only or "search" in cfg.only:
                search = "search" in cfg.only
                object_lake(spark, root / "warmup", 20, tiny, time_extract=True, time_search=search, log=log)
            if "cdc" in cfg.only:
                cdc_lake(spark, root / "warmup", 2, tiny, log)
        wanted = sorted(
            set(cfg.objects if "extract" in cfg.only else []) | set(cfg.chunks if "search" in cfg.only else [])
        )
        for n in wanted:
            log(f"lake of {n:,} objects")
            t = time.perf_counter()
            sizes[n] = object_lake(
                spark,
                root,
                n,
                cfg,
                time_extract="extract" in cfg.only and n in cfg.objects,
                time_search="search" in cfg.only and n in cfg.chunks,
                log=log,
            )
            log(f"  done in {time.perf_counter() - t:.0f} s: {json.dumps(_rounded(sizes[n]))}")
        if "cdc" in cfg.only:
            for f in sorted(cfg.files):
                log(f"CDC table after {f:,} applied files")
                t = time.perf_counter()
                cdc[f] = cdc_lake(spark, root, f, cfg, log)
                log(f"  done in {time.perf_counter() - t:.0f} s: {json.dumps(_rounded(cdc[f]))}")
    finally:
        spark.catalog.setCurrentCatalog(previous)
    return report(cfg, sizes, cdc, time.perf_counter() - started)


def _rounded(d: dict) -> dict:
    return {k: _seconds(v) if isinstance(v, float) else v for k, v in d.items()}


def _seconds(s: float) -> float:
    """4 significant digits: a no-op extract takes milliseconds, and its ratio is read from these."""
    return float(f"{s:.4g}")


def report(cfg: Config, sizes: dict[int, dict], cdc: dict[int, dict], total_s: float) -> dict:
    operations = []
    for name, axis, key, has_target in OPERATIONS:
        source = cdc if axis == "files" else sizes
        axis_sizes = {"objects": cfg.objects, "files": cfg.files, "chunks": cfg.chunks}[axis]
        seconds = {n: source[n][key] for n in sorted(axis_sizes) if n in source and key in source[n]}
        if not seconds:
            continue
        small, large = min(seconds), max(seconds)
        ratio = seconds[large] / seconds[small] if len(seconds) > 1 else None
        operations.append(
            {
                "operation": name.format(new=cfg.new),
                "axis": axis,
                "seconds": {str(n): _seconds(s) for n, s in seconds.items()},
                "ratio_largest_to_smallest": round(ratio, 2) if ratio is not None else None,
                "target": TARGET if has_target else None,
                "meets_target": (ratio <= TARGET) if has_target and ratio is not None else None,
            }
        )
    return {
        "sizes": {"objects": cfg.objects, "files": cfg.files, "chunks": cfg.chunks},
        "new": cfg.new,
        "reps": cfg.reps,
        "files_per_apply": cfg.files_per_apply,
        "operations": operations,
        "lakes": {
            "objects": {str(n): _rounded(v) for n, v in sizes.items()},
            "cdc": {str(n): _rounded(v) for n, v in cdc.items()},
        },
        "machine": {"cores": os.cpu_count(), "platform": platform.platform(), "load_avg_1min_end": os.getloadavg()[0]},
        "total_seconds": round(total_s, 1),
    }


def print_table(rep: dict) -> None:
    for axis, unit in (("objects", "objects"), ("files", "applied files"), ("chunks", "indexed chunks")):
        ops = [o for o in rep["operations"] if o["axis"] == axis]
        if not ops:
            continue
        sizes = list(ops[0]["seconds"])
        width = max(len(o["operation"]) for o in ops)
        print(
            f"\n{'seconds at ' + unit:<{width}}  " + "  ".join(f"{int(s):>10,}" for s in sizes) + "   largest/smallest"
        )
        for o in ops:
            cells = "  ".join(f"{o['seconds'].get(s, float('nan')):>10.4g}" for s in sizes)
            ratio = o["ratio_largest_to_smallest"]
            verdict = "" if o["target"] is None else ("PASS" if o["meets_target"] else "MISS")
            shown = "-" if ratio is None else f"{ratio:.2f}x"
            target = f"(target <= {o['target']:g}x) {verdict}" if o["target"] is not None else "(no target)"
            print(f"{o['operation']:<{width}}  {cells}   {shown:>6} {target}")
    print(f"\ntotal {rep['total_seconds']:.0f} s, {rep['machine']['cores']} cores")


def _sizes(text: str) -> list[int]:
    try:
        out = sorted({int(x.replace("_", "")) for x in text.split(",") if x.strip()})
    except ValueError:
        raise argparse.ArgumentTypeError(f"sizes are comma-separated whole numbers, not {text!r}") from None
    if not out or out[0] < 1:
        raise argparse.ArgumentTypeError(f"sizes must be at least 1: {text!r}")
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="small sizes: " + json.dumps(QUICK))
    ap.add_argument("--objects", type=_sizes, help="catalog sizes for extract (default 10000,100000,1000000)")
    ap.add_argument("--files", type=_sizes, help="applied CDC files (default 10,1000,10000)")
    ap.add_argument("--chunks", type=_sizes, help="indexed chunks for search-index (default 10000,100000)")
    ap.add_argument("--new", type=int, default=100, help="new objects (and chunks) per increment")
    ap.add_argument("--reps", type=int, default=3, help="runs per measurement (the median is reported)")
    ap.add_argument("--seed", type=int, default=20, help="real objects the synthetic ones are copied from")
    ap.add_argument("--files-per-apply", type=int, default=1_000, help="files per commit while filling the ledger")
    ap.add_argument("--only", default="extract,cdc,search", help="operations to measure")
    ap.add_argument("--no-warmup", action="store_true")
    ap.add_argument("--workspace", type=Path, help="kept if given; a temporary folder otherwise")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    base = QUICK if args.quick else ISSUE
    only = tuple(x.strip() for x in args.only.split(",") if x.strip())
    if bad := [x for x in only if x not in ("extract", "cdc", "search")]:
        ap.error(f"--only takes extract, cdc, search, not {', '.join(bad)}")
    cfg = Config(
        objects=args.objects or list(base["objects"]),
        files=args.files or list(base["files"]),
        chunks=args.chunks or list(base["chunks"]),
        new=args.new,
        reps=args.reps,
        seed=args.seed,
        files_per_apply=args.files_per_apply,
        only=only,
        warmup=not args.no_warmup,
    )
    from shoal.config import load_settings
    from shoal.spark import get_spark

    root = args.workspace or Path(tempfile.mkdtemp(prefix="shoal-growth-"))
    log = (lambda _m: None) if args.json else (lambda m: print(m, file=sys.stderr, flush=True))
    spark = get_spark(load_settings(workspace=root / "session", spark={"driver_memory": "4g"}))
    try:
        rep = run(spark, cfg, root, log)
    finally:
        if args.workspace is None:
            shutil.rmtree(root, ignore_errors=True)
    if args.json:
        print(json.dumps(rep, indent=2))
    else:
        print_table(rep)


if __name__ == "__main__":
    main()
