"""Enrichment jobs: enriched versions of extracted data, linked in the metadata layer.

A job (YAML or JSON) lists steps over the extracted tables:

    name: standard
    sources: [mail-archive]                   # optional: only these ingest sources
    media_types: [text/plain, application/*]  # optional: only these types
    steps:
      - type: redact_pii                      # text with every PII span replaced by <TYPE>
      - type: normalize_entities              # entities mapped to canonical names
        reference: ref.companies              # a table with columns alias, canonical
      - type: classify                        # document class by keyword rules
        classes: {invoice: [invoice, amount due], ...}   # optional; built-in rules otherwise
        # model: doc_classes@2                # or: a registered classifier decides
      - type: model                           # any registered model, its own table
        model: sentiment_onnx                 # NAME (newest version) or NAME@VERSION
        per: document                         # or part
      - type: llm                             # an OpenAI-compatible endpoint, JSON out
        endpoint: local                       # a name under [llm.endpoints] in shoal.toml
        prompt: "Summarise: {{ text }}"       # Jinja2 (sandboxed): text, object_id, title, media_type
        schema: {type: object, properties: {summary: {type: string}}, required: [summary]}

Each step writes `<warehouse>/enriched/<object_id>/<job>.<step>.json` and rows to its table
(`shoal.redacted_text`, `shoal.normalized_entities`, `shoal.classifications`,
`shoal.model_<name>` or the step's `table`, `shoal.llm_results`); the paths join
`enriched_paths` in `shoal.object_index`. A run takes the objects extracted since their last
enrichment by this job (`--force`: all) and replaces their earlier rows, so reruns never
duplicate. The work runs on Spark executors; only object ids come back to the driver.
"""

from __future__ import annotations

import json
import re
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, Field, model_validator

from shoal import definitions, storage
from shoal.exceptions import ShoalError
from shoal.models import llm

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator

    from pyspark.sql import SparkSession

    from shoal.config import Settings

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
# Predictions of registered models (`type: model`): one table per model unless a step names one.
MODEL_SCHEMA = (
    "object_id STRING, job STRING, step STRING, part STRING, model STRING, model_version STRING, "
    "label STRING, score DOUBLE, scores MAP<STRING, DOUBLE>, output STRING, predicted_at TIMESTAMP"
)
LLM_SCHEMA = (
    "object_id STRING, job STRING, step STRING, endpoint STRING, model STRING, prompt_sha STRING, "
    "output STRING, valid BOOLEAN, error STRING, attempts INT, latency_ms BIGINT, created_at TIMESTAMP"
)
_TABLE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\.[A-Za-z_][A-Za-z0-9_]*$")


class EnrichError(ShoalError):
    """An enrichment job is invalid or names what the lake does not have."""


class Step(BaseModel):
    model_config = {"extra": "forbid", "populate_by_name": True}

    type: Literal["redact_pii", "normalize_entities", "classify", "model", "llm"]
    # Names the step's output file and rows; needed when a job has two steps of one type.
    name: str | None = Field(default=None, pattern=r"^[a-z0-9][a-z0-9_-]{0,62}$")
    reference: str | None = None  # normalize_entities: NAMESPACE.TABLE with alias, canonical
    classes: dict[str, list[str]] | None = None  # classify: class -> keyword phrases
    min_score: float = Field(default=2, ge=0)  # classify: fewer keyword hits -> "other"
    model: str | None = None  # model, classify: a registered model, NAME or NAME@VERSION
    per: Literal["document", "part"] = "document"  # model: one prediction per document or per part
    table: str | None = None  # model, llm: where rows go (default shoal.model_<name> / shoal.llm_results)
    endpoint: str | None = None  # llm: a name under [llm.endpoints]
    prompt: str | None = None  # llm: Jinja2 template; text, object_id, title, media_type
    system: str | None = None  # llm: the system message (a template too)
    json_schema: dict[str, Any] | None = Field(default=None, alias="schema")  # llm: the answer's schema
    redact_pii: bool = False  # llm: send the text with PII replaced by <TYPE>
    max_chars: int = Field(default=8000, ge=100)  # llm, model: text beyond this is not sent

    @property
    def id(self) -> str:
        return self.name or self.type

    @model_validator(mode="after")
    def _fields_for_type(self) -> Step:
        if self.type == "model" and not self.model:
            raise ValueError("a model step needs model: NAME or NAME@VERSION")
        if self.type == "llm":
            missing = [f for f in ("endpoint", "prompt", "json_schema") if not getattr(self, f)]
            if missing:
                raise ValueError(f"an llm step needs {', '.join(m.replace('json_', '') for m in missing)}")
            llm.check_template(self.prompt or "", f"step {self.id} prompt")
            if self.system:
                llm.check_template(self.system, f"step {self.id} system")
            llm.check_schema(self.json_schema or {}, f"step {self.id} schema")
        if self.table and not _TABLE.match(self.table):
            raise ValueError(f"table {self.table!r} must be NAMESPACE.TABLE")
        return self


