"""Catalog, table and object pages, and raw reads through access points."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Annotated, Any
from urllib.parse import quote, urlencode

from fastapi import APIRouter, Form, Query, Request
from fastapi.responses import RedirectResponse, Response, StreamingResponse

from shoal import storage
from shoal.exceptions import first_line
from shoal.governance import AccessDenied, Governance, GovernanceError, Principal
from shoal.governance.access import RawAccess
from shoal.governance.audit import gathered
from shoal.web.console import views
from shoal.web.console.base import INLINE_IMAGES, INLINE_MEDIA, Console, Routes, identifier

# Media types as ingest stores them are data from the file (a ZIP's own `mimetype` member): only a
# plain type/subtype reaches a Content-Type header.
_MEDIA_TYPE = re.compile(r"[a-z]+/[a-z0-9][a-z0-9.+-]*")
PREVIEW_BYTES = 16 * 1024  # of a text object's raw bytes shown on its page
OBJECTS_PAGE = 100  # objects per inventory page
TOMBSTONES_SUFFIX = "__cdc_tombstones"  # shoal.cdc's bookkeeping tables (NS.TABLE__cdc_tombstones)


def _internal(entry: dict[str, Any]) -> bool:
    """Shoal's own tables (the metadata layer, CDC tombstones): behind the catalog's toggle."""
    return entry["database"] == "shoal" or str(entry["table"]).endswith(TOMBSTONES_SUFFIX)


routes = Routes()


# ---- catalog -----------------------------------------------------------------------
@routes.get("/catalog")
def catalog(
    c: Console,
    request: Request,
    q: Annotated[str, Query(max_length=200)] = "",
    internal: Annotated[str | None, Query(pattern="^(1|0)?$")] = None,
) -> Response:
    who, session = c.viewer(request)
    databases: dict[str, list[dict[str, Any]]] = {}
    hidden = 0
    words = q.lower().split()
    for entry in Governance(c.settings).visible_tables(c.spark(), who):
        if _internal(entry) and internal != "1":
            hidden += 1
            continue
        haystack = " ".join(str(entry.get(k) or "") for k in ("name", "owner", "description")).lower()
        if any(w not in haystack for w in words):
            continue
        databases.setdefault(entry["database"], []).append(
            {key: value for key, value in entry.items() if key != "database"}
        )
    c.audit.record(who.name, "catalog.list", None, True, via="console", tables=sum(map(len, databases.values())))
    return c.page(
        request, "catalog.html", who, session, databases=databases, q=q, internal=internal == "1", hidden=hidden
    )


@routes.get("/catalog/{database}/{table}")
def table_page(c: Console, request: Request, database: str, table: str) -> Response:
    who, session = c.viewer(request)
    name = f"{database}.{table}".lower()
    gov = Governance(c.settings)
    if not (identifier(database) and identifier(table)):
        return c.error(request, who, session, 404, "not a table name")
    if not c.spark().catalog.tableExists(name):
        return c.error(request, who, session, 404, f"no table {name}")
    if not gov.discoverable(who, name):
        return c.error(request, who, session, 403, f"{name} is not visible to {who.name}")
    info = gov.info(name)
    columns = [{"name": f.name, "type": f.dataType.simpleString()} for f in c.spark().table(name).schema.fields]
    table_tags, column_tags = gov.tags_of(name, [c["name"] for c in columns])
    privileges = sorted(gov.privileges(who, name))
    sample = views.governed_rows(c.spark(), c.settings, who, f"SELECT * FROM `{database}`.`{table}` LIMIT 10", 10)
    snapshots: list[dict[str, Any]] | None = None
    # Snapshots reveal record counts of rows the viewer may not see: the rule of metadata
    # tables in governed SQL (only unrestricted access: every column, every row, no mask).
    if gov.access(who, name, [col["name"] for col in columns]).unrestricted:
        try:
            snapshots = [
                {k: views.to_json_value(v) for k, v in r.asDict().items()}
                for r in c.spark()
                .sql(
                    f"SELECT committed_at, snapshot_id, operation, summary['added-records'] AS added, "
                    f"summary['deleted-records'] AS deleted, summary['total-records'] AS total "
                    f"FROM `{database}`.`{table}`.snapshots ORDER BY committed_at DESC LIMIT 20"
                )
                .collect()
            ]
        except Exception:  # noqa: BLE001 - not an Iceberg table (an external table has no snapshots)
            snapshots = []
    return c.page(
        request,
        "table.html",
        who,
        session,
        name=name,
        info=info,
        columns=columns,
        table_tags=table_tags,
        column_tags=column_tags,
        privileges=privileges,
        may_edit=who.is_admin or info["owner"] == who.name,
        saved=request.query_params.get("saved") == "1",
        sample=sample,
        snapshots=snapshots,
    )


@routes.post("/catalog/{database}/{table}/about")
def table_about(
    c: Console,
    request: Request,
    database: str,
    table: str,
    description: Annotated[str, Form(max_length=2000)] = "",
    owner: Annotated[str, Form(max_length=200)] = "",
    csrf: Annotated[str, Form()] = "",
) -> Response:
    """Owner and description, changed by the table's owner or an admin (audited)."""
    who, session = c.viewer(request)
    c.check_csrf(request, session, csrf)
    if not (identifier(database) and identifier(table)):
        return c.error(request, who, session, 404, "not a table name")
    name = f"{database}.{table}".lower()
    gov = Governance(c.settings)
    if not (who.is_admin or gov.owner(name) == who.name):
        return c.refuse(
            request, who, session, "table.describe", name, f"only the owner of {name} or an admin may edit it"
        )
    try:
        gov.set_owner(name, owner.strip() or None, description.strip())
    except GovernanceError as exc:
        return c.error(request, who, session, 400, first_line(exc))
    c.audit.record(who.name, "table.describe", name, True, via="console", owner=owner.strip() or None)
    return RedirectResponse(f"/catalog/{quote(database)}/{quote(table)}?saved=1", status_code=303)


