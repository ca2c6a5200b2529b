"""The SQL editor (run once, kept results, paging, CSV, history) and the search page."""

from __future__ import annotations

import contextlib
import csv
import decimal
import io
import json
import logging
import math
import re
import secrets
import threading
import time
from collections.abc import Iterator
from typing import Annotated, Any
from urllib.parse import urlencode

from fastapi import APIRouter, Form, Query, Request
from fastapi.responses import JSONResponse, RedirectResponse, Response, StreamingResponse

from shoal.exceptions import ShoalError, SqlError, first_line
from shoal.governance import AccessDenied, Principal
from shoal.routing import Routes
from shoal.web.console import views
from shoal.web.console.base import PAGE_SIZE, Console, identifier
from shoal.web.console.history import QueryHistory

# What the SQL page may say after a save or delete, chosen by a code (never text from the URL).
SQL_NOTICES = {
    "saved": "Query saved.",
    "deleted": "Saved query deleted.",
    "not-yours": "Only the owner of a saved query can delete it.",
}


routes = Routes()


# ---- SQL editor ----------------------------------------------------------------------
def _run_sql(
    c: Console, who: Principal, sql: str, limit: int, run_token: str = ""
) -> tuple[dict[str, Any], str | None, int]:
    from shoal.admission import admission, spark_pool
    from shoal.governance import GovernedSql

    started = time.monotonic()
    spark = c.spark()
    # Jobs started by this thread belong to a group of its own (PySpark pins the thread to a
    # JVM thread, so the group is this request's only): cancelJobGroup stops just them.
    group = f"shoal-console-{secrets.token_hex(8)}"
    key = (who.name, run_token)
    if run_token:
        with c.run_lock:
            c.running[key] = group
    spark.sparkContext.setJobGroup(group, f"console query by {who.name}", interruptOnCancel=True)
    spark.sparkContext.setLocalProperty("spark.scheduler.pool", spark_pool(who.name))
    try:
        # Admitted as the API's and the PostgreSQL endpoint's queries are (Overloaded is a ShoalError).
        with admission(c.settings).enter(who.name):
            result = GovernedSql(spark, c.settings, who).execute(sql, limit=limit)
    except (AccessDenied, SqlError, ShoalError) as exc:
        error = first_line(exc)
        if group in c.cancelled:  # Spark's own text names job ids and groups: say it plainly
            error = "cancelled: you pressed Cancel before the statement finished"
        return {"columns": [], "rows": []}, error, int((time.monotonic() - started) * 1000)
    except Exception as exc:  # a failed query, audited; never an unaudited 500
        logging.getLogger("shoal.console").exception("unexpected error running a query")
        c.audit.record(who.name, "api.error", "/sql", False, reason=type(exc).__name__, sql=sql, via="console")
        error = "the query failed (the error is in the audit log)"
        return {"columns": [], "rows": []}, error, int((time.monotonic() - started) * 1000)
    finally:
        spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]  # None clears it (PySpark; the stub says str)
        with c.run_lock:
            c.running.pop(key, None)
            c.cancelled.discard(group)
    rows = [[views.to_json_value(v) for v in r] for r in result.rows]
    return (
        {
            "columns": result.columns,
            "types": result.types,
            "rows": rows,
            "statement": result.statement,
            "affected": result.affected,
        },
        None,
        int((time.monotonic() - started) * 1000),
    )


def _error_spot(sql: str, error: str | None) -> dict[str, Any] | None:
    """The line an error's "(line L, column C)" names, split around the token there, for the
    marker under the editor (and the caret script.js puts there). Only for a single statement:
    positions count from the start of the statement that failed."""
    from shoal.sql import split_statements
    from shoal.sql.positions import position

    spot = position(error or "")
    try:
        single = len(split_statements(sql)) == 1
    except SqlError:
        single = False
    if spot is None or not single:
        return None
    # The statement was run stripped: count its lines from its first non-blank character.
    line, column = spot[0] + sql[: len(sql) - len(sql.lstrip())].count("\n"), spot[1]
    lines = sql.splitlines()
    if not 1 <= line <= len(lines):
        return None
    text, at = lines[line - 1], column - 1
    if spot[0] == 1:  # and its first line from its first non-blank column
        at += len(text) - len(text.lstrip())
    word = re.match(r"\w+|\S?", text[at:])
    end = at + max(1, len(word.group(0) if word else ""))
    return {"line": line, "column": at + 1, "before": text[:at], "token": text[at:end], "after": text[end:]}


