"""Objects: the inventory of ingested files and one object's page (its text, entities, PII,
tables, media findings and where its original can be read)."""

from __future__ import annotations

from typing import Annotated, Any
from urllib.parse import urlencode

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response

from shoal.governance import Principal
from shoal.governance.audit import gathered
from shoal.routing import Routes
from shoal.web.console import views
from shoal.web.console.base import INLINE_IMAGES, Console
from shoal.web.console.pages.originals import original_allowed, raw_access_links, raw_text_preview

OBJECTS_PAGE = 100  # objects per inventory page

routes = Routes()


@routes.get("/objects")
def objects(
    c: Console,
    request: Request,
    type: Annotated[str | None, Query(max_length=200)] = None,
    lang: Annotated[str | None, Query(max_length=20)] = None,
    pii: Annotated[str | None, Query(pattern="^(yes|no|)$")] = None,
    tag: Annotated[str | None, Query(max_length=200)] = None,
    text: Annotated[str | None, Query(max_length=500)] = None,
    sort: Annotated[str, Query(pattern="^-?(name|source|type|status|pii|title|size)$")] = "name",
    page_no: Annotated[int, Query(alias="page", ge=1, le=10_000)] = 1,
    per: Annotated[int, Query(ge=1, le=500)] = OBJECTS_PAGE,
) -> Response:
    from shoal.catalog import list_objects

    who, session = c.viewer(request)
    if not c.settings.governance.metadata_visible_to_all and not who.is_admin:
        return c.error(request, who, session, 403, "the object inventory is not open to all users here")
    tags = None
    if tag:
        key, _, value = tag.partition("=")
        tags = {key.strip(): value.strip()}
    rows = list_objects(
        c.spark(),
        media_type=type or None,
        language=lang or None,
        has_pii={"yes": True, "no": False}.get(pii or ""),
        tags=tags,
        text=text or None,
        limit=per + 1,  # one more: is there a next page?
        offset=(page_no - 1) * per,
        order=sort.lstrip("-"),
        descending=sort.startswith("-"),
        principal=who,
        settings=c.settings,
    )
    has_next, rows = len(rows) > per, rows[:per]
    for r in rows:  # named by file, not by content hash
        r["file_name"] = r.get("file_name") or (r.get("source_path") or "").rsplit("/", 1)[-1] or r["object_id"][:12]
    c.audit.record(who.name, "catalog.objects", None, True, via="console", rows=len(rows))
    filters = {"type": type or "", "lang": lang or "", "pii": pii or "", "tag": tag or "", "text": text or ""}

    def link(**change: Any) -> str:
        params = {k: v for k, v in {**filters, "sort": sort, "page": page_no, **change}.items() if v}
        if per != OBJECTS_PAGE:
            params["per"] = per
        return "/objects?" + urlencode(params)

    return c.page(
        request,
        "objects.html",
        who,
        session,
        rows=rows,
        filters=filters,
        sort=sort,
        page=page_no,
        first=(page_no - 1) * per + 1,
        has_next=has_next,
        link=link,
    )


@routes.get("/objects/{object_id}")
def object_page(c: Console, request: Request, object_id: str) -> Response:
    who, session = c.viewer(request)
    if not views.OBJECT_ID.match(object_id):
        return c.error(request, who, session, 404, "not an object id")
    if not c.settings.governance.metadata_visible_to_all and not who.is_admin:
        return c.error(request, who, session, 403, "object metadata is not open to all users here")
    found = _object_record(c, object_id)
    if found is None:
        return c.error(request, who, session, 404, f"no object {object_id}")
    obj, extractions = found
    # One audit row for the page view, naming what it read; refusals are still written one by one.
    with gathered() as reads:
        found_in = _object_findings(c, who, request, object_id, obj)
    c.audit.record(who.name, "catalog.object", object_id, True, via="console", reads=reads)
    return c.page(request, "object.html", who, session, obj=obj, extractions=extractions, **found_in)


def _object_record(c: Console, object_id: str) -> tuple[dict[str, Any], list[dict[str, Any]]] | None:
    """The object's index row and its extraction runs (the metadata layer: not governed per table)."""
    from shoal.lake import metadata

    metadata.ensure_tables(c.spark())
    found = (
        c.spark()
        .sql(f"SELECT * FROM {metadata.table('object_index').sql} WHERE object_id = :o", args={"o": object_id})
        .collect()
    )
    if not found:
        return None
    obj = {k: views.to_json_value(v) for k, v in found[0].asDict(recursive=True).items()}
    extractions = [
        {k: views.to_json_value(v) for k, v in r.asDict().items()}
        for r in c.spark()
        .sql(
            f"SELECT extractor, stage, status, error, duration_ms, extracted_at FROM {metadata.table('extractions').sql} "
            "WHERE object_id = :o ORDER BY extracted_at, extractor",
            args={"o": object_id},
        )
        .collect()
    ]
    return obj, extractions


