"""`shoal.object_index`: one row per object, linking its raw, extracted and enriched paths with
the facts people filter on. Updated incrementally for the objects a run touched (MERGE, reading
and rewriting only their buckets; an append when none of them is indexed yet).

The extraction facts of an object (status, paths, languages, PII types, counts...) are
computed by the worker that extracted it (`object_facts`), so a refresh never re-aggregates
the result tables; objects a run did not extract keep the facts their index row already has.
"""

from __future__ import annotations

from collections import Counter
from datetime import datetime
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from shoal.exceptions import ShoalError
from shoal.lake import metadata

# Index columns that come from extraction, with their value while an object is pending.
FACTS: dict[str, tuple[str, str]] = {
    "status": ("STRING", "'pending'"),
    "extracted_paths": ("ARRAY<STRING>", "array()"),
    "enriched_paths": ("ARRAY<STRING>", "array()"),
    "errors": ("ARRAY<STRING>", "array()"),
    "languages": ("ARRAY<STRING>", "array()"),
    "has_pii": ("BOOLEAN", "false"),
    "pii_types": ("ARRAY<STRING>", "array()"),
    "title": ("STRING", "NULL"),
    "page_count": ("INT", "NULL"),
    "char_count": ("BIGINT", "NULL"),
    "table_count": ("INT", "0"),
    "form_field_count": ("INT", "0"),
    "entity_counts": ("MAP<STRING, INT>", "map()"),
    "sentiment": ("STRING", "NULL"),
    "extracted_at": ("TIMESTAMP", "NULL"),
}
FACTS_SCHEMA = "object_id STRING, " + ", ".join(f"{k} {t}" for k, (t, _d) in FACTS.items())


def _sentiment(compounds: list[float]) -> str | None:
    if not compounds:
        return None
    avg = sum(compounds) / len(compounds)
    return "positive" if avg >= 0.05 else "negative" if avg <= -0.05 else "neutral"


def object_facts(
    steps: list[dict[str, Any]],
    rows: dict[str, list[dict[str, Any]]],
    extracted_at: datetime,
    optional: frozenset[str] = frozenset(),
) -> dict:
    """One object's index facts from its extraction steps and the rows they produced.

    `steps`: dicts with extractor, stage, status, error, output_path;
    `rows`: table name -> that object's rows (text, pii, entities, sentiment, document_properties...);
    `optional`: extractors whose failure makes the object partial, not failed (media analysers).
    """

    def failed(stage: str | None, statuses: tuple[str, ...]) -> bool:
        return any(
            s["status"] in statuses and (stage is None or (s["stage"] == stage and s["extractor"] not in optional))
            for s in steps
        )

    if failed("extract", ("error", "timeout")):
        status = "error"
    elif failed("extract", ("skipped",)):
        status = "skipped"
    elif failed(None, ("error", "timeout")):
        status = "partial"
    else:
        status = "ok"
    props = rows.get("document_properties", [])
    pii_types = sorted({p["pii_type"] for p in rows.get("pii", [])})
    return {
        "status": status,
        "extracted_paths": sorted(s["output_path"] for s in steps if s["stage"] == "extract" and s["status"] == "ok"),
        "enriched_paths": sorted(s["output_path"] for s in steps if s["stage"] == "enrich" and s["status"] == "ok"),
        "errors": sorted(
            f"{s['extractor']} {s['status']}: {s['error'] or ''}" for s in steps if s["status"] in ("error", "timeout")
        ),
        "languages": sorted({t["language"] for t in rows.get("text", []) if t.get("language")}),
        "has_pii": bool(pii_types),
        "pii_types": pii_types,
        "title": max((p["title"] for p in props if p.get("title")), default=None),
        "page_count": max((p["page_count"] for p in props if p.get("page_count") is not None), default=None),
        "char_count": sum(p["char_count"] for p in props) if props else None,
        "table_count": len({(t["part"], t["table_index"]) for t in rows.get("tables", [])}),
        "form_field_count": len(rows.get("form_fields", [])),
        "entity_counts": dict(Counter(e["label"] for e in rows.get("entities", []))),
        "sentiment": _sentiment([s["compound"] for s in rows.get("sentiment", [])]),
        "extracted_at": extracted_at,
    }


_INDEX_SQL = """
SELECT o.object_id, o.source_name, o.source_path, o.file_name, o.raw_path, o.media_type, o.size_bytes, o.sha256,
  o.ingested_at, o.tags, o.parent_object_id,
  coalesce(kids.child_count, old.child_count, 0) AS child_count, o.version,
  CASE WHEN o.parent_object_id IS NOT NULL THEN true
       WHEN latest.version IS NOT NULL THEN o.version = latest.version
       WHEN old.object_id IS NOT NULL THEN old.is_latest
       ELSE true END AS is_latest,
  {facts}
FROM shoal_index_obj o
LEFT JOIN shoal_index_latest latest ON o.source_name = latest.source_name AND o.source_path = latest.source_path
LEFT JOIN shoal_index_kids kids ON o.object_id = kids.object_id
LEFT JOIN shoal_index_facts f ON o.object_id = f.object_id
LEFT JOIN shoal_index_old old ON o.object_id = old.object_id
"""