# ---- objects -----------------------------------------------------------------------
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


def _raw_links(c: Console, who: Principal, raw_path: str | None) -> list[dict[str, str]]:
    """Access points through which this principal may read the object (checked again on read)."""
    if not raw_path:
        return []
    access = RawAccess(c.settings)
    root = access.raw_root.rstrip("/") + "/"
    if not raw_path.startswith(root):
        return []
    rel = raw_path[len(root) :]
    out = []
    for ap in access.list(who):
        prefix = (ap["prefix"] or "").rstrip("/")
        if not prefix or rel == prefix or rel.startswith(prefix + "/"):
            out.append({"access_point": ap["name"], "path": rel})
    return out


@routes.get("/objects/{object_id}")
def object_page(c: Console, request: Request, object_id: str) -> Response:
    from shoal.lake import metadata

    who, session = c.viewer(request)
    if not views.OBJECT_ID.match(object_id):
        return c.error(request, who, session, 404, "not an object id")
    if not c.settings.governance.metadata_visible_to_all and not who.is_admin:
        return c.error(request, who, session, 403, "object metadata is not open to all users here")
    metadata.ensure_tables(c.spark())
    found = (
        c.spark()
        .sql(f"SELECT * FROM {metadata.table('object_index').sql} WHERE object_id = :o", args={"o": object_id})
        .collect()
    )
    if not found:
        return c.error(request, who, session, 404, f"no object {object_id}")
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
    where = f"WHERE object_id = '{object_id}'"  # object_id matched ^[0-9a-f]{32}$ above

    def q(sql: str, limit: int = 5000) -> dict[str, Any]:
        return views.governed_rows(c.spark(), c.settings, who, sql, limit)

    # One audit row for the page view, naming what it read; refusals are still written one by one.
    with gathered() as reads:
        text = q(f"SELECT part, part_index, text FROM shoal.text {where} ORDER BY part_index")
        entities = q(f"SELECT part, entity, label, start_char, end_char FROM shoal.entities {where}")
        pii = q(f"SELECT part, pii_type, start_char, end_char FROM shoal.pii {where}")
        spans: dict[str, list[tuple[int, int, str]]] = {}
        # PII first, longest first: an e-mail wins over the URL-like pieces inside it and over entities.
        for p in sorted(pii["rows"], key=lambda r: (r["start_char"] - r["end_char"], r["start_char"])):
            spans.setdefault(p["part"], []).append((p["start_char"], p["end_char"], "PII " + p["pii_type"]))
        for e in sorted(
            entities["rows"], key=lambda r: ((r["start_char"] or 0) - (r["end_char"] or 0), r["start_char"] or 0)
        ):
            if e["start_char"] is not None:
                spans.setdefault(e["part"], []).append((e["start_char"], e["end_char"], e["label"]))
        parts = [
            {"part": t["part"], "html": views.highlight(t["text"] or "", spans.get(t["part"], []))}
            for t in text["rows"]
        ]
        tables = q(f"SELECT part, table_index, row_index, column_index, value FROM shoal.tables {where}", 20000)
        forms = q(f"SELECT part, field_name, field_type, value FROM shoal.form_fields {where}")
        transcript = q(
            f"SELECT segment, start_s, end_s, text, confidence FROM shoal.transcripts {where} ORDER BY segment"
        )
        faces = q(f"SELECT part, x, y, width, height, confidence FROM shoal.faces {where} AND time_s IS NULL")
        ocr = q(f"SELECT part, word, x, y, width, height, confidence FROM shoal.ocr {where} AND time_s IS NULL", 20000)
        labels = q(
            f"SELECT part, time_s, kind, rank, label, score FROM shoal.image_labels {where} ORDER BY time_s, rank"
        )
        image = q(f"SELECT part, width, height, format FROM shoal.image_properties {where} AND time_s IS NULL")
        raw_links = _raw_links(c, who, obj.get("raw_path"))
        original = _original_allowed(c, who, obj.get("raw_path"))
        first_image = image["rows"][0] if image["rows"] else None
        preview = None
        if original and first_image and obj.get("media_type") in INLINE_IMAGES:
            preview = {
                "src": f"/objects/{object_id}/file?inline=1",
                "width": first_image["width"],
                "height": first_image["height"],
                "faces": [f for f in faces["rows"] if f["part"] == first_image["part"]],
                "words": [w for w in ocr["rows"] if w["part"] == first_image["part"]],
            }
        phrases = q(f"SELECT phrase, score FROM shoal.key_phrases {where} ORDER BY rank", 50)
        sentiment = q(f"SELECT part, sentiment, compound FROM shoal.sentiment {where}")
        links = q(f"SELECT part, url, text FROM shoal.links {where}", 500)
        # Every path holding this content, governed like the other tables: no grant, no paths.
        paths = q(
            "SELECT source_name, source_path, first_seen, last_seen FROM shoal.object_sources "
            f"{where} ORDER BY first_seen, source_name, source_path",
            1000,
        )
        raw_text = None
        if raw_links and str(obj.get("media_type") or "").startswith("text/"):
            raw_text = _raw_text_preview(c, who, raw_links[0], request)
    c.audit.record(who.name, "catalog.object", object_id, True, via="console", reads=reads)
    return c.page(
        request,
        "object.html",
        who,
        session,
        obj=obj,
        extractions=extractions,
        text=text,
        parts=parts,
        entities=entities,
        pii=pii,
        grids=views.grid(tables["rows"]),
        tables=tables,
        forms=forms,
        transcript=transcript,
        faces=faces,
        ocr=ocr,
        labels=labels,
        preview=preview,
        raw_links=raw_links,
        original=original,
        raw_text=raw_text,
        phrases=phrases,
        sentiment=sentiment,
        links=links,
        paths=paths,
    )