def _sort_key(kind: str) -> Any:
    """How the kept rows of one column sort: NULL first (as Spark sorts ascending, and last
    descending), numbers as numbers (decimals are kept as text), then text, then the rest."""

    def key(value: Any) -> tuple[Any, ...]:
        if value is None:
            return (0,)
        if kind.startswith("decimal") and isinstance(value, str):
            try:
                return (1, decimal.Decimal(value))
            except decimal.InvalidOperation:
                return (2, value)
        if isinstance(value, int | float):
            return (1, value)
        if isinstance(value, str):
            return (2, value)
        return (3, json.dumps(value, sort_keys=True, default=str))

    return key


def _sorted_rows(rows: list[list[Any]], types: list[str], column: int, desc: bool) -> list[list[Any]]:
    """The kept rows sorted by one column (stable: ties keep the order the statement gave)."""
    key = _sort_key(types[column] if column < len(types) else "")
    return sorted(rows, key=lambda r: key(r[column]), reverse=desc)


def _order(value: int | None, columns: int) -> tuple[int, bool] | None:
    """`order` is a result column's 1-based position, negative for descending: (index, desc)."""
    if value is None or not 1 <= abs(value) <= columns:
        return None
    return abs(value) - 1, value < 0


def _single_query(sql: str) -> Any:
    """The statement's parsed tree when it is one query (a SELECT, a set operation, VALUES...):
    only those run again for a sort or an export of the whole result. None otherwise."""
    import sqlglot
    from sqlglot import exp

    from shoal.sql import split_statements

    try:
        if len(split_statements(sql)) != 1:
            return None
        tree = sqlglot.parse_one(sql, read="spark")
    except (SqlError, sqlglot.errors.SqlglotError, RecursionError):
        return None
    return tree if isinstance(tree, exp.Query) else None


def _sorted_sql(sql: str, column: int, desc: bool) -> str | None:
    """The statement wrapped, as a parsed tree, in `SELECT * FROM (...) ORDER BY <position>`:
    the column is named by its position (an integer checked against the result's columns), so
    nothing from the request is spliced into SQL text, and duplicate column names cannot make it
    ambiguous. The wrapped statement is then governed as any other (the rewrite applies inside)."""
    from sqlglot import exp

    tree = _single_query(sql)
    if tree is None:
        return None
    ordered = exp.Ordered(this=exp.Literal.number(column + 1), desc=desc, nulls_first=not desc)
    return exp.select("*").from_(tree.subquery("shoal_sorted")).order_by(ordered).sql(dialect="spark")


def _keep_run(c: Console, who: Principal, sql: str, run_token: str, sort: dict[str, Any] | None = None) -> str:
    """Run a statement for the SQL page and keep it in the viewer's history; the entry's id."""
    keep = c.settings.server.console_kept_rows
    # One more row than is kept tells whether the result was cut short.
    result, error, ms = _run_sql(c, who, sql, keep + 1, run_token)
    if sort is not None and error is None:
        result["sort"] = sort
    return QueryHistory(c.settings).add(
        who.name,
        sql,
        ok=error is None,
        result=None if error else result,
        truncated=len(result["rows"]) > keep,
        error=error,
        duration_ms=ms,
        keep=keep,
    )


# A statement runs only in sql_run (a POST with the CSRF token). The result page and the
# CSV read what that run kept: GETs never execute SQL (a reload, a prefetch or a link
# from another site would otherwise repeat writes).
def _sql_page(c: Console, request: Request, who: Principal, session: Any, **ctx: Any) -> Response:
    """The SQL page with the tables and columns the viewer may read (the schema tree and the
    editor's completion) in it, and the page view's one audit row: what it showed (the
    history entry, if any) and how many tables the viewer was shown."""
    schema = views.readable_schema(c.spark(), c.settings, who)
    tables = sum(len(t) for t in schema.values())
    found = int(ctx.get("status", 200)) == 200
    c.audit.record(
        who.name,
        "query.page",
        ctx.get("query_id"),
        found,
        reason=None if found else "no such query in your history",
        via="console",
        tables=tables,
    )
    return c.page(request, "sql.html", who, session, schema=schema, **ctx)


def _not_found(c: Console, request: Request, who: Principal, session: Any) -> Response:
    # Same answer for a missing id and another principal's: ids are not confirmable.
    return _sql_page(
        c,
        request,
        who,
        session,
        status=404,
        sql="",
        result=None,
        error="no such query in your history",
        query_id=None,
        page=1,
        history=QueryHistory(c.settings).list(who.name),
        saved=QueryHistory(c.settings).list_saved(who.name),
        run_token=secrets.token_urlsafe(12),
    )