def refresh_index(
    spark: SparkSession,
    object_ids: list[str],
    facts: DataFrame | None = None,
    child_ids: list[str] | None = None,
) -> None:
    """Upsert the index rows of these objects (and of other versions of their source paths).

    `facts`: fresh extraction facts (object_id plus the FACTS columns) for objects just
    extracted; every other object keeps the facts of its current index row (or 'pending').
    `child_ids`: the child objects these objects' extraction produced (new or known), whose
    parents' child_count is recounted; other objects keep their count.

    Reads and rewrites only the affected objects' rows: every lookup is by object id, so
    Iceberg opens just the files of their buckets. Only a new version of a source path
    looks up the path's other versions (their is_latest flips), by path.
    """
    if not object_ids:
        return
    metadata.ensure_tables(spark, ("objects", "object_index"))
    names = {t: metadata.table(t).sql for t in ("objects", "object_index")}
    objects = spark.table(names["objects"])
    index = spark.table(names["object_index"])
    ids = sorted(set(object_ids))
    # A new version (not yet indexed, version > 1) demotes the other versions of its path.
    fresh_versions = (
        metadata.for_ids(spark, objects, ids)
        .where(F.col("parent_object_id").isNull() & (F.col("version") > 1))
        .select("object_id", "source_name", "source_path")
        .join(metadata.for_ids(spark, index.select("object_id"), ids), "object_id", "left_anti")
        .select("source_name", "source_path")
        .distinct()
        .collect()
    )
    versions = []
    if fresh_versions:
        paths = spark.createDataFrame(fresh_versions, "source_name STRING, source_path STRING")
        versions = (
            objects.where(F.col("parent_object_id").isNull())
            .join(paths, ["source_name", "source_path"], "left_semi")
            .select("object_id", "source_name", "source_path", "version")
            .collect()
        )
    touched = sorted(set(ids) | {r.object_id for r in versions})
    latest: dict[tuple[str, str], int] = {}
    for r in versions:
        key = (r.source_name, r.source_path)
        latest[key] = max(latest.get(key, 0), r.version)
    spark.createDataFrame(
        [(*k, v) for k, v in latest.items()], "source_name STRING, source_path STRING, version INT"
    ).createOrReplaceTempView("shoal_index_latest")
    metadata.for_ids(spark, objects, touched).createOrReplaceTempView("shoal_index_obj")
    metadata.for_ids(spark, index, touched).createOrReplaceTempView("shoal_index_old")
    kids = (
        metadata.for_ids(spark, objects, child_ids or [])
        .where(F.col("parent_object_id").isin(touched) if len(touched) <= metadata.IN_LIST_LIMIT else F.lit(True))
        .groupBy(F.col("parent_object_id").alias("object_id"))
        .agg(F.count(F.lit(1)).cast("int").alias("child_count"))
    )
    kids.createOrReplaceTempView("shoal_index_kids")
    if facts is None:
        facts = spark.createDataFrame([], FACTS_SCHEMA)
    facts.select("object_id", *FACTS).createOrReplaceTempView("shoal_index_facts")
    fact_sql = ",\n  ".join(
        f"CASE WHEN f.object_id IS NOT NULL THEN f.{c} WHEN old.object_id IS NOT NULL THEN old.{c} "
        f"ELSE CAST({default} AS {typ}) END AS {c}"
        for c, (typ, default) in FACTS.items()
    )
    # Computed once: checked, then written (an append or the MERGE's source).
    rows = spark.sql(_INDEX_SQL.format(facts=fact_sql)).select(*metadata.columns("object_index")).persist()
    try:
        _one_row_each(rows)
        if not spark.table("shoal_index_old").limit(1).count():
            # Brand-new objects only (the usual run): nothing to update, so an append, not a MERGE.
            rows.writeTo(names["object_index"]).append()
            return
        rows.createOrReplaceTempView("shoal_index_fresh")
        # The target-side `IN` list is pushed to the index scan: only the touched buckets are read.
        scope = f" AND t.object_id IN {metadata.ids_sql(touched)}" if len(touched) <= metadata.IN_LIST_LIMIT else ""
        spark.sql(
            f"MERGE INTO {names['object_index']} t USING shoal_index_fresh s ON t.object_id = s.object_id{scope} "
            "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *"
        )
    finally:
        rows.unpersist()


def _one_row_each(rows: DataFrame) -> None:
    """Refuse, before writing, fresh index rows with two for one object (two objects rows or
    two facts rows of one id): an append would write both, and so would the MERGE for an
    object not indexed yet (it refuses only a target row that two source rows match)."""
    twice = [r.object_id for r in rows.groupBy("object_id").count().where(F.col("count") > 1).limit(3).collect()]
    if twice:
        raise ShoalError(
            f"shoal.object_index: objects with two fresh index rows each ({', '.join(twice)}); nothing written",
            hint="each object needs one shoal.objects row and one extraction per run",
        )
