"""The metadata layer's Iceberg tables (namespace `shoal`): what ingest and extraction write.

One definition per table, so ingest, extraction and the catalog agree on names and columns.
Every table keys its rows by `object_id`, the content hash of a raw object.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from shoal.lake.tables import TableName

NAMESPACE = "shoal"

# Column DDL per table. Order matters: rows are built as JSON and parsed with these schemas.
SCHEMAS: dict[str, str] = {
    "objects": (
        "object_id STRING, raw_path STRING, source_path STRING, "
        "source_name STRING, media_type STRING, size_bytes BIGINT, sha256 STRING, "
        "ingested_at TIMESTAMP, tags MAP<STRING, STRING>, parent_object_id STRING, "
        "file_name STRING, version INT, depth INT"
    ),
    # Every (source, path) where ingest saw an object's content: identical content under many
    # paths is one object but keeps all its paths. A path whose content changed points at the
    # new object; first_seen is when the path was first ingested, last_seen the latest run that saw it.
    "object_sources": (
        "object_id STRING, source_name STRING, source_path STRING, first_seen TIMESTAMP, last_seen TIMESTAMP"
    ),
    "extractions": (
        "object_id STRING, extractor STRING, extractor_version STRING, stage STRING, "
        "status STRING, error STRING, output_path STRING, duration_ms BIGINT, extracted_at TIMESTAMP, run_id STRING"
    ),
    "text": "object_id STRING, part STRING, part_index INT, text STRING, language STRING, extractor STRING",
    "document_properties": (
        "object_id STRING, extractor STRING, title STRING, author STRING, page_count INT, "
        "char_count BIGINT, word_count BIGINT, encoding STRING, properties MAP<STRING, STRING>"
    ),
    "entities": ("object_id STRING, part STRING, entity STRING, label STRING, start_char INT, end_char INT"),
    "key_phrases": "object_id STRING, rank INT, phrase STRING, score DOUBLE",
    "sentiment": (
        "object_id STRING, part STRING, sentiment STRING, compound DOUBLE, positive DOUBLE, "
        "negative DOUBLE, neutral DOUBLE"
    ),
    "pii": (
        "object_id STRING, part STRING, pii_type STRING, start_char INT, end_char INT, score DOUBLE, recognizer STRING"
    ),
    "tables": ("object_id STRING, part STRING, table_index INT, row_index INT, column_index INT, value STRING"),
    "form_fields": "object_id STRING, part STRING, field_name STRING, field_type STRING, value STRING",
    "links": "object_id STRING, part STRING, url STRING, text STRING",
    "ocr": (
        "object_id STRING, part STRING, time_s DOUBLE, block INT, line INT, word_index INT, word STRING, "
        "confidence DOUBLE, x INT, y INT, width INT, height INT"
    ),
    "faces": (
        "object_id STRING, part STRING, time_s DOUBLE, face_index INT, x INT, y INT, width INT, height INT, "
        "confidence DOUBLE"
    ),
    "image_labels": (
        "object_id STRING, part STRING, time_s DOUBLE, kind STRING, rank INT, label STRING, score DOUBLE, "
        "model STRING, x INT, y INT, width INT, height INT"
    ),
    "image_properties": (
        "object_id STRING, part STRING, time_s DOUBLE, width INT, height INT, format STRING, mode STRING, "
        "frame_count INT, dominant_colors ARRAY<STRUCT<color: STRING, share: DOUBLE>>, phash STRING, "
        "captured_at TIMESTAMP, gps_latitude DOUBLE, gps_longitude DOUBLE, camera STRING, exif MAP<STRING, STRING>"
    ),
    "transcripts": (
        "object_id STRING, segment INT, start_s DOUBLE, end_s DOUBLE, text STRING, confidence DOUBLE, "
        "language STRING, model STRING, "
        "words ARRAY<STRUCT<word: STRING, start_s: DOUBLE, end_s: DOUBLE, probability: DOUBLE>>"
    ),
    "media_properties": (
        "object_id STRING, duration_s DOUBLE, container STRING, bit_rate BIGINT, video_codec STRING, width INT, "
        "height INT, fps DOUBLE, audio_codec STRING, sample_rate INT, channels INT, has_audio BOOLEAN, "
        "has_video BOOLEAN, keyframes INT"
    ),
    "object_index": (
        "object_id STRING, source_name STRING, source_path STRING, file_name STRING, raw_path STRING, "
        "media_type STRING, size_bytes BIGINT, sha256 STRING, ingested_at TIMESTAMP, tags MAP<STRING, STRING>, "
        "parent_object_id STRING, child_count INT, version INT, is_latest BOOLEAN, status STRING, "
        "extracted_paths ARRAY<STRING>, enriched_paths ARRAY<STRING>, errors ARRAY<STRING>, "
        "languages ARRAY<STRING>, has_pii BOOLEAN, pii_types ARRAY<STRING>, title STRING, page_count INT, "
        "char_count BIGINT, table_count INT, form_field_count INT, entity_counts MAP<STRING, INT>, "
        "sentiment STRING, extracted_at TIMESTAMP"
    ),
}

# Tables whose rows an extraction run produces (and replaces when an object is re-extracted).
RESULT_TABLES = (
    "text",
    "document_properties",
    "entities",
    "key_phrases",
    "sentiment",
    "pii",
    "tables",
    "form_fields",
    "links",
    "ocr",
    "faces",
    "image_labels",
    "image_properties",
    "transcripts",
    "media_properties",
)


# Every metadata table is laid out in buckets of its object id, so that work on a few objects
# (a refresh of their index rows, a purge before re-extraction, a lookup by id) opens only
# the files of their buckets. Tables made before this layout gain it on the next write
# (`ensure_tables(add_columns=True)`); their older files keep the old layout until
# `shoal maintain` rewrites them.
BUCKETS = 16
PARTITION_FIELD = f"bucket({BUCKETS}, object_id)"
# Above this many ids a lookup joins an id frame instead of an `IN` list (which Iceberg
# prunes to the ids' buckets and min/max ranges when it plans the scan).
IN_LIST_LIMIT = 2000


def table(name: str) -> TableName:
    return TableName(NAMESPACE, name)


def schema(name: str) -> str:
    """The table's columns as a DDL string (accepted by createDataFrame and from_json)."""
    return SCHEMAS[name]


