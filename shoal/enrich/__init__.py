"""Enrichment jobs: enriched versions of extracted data, linked in the metadata layer.

A job (YAML or JSON) lists steps over the extracted tables:

    name: standard
    steps:
      - type: redact_pii                      # text with every PII span replaced by <TYPE>
      - type: normalize_entities              # entities mapped to canonical names
        reference: ref.companies              # a table with columns alias, canonical
      - type: classify                        # document class by keyword rules
        classes: {invoice: [invoice, amount due], ...}   # optional; built-in rules otherwise

Each step writes `<warehouse>/enriched/<object_id>/<job>.<step>.json` and rows to its table
(`shoal.redacted_text`, `shoal.normalized_entities`, `shoal.classifications`); the paths join
`enriched_paths` in `shoal.object_index`. A run takes the objects extracted since their last
enrichment by this job (`--force`: all) and replaces their earlier rows, so reruns never
duplicate. The work runs on Spark executors; only object ids come back to the driver.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, Field, ValidationError

from shoal import storage
from shoal.exceptions import ShoalError

VERSION = "1"
# Built-in document classes: keyword phrases, counted case-insensitively over the whole text.
DEFAULT_CLASSES: dict[str, list[str]] = {
    "invoice": ["invoice", "amount due", "total due", "bill to", "payment terms", "vat", "subtotal"],
    "contract": ["agreement", "hereinafter", "party", "parties", "terms and conditions", "governing law", "shall"],
    "resume": ["curriculum vitae", "resume", "work experience", "education", "skills", "references"],
    "support_email": ["ticket", "support", "issue", "not working", "please help", "customer service", "refund"],
}
TABLES = {
    "redacted_text": "object_id STRING, job STRING, part STRING, part_index INT, text STRING, redactions INT",
    "normalized_entities": (
        "object_id STRING, job STRING, part STRING, entity STRING, label STRING, canonical STRING, matched BOOLEAN"
    ),
    "classifications": "object_id STRING, job STRING, class STRING, score DOUBLE, method STRING, scores MAP<STRING, DOUBLE>",
    "enrichments": "object_id STRING, job STRING, job_version STRING, output_paths ARRAY<STRING>, enriched_at TIMESTAMP",
}


class EnrichError(ShoalError):
    """An enrichment job is invalid or names what the lake does not have."""


class Step(BaseModel):
    model_config = {"extra": "forbid"}

    type: Literal["redact_pii", "normalize_entities", "classify"]
    reference: str | None = None  # normalize_entities: NAMESPACE.TABLE with alias, canonical
    classes: dict[str, list[str]] | None = None  # classify: class -> keyword phrases
    min_score: float = Field(default=2, ge=0)  # classify: fewer keyword hits -> "other"


class EnrichmentJob(BaseModel):
    model_config = {"extra": "forbid"}

    name: str = Field(pattern=r"^[a-z0-9][a-z0-9_-]{0,62}$")
    steps: list[Step] = Field(min_length=1)


def load_job(ref: str | Path) -> EnrichmentJob:
    path = Path(ref)
    if not path.is_file():
        raise EnrichError(f"enrichment job file {path} does not exist")
    try:
        return EnrichmentJob.model_validate(yaml.safe_load(path.read_text()))
    except yaml.YAMLError as exc:
        raise EnrichError(f"{path}: not valid YAML/JSON: {exc}") from exc
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors())
        raise EnrichError(f"{path}: invalid enrichment job: {problems}") from None


@dataclass
class EnrichResult:
    job: str
    objects: int = 0
    seconds: float = 0.0
    rows: dict[str, int] = field(default_factory=dict)
    classes: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def entity_key(name: str) -> str:
    """How entities and aliases are matched: case, surrounding spaces and punctuation ignored."""
    return " ".join(name.split()).strip(" .,;:!?\"'()").lower()


def redact(text: str, spans: list[tuple[int, int, str]]) -> tuple[str, int]:
    """Replace each [start, end) span with <TYPE>; overlapping spans merge into the first's type."""
    out, last, count = [], 0, 0
    for start, end, kind in sorted(spans):
        if end <= last or start >= len(text):
            continue
        start = max(start, last)
        out.append(text[last:start])
        out.append(f"<{kind}>")
        last, count = min(end, len(text)), count + 1
    out.append(text[last:])
    return "".join(out), count