def _raw_text_preview(c: Console, who: Principal, link: dict[str, str], request: Request) -> str | None:
    """The first 16 KB of a text object, read through its access point (audited), as text."""
    client = request.client.host if request.client else None
    try:
        target = RawAccess(c.settings).resolve(who, link["access_point"], link["path"], client=client, via="console")
    except AccessDenied:
        return None
    with storage.open_input(target.uri) as f:
        head = f.read(PREVIEW_BYTES + 1)
    text = head[:PREVIEW_BYTES].decode("utf-8", errors="replace")
    return text + ("\n[... more in the download]" if len(head) > PREVIEW_BYTES else "")


def _original_allowed(c: Console, who: Principal, raw_path: str | None) -> bool:
    """Admins read every original; anyone else through an access point that covers it."""
    return bool(raw_path) and (who.is_admin or bool(_raw_links(c, who, raw_path)))


@routes.get("/objects/{object_id}/file")
def object_file(
    c: Console,
    request: Request,
    object_id: str,
    inline: Annotated[str | None, Query(pattern="^(1|0)$")] = None,
) -> Response:
    """The original file, for an admin or through the viewer's access point; audited either
    way (a refusal too). Inline only for types a browser shows without running them
    (images, PDF, audio, video); anything else downloads."""
    from shoal.lake import metadata

    who, session = c.viewer(request)
    if not views.OBJECT_ID.match(object_id):
        return c.error(request, who, session, 404, "not an object id")
    rows = (
        c.spark()
        .sql(
            f"SELECT raw_path, media_type, source_path FROM {metadata.table('object_index').sql} "
            "WHERE object_id = :o AND is_latest",
            args={"o": object_id},
        )
        .collect()
    )
    if not rows or not rows[0].raw_path:
        return c.error(request, who, session, 404, f"no object {object_id}")
    row = rows[0]
    client = request.client.host if request.client else None
    name = (row.source_path or object_id).rsplit("/", 1)[-1]
    if who.is_admin:
        uri = row.raw_path
        c.audit.record(who.name, "object.raw", object_id, True, via="console", client=client, inline=inline == "1")
    else:
        links = _raw_links(c, who, row.raw_path)
        if not links:
            return c.refuse(
                request,
                who,
                session,
                "object.raw",
                object_id,
                f"{who.name} may not open the original file: no access point of yours covers it (ask an admin for one)",
            )
        try:  # RawAccess checks the access point again and writes the audit row
            target = RawAccess(c.settings).resolve(
                who, links[0]["access_point"], links[0]["path"], client=client, via="console"
            )
        except AccessDenied as exc:
            return c.refuse(request, who, session, "object.raw", object_id, first_line(exc))
        uri, name = target.uri, target.name
    media = row.media_type if row.media_type and _MEDIA_TYPE.fullmatch(row.media_type) else ""
    media = media or "application/octet-stream"
    show = inline == "1" and (media in INLINE_MEDIA or media.startswith(("audio/", "video/")))
    headers = {
        "X-Content-Type-Options": "nosniff",
        # A PDF needs the browser's viewer (no sandbox); everything else is sandboxed.
        "Content-Security-Policy": "default-src 'none'; frame-ancestors 'self'"
        + ("" if media == "application/pdf" else "; sandbox"),
        "X-Frame-Options": "SAMEORIGIN",
        "Cache-Control": "private, no-store",
        "Content-Disposition": ("inline" if show else "attachment") + f"; filename*=UTF-8''{quote(name)}",
    }

    def chunks() -> Iterator[bytes]:
        with storage.open_input(uri) as f:
            while block := f.read(1 << 20):
                yield block

    return StreamingResponse(chunks(), media_type=media if show else "application/octet-stream", headers=headers)


