"""Worker side of `shoal extract`: one object in, its JSON outputs written, its table rows out.

Runs inside Spark's Python workers. Each object's chain runs isolated (sandbox.py); this
module turns the step results into the JSON documents under `extracted/<object_id>/` and
into rows for the metadata tables (returned as (table, JSON row) pairs).
"""

from __future__ import annotations

import hashlib
import json
import logging
import posixpath
import re
from collections.abc import Callable, Iterator
from dataclasses import asdict
from datetime import UTC, datetime
from typing import Any

from shoal import storage
from shoal.extract.base import Extraction, ObjectInfo
from shoal.extract.router import Router
from shoal.extract.sandbox import StepResult, run_isolated
from shoal.ingest.sniff import SNIFF_BYTES, detect_media_type
from shoal.lake.object_index import object_facts

log = logging.getLogger(__name__)
_UNSAFE_NAME = re.compile(r"[^A-Za-z0-9._ -]+")
_warm: set[str] = set()


def iso(ts: datetime) -> str:
    """Timestamps in JSON rows: the format the driver parses them back with (TIMESTAMP_FORMAT)."""
    return ts.isoformat(timespec="microseconds")


TIMESTAMP_FORMAT = "yyyy-MM-dd'T'HH:mm:ss.SSSSSSXXX"


def extracted_zone(warehouse: str) -> str:
    return storage.join(warehouse, "extracted")


def output_path(warehouse: str, object_id: str, extractor: str) -> str:
    return storage.join(extracted_zone(warehouse), object_id, f"{extractor}.json")


def warm(router: Router, chains: list[list[str]]) -> None:
    """Load each needed model once per worker process, before any object is forked."""
    for name in {n for chain in chains for n in chain}:
        if name not in _warm:
            try:
                router.extractors[name].warm(router.settings)
            except Exception as exc:  # noqa: BLE001 - a missing model fails that step per object, not the job
                log.warning("extractor %s could not warm up: %s", name, exc)
                continue  # not marked warm: a later partition tries again
            _warm.add(name)


def process_tree(
    obj: dict[str, Any], chain: list[str], router: Router, warehouse: str, run_id: str, seen: set[str]
) -> Iterator[tuple[str, str, str, str]]:
    """Extract one planned object and, inline, every child object its extraction registers
    (attachments, archive members; `_children` stops at max_depth), so children need no second
    Spark round. Yields (table, JSON row, the row's object_id, the planned object's id).

    `seen`: child ids already extracted in this partition (children are content-addressed: the
    same attachment in many e-mails is one object, extracted once here). The driver keeps one
    extraction of each child that is new to the lake and drops the rest."""
    via = obj["object_id"]
    pending = [(obj, chain)]
    while pending:
        item, steps = pending.pop()
        for table, row, oid in process_object(item, steps, router, warehouse, run_id):
            yield table, row, oid, via
            if table == "objects" and oid not in seen:
                seen.add(oid)
                child = json.loads(row)
                child_chain = router.chain(child.get("media_type"))
                warm(router, [child_chain])
                pending.append((child, child_chain))


def process_object(
    obj: dict[str, Any], chain: list[str], router: Router, warehouse: str, run_id: str
) -> list[tuple[str, str, str]]:
    """Extract one object; returns [(table, json_row, row's object_id)] including its `extractions` rows
    (and an `objects` row per child it registers, under the child's id)."""
    info = ObjectInfo(
        object_id=obj["object_id"],
        raw_path=obj["raw_path"],
        media_type=obj["media_type"] or "application/octet-stream",
        file_name=obj.get("file_name") or posixpath.basename(obj["raw_path"]),
        size_bytes=int(obj.get("size_bytes") or 0),
        depth=int(obj.get("depth") or 0),
    )
    now = datetime.now(UTC)
    limit = router.settings.max_file_mb << 20
    steps: list[StepResult]
    if info.size_bytes > limit:
        reason = f"oversized: {info.size_bytes >> 20} MiB exceeds the {router.settings.max_file_mb} MiB limit"
        steps = [StepResult(n, "skipped", reason) for n in chain]
    else:
        try:
            data = storage.read_bytes(info.raw_path)
        except Exception as exc:  # noqa: BLE001 - a missing raw file is this object's error
            steps = [StepResult(n, "error", f"cannot read raw object {info.raw_path}: {exc}") for n in chain]
        else:
            steps = run_isolated(info, data, chain, router)
    return _rows(obj, info, steps, router, warehouse, run_id, now)