@routes.get("/sql")
def sql_page(
    c: Console,
    request: Request,
    q: Annotated[str | None, Query(max_length=64)] = None,
    saved_id: Annotated[str | None, Query(alias="saved", max_length=64)] = None,
    table: Annotated[str | None, Query(max_length=300)] = None,
    page_no: Annotated[int, Query(alias="page", ge=1, le=1_000_000)] = 1,
    done: Annotated[str | None, Query(max_length=20)] = None,
    order: Annotated[int | None, Query(ge=-100_000, le=100_000)] = None,
) -> Response:
    who, session = c.viewer(request)
    history = QueryHistory(c.settings)
    ctx: dict[str, Any] = {"sql": "", "result": None, "error": None, "query_id": None, "page": page_no}
    ctx["notice"] = SQL_NOTICES.get(done or "")
    if saved_id:
        entry = history.saved_query(who.name, saved_id)
        if entry is None:
            return _not_found(c, request, who, session)
        ctx.update(sql=entry["sql"], saved_entry=entry, tab_title=entry["name"])
    elif table and all(identifier(part) for part in table.split(".")) and table.count(".") == 1:
        # "Query this table" from the catalog: a statement to start from, not run.
        db, name = table.split(".")
        ctx["sql"] = f"SELECT *\nFROM `{db}`.`{name}`\nLIMIT 100"
        ctx["tab_title"] = f"{db}.{name}"
    if q:
        entry = history.get(who.name, q)
        if entry is None:
            return _not_found(c, request, who, session)
        kept = entry["result"] or {"columns": [], "rows": []}
        rows = kept["rows"]
        # Sorted over the whole result: the kept rows when they are all of it (no run), else
        # the statement was run again sorted (sql_sort) and its entry says by what.
        sort = None if entry["truncated"] else _order(order, len(kept["columns"]))
        if sort is not None:
            rows = _sorted_rows(rows, kept.get("types") or [], *sort)
        elif kept.get("sort"):
            sort = (kept["sort"]["column"], kept["sort"]["desc"])
        pages = max(1, math.ceil(len(rows) / PAGE_SIZE))
        page_no = min(page_no, pages)
        ctx.update(
            page=page_no,
            pages=pages,
            sort=sort,
            order=(sort[0] + 1) * (-1 if sort[1] else 1) if sort else None,
            # Sorting a cut-short result runs the statement again: only a single query can be.
            rerun_ok=entry["ok"] and bool(kept["columns"]) and _single_query(entry["sql"]) is not None,
        )
        ctx.update(
            sql=entry["sql"],
            query_id=entry["id"],
            error=entry["error"],
            ms=entry["duration_ms"],
            ran_at=entry["ran_at"],
            truncated=entry["truncated"],
            kept=len(rows),
            total=None if entry["truncated"] else len(rows),
            result={
                "statement": kept.get("statement"),
                "affected": kept.get("affected"),
                "columns": kept["columns"],
                "rows": rows[(page_no - 1) * PAGE_SIZE : page_no * PAGE_SIZE],
                "first": (page_no - 1) * PAGE_SIZE + 1,
                "has_next": len(rows) > page_no * PAGE_SIZE,
            }
            if entry["ok"]
            else None,
        )
        ctx["spot"] = _error_spot(entry["sql"], entry["error"])
    ctx["history"] = history.list(who.name)
    ctx["saved"] = history.list_saved(who.name)
    ctx["run_token"] = secrets.token_urlsafe(12)
    return _sql_page(c, request, who, session, **ctx)


@routes.get("/sql/schema.json")
def sql_schema(c: Console, request: Request) -> Response:
    """The tables and columns the viewer may read, as the SQL page has them in it (for other
    clients: the page itself does not fetch this), audited as `catalog.schema`."""
    who, _session = c.viewer(request)
    schema = views.readable_schema(c.spark(), c.settings, who)
    c.audit.record(who.name, "catalog.schema", None, True, via="console", tables=sum(len(t) for t in schema.values()))
    return JSONResponse(schema, headers={"Cache-Control": "no-store"})


