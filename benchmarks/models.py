"""Registered models on Spark: a text classifier (ONNX and skops) scoring a table of texts.

Baseline: the same ONNX model called in this process on the same texts, in batches of 256.
The Spark runs go through `shoal model predict --table` code (`predict_table`): rows to Python
workers, one model load per worker, batches of 256, results written to an Iceberg table.

    python benchmarks/models.py [--rows 50000] [--json]

The model is the small TF-IDF + logistic-regression classifier the tests train
(tests/support/sample_models.py); ratios are against the in-process baseline measured in the same run.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # tests.support.sample_models

WORDS = [
    "invoice",
    "amount",
    "due",
    "bill",
    "payment",
    "terms",
    "vat",
    "subtotal",
    "resume",
    "education",
    "skills",
    "work",
    "experience",
    "references",
    "support",
    "ticket",
    "refund",
    "please",
    "help",
    "not",
    "working",
    "customer",
    "service",
    "order",
    "delivery",
    "coffee",
    "grinder",
    "kettle",
]


def texts(n: int) -> list[str]:
    rng = random.Random(11)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 40))) for _ in range(n)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=50_000)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    from shoal.config import load_settings
    from shoal.models import load_predictor, register_model
    from shoal.models.score import predict_table
    from shoal.spark import get_spark, stop_spark
    from tests.support import sample_models

    work = Path(tempfile.mkdtemp(prefix="shoal-bench-models-"))
    settings = load_settings(workspace=work / "ws")
    spark = get_spark(settings)
    data = texts(args.rows)
    onnx, _ = register_model(
        settings, "bench_onnx", str(sample_models.text_onnx(work / "c.onnx")), labels=sample_models.LABELS
    )
    skops, _ = register_model(settings, "bench_skops", str(sample_models.text_skops(work / "c.skops")))

    predictor = load_predictor(onnx)
    started = time.perf_counter()
    for i in range(0, len(data), 256):
        predictor.predict(data[i : i + 256])
    baseline = time.perf_counter() - started

    spark.sql("CREATE NAMESPACE IF NOT EXISTS bench")
    spark.createDataFrame([(i, t) for i, t in enumerate(data)], "id INT, body STRING").writeTo(
        "bench.texts"
    ).createOrReplace()
    results = {"in-process ONNX (baseline)": baseline}
    for name, record in (("Spark, ONNX", onnx), ("Spark, skops", skops)):
        predict_table(spark, record, "bench.texts", ["body"], "bench.warm", keep=["id"])  # warm the workers
        started = time.perf_counter()
        out = predict_table(spark, record, "bench.texts", ["body"], f"bench.scored_{record.name}", keep=["id"])
        results[name] = time.perf_counter() - started
        assert out["rows"] == args.rows
    stop_spark()

    report = {
        name: {"seconds": round(s, 2), "rows_per_s": round(args.rows / s), "ratio": round(s / baseline, 2)}
        for name, s in results.items()
    }
    if args.json:
        print(json.dumps({"rows": args.rows, "results": report}))
        return
    print(f"{args.rows} texts, 2 local cores")
    for name, r in report.items():
        print(f"  {name:28s} {r['seconds']:7.2f} s  {r['rows_per_s']:8d} rows/s  x{r['ratio']}")


if __name__ == "__main__":
    main()