def classify(text: str, classes: dict[str, list[str]], min_score: float) -> tuple[str, float, dict[str, float]]:
    low = text.lower()
    scores = {
        name: float(sum(len(re.findall(r"\b" + re.escape(k.lower()) + r"\b", low)) for k in keywords))
        for name, keywords in classes.items()
    }
    best = max(scores, key=lambda k: (scores[k], k)) if scores else "other"
    if not scores or scores[best] < min_score:
        return "other", scores.get(best, 0.0), scores
    return best, scores[best], scores


def _partition(job_json: str, warehouse: str, references: dict[str, dict[str, str]]):
    """Executor side: one object's texts, PII spans and entities in; rows and files out."""

    def run(groups):
        job = EnrichmentJob.model_validate_json(job_json)
        for g in groups:
            oid = g["object_id"]
            parts = sorted(g["parts"] or [], key=lambda p: p["part_index"])
            paths: list[str] = []
            for step in job.steps:
                name = f"{job.name}.{step.type}"
                path = storage.join(warehouse, "enriched", oid, f"{name}.json")
                if step.type == "redact_pii":
                    spans: dict[str, list[tuple[int, int, str]]] = {}
                    for s in g["pii"] or []:
                        spans.setdefault(s["part"], []).append((s["start_char"], s["end_char"], s["pii_type"]))
                    doc = []
                    for p in parts:
                        text, n = redact(p["text"] or "", spans.get(p["part"], []))
                        row = {"part": p["part"], "part_index": p["part_index"], "text": text, "redactions": n}
                        doc.append(row)
                        yield ("redacted_text", json.dumps({"object_id": oid, "job": job.name, **row}))
                elif step.type == "normalize_entities":
                    aliases = references[step.reference or ""]
                    doc = []
                    for e in g["entities"] or []:
                        canonical = aliases.get(entity_key(e["entity"]))
                        row = {
                            "part": e["part"],
                            "entity": e["entity"],
                            "label": e["label"],
                            "canonical": canonical or e["entity"],
                            "matched": canonical is not None,
                        }
                        doc.append(row)
                        yield ("normalized_entities", json.dumps({"object_id": oid, "job": job.name, **row}))
                else:
                    text = "\n".join(p["text"] or "" for p in parts)
                    cls, score, scores = classify(text, step.classes or DEFAULT_CLASSES, step.min_score)
                    doc = {"class": cls, "score": score, "method": "keyword rules", "scores": scores}
                    yield (
                        "classifications",
                        json.dumps(
                            {
                                "object_id": oid,
                                "job": job.name,
                                "class": cls,
                                "score": score,
                                "method": "keyword rules",
                                "scores": scores,
                            }
                        ),
                    )
                storage.write_bytes(
                    path, json.dumps({"object_id": oid, "step": name, "result": doc}, indent=1).encode()
                )
                paths.append(path)
            yield ("paths", json.dumps({"object_id": oid, "paths": paths}))

    return run


