"""Console pages: sign-in, catalog, objects, SQL, search, dashboards, workflows, governance."""

from __future__ import annotations

import csv
import io
import json
import logging
import threading
import time
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import quote, urlencode

from fastapi import APIRouter, FastAPI, Form, Query, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response, StreamingResponse
from fastapi.staticfiles import StaticFiles
from jinja2 import Environment, FileSystemLoader, select_autoescape

from shoal import __version__, storage
from shoal.config import Settings
from shoal.exceptions import ShoalError, SqlError, first_line
from shoal.governance import AccessDenied, AuditLog, AuthError, Governance, GovernanceError, Principal, Principals
from shoal.governance.access import AccessRequests, RawAccess
from shoal.web.console import dashboards as dash
from shoal.web.console import sessions as sess
from shoal.web.console import views
from shoal.web.console.history import QueryHistory

HERE = Path(__file__).resolve().parent.parent
PAGE_SIZE = 50
MAX_QUERY_ROWS = 10_000
OPERATORS = "operators"  # a group whose members may start and resume workflows (besides admins)
# Pictures the console shows inline; anything else is only downloaded.
INLINE_IMAGES = {"image/png", "image/jpeg", "image/gif", "image/webp", "image/bmp"}
CSP = (
    "default-src 'self'; script-src 'self'{eval}; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
    "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'; connect-src 'self'"
)


class LoginRequired(Exception):
    def __init__(self, next_url: str) -> None:
        self.next_url = next_url


class CsrfFailed(Exception):
    pass


def _safe_next(value: str | None) -> str:
    """Only local paths: a sign-in link must not bounce people to another site."""
    if not value or not value.startswith("/") or value.startswith("//") or "\\" in value:
        return "/catalog"
    return value