class EnrichmentJob(BaseModel):
    model_config = {"extra": "forbid"}

    name: str = Field(pattern=r"^[a-z0-9][a-z0-9_-]{0,62}$")
    steps: list[Step] = Field(min_length=1)
    # Which objects the job covers (default: every extracted one).
    sources: list[str] | None = None  # ingest source names
    media_types: list[str] | None = None  # e.g. [text/plain, application/pdf]; type/* allowed
    latest_only: bool = True  # only the newest version of each object

    @model_validator(mode="after")
    def _unique_steps(self) -> EnrichmentJob:
        ids = [s.id for s in self.steps]
        dupes = sorted({i for i in ids if ids.count(i) > 1})
        if dupes:
            raise ValueError(f"steps {', '.join(dupes)} appear twice: give each a distinct name")
        return self


def load_job(ref: str | Path) -> EnrichmentJob:
    try:
        return definitions.load(Path(ref), EnrichmentJob, EnrichError, "enrichment job")
    except llm.LlmError as exc:
        raise EnrichError(f"{ref}: {exc}") from None


def step_table(step: Step) -> tuple[str, str]:
    """The table a step's rows go to, and its schema."""
    if step.type == "model":
        return step.table or f"shoal.model_{(step.model or '').split('@')[0]}", MODEL_SCHEMA
    if step.type == "llm":
        return step.table or "shoal.llm_results", LLM_SCHEMA
    name = {"redact_pii": "redacted_text", "normalize_entities": "normalized_entities"}.get(step.type, step.type)
    name = "classifications" if step.type == "classify" else name
    return f"shoal.{name}", TABLES[name]


@dataclass
class EnrichResult:
    job: str
    objects: int = 0
    seconds: float = 0.0
    rows: dict[str, int] = field(default_factory=dict)
    classes: dict[str, int] = field(default_factory=dict)
    invalid: dict[str, int] = field(default_factory=dict)  # llm steps: answers that failed validation

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


def _pii_spans(group: dict[str, Any]) -> dict[str, list[tuple[int, int, str]]]:
    """One object's PII spans by part, as `redact` takes them."""
    spans: dict[str, list[tuple[int, int, str]]] = {}
    for s in group["pii"] or []:
        spans.setdefault(s["part"], []).append((s["start_char"], s["end_char"], s["pii_type"]))
    return spans


def _texts(parts: list[dict[str, Any]], spans: dict[str, list[tuple[int, int, str]]], redacted: bool) -> list[str]:
    return [redact(p["text"] or "", spans.get(p["part"], []))[0] if redacted else (p["text"] or "") for p in parts]


