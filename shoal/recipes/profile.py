"""Per-column statistics of a dataset, computed in one Spark aggregation."""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import NumericType, StringType

from shoal.recipes.operations import col


def profile(df: DataFrame, *, top: int = 5) -> dict[str, Any]:
    fields = df.schema.fields
    aggs = [F.count(F.lit(1)).alias("__rows")]
    for i, f in enumerate(fields):
        c = col(f.name)
        aggs += [
            F.count(c).alias(f"{i}_count"),
            F.approx_count_distinct(c).alias(f"{i}_distinct"),
        ]
        if isinstance(f.dataType, NumericType):
            aggs += [
                F.min(c).alias(f"{i}_min"),
                F.max(c).alias(f"{i}_max"),
                F.avg(c).alias(f"{i}_mean"),
                F.stddev(c).alias(f"{i}_stddev"),
            ]
        elif isinstance(f.dataType, StringType):
            aggs += [
                F.min(F.length(c)).alias(f"{i}_min_length"),
                F.max(F.length(c)).alias(f"{i}_max_length"),
                F.sum(F.when(F.trim(c) == "", 1).otherwise(0)).alias(f"{i}_empty"),
            ]
        else:
            aggs += [F.min(c).cast("string").alias(f"{i}_min"), F.max(c).cast("string").alias(f"{i}_max")]
    row = df.agg(*aggs).collect()[0].asDict()  # an aggregate: exactly one row
    rows = row["__rows"]
    columns = []
    for i, f in enumerate(fields):
        stats = {k.split("_", 1)[1]: v for k, v in row.items() if k.startswith(f"{i}_")}
        stats["missing"] = rows - stats.pop("count")
        stats["missing_pct"] = round(100 * stats["missing"] / rows, 2) if rows else 0.0
        if isinstance(stats.get("mean"), float):
            stats["mean"] = round(stats["mean"], 6)
        if isinstance(stats.get("stddev"), float):
            stats["stddev"] = round(stats["stddev"], 6)
        columns.append({"column": f.name, "type": f.dataType.simpleString(), **stats})
    if top:
        for entry in columns:
            counts = df.where(col(entry["column"]).isNotNull()).groupBy(col(entry["column"]).alias("v")).count()
            entry["top_values"] = [
                {"value": r["v"] if isinstance(r["v"], str | int | float | bool) else str(r["v"]), "count": r["count"]}
                for r in counts.orderBy(F.desc("count"), F.asc("v")).limit(top).collect()
            ]
    return {"rows": rows, "columns": columns}