@routes.post("/sql")
def sql_run(
    c: Console,
    request: Request,
    sql: Annotated[str, Form(min_length=1, max_length=100_000)],
    csrf: Annotated[str, Form()] = "",
    run: Annotated[str, Form(max_length=64)] = "",
) -> Response:
    who, session = c.viewer(request)
    c.check_csrf(request, session, csrf)
    qid = _keep_run(c, who, sql, run)
    if request.headers.get("accept") == "application/json":  # the editor's script posted it
        return JSONResponse({"location": f"/sql?q={qid}"})
    return RedirectResponse(f"/sql?q={qid}", status_code=303)


@routes.post("/sql/cancel")
def sql_cancel(
    c: Console,
    request: Request,
    run: Annotated[str, Form(min_length=1, max_length=64)],
    csrf: Annotated[str, Form()] = "",
) -> Response:
    """Cancel the viewer's own running statement (Spark cancels its job group's jobs)."""
    who, session = c.viewer(request)
    c.check_csrf(request, session, csrf)
    with c.run_lock:
        group = c.running.get((who.name, run))
        if group:
            c.cancelled.add(group)
    if group is None:
        return JSONResponse({"cancelled": False, "reason": "no statement of yours is running"}, status_code=404)
    sc = c.spark().sparkContext

    def keep_cancelling() -> None:
        # Spark cancels only the group's active jobs: a statement still being checked or
        # planned starts its jobs later, so repeat until the run has ended.
        while True:
            with c.run_lock:
                if group not in c.cancelled:
                    return
            sc.cancelJobGroup(group)
            time.sleep(0.5)

    threading.Thread(target=keep_cancelling, name="shoal-console-cancel", daemon=True).start()
    c.audit.record(who.name, "query.cancel", None, True, via="console")
    return JSONResponse({"cancelled": True})


@routes.post("/sql/saved")
def sql_save(
    c: Console,
    request: Request,
    name: Annotated[str, Form(min_length=1, max_length=200)],
    sql: Annotated[str, Form(min_length=1, max_length=100_000)],
    csrf: Annotated[str, Form()] = "",
    shared: Annotated[str, Form(max_length=10)] = "",
) -> Response:
    who, session = c.viewer(request)
    c.check_csrf(request, session, csrf)
    saved_id = QueryHistory(c.settings).save(who.name, name.strip() or "untitled", sql, shared=bool(shared))
    c.audit.record(who.name, "query.save", None, True, via="console", shared=bool(shared), name=name)
    return RedirectResponse("/sql?" + urlencode({"saved": saved_id, "done": "saved"}), status_code=303)


@routes.post("/sql/saved/{saved_id}/delete")
def sql_unsave(c: Console, request: Request, saved_id: str, csrf: Annotated[str, Form()] = "") -> Response:
    who, session = c.viewer(request)
    c.check_csrf(request, session, csrf)
    gone = QueryHistory(c.settings).unsave(who.name, saved_id)
    c.audit.record(who.name, "query.unsave", None, gone, via="console")
    return RedirectResponse("/sql?" + urlencode({"done": "deleted" if gone else "not-yours"}), status_code=303)


def _csv_row(row: Any) -> list[str]:
    return [views.csv_safe(v if not isinstance(v, dict | list) else json.dumps(v)) for v in row]


@routes.get("/sql/{query_id}.csv")
def sql_csv(
    c: Console,
    request: Request,
    query_id: str,
    order: Annotated[int | None, Query(ge=-100_000, le=100_000)] = None,
) -> Response:
    """The kept rows as CSV (sorted as the page is); no SQL runs (sql_export runs it again)."""
    who, _session = c.viewer(request)
    entry = QueryHistory(c.settings).get(who.name, query_id)
    if entry is None:
        return Response("no such query in your history", status_code=404, media_type="text/plain")
    if not entry["ok"]:
        return Response(entry["error"] or "the query failed", status_code=400, media_type="text/plain")
    kept = entry["result"] or {"columns": [], "rows": []}
    rows = kept["rows"]
    sort = None if entry["truncated"] else _order(order, len(kept["columns"]))
    if sort is not None:
        rows = _sorted_rows(rows, kept.get("types") or [], *sort)
    buf = io.StringIO()
    writer = csv.writer(buf)
    writer.writerow([views.csv_safe(name) for name in kept["columns"]])
    for row in rows:
        writer.writerow(_csv_row(row))
    return Response(
        buf.getvalue(),
        media_type="text/csv; charset=utf-8",
        headers={"Content-Disposition": f'attachment; filename="query-{entry["id"]}.csv"'},
    )