def mount(app: FastAPI, settings: Settings) -> None:
    env = Environment(
        loader=FileSystemLoader(str(HERE / "templates")),
        autoescape=select_autoescape(default=True, default_for_string=True),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["num"] = lambda v, fmt=",.0f": "" if v is None else format(v, fmt)
    principals = Principals(settings)
    sessions = sess.Sessions(settings)
    audit = AuditLog(settings)
    router = APIRouter(include_in_schema=False)
    app.mount("/static", StaticFiles(directory=str(HERE / "static")), name="static")

    def spark():
        from shoal.spark import get_spark

        return get_spark(settings)

    def viewer(request: Request) -> tuple[Principal, sess.Session]:
        session = sessions.get(request.cookies.get(sess.COOKIE))
        if session is None:
            raise LoginRequired(request.url.path + (f"?{request.url.query}" if request.url.query else ""))
        try:
            return principals.principal(session.principal), session
        except (GovernanceError, AuthError):  # the principal was removed: the session dies with it
            sessions.end(request.cookies.get(sess.COOKIE))
            raise LoginRequired(request.url.path) from None

    def check_csrf(request: Request, session: sess.Session, form_value: str | None) -> None:
        if not sess.same(form_value or request.headers.get("x-csrf-token"), session.csrf):
            raise CsrfFailed()

    def page(request: Request, template: str, who: Principal | None, session: sess.Session | None, **ctx: Any):
        html = env.get_template(template).render(
            request=request,
            who=who,
            csrf=session.csrf if session else "",
            version=__version__,
            path=request.url.path,
            **ctx,
        )
        response = HTMLResponse(html, status_code=int(ctx.get("status", 200)))
        response.headers["Content-Security-Policy"] = CSP.format(eval=" 'unsafe-eval'" if ctx.get("charts") else "")
        return response

    def is_operator(who: Principal) -> bool:
        return who.is_admin or OPERATORS in who.groups

    @app.exception_handler(LoginRequired)
    async def _login(_request: Request, exc: LoginRequired) -> Response:
        return RedirectResponse("/login?" + urlencode({"next": exc.next_url}), status_code=303)

    @app.exception_handler(CsrfFailed)
    async def _csrf(_request: Request, _exc: CsrfFailed) -> Response:
        return HTMLResponse(
            "<h1>403</h1><p>The form expired or did not come from this console. Go back, reload the page "
            "and try again.</p>",
            status_code=403,
        )

    @app.middleware("http")
    async def _headers(request: Request, call_next):
        response = await call_next(request)
        if not request.url.path.startswith(("/api/", "/raw/", "/docs", "/openapi", "/redoc")):
            response.headers.setdefault("Content-Security-Policy", CSP.format(eval=""))
            response.headers.setdefault("X-Content-Type-Options", "nosniff")
            response.headers.setdefault("X-Frame-Options", "DENY")
            response.headers.setdefault("Referrer-Policy", "no-referrer")
            if not request.url.path.startswith("/static/"):
                response.headers.setdefault("Cache-Control", "no-store")
        return response

    # ---- sign-in -----------------------------------------------------------------------
    @router.get("/login")
    def login_form(request: Request, next: str | None = None, error: str | None = None) -> Response:
        token = request.cookies.get(sess.LOGIN_COOKIE) or __import__("secrets").token_urlsafe(24)
        response = page(request, "login.html", None, None, login_csrf=token, next=_safe_next(next), error=error)
        response.set_cookie(
            sess.LOGIN_COOKIE, token, httponly=True, samesite="strict", secure=settings.server.secure_cookies
        )
        return response

    @router.post("/login")
    def login(
        request: Request,
        csrf: Annotated[str, Form()] = "",
        method: Annotated[str, Form()] = "password",
        user: Annotated[str, Form(max_length=200)] = "",
        password: Annotated[str, Form(max_length=1000)] = "",
        token: Annotated[str, Form(max_length=2000)] = "",
        next: Annotated[str, Form(max_length=2000)] = "/catalog",
    ) -> Response:
        if not sess.same(csrf, request.cookies.get(sess.LOGIN_COOKIE)):
            raise CsrfFailed()
        client = request.client.host if request.client else None
        try:
            who = principals.authenticate(token) if method == "token" else principals.check_password(user, password)
        except (AuthError, GovernanceError) as exc:
            audit.record(
                user or "anonymous", "console.login", None, False, reason=first_line(exc), client=client, via=method
            )
            return RedirectResponse(
                "/login?" + urlencode({"next": _safe_next(next), "error": first_line(exc)}), status_code=303
            )
        cookie, _session = sessions.create(who.name)
        audit.record(who.name, "console.login", None, True, client=client, via=method)
        response = RedirectResponse(_safe_next(next), status_code=303)
        response.set_cookie(
            sess.COOKIE,
            cookie,
            httponly=True,
            samesite="lax",
            secure=settings.server.secure_cookies,
            max_age=int(settings.server.session_hours * 3600),
        )
        response.delete_cookie(sess.LOGIN_COOKIE)
        return response

    @router.post("/logout")
    def logout(request: Request, csrf: Annotated[str, Form()] = "") -> Response:
        who, session = viewer(request)
        check_csrf(request, session, csrf)
        sessions.end(request.cookies.get(sess.COOKIE))
        audit.record(who.name, "console.logout", None, True)
        response = RedirectResponse("/login", status_code=303)
        response.delete_cookie(sess.COOKIE)
        return response

    @router.get("/")
    def home() -> Response:
        return RedirectResponse("/catalog", status_code=303)

    # ---- catalog -----------------------------------------------------------------------
    @router.get("/catalog")
    def catalog(request: Request) -> Response:
        who, session = viewer(request)
        gov = Governance(settings)
        databases: dict[str, list[dict[str, Any]]] = {}
        for (db,) in spark().sql("SHOW NAMESPACES").collect():
            for row in spark().sql(f"SHOW TABLES IN `{db}`").collect():
                name = f"{db}.{row['tableName']}"
                if gov.discoverable(who, name):
                    databases.setdefault(db, []).append(
                        {
                            "name": name,
                            "table": row["tableName"],
                            **gov.info(name),
                            "privileges": sorted(gov.privileges(who, name)),
                        }
                    )
        audit.record(who.name, "catalog.list", None, True, via="console", tables=sum(map(len, databases.values())))
        return page(request, "catalog.html", who, session, databases=databases)

    @router.get("/catalog/{database}/{table}")
    def table_page(request: Request, database: str, table: str) -> Response:
        who, session = viewer(request)
        name = f"{database}.{table}".lower()
        gov = Governance(settings)
        if not (_identifier(database) and _identifier(table)):
            return page(request, "error.html", who, session, status=404, message="not a table name")
        if not spark().catalog.tableExists(name):
            return page(request, "error.html", who, session, status=404, message=f"no table {name}")
        if not gov.discoverable(who, name):
            return page(request, "error.html", who, session, status=403, message=f"{name} is not visible to {who.name}")
        info = gov.info(name)
        columns = [{"name": f.name, "type": f.dataType.simpleString()} for f in spark().table(name).schema.fields]
        table_tags, column_tags = gov.tags_of(name, [c["name"] for c in columns])
        privileges = sorted(gov.privileges(who, name))
        sample = views.governed_rows(spark(), settings, who, f"SELECT * FROM `{database}`.`{table}` LIMIT 10", 10)
        snapshots: list[dict[str, Any]] = []
        if not sample["denied"]:
            try:
                snapshots = [
                    {k: views.to_json_value(v) for k, v in r.asDict().items()}
                    for r in spark()
                    .sql(
                        f"SELECT committed_at, snapshot_id, operation, summary['added-records'] AS added, "
                        f"summary['deleted-records'] AS deleted, summary['total-records'] AS total "
                        f"FROM `{database}`.`{table}`.snapshots ORDER BY committed_at DESC LIMIT 20"
                    )
                    .collect()
                ]
            except Exception:  # not an Iceberg table (an external table has no snapshots)
                snapshots = []
        return page(
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
            sample=sample,
            snapshots=snapshots,
        )

    # ---- objects -----------------------------------------------------------------------
    @router.get("/objects")
    def objects(
        request: Request,
        type: Annotated[str | None, Query(max_length=200)] = None,
        lang: Annotated[str | None, Query(max_length=20)] = None,
        pii: Annotated[str | None, Query(pattern="^(yes|no|)$")] = None,
        tag: Annotated[str | None, Query(max_length=200)] = None,
        text: Annotated[str | None, Query(max_length=500)] = None,
    ) -> Response:
        from shoal.catalog import list_objects

        who, session = viewer(request)
        if not settings.governance.metadata_visible_to_all and not who.is_admin:
            return page(
                request,
                "error.html",
                who,
                session,
                status=403,
                message="the object inventory is not open to all users here",
            )
        tags = None
        if tag:
            key, _, value = tag.partition("=")
            tags = {key.strip(): value.strip()}
        rows = list_objects(
            spark(),
            media_type=type or None,
            language=lang or None,
            has_pii={"yes": True, "no": False}.get(pii or ""),
            tags=tags,
            text=text or None,
            limit=200,
        )
        audit.record(who.name, "catalog.objects", None, True, via="console", rows=len(rows))
        filters = {"type": type or "", "lang": lang or "", "pii": pii or "", "tag": tag or "", "text": text or ""}
        return page(request, "objects.html", who, session, rows=rows, filters=filters)

    def _raw_links(who: Principal, raw_path: str | None) -> list[dict[str, str]]:
        """Access points through which this principal may read the object (checked again on read)."""
        if not raw_path:
            return []
        access = RawAccess(settings)
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

    @router.get("/objects/{object_id}")
    def object_page(request: Request, object_id: str) -> Response:
        from shoal.lake import metadata

        who, session = viewer(request)
        if not views.OBJECT_ID.match(object_id):
            return page(request, "error.html", who, session, status=404, message="not an object id")
        if not settings.governance.metadata_visible_to_all and not who.is_admin:
            return page(
                request, "error.html", who, session, status=403, message="object metadata is not open to all users here"
            )
        metadata.ensure_tables(spark())
        found = (
            spark()
            .sql(f"SELECT * FROM {metadata.table('object_index').sql} WHERE object_id = :o", args={"o": object_id})
            .collect()
        )
        if not found:
            return page(request, "error.html", who, session, status=404, message=f"no object {object_id}")
        obj = {k: views.to_json_value(v) for k, v in found[0].asDict(recursive=True).items()}
        extractions = [
            {k: views.to_json_value(v) for k, v in r.asDict().items()}
            for r in spark()
            .sql(
                f"SELECT extractor, stage, status, error, duration_ms, extracted_at FROM {metadata.table('extractions').sql} "
                "WHERE object_id = :o ORDER BY extracted_at, extractor",
                args={"o": object_id},
            )
            .collect()
        ]
        where = f"WHERE object_id = '{object_id}'"  # object_id matched ^[0-9a-f]{32}$ above

        def q(sql: str, limit: int = 5000) -> dict[str, Any]:
            return views.governed_rows(spark(), settings, who, sql, limit)

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
        raw_links = _raw_links(who, obj.get("raw_path"))
        first_image = image["rows"][0] if image["rows"] else None
        preview = None
        if raw_links and first_image and obj.get("media_type") in INLINE_IMAGES:
            link = raw_links[0]
            preview = {
                "src": f"/objects/{object_id}/raw?" + urlencode({"ap": link["access_point"], "inline": "1"}),
                "width": first_image["width"],
                "height": first_image["height"],
                "faces": [f for f in faces["rows"] if f["part"] == first_image["part"]],
                "words": [w for w in ocr["rows"] if w["part"] == first_image["part"]],
            }
        audit.record(who.name, "catalog.object", object_id, True, via="console")
        return page(
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
        )

    @router.get("/objects/{object_id}/raw")
    def object_raw(
        request: Request,
        object_id: str,
        ap: Annotated[str, Query(max_length=63)],
        inline: Annotated[str | None, Query(pattern="^(1|0)$")] = None,
    ) -> Response:
        from shoal.lake import metadata

        who, _session = viewer(request)
        if not views.OBJECT_ID.match(object_id):
            return Response("not an object id", status_code=404)
        rows = (
            spark()
            .sql(
                f"SELECT raw_path, media_type FROM {metadata.table('object_index').sql} WHERE object_id = :o",
                args={"o": object_id},
            )
            .collect()
        )
        if not rows:
            return Response("no such object", status_code=404)
        links = [link for link in _raw_links(who, rows[0].raw_path) if link["access_point"] == ap]
        if not links:
            return Response(f"{who.name} may not read this object through {ap}", status_code=403)
        client = request.client.host if request.client else None
        try:
            target = RawAccess(settings).resolve(who, ap, links[0]["path"], client=client, via="console")
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

        def chunks():
            with storage.open_input(target.uri) as f:
                while block := f.read(1 << 20):
                    yield block

        return StreamingResponse(chunks(), media_type=media, headers=headers)

    # ---- SQL editor ----------------------------------------------------------------------
    def _run_sql(who: Principal, sql: str, limit: int) -> tuple[dict[str, Any], str | None, int]:
        from shoal.governance import GovernedSql

        started = time.monotonic()
        try:
            result = GovernedSql(spark(), settings, who).execute(sql, limit=limit)
        except (AccessDenied, SqlError, ShoalError) as exc:
            return {"columns": [], "rows": []}, first_line(exc), int((time.monotonic() - started) * 1000)
        rows = [[views.to_json_value(v) for v in r] for r in result.rows]
        return (
            {"columns": result.columns, "types": result.types, "rows": rows},
            None,
            int((time.monotonic() - started) * 1000),
        )

    @router.get("/sql")
    def sql_page(
        request: Request,
        q: Annotated[int | None, Query(ge=1, le=2**31 - 1)] = None,
        page_no: Annotated[int, Query(alias="page", ge=1, le=10_000)] = 1,
    ) -> Response:
        who, session = viewer(request)
        history = QueryHistory(settings)
        entry = history.get(who.name, q) if q else None
        ctx: dict[str, Any] = {"sql": "", "result": None, "error": None, "query_id": None, "page": page_no}
        if q and entry is None:
            ctx["error"] = f"no query {q} in {who.name}'s history"
        if entry:
            upto = min(page_no * PAGE_SIZE + 1, MAX_QUERY_ROWS)
            result, error, ms = _run_sql(who, entry["sql"], upto)
            rows = result["rows"]
            ctx.update(
                sql=entry["sql"],
                query_id=entry["id"],
                error=error,
                ms=ms,
                result={
                    "columns": result["columns"],
                    "rows": rows[(page_no - 1) * PAGE_SIZE : page_no * PAGE_SIZE],
                    "first": (page_no - 1) * PAGE_SIZE + 1,
                    "has_next": len(rows) > page_no * PAGE_SIZE,
                }
                if not error
                else None,
            )
        ctx["history"] = history.list(who.name)
        return page(request, "sql.html", who, session, **ctx)

    @router.post("/sql")
    def sql_run(
        request: Request, sql: Annotated[str, Form(min_length=1, max_length=100_000)], csrf: Annotated[str, Form()] = ""
    ) -> Response:
        who, session = viewer(request)
        check_csrf(request, session, csrf)
        result, error, ms = _run_sql(who, sql, PAGE_SIZE + 1)
        qid = QueryHistory(settings).add(
            who.name, sql, ok=error is None, rows=None if error else len(result["rows"]), error=error, duration_ms=ms
        )
        return RedirectResponse(f"/sql?q={qid}", status_code=303)

    @router.get("/sql/{query_id}.csv")
    def sql_csv(request: Request, query_id: int) -> Response:
        who, _session = viewer(request)
        entry = QueryHistory(settings).get(who.name, query_id)
        if entry is None:
            return Response(f"no query {query_id} in {who.name}'s history", status_code=404)
        result, error, _ms = _run_sql(who, entry["sql"], 100_000)
        if error:
            return Response(error, status_code=400, media_type="text/plain")
        buf = io.StringIO()
        writer = csv.writer(buf)
        writer.writerow(result["columns"])
        for row in result["rows"]:
            writer.writerow([views.csv_safe(v if not isinstance(v, dict | list) else json.dumps(v)) for v in row])
        return Response(
            buf.getvalue(),
            media_type="text/csv; charset=utf-8",
            headers={"Content-Disposition": f'attachment; filename="query-{query_id}.csv"'},
        )

    # ---- search --------------------------------------------------------------------------
    @router.get("/search")
    def search_page(
        request: Request,
        q: Annotated[str, Query(max_length=500)] = "",
        type: Annotated[str | None, Query(max_length=200)] = None,
        lang: Annotated[str | None, Query(max_length=20)] = None,
        mode: Annotated[str, Query(pattern="^(hybrid|vector|keyword)$")] = "hybrid",
        k: Annotated[int, Query(ge=1, le=100)] = 10,
    ) -> Response:
        from shoal.search.query import keyword_terms, search

        who, session = viewer(request)
        hits, error = [], None
        if q.strip():
            try:
                found = search(
                    settings,
                    q,
                    k=k,
                    media_type=type or None,
                    lang=lang or None,
                    principal=who,
                    spark=spark(),
                    mode=mode,
                )
                terms = keyword_terms(q)
                hits = [{**h.to_dict(), "html": views.mark_terms(h.snippet, terms)} for h in found]
            except ShoalError as exc:
                error = first_line(exc)
        filters = {"q": q, "type": type or "", "lang": lang or "", "mode": mode, "k": k}
        return page(request, "search.html", who, session, hits=hits, error=error, filters=filters)

    # ---- dashboards ------------------------------------------------------------------------
    def _feed_version(board: dash.Dashboard) -> str:
        from shoal.workflows import Store

        store = Store(settings)
        latest = []
        for wf in board.refresh_after:
            done = store.list_executions(workflow=wf, status="SUCCEEDED", limit=1)
            if done:
                latest.append(f"{done[0].id}@{done[0].stopped_at.isoformat() if done[0].stopped_at else ''}")
        return "|".join(latest)

    @router.get("/dashboards")
    def dashboards_page(request: Request) -> Response:
        who, session = viewer(request)
        boards, errors = dash.load_all(settings)
        return page(
            request,
            "dashboards.html",
            who,
            session,
            boards=sorted(boards.values(), key=lambda b: b.title),
            errors=errors,
        )

    @router.get("/dashboards/{name}/version")
    def dashboard_version(request: Request, name: str) -> Response:
        viewer(request)
        boards, _ = dash.load_all(settings)
        if name not in boards:
            return JSONResponse({"detail": f"no dashboard {name}"}, status_code=404)
        return JSONResponse({"version": _feed_version(boards[name])})

    @router.get("/dashboards/{name}")
    def dashboard_page(request: Request, name: str) -> Response:
        who, session = viewer(request)
        boards, _ = dash.load_all(settings)
        board = boards.get(name)
        if board is None:
            return page(request, "error.html", who, session, status=404, message=f"no dashboard {name}")
        chosen = {
            f.field: request.query_params[f.field]
            for f in board.filters
            if request.query_params.get(f.field) not in (None, "")
        }
        data: dict[str, dict[str, Any]] = {}
        options: dict[str, list[str]] = {}
        for ds, sql in board.datasets.items():
            mine = {k: v for k, v in chosen.items() if any(f.field == k and f.dataset == ds for f in board.filters)}
            data[ds] = views.governed_rows(spark(), settings, who, dash.filtered_sql(sql, mine), dash.MAX_ROWS)
        for f in board.filters:
            unfiltered = views.governed_rows(spark(), settings, who, board.datasets[f.dataset], dash.MAX_ROWS)
            options[f.field] = sorted({str(r.get(f.field)) for r in unfiltered["rows"] if r.get(f.field) is not None})
        charts = []
        for i, chart in enumerate(board.charts):
            d = data[chart.dataset]
            item: dict[str, Any] = {"chart": chart, "id": f"chart-{i}", "denied": d["denied"]}
            if not d["denied"]:
                if chart.type == "kpi":
                    item["value"] = dash.kpi_value(chart, d["rows"])
                elif chart.type == "table":
                    cols = chart.columns or d["columns"]
                    item["columns"] = cols
                    item["rows"] = [[r.get(c) for c in cols] for r in d["rows"][:500]]
                else:
                    item["spec"] = dash.vega_lite(chart, d["rows"])
            charts.append(item)
        audit.record(who.name, "dashboard.view", name, True, via="console")
        return page(
            request,
            "dashboard.html",
            who,
            session,
            board=board,
            charts=charts,
            options=options,
            chosen=chosen,
            feed_version=_feed_version(board),
            queried_at=time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        )

    # ---- workflows -------------------------------------------------------------------------
    @router.get("/workflows")
    def workflows_page(request: Request) -> Response:
        from shoal.workflows import Store
        from shoal.workflows.schedule import Schedules

        who, session = viewer(request)
        store = Store(settings)
        return page(
            request,
            "workflows.html",
            who,
            session,
            workflows=store.list_workflows(),
            executions=[e.to_dict() for e in store.list_executions(limit=30)],
            schedules=Schedules(settings).list(),
            operator=is_operator(who),
        )

    @router.get("/workflows/{name}")
    def workflow_page(request: Request, name: str) -> Response:
        from shoal.workflows import Store

        who, session = viewer(request)
        store = Store(settings)
        wf = store.workflow(name)
        if wf is None:
            return page(request, "error.html", who, session, status=404, message=f"no workflow {name}")
        return page(
            request,
            "workflow.html",
            who,
            session,
            name=name,
            wf=wf,
            definition=json.dumps(wf["definition"], indent=2),
            executions=[e.to_dict() for e in store.list_executions(workflow=name, limit=50)],
            operator=is_operator(who),
        )

    @router.get("/workflows/{name}/graph.svg")
    def workflow_graph(request: Request, name: str) -> Response:
        from shoal.workflows import Store
        from shoal.workflows.graph import render

        viewer(request)
        wf = Store(settings).workflow(name)
        if wf is None:
            return Response("no such workflow", status_code=404)
        return Response(render(wf["definition"], title=name), media_type="image/svg+xml")

    @router.post("/workflows/{name}/start")
    def workflow_start(
        request: Request,
        name: str,
        csrf: Annotated[str, Form()] = "",
        input: Annotated[str, Form(max_length=100_000)] = "{}",
    ) -> Response:
        from shoal import workflows
        from shoal.workflows.engine import new_execution_id

        who, session = viewer(request)
        check_csrf(request, session, csrf)
        if not is_operator(who):
            audit.record(who.name, "workflow.start", name, False, reason="not an operator", via="console")
            return page(
                request,
                "error.html",
                who,
                session,
                status=403,
                message=f"{who.name} may not start workflows (admins and the {OPERATORS} group)",
            )
        try:
            payload = json.loads(input or "{}")
            machine = workflows.load_machine(settings, name)
        except (ValueError, ShoalError) as exc:
            return page(
                request, "error.html", who, session, status=400, message=f"cannot start {name}: {first_line(exc)}"
            )
        execution_id = new_execution_id(machine.name)
        audit.record(who.name, "workflow.start", name, True, via="console", execution=execution_id)
        threading.Thread(
            target=_quietly(workflows.run),
            args=(settings, machine, payload),
            kwargs={"execution_id": execution_id, "trigger": {"console": who.name}},
            daemon=True,
            name=f"console-{execution_id}",
        ).start()
        _wait_created(execution_id)
        return RedirectResponse(f"/executions/{quote(execution_id)}", status_code=303)

    def _wait_created(execution_id: str, timeout: float = 10) -> None:
        from shoal.workflows import Store

        store = Store(settings)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                store.execution(execution_id)
                return
            except ShoalError:
                time.sleep(0.1)

    @router.get("/executions/{execution_id}")
    def execution_page(request: Request, execution_id: str) -> Response:
        from shoal.workflows import Store

        who, session = viewer(request)
        store = Store(settings)
        try:
            record = store.execution(execution_id)
        except ShoalError:
            return page(request, "error.html", who, session, status=404, message=f"no execution {execution_id}")
        return page(
            request,
            "execution.html",
            who,
            session,
            record=record.to_dict(full=True),
            input=json.dumps(record.input, indent=2, default=str),
            output=json.dumps(record.output, indent=2, default=str),
            history=store.history(execution_id),
            operator=is_operator(who),
            running=record.status == "RUNNING",
        )

    @router.get("/executions/{execution_id}/graph.svg")
    def execution_graph(request: Request, execution_id: str) -> Response:
        from shoal.workflows import Store
        from shoal.workflows.graph import render

        viewer(request)
        store = Store(settings)
        try:
            record = store.execution(execution_id)
        except ShoalError:
            return Response("no such execution", status_code=404)
        svg = render(record.definition, title=f"{record.workflow} {record.status}", history=store.history(execution_id))
        return Response(svg, media_type="image/svg+xml")

    @router.post("/executions/{execution_id}/resume")
    def execution_resume(request: Request, execution_id: str, csrf: Annotated[str, Form()] = "") -> Response:
        from shoal import workflows

        who, session = viewer(request)
        check_csrf(request, session, csrf)
        if not is_operator(who):
            return page(request, "error.html", who, session, status=403, message=f"{who.name} may not resume workflows")
        audit.record(who.name, "workflow.resume", execution_id, True, via="console")
        threading.Thread(target=_quietly(workflows.resume), args=(settings, execution_id), daemon=True).start()
        time.sleep(0.3)
        return RedirectResponse(f"/executions/{quote(execution_id)}", status_code=303)

    # ---- governance ------------------------------------------------------------------------
    @router.get("/governance")
    def governance_page(request: Request, message: str | None = None) -> Response:
        who, session = viewer(request)
        gov = Governance(settings)
        requests_ = AccessRequests(settings).list(who)
        grants = [g.to_dict() for g in (gov.list() if who.is_admin else gov.grants_for(who))]
        return page(
            request,
            "governance.html",
            who,
            session,
            requests=requests_,
            grants=grants,
            access_points=RawAccess(settings).list(who),
            audit_rows=audit.list(limit=200) if who.is_admin else None,
            message=message,
        )

    @router.post("/governance/requests")
    def governance_request(
        request: Request,
        table: Annotated[str, Form(min_length=3, max_length=400)],
        reason: Annotated[str, Form(min_length=5, max_length=2000)],
        csrf: Annotated[str, Form()] = "",
    ) -> Response:
        who, session = viewer(request)
        check_csrf(request, session, csrf)
        try:
            made = AccessRequests(settings).request(who, table, reason)
            message = f"request {made['id']} for {table} sent"
        except (GovernanceError, AccessDenied) as exc:
            message = first_line(exc)
        return RedirectResponse("/governance?" + urlencode({"message": message}), status_code=303)

    @router.post("/governance/requests/{request_id}/{decision}")
    def governance_decide(
        request: Request,
        request_id: int,
        decision: str,
        csrf: Annotated[str, Form()] = "",
        note: Annotated[str, Form(max_length=2000)] = "",
    ) -> Response:
        who, session = viewer(request)
        check_csrf(request, session, csrf)
        if decision not in ("approve", "reject"):
            return Response("unknown decision", status_code=404)
        try:
            AccessRequests(settings).decide(who, request_id, approve=decision == "approve", note=note or None)
            message = f"request {request_id} {decision}d"
        except (GovernanceError, AccessDenied) as exc:
            message = first_line(exc)
        return RedirectResponse("/governance?" + urlencode({"message": message}), status_code=303)

    app.include_router(router)


def _identifier(name: str) -> bool:
    return name.replace("_", "a").isalnum() and len(name) <= 128


def _quietly(fn):
    """Workflow runs in a console thread: the execution's record holds any failure; log the rest."""

    def run(*args, **kwargs):
        try:
            fn(*args, **kwargs)
        except Exception:
            logging.getLogger("shoal.console").exception("workflow run from the console failed")

    return run
