"""Near-duplicate images: perceptual hashes (64-bit pHash) within a Hamming distance.

Candidate pairs come from a banded self-join: split each hash into equal bands; two hashes
at distance d <= bands - 1 agree on at least one band (pigeonhole), so joining on
(band position, band value) finds every such pair without comparing all pairs. Pairs are
then grouped transitively (union-find) into duplicate groups.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import SparkSession

from shoal.exceptions import ShoalError
from shoal.lake import metadata

MAX_DISTANCE = 15  # 16 one-hex-digit bands; beyond this the pigeonhole guarantee is lost


def find_duplicates(
    spark: SparkSession,
    *,
    max_distance: int = 6,
    include_keyframes: bool = False,
    all_versions: bool = False,
) -> list[dict[str, Any]]:
    """Groups of near-identical pictures: [{group, members: [{object_id, source_path, part, ...}]}]."""
    if not 0 <= max_distance <= MAX_DISTANCE:
        raise ShoalError(
            f"--max-distance must be between 0 and {MAX_DISTANCE} (bits of a 64-bit perceptual hash)",
            hint="6 finds resized and re-encoded copies; 10-12 also finds light edits",
        )
    metadata.ensure_tables(spark, ("image_properties", "object_index"))
    width = 2 if max_distance <= 7 else 1  # hex digits per band
    bands = 16 // width
    where = ["p.phash IS NOT NULL", "length(p.phash) = 16"]
    if not include_keyframes:
        where.append("p.time_s IS NULL")
    if not all_versions:
        where.append("i.is_latest")
    sql = f"""
    WITH h AS (
      SELECT p.object_id, p.part, p.time_s, p.phash, i.source_name, i.source_path, i.media_type,
             CAST(conv(substr(p.phash, 1, 8), 16, 10) AS BIGINT) AS hi,
             CAST(conv(substr(p.phash, 9, 8), 16, 10) AS BIGINT) AS lo
      FROM {metadata.table("image_properties").sql} p
      JOIN {metadata.table("object_index").sql} i ON p.object_id = i.object_id
      WHERE {" AND ".join(where)}
    ),
    b AS (
      SELECT h.*, pos, substr(phash, pos * {width} + 1, {width}) AS band
      FROM h LATERAL VIEW explode(sequence(0, {bands - 1})) t AS pos
    ),
    pairs AS (
      SELECT DISTINCT x.object_id AS a_id, x.part AS a_part, y.object_id AS b_id, y.part AS b_part,
             bit_count(x.hi ^ y.hi) + bit_count(x.lo ^ y.lo) AS distance
      FROM b x JOIN b y ON x.pos = y.pos AND x.band = y.band
      WHERE x.object_id < y.object_id OR (x.object_id = y.object_id AND x.part < y.part)
    )
    SELECT * FROM pairs WHERE distance <= :max_distance
    """
    pairs = spark.sql(sql, args={"max_distance": max_distance}).collect()
    if not pairs:
        return []
    keys = {(r.a_id, r.a_part) for r in pairs} | {(r.b_id, r.b_part) for r in pairs}
    parent = {k: k for k in keys}

    def root(k: tuple[Any, Any]) -> tuple[Any, Any]:
        while parent[k] != k:
            parent[k] = parent[parent[k]]
            k = parent[k]
        return k

    for r in pairs:
        a, b = root((r.a_id, r.a_part)), root((r.b_id, r.b_part))
        if a != b:
            parent[max(a, b)] = min(a, b)
    ids = metadata.id_frame(spark, sorted({k[0] for k in keys}))
    facts = {
        (r.object_id, r.part): r.asDict()
        for r in spark.table(metadata.table("image_properties").sql)
        .join(ids, "object_id", "left_semi")
        .join(spark.table(metadata.table("object_index").sql), "object_id")
        .select("object_id", "part", "time_s", "phash", "width", "height", "source_name", "source_path", "media_type")
        .collect()
    }
    groups: dict[tuple[str, str], list[tuple[str, str]]] = {}
    for k in sorted(keys):
        groups.setdefault(root(k), []).append(k)
    out = []
    for n, (first, members) in enumerate(sorted(groups.items(), key=lambda g: (-len(g[1]), g[0])), 1):
        ref = int(facts[first]["phash"], 16)
        out.append(
            {
                "group": n,
                "members": [
                    {
                        **{c: facts[m][c] for c in ("object_id", "source_name", "source_path", "part", "time_s")},
                        **{c: facts[m][c] for c in ("media_type", "width", "height", "phash")},
                        "distance": (int(facts[m]["phash"], 16) ^ ref).bit_count(),
                    }
                    for m in members
                ],
            }
        )
    return out