@routes.get("/objects/{object_id}/raw")
def object_raw(
    c: Console,
    request: Request,
    object_id: str,
    ap: Annotated[str, Query(max_length=63)],
    inline: Annotated[str | None, Query(pattern="^(1|0)$")] = None,
) -> Response:
    from shoal.lake import metadata

    who, _session = c.viewer(request)
    if not views.OBJECT_ID.match(object_id):
        return Response("not an object id", status_code=404)
    rows = (
        c.spark()
        .sql(
            f"SELECT raw_path, media_type FROM {metadata.table('object_index').sql} WHERE object_id = :o",
            args={"o": object_id},
        )
        .collect()
    )
    if not rows:
        return Response("no such object", status_code=404)
    links = [link for link in _raw_links(c, who, rows[0].raw_path) if link["access_point"] == ap]
    if not links:
        return Response(f"{who.name} may not read this object through {ap}", status_code=403)
    client = request.client.host if request.client else None
    try:
        target = RawAccess(c.settings).resolve(who, ap, links[0]["path"], client=client, via="console")
    except AccessDenied as exc:
        return Response(first_line(exc), status_code=403)
    show = inline == "1" and rows[0].media_type in INLINE_IMAGES
    headers = {
        "X-Content-Type-Options": "nosniff",
        "Content-Security-Policy": "sandbox; default-src 'none'",
        "Cache-Control": "private, no-store",
        "Content-Disposition": ("inline" if show else "attachment") + f"; filename*=UTF-8''{quote(target.name)}",
    }
    media = rows[0].media_type if show else "application/octet-stream"

    def chunks() -> Iterator[bytes]:
        with storage.open_input(target.uri) as f:
            while block := f.read(1 << 20):
                yield block

    return StreamingResponse(chunks(), media_type=media, headers=headers)


def add(router: APIRouter, c: Console) -> None:
    """Mount this module's pages on the console's router, in the order they are defined above."""
    routes.mount(router, c)
