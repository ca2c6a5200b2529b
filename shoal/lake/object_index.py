"""`shoal.object_index`: one row per object, linking its raw, extracted and enriched paths with
the facts people filter on. Updated incrementally for the objects a run touched (MERGE).

The extraction facts of an object (status, paths, languages, PII types, counts...) are
computed by the worker that extracted it (`object_facts`), so a refresh never re-aggregates
the result tables; objects a run did not extract keep the facts their index row already has.
"""

from __future__ import annotations

from collections import Counter
from datetime import datetime
from typing import Any

from pyspark.sql import DataFrame, SparkSession

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
WITH obj AS (SELECT * FROM {objects} WHERE object_id IN (SELECT object_id FROM shoal_index_touched)),
latest AS (
  SELECT source_name, source_path, max(version) AS version FROM {objects}
  WHERE (source_name, source_path) IN (SELECT source_name, source_path FROM obj) GROUP BY source_name, source_path
),
kids AS (
  SELECT parent_object_id AS object_id, CAST(count(*) AS INT) AS child_count FROM {objects}
  WHERE parent_object_id IN (SELECT object_id FROM shoal_index_touched) GROUP BY parent_object_id
),
old AS (SELECT * FROM {object_index} WHERE object_id IN (SELECT object_id FROM shoal_index_touched))
SELECT o.object_id, o.source_name, o.source_path, o.file_name, o.raw_path, o.media_type, o.size_bytes, o.sha256,
  o.ingested_at, o.tags, o.parent_object_id, coalesce(kids.child_count, 0) AS child_count, o.version,
  (o.parent_object_id IS NOT NULL OR o.version = latest.version) AS is_latest,
  {facts}
FROM obj o
LEFT JOIN latest ON o.source_name = latest.source_name AND o.source_path = latest.source_path
LEFT JOIN kids ON o.object_id = kids.object_id
LEFT JOIN shoal_index_facts f ON o.object_id = f.object_id
LEFT JOIN old ON o.object_id = old.object_id
"""


def refresh_index(spark: SparkSession, object_ids: list[str], facts: DataFrame | None = None) -> None:
    """Upsert the index rows of these objects (and of other versions of their source paths).

    `facts`: fresh extraction facts (object_id plus the FACTS columns) for objects just
    extracted; every other object keeps the facts of its current index row (or 'pending').
    """
    if not object_ids:
        return
    metadata.ensure_tables(spark, ("objects", "object_index"))
    names = {t: metadata.table(t).sql for t in ("objects", "object_index")}
    ids = metadata.id_frame(spark, sorted(set(object_ids)))
    # Other versions of the same source paths change too (is_latest). Resolved once up front,
    # so every part of the index query joins a small local list instead of recomputing it.
    objects = spark.table(names["objects"])
    paths = objects.join(ids, "object_id", "left_semi").select("source_name", "source_path")
    siblings = objects.join(paths, ["source_name", "source_path"], "left_semi").select("object_id")
    touched = sorted({r.object_id for r in siblings.collect()} | set(object_ids))
    metadata.id_frame(spark, touched).createOrReplaceTempView("shoal_index_touched")
    if facts is None:
        facts = spark.createDataFrame([], FACTS_SCHEMA)
    facts.select("object_id", *FACTS).createOrReplaceTempView("shoal_index_facts")
    fact_sql = ",\n  ".join(
        f"CASE WHEN f.object_id IS NOT NULL THEN f.{c} WHEN old.object_id IS NOT NULL THEN old.{c} "
        f"ELSE CAST({default} AS {typ}) END AS {c}"
        for c, (typ, default) in FACTS.items()
    )
    rows = spark.sql(_INDEX_SQL.format(facts=fact_sql, **names))
    rows.select(*metadata.columns("object_index")).createOrReplaceTempView("shoal_index_fresh")
    spark.sql(
        f"MERGE INTO {names['object_index']} t USING shoal_index_fresh s ON t.object_id = s.object_id "
        "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *"
    )
