"""Recipe ConditionExpressions benchmark: a recipe whose steps carry conditions vs the same
recipe without them vs the same work written by hand as Spark `when` expressions.

All three run in this one process on the same generated rows (made inside the JVM) and are
forced with Spark's no-op writer, so the printed ratios are comparable; absolute times drift
2-3x between runs on shared machines.

    python benchmarks/recipe_conditions.py                 # 1M rows
    python benchmarks/recipe_conditions.py --rows 200000 --json

Expectation: conditions cost little over the plain recipe (the step runs once, and the
result is chosen per row), and the conditional recipe stays close to the hand-written one.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from pyspark.sql import functions as F

from shoal.config import load_settings
from shoal.recipes import apply_recipe
from shoal.spark import get_spark

CONDITION = [{"Condition": "GREATER_THAN", "Value": "500", "TargetColumn": "amount"}]


def recipe(conditions: list | None) -> list[dict]:
    def step(op: str, **params: str) -> dict:
        s: dict = {"Action": {"Operation": op, "Parameters": params}}
        if conditions:
            s["ConditionExpressions"] = conditions
        return s

    return [
        step("UPPER_CASE", sourceColumn="name"),
        step("ADD_PREFIX", sourceColumn="code", pattern="X-"),
        step("ROUND", sourceColumn="amount", decimalPlaces="1"),
        step("FLAG_COLUMN_FROM_PATTERN", sourceColumn="name", pattern="7$", targetColumn="sevens"),
        step("MASK_RANGE", sourceColumns='["code"]', maskSymbol="#", start="0", stop="3"),
    ]


def by_hand(df):
    big = F.col("amount") > 500
    masked = F.concat(
        F.regexp_replace(F.substring(F.concat(F.lit("X-"), "code"), 1, 3), ".", "#"),
        F.substring(F.concat(F.lit("X-"), "code"), 4, 1 << 30),
    )
    return df.select(
        "id",
        F.when(big, F.upper("name")).otherwise(F.col("name")).alias("name"),
        F.when(big, masked).otherwise(F.col("code")).alias("code"),
        F.when(big, F.round("amount", 1)).otherwise(F.col("amount")).alias("amount"),
        F.when(big, F.col("name").rlike("7$")).alias("sevens"),
    )


def timed(fn) -> float:
    start = time.perf_counter()
    fn().write.format("noop").mode("overwrite").save()
    return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=3, help="best of N per contender")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    workspace = Path(tempfile.mkdtemp(prefix="shoal-bench-"))
    spark = get_spark(load_settings(workspace=workspace))
    source = spark.range(args.rows).select(
        "id",
        F.concat(F.lit("name "), F.col("id").cast("string")).alias("name"),
        F.lpad((F.col("id") % 100000).cast("string"), 6, "0").alias("code"),
        ((F.col("id") * 37) % 1000 + 0.25).alias("amount"),
    )
    source = source.cache()
    source.count()
    contenders = {
        "plain": lambda: apply_recipe(source, recipe(None), lambda ref: None),
        "conditional": lambda: apply_recipe(source, recipe(CONDITION), lambda ref: None),
        "hand_written": lambda: by_hand(source),
    }
    timed(contenders["plain"])  # warm-up: code generation, JIT
    best = {name: min(timed(fn) for _ in range(args.repeat)) for name, fn in contenders.items()}
    result = {
        "rows": args.rows,
        "seconds": {k: round(v, 3) for k, v in best.items()},
        "conditional_vs_plain": round(best["conditional"] / best["plain"], 2),
        "conditional_vs_hand_written": round(best["conditional"] / best["hand_written"], 2),
    }
    if args.json:
        print(json.dumps(result))
    else:
        for k, v in result["seconds"].items():
            print(f"{k:>14}: {v:.3f} s")
        print(f"conditional / plain:        {result['conditional_vs_plain']}x")
        print(f"conditional / hand-written: {result['conditional_vs_hand_written']}x")


if __name__ == "__main__":
    main()
