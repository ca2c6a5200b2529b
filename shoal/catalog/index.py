"""`shoal.object_index`: one row per object, linking its raw, extracted and enriched paths with
the facts people filter on. Rebuilt incrementally for the objects a run touched (MERGE)."""

from __future__ import annotations

from pyspark.sql import SparkSession

from shoal.lake import metadata

_INDEX_SQL = """
WITH touched AS (SELECT object_id FROM shoal_index_touched),
obj AS (SELECT * FROM {objects} WHERE object_id IN (SELECT object_id FROM touched)),
latest AS (
  SELECT source_name, source_path, max(version) AS version FROM {objects}
  WHERE (source_name, source_path) IN (SELECT source_name, source_path FROM obj) GROUP BY source_name, source_path
),
ex AS (
  SELECT object_id,
    array_sort(collect_list(CASE WHEN stage = 'extract' AND status = 'ok' THEN output_path END)) AS extracted_paths,
    array_sort(collect_list(CASE WHEN stage = 'enrich' AND status = 'ok' THEN output_path END)) AS enriched_paths,
    array_sort(collect_list(CASE WHEN status IN ('error', 'timeout')
      THEN concat(extractor, ' ', status, ': ', coalesce(error, '')) END)) AS errors,
    CASE
      WHEN bool_or(stage = 'extract' AND status IN ('error', 'timeout')) THEN 'error'
      WHEN bool_or(stage = 'extract' AND status = 'skipped') THEN 'skipped'
      WHEN bool_or(status IN ('error', 'timeout')) THEN 'partial'
      ELSE 'ok' END AS status,
    max(extracted_at) AS extracted_at
  FROM {extractions} WHERE object_id IN (SELECT object_id FROM touched) GROUP BY object_id
),
txt AS (
  SELECT object_id, array_sort(collect_set(language)) AS languages FROM {text}
  WHERE object_id IN (SELECT object_id FROM touched) GROUP BY object_id
),
dp AS (
  SELECT object_id, max(title) AS title, max(page_count) AS page_count, sum(char_count) AS char_count
  FROM {document_properties} WHERE object_id IN (SELECT object_id FROM touched) GROUP BY object_id
),
pii AS (
  SELECT object_id, array_sort(collect_set(pii_type)) AS pii_types FROM {pii}
  WHERE object_id IN (SELECT object_id FROM touched) GROUP BY object_id
),
tbl AS (
  SELECT object_id, count(DISTINCT table_index) AS table_count FROM {tables}
  WHERE object_id IN (SELECT object_id FROM touched) GROUP BY object_id
),
ff AS (
  SELECT object_id, count(*) AS form_field_count FROM {form_fields}
  WHERE object_id IN (SELECT object_id FROM touched) GROUP BY object_id
),
ent AS (
  SELECT object_id, map_from_entries(collect_list(struct(label, n))) AS entity_counts FROM (
    SELECT object_id, label, CAST(count(*) AS INT) AS n FROM {entities}
    WHERE object_id IN (SELECT object_id FROM touched) GROUP BY object_id, label
  ) GROUP BY object_id
),
sen AS (
  SELECT object_id, CASE WHEN avg(compound) >= 0.05 THEN 'positive' WHEN avg(compound) <= -0.05 THEN 'negative'
    ELSE 'neutral' END AS sentiment
  FROM {sentiment} WHERE object_id IN (SELECT object_id FROM touched) GROUP BY object_id
),
kids AS (
  SELECT parent_object_id AS object_id, CAST(count(*) AS INT) AS child_count FROM {objects}
  WHERE parent_object_id IN (SELECT object_id FROM touched) GROUP BY parent_object_id
)
SELECT o.object_id, o.source_name, o.source_path, o.file_name, o.raw_path, o.media_type, o.size_bytes, o.sha256,
  o.ingested_at, o.tags, o.parent_object_id, coalesce(kids.child_count, 0) AS child_count, o.version,
  (o.parent_object_id IS NOT NULL OR o.version = latest.version) AS is_latest,
  coalesce(ex.status, 'pending') AS status,
  coalesce(filter(ex.extracted_paths, x -> x IS NOT NULL), array()) AS extracted_paths,
  coalesce(filter(ex.enriched_paths, x -> x IS NOT NULL), array()) AS enriched_paths,
  coalesce(filter(ex.errors, x -> x IS NOT NULL), array()) AS errors,
  coalesce(txt.languages, array()) AS languages,
  pii.pii_types IS NOT NULL AS has_pii,
  coalesce(pii.pii_types, array()) AS pii_types,
  dp.title, CAST(dp.page_count AS INT) AS page_count, dp.char_count,
  CAST(coalesce(tbl.table_count, 0) AS INT) AS table_count,
  CAST(coalesce(ff.form_field_count, 0) AS INT) AS form_field_count,
  coalesce(ent.entity_counts, map()) AS entity_counts,
  sen.sentiment, ex.extracted_at
FROM obj o
LEFT JOIN latest ON o.source_name = latest.source_name AND o.source_path = latest.source_path
LEFT JOIN ex ON o.object_id = ex.object_id
LEFT JOIN txt ON o.object_id = txt.object_id
LEFT JOIN dp ON o.object_id = dp.object_id
LEFT JOIN pii ON o.object_id = pii.object_id
LEFT JOIN tbl ON o.object_id = tbl.object_id
LEFT JOIN ff ON o.object_id = ff.object_id
LEFT JOIN ent ON o.object_id = ent.object_id
LEFT JOIN sen ON o.object_id = sen.object_id
LEFT JOIN kids ON o.object_id = kids.object_id
"""


def refresh_index(spark: SparkSession, object_ids: list[str]) -> None:
    """Recompute the index rows of these objects (and of other versions of their source paths)."""
    if not object_ids:
        return
    metadata.ensure_tables(spark)
    names = {t: metadata.table(t).sql for t in metadata.SCHEMAS}
    ids = spark.createDataFrame([(i,) for i in sorted(set(object_ids))], "object_id STRING")
    # Other versions of the same source paths change too (is_latest). Resolved once up front,
    # so every part of the index query joins a small local list instead of recomputing it.
    objects = spark.table(names["objects"])
    paths = objects.join(ids, "object_id", "left_semi").select("source_name", "source_path")
    siblings = objects.join(paths, ["source_name", "source_path"], "left_semi").select("object_id")
    touched = sorted({r.object_id for r in siblings.collect()} | set(object_ids))
    spark.createDataFrame([(i,) for i in touched], "object_id STRING").createOrReplaceTempView("shoal_index_touched")
    fresh = spark.sql(_INDEX_SQL.format(**names))
    columns = metadata.columns("object_index")
    fresh.select(*columns).createOrReplaceTempView("shoal_index_fresh")
    spark.sql(
        f"MERGE INTO {names['object_index']} t USING shoal_index_fresh s ON t.object_id = s.object_id "
        "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *"
    )