def _partition(
    job_json: str, warehouse: str, references: dict[str, dict[str, str]], context: dict[str, Any]
) -> Callable[[Iterable[dict[str, Any]]], Iterator[tuple[str, str]]]:
    """Executor side: one object's texts, PII spans and entities in; rows and files out.

    `context` carries what the driver resolved: registry records of the models (so every
    executor uses the same version) and the LLM endpoints' settings with thread counts.
    """

    def run(groups: Iterable[dict[str, Any]]) -> Iterator[tuple[str, str]]:
        from shoal.models import load_predictor

        job = EnrichmentJob.model_validate_json(job_json)
        groups = list(groups)
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        llm_answers: dict[str, list[llm.Answer]] = {}
        for step in job.steps:
            if step.type == "llm":
                llm_answers[step.id] = _ask_all(step, groups, context["endpoints"][step.endpoint or ""])
        for gi, g in enumerate(groups):
            oid = g["object_id"]
            parts = sorted(g["parts"] or [], key=lambda p: p["part_index"])
            spans = _pii_spans(g)
            paths: list[str] = []
            for step in job.steps:
                table, _ = step_table(step)
                path = storage.join(warehouse, "enriched", oid, f"{job.name}.{step.id}.json")
                base = {"object_id": oid, "job": job.name}
                doc: Any
                if step.type == "redact_pii":
                    doc = []
                    for p in parts:
                        text, n = redact(p["text"] or "", spans.get(p["part"], []))
                        row = {"part": p["part"], "part_index": p["part_index"], "text": text, "redactions": n}
                        doc.append(row)
                        yield (table, json.dumps({**base, **row}))
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
                        yield (table, json.dumps({**base, **row}))
                elif step.type == "classify":
                    text = "\n".join(p["text"] or "" for p in parts)
                    if step.model:
                        record = context["models"][step.model]
                        pred = load_predictor(record).predict([text[: step.max_chars]])[0]
                        cls, score, scores = pred.label or "other", pred.score or 0.0, pred.scores
                        method = f"model {record['name']}@{record['version']}"
                    else:
                        cls, score, scores = classify(text, step.classes or DEFAULT_CLASSES, step.min_score)
                        method = "keyword rules"
                    doc = {"class": cls, "score": score, "method": method, "scores": scores}
                    yield (table, json.dumps({**base, **doc}))
                elif step.type == "model":
                    record = context["models"][step.model or ""]
                    if step.per == "part":
                        names, inputs = [p["part"] for p in parts], [(p["text"] or "")[: step.max_chars] for p in parts]
                    else:
                        names, inputs = [""], ["\n".join(p["text"] or "" for p in parts)[: step.max_chars]]
                    preds = load_predictor(record).predict(inputs)
                    doc = []
                    for part_name, pred in zip(names, preds, strict=True):
                        row = {
                            "step": step.id,
                            "part": part_name,
                            "model": record["name"],
                            "model_version": record["version"],
                            "label": pred.label,
                            "score": pred.score,
                            "scores": pred.scores,
                            "output": json.dumps(pred.output),
                            "predicted_at": now,
                        }
                        doc.append({**row, "output": pred.output})
                        yield (table, json.dumps({**base, **row}))
                else:
                    answer = llm_answers[step.id][gi]
                    endpoint = context["endpoints"][step.endpoint or ""]
                    doc = {
                        "step": step.id,
                        "endpoint": step.endpoint,
                        "model": answer.model,
                        "prompt_sha": endpoint["prompt_sha"][step.id],
                        "output": answer.output,
                        "valid": answer.valid,
                        "error": answer.error,
                        "attempts": answer.attempts,
                        "latency_ms": answer.latency_ms,
                        "created_at": now,
                    }
                    yield (table, json.dumps({**base, **doc, "output": json.dumps(answer.output)}))
                storage.write_bytes(
                    path,
                    json.dumps({"object_id": oid, "step": f"{job.name}.{step.id}", "result": doc}, indent=1).encode(),
                )
                paths.append(path)
            yield ("paths", json.dumps({"object_id": oid, "paths": paths}))

    return run


def _ask_all(step: Step, groups: list[dict[str, Any]], endpoint: dict[str, Any]) -> list[llm.Answer]:
    """Every object's question to one endpoint, `threads` at a time (the job's share of its limit)."""
    client = llm.ChatClient(step.endpoint or "", endpoint)

    def one(g: dict[str, Any]) -> llm.Answer:
        parts = sorted(g["parts"] or [], key=lambda p: p["part_index"])
        text = "\n".join(_texts(parts, _pii_spans(g), step.redact_pii))[: step.max_chars]
        values = {
            "text": text,
            "object_id": g["object_id"],
            "title": g.get("title") or "",
            "media_type": g.get("media_type") or "",
        }
        try:
            system = llm.render(step.system, **values) if step.system else None
            user = llm.render(step.prompt or "", **values)
        except Exception as exc:  # noqa: BLE001 - a template error is this object's, never the whole task's
            return llm.Answer(None, False, f"prompt template: {exc}", 0, 0, endpoint.get("model") or "")
        return client.ask(system, user, step.json_schema or {})

    try:
        with ThreadPoolExecutor(max_workers=endpoint["threads"]) as pool:
            return list(pool.map(one, groups))
    finally:
        client.close()