@routes.post("/sql/{query_id}/sort")
def sql_sort(
    c: Console,
    request: Request,
    query_id: str,
    order: Annotated[int, Form(ge=-100_000, le=100_000)],
    csrf: Annotated[str, Form()] = "",
) -> Response:
    """Sort a result by a column over all of it. A result kept whole is sorted as kept (no run:
    a redirect to its page with `order`); a cut-short one runs again, as a new history entry,
    wrapped in ORDER BY (_sorted_sql) and governed, admitted and audited as any run."""
    who, session = c.viewer(request)
    c.check_csrf(request, session, csrf)
    entry = QueryHistory(c.settings).get(who.name, query_id)
    if entry is None or not entry["ok"]:
        return _not_found(c, request, who, session)
    kept = entry["result"] or {"columns": [], "rows": []}
    sort = _order(order, len(kept["columns"]))
    if sort is None:
        return RedirectResponse(f"/sql?q={entry['id']}", status_code=303)
    if not entry["truncated"]:
        return RedirectResponse("/sql?" + urlencode({"q": entry["id"], "order": order}), status_code=303)
    base = (kept.get("sort") or {}).get("of") or entry["sql"]  # re-sorting a sorted run sorts its statement
    sorted_sql = _sorted_sql(base, *sort)
    if sorted_sql is None:
        return c.refuse(
            request, who, session, "query.sort", entry["id"], "only a single query can be sorted over its whole result"
        )
    qid = _keep_run(c, who, sorted_sql, "", sort={"column": sort[0], "desc": sort[1], "of": base})
    return RedirectResponse(f"/sql?q={qid}", status_code=303)


# Rows per chunk of the streamed CSV (one write to the socket each).
_EXPORT_CHUNK = 1000


@routes.post("/sql/{query_id}/export")
def sql_export(c: Console, request: Request, query_id: str, csrf: Annotated[str, Form()] = "") -> Response:
    """The whole result as CSV: the statement runs again, governed as the viewer (the same
    checks and rewrite as their run), admitted like any run, and streamed a partition at a time
    (the driver never holds the result). Its `select` audit row is written when the download
    ends, with the rows sent; a `query.export` row names the history entry. A POST with the
    CSRF token: a link cannot make a browser run it. Only a single query runs again."""
    from shoal.admission import admission
    from shoal.governance import GovernedSql

    who, session = c.viewer(request)
    c.check_csrf(request, session, csrf)
    entry = QueryHistory(c.settings).get(who.name, query_id)
    if entry is None:
        return Response("no such query in your history", status_code=404, media_type="text/plain")
    if not entry["ok"] or _single_query(entry["sql"]) is None:
        c.audit.record(who.name, "query.export", entry["id"], False, reason="not a single query", via="console")
        return Response("only a single query's result can be exported again", status_code=400, media_type="text/plain")
    stack = contextlib.ExitStack()
    try:
        stack.enter_context(admission(c.settings).enter(who.name))
        result = GovernedSql(c.spark(), c.settings, who).execute(entry["sql"], stream=True)
    except (AccessDenied, SqlError, ShoalError) as exc:
        stack.close()
        c.audit.record(who.name, "query.export", entry["id"], False, reason=first_line(exc), via="console")
        return Response(first_line(exc), status_code=400, media_type="text/plain")
    except BaseException:
        stack.close()
        raise
    c.audit.record(who.name, "query.export", entry["id"], True, via="console")
    stream = result.stream if result.stream is not None else iter(result.rows)

    def chunks() -> Iterator[str]:
        try:
            buf = io.StringIO()
            writer = csv.writer(buf)
            writer.writerow([views.csv_safe(name) for name in result.columns])
            for n, row in enumerate(stream, 1):
                writer.writerow(_csv_row(views.to_json_value(v) for v in row))
                if n % _EXPORT_CHUNK == 0:
                    yield buf.getvalue()
                    buf.seek(0)
                    buf.truncate()
            yield buf.getvalue()
        finally:
            close = getattr(stream, "close", None)
            if close is not None:
                close()  # a download cut short stops Spark serving (and writes the audit row)
            stack.close()

    return StreamingResponse(
        chunks(),
        media_type="text/csv; charset=utf-8",
        headers={"Content-Disposition": f'attachment; filename="query-{entry["id"]}-all.csv"'},
    )


# ---- search --------------------------------------------------------------------------
@routes.get("/search")
def search_page(
    c: Console,
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


def add(router: APIRouter, c: Console) -> None:
    """Mount this module's pages on the console's router, in the order they are defined above."""
    routes.mount(router, c)