def _rows(
    obj: dict[str, Any],
    info: ObjectInfo,
    steps: list[StepResult],
    router: Router,
    warehouse: str,
    run_id: str,
    now: datetime,
) -> list[tuple[str, str, str]]:
    out: list[tuple[str, str, str]] = []
    oid = info.object_id

    own: dict[str, list[dict[str, Any]]] = {}  # this object's rows by table, for its index facts

    def emit(table: str, row: dict[str, Any], object_id: str | None = None) -> None:
        if object_id is None:
            own.setdefault(table, []).append(row)
        rid = object_id or oid
        out.append((table, json.dumps({"object_id": rid, **row}, default=str, ensure_ascii=False), rid))

    props: dict[str, Any] = {}
    for s in steps:
        if s.extraction is not None:
            props.update(s.extraction.properties)
    part_languages: dict[str, str | None] = props.get("part_languages", {})
    part_index = 0
    for s in steps:
        ext = router.extractors[s.extractor]
        path = None
        if s.status == "ok" and s.extraction is not None:
            x = s.extraction
            children = _children(obj, info, x, router, emit) if x.children else []
            path = output_path(warehouse, oid, s.extractor)
            storage.write_bytes(path, _document(oid, s, ext.version, x, children, part_index))
            for p in x.text:
                emit(
                    "text",
                    {
                        "part": p.part,
                        "part_index": part_index,
                        "text": p.text,
                        "language": part_languages.get(str(part_index)),
                        "extractor": s.extractor,
                    },
                )
                part_index += 1
            for ti, t in enumerate(x.tables):
                for ri, row in enumerate(t.rows):
                    for ci, value in enumerate(row):
                        emit(
                            "tables",
                            {"part": t.part, "table_index": ti, "row_index": ri, "column_index": ci, "value": value},
                        )
            for f in x.form_fields:
                emit(
                    "form_fields", {"part": f.part, "field_name": f.name, "field_type": f.field_type, "value": f.value}
                )
            for link in x.links:
                emit("links", {"part": link.part, "url": link.url, "text": link.text})
            for table, rows in x.rows.items():
                for r in rows:
                    emit(table, r)
            if ext.stage == "extract":
                emit("document_properties", _document_properties(s.extractor, x))
        emit(
            "extractions",
            {
                "extractor": s.extractor,
                "extractor_version": ext.version,
                "stage": ext.stage,
                "status": s.status,
                "error": s.error,
                "output_path": path,
                "duration_ms": s.duration_ms,
                "extracted_at": iso(now),
                "run_id": run_id,
            },
        )
    optional = frozenset(n for n, e in router.extractors.items() if e.optional)
    facts = object_facts(own.get("extractions", []), own, now, optional)
    emit("index_facts", {**facts, "extracted_at": iso(now)})
    return out


def _document(oid: str, s: StepResult, version: str, x: Extraction, children: list[dict], first_part: int) -> bytes:
    doc = {
        "object_id": oid,
        "extractor": s.extractor,
        "extractor_version": version,
        "duration_ms": s.duration_ms,
        "text": [{"part": p.part, "part_index": first_part + i, "text": p.text} for i, p in enumerate(x.text)],
        "tables": [asdict(t) for t in x.tables],
        "form_fields": [asdict(f) for f in x.form_fields],
        "links": [asdict(link) for link in x.links],
        "children": children,
        "properties": x.properties,
        "rows": x.rows,
        "details": x.details,
    }
    doc = {k: v for k, v in doc.items() if v not in ([], {}, None)}
    return json.dumps(doc, default=str, ensure_ascii=False, indent=1).encode("utf-8")


def _document_properties(extractor: str, x: Extraction) -> dict[str, Any]:
    p = x.properties
    text = "\n".join(t.text for t in x.text)
    pages = p.get("page_count")
    if pages is None and x.text and all(t.part.startswith("page ") for t in x.text):
        pages = len(x.text)
    scalars = {
        k: (v if isinstance(v, str) else json.dumps(v, default=str))
        for k, v in p.items()
        if k not in ("title", "author", "page_count", "encoding") and v is not None
    }
    return {
        "extractor": extractor,
        "title": p.get("title"),
        "author": p.get("author"),
        "page_count": pages,
        "char_count": len(text),
        "word_count": len(text.split()),
        "encoding": p.get("encoding"),
        "properties": scalars,
    }


def _children(
    obj: dict[str, Any], info: ObjectInfo, x: Extraction, router: Router, emit: Callable[..., None]
) -> list[dict[str, Any]]:
    """Store embedded files in the raw zone next to their parent and register them as objects."""
    listed = []
    depth = info.depth + 1
    if depth > router.settings.max_depth:
        return [
            {"name": c.name, "skipped": f"nesting depth limit {router.settings.max_depth} reached"} for c in x.children
        ]
    for i, child in enumerate(x.children):
        safe = _UNSAFE_NAME.sub("_", posixpath.basename(child.name.replace("\\", "/"))).strip(" .") or f"part-{i + 1}"
        sha = hashlib.sha256(child.data).hexdigest()
        cid = sha[:32]
        raw_path = f"{info.raw_path}.parts/{i + 1}/{safe}"
        if not storage.exists(raw_path):
            storage.write_bytes(raw_path, child.data)
        media_type = detect_media_type(child.data[:SNIFF_BYTES], safe, child.data)
        emit_row = {
            "raw_path": raw_path,
            "source_path": f"{obj.get('source_path')}#{child.name}",
            "source_name": obj.get("source_name"),
            "media_type": media_type,
            "size_bytes": len(child.data),
            "sha256": sha,
            "ingested_at": iso(datetime.now(UTC)),
            "tags": obj.get("tags") or {},
            "parent_object_id": info.object_id,
            "file_name": safe,
            "version": 1,
            "depth": depth,
        }
        listed.append(
            {
                "name": child.name,
                "object_id": cid,
                "raw_path": raw_path,
                "media_type": media_type,
                "size_bytes": len(child.data),
            }
        )
        emit("objects", emit_row, cid)
    return listed
