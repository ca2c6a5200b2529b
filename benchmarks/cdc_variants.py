"""Issue 45: the comparison's variants, each apply beside its own plain append, in one process.

    python benchmarks/cdc_variants.py --rows 1000000 --changes 200000 --variants path,hash,shj,path,hash,shj

Variants (the same code, two of its choices switched off in this process only):
- `path`: the comparison carries each table row's data file path (the code before issue 45);
- `hash`: it carries a 64-bit hash of the path instead (mapped back at the commit);
- `shj`: `hash` plus shuffled hash joins built on the batch (off by default: no gain measured).

Interleave the variants (and repeat them): on a shared machine the load moves absolute times
3-4x; each line prints the append and apply of that round, their ratio, the comparison step
and the 1-minute load average at its start and end.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import cdc_merge as cm

from shoal.cdc import ApplyOptions, apply_changes, batch, rowdelta
from shoal.config import load_settings
from shoal.spark import get_spark

SCHEMA = (
    "op string, product_id bigint, category string, name string, quantity bigint, price double, updated_at timestamp"
)
COMPARING = "validating, deduplicating and comparing with the table"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--changes", type=int, default=200_000)
    ap.add_argument("--variants", default="path,hash,shj,path,hash,shj")
    args = ap.parse_args()

    ws = Path(tempfile.mkdtemp(prefix="shoal-cdc-variants-"))
    settings = load_settings(workspace=ws / "lake", spark={"driver_memory": "4g"})
    spark = get_spark(settings)
    spark.sql("CREATE NAMESPACE IF NOT EXISTS bench")
    cm.create_base(spark, args.rows)
    src = ws / "changes"
    cm.write_change_files(cm.change_rows(args.rows, args.changes), src, 8)
    warm = ws / "warm"
    cm.write_change_files(cm.change_rows(100, 10), warm, 1)
    apply_changes(
        spark, settings, str(warm), ApplyOptions(table="bench.warm", keys=["product_id"], sequence="updated_at")
    )
    file_ids = rowdelta.file_ids
    for i, variant in enumerate(args.variants.split(",")):
        cm.copy_base(spark, f"bench.append{i}", "merge-on-read")
        load0, t0 = os.getloadavg()[0], time.perf_counter()
        spark.read.csv(str(src), header=True, schema=SCHEMA).drop("op").writeTo(f"bench.append{i}").append()
        append_s = time.perf_counter() - t0
        cm.copy_base(spark, f"bench.apply{i}", "merge-on-read")
        rowdelta.file_ids = file_ids if variant != "path" else (lambda *_a, **_k: None)
        batch.HASH_JOIN_ON_BATCH = variant == "shj"
        steps: dict[str, float] = {}
        t0 = time.perf_counter()

        def say(msg: str, t0: float = t0, steps: dict[str, float] = steps) -> None:
            steps[msg] = time.perf_counter() - t0

        opts = ApplyOptions(table=f"bench.apply{i}", keys=["product_id"], sequence="updated_at", op_column="Op")
        r = apply_changes(spark, settings, str(src), opts, say=say)
        apply_s = time.perf_counter() - t0
        comparison = steps.get("recording deleted keys", steps.get("merging into the table", 0)) - steps.get(
            COMPARING, 0
        )
        print(
            f"{variant:5s} append {append_s:6.2f} s  apply {apply_s:6.2f} s  = {apply_s / append_s:4.2f}x  "
            f"(comparison {comparison:5.2f} s)  load {load0:.1f}->{os.getloadavg()[0]:.1f}  "
            f"({r.inserted:,} ins, {r.updated:,} upd, {r.deleted:,} del)",
            flush=True,
        )


if __name__ == "__main__":
    main()
