"""Original files: which access points let a principal read an object's raw file, and the
routes that stream it (audited, sandboxed, inline only for what a browser shows safely)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Annotated
from urllib.parse import quote

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response, StreamingResponse

from shoal import storage
from shoal.exceptions import first_line
from shoal.governance import AccessDenied, Principal
from shoal.governance.access import RawAccess
from shoal.routing import Routes
from shoal.web.console import views
from shoal.web.console.base import INLINE_IMAGES, INLINE_MEDIA, Console

# Media types as ingest stores them are data from the file (a ZIP's own `mimetype` member): only a
# plain type/subtype reaches a Content-Type header.
_MEDIA_TYPE = re.compile(r"[a-z]+/[a-z0-9][a-z0-9.+-]*")
PREVIEW_BYTES = 16 * 1024  # of a text object's raw bytes shown on its page


def raw_access_links(c: Console, who: Principal, raw_path: str | None) -> list[dict[str, str]]:
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


def original_allowed(c: Console, who: Principal, raw_path: str | None) -> bool:
    """Admins read every original; anyone else through an access point that covers it."""
    return bool(raw_path) and (who.is_admin or bool(raw_access_links(c, who, raw_path)))


def raw_text_preview(c: Console, who: Principal, link: dict[str, str], request: Request) -> str | None:
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


def _stream(uri: str, media: str, headers: dict[str, str]) -> StreamingResponse:
    """The file at `uri`, streamed in 1 MiB blocks."""

    def chunks() -> Iterator[bytes]:
        with storage.open_input(uri) as f:
            while block := f.read(1 << 20):
                yield block

    return StreamingResponse(chunks(), media_type=media, headers=headers)


routes = Routes()


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
        links = raw_access_links(c, who, row.raw_path)
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
    return _stream(uri, media if show else "application/octet-stream", headers)


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
    links = [link for link in raw_access_links(c, who, rows[0].raw_path) if link["access_point"] == ap]
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
    return _stream(target.uri, media, headers)


def add(router: APIRouter, c: Console) -> None:
    """Mount this module's pages on the console's router, in the order they are defined above."""
    routes.mount(router, c)