def column_definitions(name: str) -> list[str]:
    """Each column's DDL ("name TYPE") in order (commas inside MAP<...>/ARRAY<...> do not split)."""
    out, depth, start, ddl = [], 0, 0, SCHEMAS[name] + ","
    for i, ch in enumerate(ddl):
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif ch == "," and depth == 0:
            out.append(ddl[start:i].strip())
            start = i + 1
    return out


def columns(name: str) -> list[str]:
    """Column names in order."""
    return [d.split()[0] for d in column_definitions(name)]


def id_frame(spark: SparkSession, ids: list[str]) -> DataFrame:
    """A one-column DataFrame of object ids, to join metadata tables against."""
    return spark.createDataFrame([(i,) for i in ids], "object_id STRING")


def for_ids(spark: SparkSession, frame: DataFrame, ids: list[str]) -> DataFrame:
    """`frame`'s rows of these object ids: a pushed-down `IN` filter (pruned to the ids'
    buckets) for up to IN_LIST_LIMIT ids, a semi-join beyond."""
    if len(ids) <= IN_LIST_LIMIT:
        return frame.where(F.col("object_id").isin(sorted(set(ids))))
    return frame.join(id_frame(spark, ids), "object_id", "left_semi")


def ids_sql(ids: list[str]) -> str:
    """A SQL `IN (...)` list of object ids (content hashes; quoted defensively)."""
    return "(" + ", ".join("'" + i.replace("\\", "\\\\").replace("'", "\\'") + "'" for i in sorted(set(ids))) + ")"


def ensure_tables(spark: SparkSession, names: tuple[str, ...] | None = None, *, add_columns: bool = False) -> None:
    """Create the namespace and the named metadata tables (all by default) where missing;
    with `add_columns` (writers), add columns the definitions gained since a table was made."""
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS `{NAMESPACE}`")
    existing = {r.tableName for r in spark.sql(f"SHOW TABLES IN `{NAMESPACE}`").collect()}
    for name in names or tuple(SCHEMAS):
        if name in existing:
            if add_columns:
                _add_new_columns(spark, name)
                _add_partitioning(spark, name)
            continue
        spark.sql(
            f"CREATE TABLE IF NOT EXISTS {table(name).sql} ({SCHEMAS[name]}) USING iceberg "
            f"PARTITIONED BY ({PARTITION_FIELD}) "
            "TBLPROPERTIES ('format-version'='2', 'write.delete.mode'='merge-on-read', "
            "'write.update.mode'='merge-on-read', 'write.merge.mode'='merge-on-read')"
        )
        if name == "object_sources" and "objects" in existing:
            _backfill_object_sources(spark)


def _add_new_columns(spark: SparkSession, name: str) -> None:
    """Columns added to a table's definition since the lake was made (appended last, as
    Iceberg adds them), so rows of the new shape can be written to an older table."""
    have = {c.lower() for c in spark.table(table(name).sql).columns}
    missing = [d for d in column_definitions(name) if d.split()[0].lower() not in have]
    if missing:
        spark.sql(f"ALTER TABLE {table(name).sql} ADD COLUMNS ({', '.join(missing)})")


def partitioned(spark: SparkSession, name: str) -> bool:
    """Whether the table's current partition spec is laid out by object id buckets."""
    # DESCRIBE resolves the name as every other statement does (the warm engine's per-command
    # sessions included), and lists the spec under "# Partitioning" as "bucket(16, object_id)".
    spec, rows = False, spark.sql(f"DESCRIBE TABLE {table(name).sql}").collect()
    for r in rows:
        if r[0] == "# Partitioning":
            spec = True
        elif spec and str(r[0]).startswith("Part ") and str(r[1]).replace(" ", "") == f"bucket({BUCKETS},object_id)":
            return True
    return False


def _add_partitioning(spark: SparkSession, name: str) -> None:
    """A table made by an earlier release (unpartitioned) evolves to the bucket layout: new
    files are written in buckets, existing ones stay readable as they are (Iceberg
    partition evolution changes metadata only)."""
    if not partitioned(spark, name):
        # Named as CREATE TABLE names it, so old and new lakes' files share one partition column.
        spark.sql(f"ALTER TABLE {table(name).sql} ADD PARTITION FIELD {PARTITION_FIELD} AS object_id_bucket")


def _backfill_object_sources(spark: SparkSession) -> None:
    """A lake ingested before object_sources existed: one row per top-level path from
    `shoal.objects` (the newest version's object), first/last seen from its ingest times."""
    spark.sql(
        f"INSERT INTO {table('object_sources').sql} SELECT object_id, source_name, source_path, first_at, last_at "
        "FROM (SELECT object_id, source_name, source_path, "
        "min(ingested_at) OVER (PARTITION BY source_name, source_path) AS first_at, "
        "max(ingested_at) OVER (PARTITION BY source_name, source_path) AS last_at, "
        "row_number() OVER (PARTITION BY source_name, source_path ORDER BY version DESC) AS n "
        f"FROM {table('objects').sql} WHERE parent_object_id IS NULL) WHERE n = 1"
    )