def run_job(spark, settings, job: EnrichmentJob, *, force: bool = False, say=lambda _m: None) -> EnrichResult:
    from pyspark.sql import functions as F

    from shoal.lake import metadata

    started = time.monotonic()
    metadata.ensure_tables(spark)
    _ensure(spark)
    references: dict[str, dict[str, str]] = {}
    for step in job.steps:
        if step.type == "normalize_entities":
            if not step.reference:
                raise EnrichError("normalize_entities needs a reference table (columns alias, canonical)")
            if not spark.catalog.tableExists(step.reference):
                raise EnrichError(f"reference table {step.reference} does not exist")
            cols = {c.lower() for c in spark.table(step.reference).columns}
            if not {"alias", "canonical"} <= cols:
                raise EnrichError(f"reference table {step.reference} needs columns alias and canonical")
            references[step.reference] = {
                entity_key(str(r.alias)): str(r.canonical)
                for r in spark.table(step.reference).select("alias", "canonical").collect()
                if r.alias is not None
            }
    t = {n: metadata.table(n).sql for n in ("object_index", "text", "pii", "entities")}
    index = spark.table(t["object_index"]).where("status IN ('ok', 'partial')").select("object_id", "extracted_at")
    if not force:
        done = (
            spark.table("shoal.enrichments")
            .where((F.col("job") == job.name) & (F.col("job_version") == VERSION))
            .select("object_id", "enriched_at")
        )
        index = index.join(done, "object_id", "left").where(
            F.col("enriched_at").isNull() | (F.col("extracted_at") > F.col("enriched_at"))
        )
    todo = index.select("object_id")
    parts = (
        spark.table(t["text"])
        .groupBy("object_id")
        .agg(F.collect_list(F.struct("part", "part_index", "text")).alias("parts"))
    )
    pii = (
        spark.table(t["pii"])
        .groupBy("object_id")
        .agg(F.collect_list(F.struct("part", "start_char", "end_char", "pii_type")).alias("pii"))
    )
    ents = (
        spark.table(t["entities"])
        .groupBy("object_id")
        .agg(F.collect_list(F.struct("part", "entity", "label")).alias("entities"))
    )
    work = todo.join(parts, "object_id").join(pii, "object_id", "left").join(ents, "object_id", "left")
    say(f"enriching with job {job.name}")
    out = spark.createDataFrame(
        work.rdd.map(lambda r: r.asDict(recursive=True)).mapPartitions(
            _partition(job.model_dump_json(), settings.warehouse_uri, references)
        ),
        "table STRING, row STRING",
    ).persist()
    try:
        ids_rows = (
            out.where("table = 'paths'")
            .select(F.from_json("row", "object_id STRING, paths ARRAY<STRING>").alias("r"))
            .select("r.*")
        )
        ids_rows = ids_rows.persist()
        ids = [r.object_id for r in ids_rows.select("object_id").collect()]
        result = EnrichResult(job.name, objects=len(ids))
        if ids:
            metadata.id_frame(spark, ids).createOrReplaceTempView("shoal_enrich_ids")
            for name in ("redacted_text", "normalized_entities", "classifications", "enrichments"):
                spark.sql(
                    f"DELETE FROM shoal.{name} WHERE job = '{job.name}' AND object_id IN (SELECT object_id FROM shoal_enrich_ids)"
                )
            for name in ("redacted_text", "normalized_entities", "classifications"):
                rows = (
                    out.where(F.col("table") == name).select(F.from_json("row", TABLES[name]).alias("r")).select("r.*")
                )
                n = rows.count()
                if n:
                    rows.writeTo(f"shoal.{name}").append()
                result.rows[name] = n
            for r in (
                spark.table("shoal.classifications")
                .join(spark.table("shoal_enrich_ids"), "object_id")
                .where(F.col("job") == job.name)
                .groupBy("class")
                .count()
                .collect()
            ):
                result.classes[r["class"]] = r["count"]
            ids_rows.createOrReplaceTempView("shoal_enrich_paths")
            spark.sql(
                f"MERGE INTO {t['object_index']} i USING shoal_enrich_paths p ON i.object_id = p.object_id "
                "WHEN MATCHED THEN UPDATE SET i.enriched_paths = array_sort(array_union("
                f"filter(i.enriched_paths, x -> NOT contains(x, '/{job.name}.')), p.paths))"
            )
            # Last: the record of completed work (a crash before it redoes these objects).
            ids_rows.select(
                "object_id",
                F.lit(job.name).alias("job"),
                F.lit(VERSION).alias("job_version"),
                F.col("paths").alias("output_paths"),
                F.current_timestamp().alias("enriched_at"),
            ).writeTo("shoal.enrichments").append()
        ids_rows.unpersist()
    finally:
        out.unpersist()
    result.seconds = round(time.monotonic() - started, 2)
    return result


def _ensure(spark) -> None:
    for name, schema in TABLES.items():
        spark.sql(f"CREATE TABLE IF NOT EXISTS shoal.{name} ({schema}) USING iceberg")
