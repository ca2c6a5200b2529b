"""The SQL editor (run once, kept results, paging, CSV, history) and the search page."""

from __future__ import annotations

import csv
import io
import json
import logging
import time
from typing import Annotated, Any

from fastapi import APIRouter, Form, Query, Request
from fastapi.responses import RedirectResponse, Response

from shoal.exceptions import ShoalError, SqlError, first_line
from shoal.governance import AccessDenied, Principal
from shoal.web.console import views
from shoal.web.console.base import PAGE_SIZE, Console
from shoal.web.console.history import MAX_KEPT_ROWS, QueryHistory


def add(router: APIRouter, c: Console) -> None:
    # ---- SQL editor ----------------------------------------------------------------------
    def _run_sql(who: Principal, sql: str, limit: int) -> tuple[dict[str, Any], str | None, int]:
        from shoal.governance import GovernedSql

        started = time.monotonic()
        try:
            result = GovernedSql(c.spark(), c.settings, who).execute(sql, limit=limit)
        except (AccessDenied, SqlError, ShoalError) as exc:
            return {"columns": [], "rows": []}, first_line(exc), int((time.monotonic() - started) * 1000)
        except Exception as exc:  # a failed query, audited; never an unaudited 500
            logging.getLogger("shoal.console").exception("unexpected error running a query")
            c.audit.record(who.name, "api.error", "/sql", False, reason=type(exc).__name__, sql=sql, via="console")
            error = "the query failed (the error is in the audit log)"
            return {"columns": [], "rows": []}, error, int((time.monotonic() - started) * 1000)
        rows = [[views.to_json_value(v) for v in r] for r in result.rows]
        return (
            {"columns": result.columns, "types": result.types, "rows": rows},
            None,
            int((time.monotonic() - started) * 1000),
        )

    # A statement runs only in sql_run (a POST with the CSRF token). The result page and the
    # CSV read what that run kept: GETs never execute SQL (a reload, a prefetch or a link
    # from another site would otherwise repeat writes).
    def _not_found(request: Request, who: Principal, session: Any) -> Response:
        # Same answer for a missing id and another principal's: ids are not confirmable.
        return c.page(
            request,
            "sql.html",
            who,
            session,
            status=404,
            sql="",
            result=None,
            error="no such query in your history",
            query_id=None,
            page=1,
            history=QueryHistory(c.settings).list(who.name),
        )

    @router.get("/sql")
    def sql_page(
        request: Request,
        q: Annotated[str | None, Query(max_length=64)] = None,
        page_no: Annotated[int, Query(alias="page", ge=1, le=10_000)] = 1,
    ) -> Response:
        who, session = c.viewer(request)
        history = QueryHistory(c.settings)
        ctx: dict[str, Any] = {"sql": "", "result": None, "error": None, "query_id": None, "page": page_no}
        if q:
            entry = history.get(who.name, q)
            if entry is None:
                return _not_found(request, who, session)
            kept = entry["result"] or {"columns": [], "rows": []}
            rows = kept["rows"]
            ctx.update(
                sql=entry["sql"],
                query_id=entry["id"],
                error=entry["error"],
                ms=entry["duration_ms"],
                ran_at=entry["ran_at"],
                truncated=entry["truncated"],
                kept=len(rows),
                result={
                    "columns": kept["columns"],
                    "rows": rows[(page_no - 1) * PAGE_SIZE : page_no * PAGE_SIZE],
                    "first": (page_no - 1) * PAGE_SIZE + 1,
                    "has_next": len(rows) > page_no * PAGE_SIZE,
                }
                if entry["ok"]
                else None,
            )
        ctx["history"] = history.list(who.name)
        return c.page(request, "sql.html", who, session, **ctx)

    @router.post("/sql")
    def sql_run(
        request: Request, sql: Annotated[str, Form(min_length=1, max_length=100_000)], csrf: Annotated[str, Form()] = ""
    ) -> Response:
        who, session = c.viewer(request)
        c.check_csrf(request, session, csrf)
        # One more row than is kept tells whether the result was cut short.
        result, error, ms = _run_sql(who, sql, MAX_KEPT_ROWS + 1)
        truncated = len(result["rows"]) > MAX_KEPT_ROWS
        qid = QueryHistory(c.settings).add(
            who.name,
            sql,
            ok=error is None,
            result=None if error else result,
            truncated=truncated,
            error=error,
            duration_ms=ms,
        )
        return RedirectResponse(f"/sql?q={qid}", status_code=303)

    @router.get("/sql/{query_id}.csv")
    def sql_csv(request: Request, query_id: str) -> Response:
        who, _session = c.viewer(request)
        entry = QueryHistory(c.settings).get(who.name, query_id)
        if entry is None:
            return Response("no such query in your history", status_code=404, media_type="text/plain")
        if not entry["ok"]:
            return Response(entry["error"] or "the query failed", status_code=400, media_type="text/plain")
        kept = entry["result"] or {"columns": [], "rows": []}
        buf = io.StringIO()
        writer = csv.writer(buf)
        writer.writerow([views.csv_safe(name) for name in kept["columns"]])
        for row in kept["rows"]:
            writer.writerow([views.csv_safe(v if not isinstance(v, dict | list) else json.dumps(v)) for v in row])
        return Response(
            buf.getvalue(),
            media_type="text/csv; charset=utf-8",
            headers={"Content-Disposition": f'attachment; filename="query-{entry["id"]}.csv"'},
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

        who, session = c.viewer(request)
        hits, error = [], None
        if q.strip():
            try:
                found = search(
                    c.settings,
                    q,
                    k=k,
                    media_type=type or None,
                    lang=lang or None,
                    principal=who,
                    spark=c.spark(),
                    mode=mode,
                )
                terms = keyword_terms(q)
                hits = [{**h.to_dict(), "html": views.mark_terms(h.snippet, terms)} for h in found]
            except ShoalError as exc:
                error = first_line(exc)
        filters = {"q": q, "type": type or "", "lang": lang or "", "mode": mode, "k": k}
        return c.page(request, "search.html", who, session, hits=hits, error=error, filters=filters)
