"""Scoring a table with a registered model on Spark: `shoal model predict --table`.

Each task loads the model once (per process, see `registry.load_predictor`) and predicts
in batches; rows keep the chosen key columns and gain the prediction and model version.
The output table is replaced in one commit, so a failed run leaves the previous one.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any

from shoal.models.base import ModelError
from shoal.models.registry import ModelVersion, load_predictor

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator

    from pyspark.sql import SparkSession

OUTPUT_COLUMNS = (
    "model STRING, model_version STRING, label STRING, score DOUBLE, scores MAP<STRING, DOUBLE>, "
    "output STRING, predicted_at TIMESTAMP"
)


def predict_table(
    spark: SparkSession,
    record: ModelVersion,
    table: str,
    columns: list[str],
    into: str,
    *,
    keep: list[str],
    batch_size: int = 256,
) -> dict[str, Any]:
    from pyspark.sql import types as T

    if not spark.catalog.tableExists(table):
        raise ModelError(f"table {table} does not exist")
    df = spark.table(table)
    known = {c.lower(): c for c in df.columns}
    missing = [c for c in [*columns, *keep] if c.lower() not in known]
    if missing:
        raise ModelError(f"table {table} has no column(s) {', '.join(missing)}; it has {', '.join(df.columns)}")
    # Text models: ONNX string inputs and spaCy; scikit-learn and entry points take whatever the
    # column holds, so one string column means text.
    string_column = len(columns) == 1 and isinstance(df.schema[known[columns[0].lower()]].dataType, T.StringType)
    text_input = record.info.get("input_kind") == "text" or record.kind == "spacy" or string_column
    if text_input and len(columns) != 1:
        raise ModelError(f"model {record.ref} takes text: give exactly one --columns column")
    key_fields = [df.schema[known[c.lower()]] for c in keep]
    out_schema = T.StructType(key_fields).add("model", T.StringType()).add("model_version", T.StringType())
    for name, dtype in (("label", T.StringType()), ("score", T.DoubleType()), ("output", T.StringType())):
        out_schema = out_schema.add(name, dtype)
    out_schema = out_schema.add("scores", T.MapType(T.StringType(), T.DoubleType()))
    payload = record.to_dict()
    cols = [known[c.lower()] for c in columns]
    keep_cols = [known[c.lower()] for c in keep]

    def run(batches: Iterable[Any]) -> Iterator[Any]:  # pandas DataFrames in and out
        import pandas as pd

        predictor = load_predictor(payload)
        for pdf in batches:
            for start in range(0, len(pdf), batch_size):
                chunk = pdf.iloc[start : start + batch_size]
                if text_input:
                    inputs = ["" if v is None else str(v) for v in chunk[cols[0]]]
                else:
                    inputs = chunk[cols].astype("float64").values.tolist()
                preds = predictor.predict(inputs)
                out = chunk[keep_cols].reset_index(drop=True).copy()
                out["model"] = payload["name"]
                out["model_version"] = payload["version"]
                out["label"] = [p.label for p in preds]
                out["score"] = [p.score for p in preds]
                out["output"] = [json.dumps(p.output) for p in preds]
                out["scores"] = [p.scores for p in preds]
                yield pd.DataFrame(out)

    started = time.monotonic()
    from pyspark.sql import functions as F

    result = df.select(*keep_cols, *cols).mapInPandas(run, out_schema).withColumn("predicted_at", F.current_timestamp())
    result.writeTo(into).using("iceberg").createOrReplace()
    rows = spark.table(into).count()
    return {
        "model": record.ref,
        "table": table,
        "into": into,
        "rows": rows,
        "seconds": round(time.monotonic() - started, 2),
    }