def _object_findings(
    c: Console, who: Principal, request: Request, object_id: str, obj: dict[str, Any]
) -> dict[str, Any]:
    """What the object page shows from the governed tables, read as `who` (in this order: the
    page's audit row lists the reads), and where its original can be read."""
    where = f"WHERE object_id = '{object_id}'"  # object_id matched ^[0-9a-f]{32}$ in object_page

    def q(sql: str, limit: int = 5000) -> dict[str, Any]:
        return views.governed_rows(c.spark(), c.settings, who, sql, limit)

    text = q(f"SELECT part, part_index, text FROM shoal.text {where} ORDER BY part_index")
    entities = q(f"SELECT part, entity, label, start_char, end_char FROM shoal.entities {where}")
    pii = q(f"SELECT part, pii_type, start_char, end_char FROM shoal.pii {where}")
    tables = q(f"SELECT part, table_index, row_index, column_index, value FROM shoal.tables {where}", 20000)
    forms = q(f"SELECT part, field_name, field_type, value FROM shoal.form_fields {where}")
    transcript = q(f"SELECT segment, start_s, end_s, text, confidence FROM shoal.transcripts {where} ORDER BY segment")
    faces = q(f"SELECT part, x, y, width, height, confidence FROM shoal.faces {where} AND time_s IS NULL")
    ocr = q(f"SELECT part, word, x, y, width, height, confidence FROM shoal.ocr {where} AND time_s IS NULL", 20000)
    labels = q(f"SELECT part, time_s, kind, rank, label, score FROM shoal.image_labels {where} ORDER BY time_s, rank")
    image = q(f"SELECT part, width, height, format FROM shoal.image_properties {where} AND time_s IS NULL")
    raw_links = raw_access_links(c, who, obj.get("raw_path"))
    original = original_allowed(c, who, obj.get("raw_path"))
    preview = _image_preview(object_id, obj, original, image, faces, ocr)
    phrases = q(f"SELECT phrase, score FROM shoal.key_phrases {where} ORDER BY rank", 50)
    sentiment = q(f"SELECT part, sentiment, compound FROM shoal.sentiment {where}")
    links = q(f"SELECT part, url, text FROM shoal.links {where}", 500)
    # Every path holding this content, governed like the other tables: no grant, no paths.
    paths = q(
        "SELECT source_name, source_path, first_seen, last_seen FROM shoal.object_sources "
        f"{where} ORDER BY first_seen, source_name, source_path",
        1000,
    )
    # One notice naming what the viewer's grants withhold, not one red block per section.
    sections = {"text": text, "entities": entities, "tables": tables, "form fields": forms, "transcript": transcript}
    hidden = [{"what": what, "why": r["denied"]} for what, r in sections.items() if r["denied"]]
    raw_text = None
    if raw_links and str(obj.get("media_type") or "").startswith("text/"):
        raw_text = raw_text_preview(c, who, raw_links[0], request)
    return {
        "text": text,
        "parts": _highlighted_parts(text, entities, pii),
        "entities": entities,
        "pii": pii,
        "grids": views.grid(tables["rows"]),
        "tables": tables,
        "forms": forms,
        "transcript": transcript,
        "faces": faces,
        "ocr": ocr,
        "labels": labels,
        "preview": preview,
        "raw_links": raw_links,
        "original": original,
        "raw_text": raw_text,
        "phrases": phrases,
        "sentiment": sentiment,
        "links": links,
        "paths": paths,
        "hidden": hidden,
    }


def _highlighted_parts(text: dict[str, Any], entities: dict[str, Any], pii: dict[str, Any]) -> list[dict[str, Any]]:
    """Each text part as HTML with its PII and entities marked."""
    spans: dict[str, list[tuple[int, int, str]]] = {}
    # PII first, longest first: an e-mail wins over the URL-like pieces inside it and over entities.
    for p in sorted(pii["rows"], key=lambda r: (r["start_char"] - r["end_char"], r["start_char"])):
        spans.setdefault(p["part"], []).append((p["start_char"], p["end_char"], "PII " + p["pii_type"]))
    for e in sorted(
        entities["rows"], key=lambda r: ((r["start_char"] or 0) - (r["end_char"] or 0), r["start_char"] or 0)
    ):
        if e["start_char"] is not None:
            spans.setdefault(e["part"], []).append((e["start_char"], e["end_char"], e["label"]))
    return [
        {"part": t["part"], "html": views.highlight(t["text"] or "", spans.get(t["part"], []))} for t in text["rows"]
    ]


def _image_preview(
    object_id: str,
    obj: dict[str, Any],
    original: bool,
    image: dict[str, Any],
    faces: dict[str, Any],
    ocr: dict[str, Any],
) -> dict[str, Any] | None:
    """The picture shown inline with its faces and OCR words boxed: only where the viewer may
    open the original and the browser shows the type."""
    first_image = image["rows"][0] if image["rows"] else None
    if not (original and first_image and obj.get("media_type") in INLINE_IMAGES):
        return None
    return {
        "src": f"/objects/{object_id}/file?inline=1",
        "width": first_image["width"],
        "height": first_image["height"],
        "faces": [f for f in faces["rows"] if f["part"] == first_image["part"]],
        "words": [w for w in ocr["rows"] if w["part"] == first_image["part"]],
    }


def add(router: APIRouter, c: Console) -> None:
    """Mount this module's pages on the console's router, in the order they are defined above."""
    routes.mount(router, c)