def _resolve(
    spark: SparkSession, settings: Settings, job: EnrichmentJob
) -> tuple[dict[str, dict[str, str]], dict[str, Any], int | None]:
    """Driver side: reference tables, model records and endpoints, checked before any work."""
    from shoal.models import get_model

    references: dict[str, dict[str, str]] = {}
    context: dict[str, Any] = {"models": {}, "endpoints": {}}
    partitions: int | None = None
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
        if step.model:
            context["models"][step.model] = get_model(settings, step.model).to_dict()
        if step.type == "llm":
            configured = settings.llm.endpoints
            if step.endpoint not in configured:
                raise EnrichError(
                    f"step {step.id} names endpoint {step.endpoint!r}, which is not configured",
                    hint=f"add [llm.endpoints.{step.endpoint}] base_url = ... to shoal.toml "
                    f"(configured: {', '.join(sorted(configured)) or 'none'})",
                )
            ep = configured[step.endpoint or ""]
            entry = context["endpoints"].setdefault(
                step.endpoint,
                {
                    **ep.model_dump(exclude={"api_key"}),
                    "api_key": ep.api_key.get_secret_value() if ep.api_key else None,
                    "prompt_sha": {},
                },
            )
            entry["prompt_sha"][step.id] = llm.prompt_sha(step.system, step.prompt or "", step.json_schema or {})
            # The endpoint's limit holds over the whole job: P tasks x (limit // P) threads.
            p = max(1, min(ep.concurrency, spark.sparkContext.defaultParallelism))
            partitions = p if partitions is None else min(partitions, p)
    for entry in context["endpoints"].values():
        entry["threads"] = max(1, entry["concurrency"] // (partitions or 1))
    return references, context, partitions


def run_job(
    spark: SparkSession,
    settings: Settings,
    job: EnrichmentJob,
    *,
    force: bool = False,
    say: Callable[[str], None] = lambda _m: None,
) -> EnrichResult:
    from pyspark.sql import functions as F

    from shoal.lake import metadata

    started = time.monotonic()
    metadata.ensure_tables(spark)
    _ensure(spark)
    references, context, partitions = _resolve(spark, settings, job)
    outputs = dict(step_table(step) for step in job.steps)
    for table, schema in outputs.items():
        spark.sql(f"CREATE TABLE IF NOT EXISTS {table} ({schema}) USING iceberg")
    t = {n: metadata.table(n).sql for n in ("object_index", "text", "pii", "entities")}
    index = (
        spark.table(t["object_index"])
        .where("status IN ('ok', 'partial')")
        .select("object_id", "extracted_at", "title", "media_type", "source_name", "is_latest")
    )
    if job.sources:
        index = index.where(F.col("source_name").isin(job.sources))
    if job.media_types:
        cond = F.lit(False)
        for m in job.media_types:
            cond = cond | (F.col("media_type").startswith(m[:-1]) if m.endswith("/*") else (F.col("media_type") == m))
        index = index.where(cond)
    if job.latest_only:
        index = index.where(F.coalesce(F.col("is_latest"), F.lit(True)))
    if not force:
        done = (
            spark.table("shoal.enrichments")
            .where((F.col("job") == job.name) & (F.col("job_version") == VERSION))
            .select("object_id", "enriched_at")
        )
        index = index.join(done, "object_id", "left").where(
            F.col("enriched_at").isNull() | (F.col("extracted_at") > F.col("enriched_at"))
        )
    todo = index.select("object_id", "title", "media_type")
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
    if partitions:
        work = work.repartition(partitions)
    say(f"enriching with job {job.name}")
    out = spark.createDataFrame(
        work.rdd.map(lambda r: r.asDict(recursive=True)).mapPartitions(
            _partition(job.model_dump_json(by_alias=True), settings.warehouse_uri, references, context)
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
            job_lit = F.lit(job.name)
            for table in [*outputs, "shoal.enrichments"]:
                spark.sql(
                    f"DELETE FROM {table} WHERE job = '{job.name}' AND object_id IN (SELECT object_id FROM shoal_enrich_ids)"
                )
            for table, schema in outputs.items():
                rows = out.where(F.col("table") == table).select(F.from_json("row", schema).alias("r")).select("r.*")
                n = rows.count()
                if n:
                    rows.writeTo(table).append()
                result.rows[table.split(".", 1)[1]] = n
            if "shoal.classifications" in outputs:
                for r in (
                    spark.table("shoal.classifications")
                    .join(spark.table("shoal_enrich_ids"), "object_id")
                    .where(F.col("job") == job_lit)
                    .groupBy("class")
                    .count()
                    .collect()
                ):
                    result.classes[r["class"]] = r["count"]
            for step in (s for s in job.steps if s.type == "llm"):
                result.invalid[step.id] = (
                    spark.table(step_table(step)[0])
                    .join(spark.table("shoal_enrich_ids"), "object_id")
                    .where((F.col("job") == job_lit) & (F.col("step") == step.id) & ~F.col("valid"))
                    .count()
                )
            ids_rows.createOrReplaceTempView("shoal_enrich_paths")
            spark.sql(
                f"MERGE INTO {t['object_index']} i USING shoal_enrich_paths p ON i.object_id = p.object_id "
                "WHEN MATCHED THEN UPDATE SET i.enriched_paths = array_sort(array_union("
                f"filter(i.enriched_paths, x -> NOT contains(x, '/{job.name}.')), p.paths))"
            )
            # Last: the record of completed work (a crash before it redoes these objects).
            ids_rows.select(
                "object_id",
                job_lit.alias("job"),
                F.lit(VERSION).alias("job_version"),
                F.col("paths").alias("output_paths"),
                F.current_timestamp().alias("enriched_at"),
            ).writeTo("shoal.enrichments").append()
        ids_rows.unpersist()
    finally:
        out.unpersist()
    result.seconds = round(time.monotonic() - started, 2)
    return result


def _ensure(spark: SparkSession) -> None:
    for name, schema in TABLES.items():
        spark.sql(f"CREATE TABLE IF NOT EXISTS shoal.{name} ({schema}) USING iceberg")
