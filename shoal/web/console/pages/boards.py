"""Dashboard pages: datasets run as the viewer, charts drawn by Vega-Lite in the browser."""

from __future__ import annotations

import time
from typing import Annotated, Any
from urllib.parse import quote

import sqlglot
from fastapi import APIRouter, Form, Query, Request
from fastapi.responses import JSONResponse, RedirectResponse, Response
from sqlglot import exp

from shoal.governance import Principal
from shoal.routing import Routes
from shoal.web.console import dashboards as dash
from shoal.web.console import views
from shoal.web.console.base import Console
from shoal.web.console.history import QueryHistory

# The chart builder's fields, shared by its preview (GET) and its save (POST).
BuilderType = Annotated[str, Query(pattern="^(bar|line|area|pie|table|kpi)$")]
Column = Annotated[str, Query(max_length=128)]


def draw(chart: dash.Chart, d: dict[str, Any], i: int) -> dict[str, Any]:
    """One chart of a dashboard (or the builder's preview) from its dataset's governed rows."""
    item: dict[str, Any] = {"chart": chart, "id": f"chart-{i}", "denied": d["denied"]}
    if not d["denied"]:
        if chart.type == "kpi":
            item["value"] = dash.kpi_value(chart, d["rows"])
        elif chart.type == "table":
            cols = chart.columns or d["columns"]
            item["columns"] = cols
            item["rows"] = dash.table_rows(chart, cols, d["rows"])
        else:
            item["spec"] = dash.vega_lite(chart, d["rows"])
    return item


def is_query(sql: str) -> bool:
    """Only a SELECT becomes a chart's dataset: the builder runs it to preview, and dashboards
    run their datasets on every view."""
    try:
        return isinstance(sqlglot.parse_one(sql, read="spark"), exp.Query)
    except sqlglot.errors.ParseError:
        return False


routes = Routes()


# ---- dashboards ------------------------------------------------------------------------
def _feed_version(c: Console, board: dash.Dashboard) -> str:
    from shoal.workflows import Store

    store = Store(c.settings)
    latest = []
    for wf in board.refresh_after:
        done = store.list_executions(workflow=wf, status="SUCCEEDED", limit=1)
        if done:
            latest.append(f"{done[0].id}@{done[0].stopped_at.isoformat() if done[0].stopped_at else ''}")
    return "|".join(latest)


@routes.get("/dashboards")
def dashboards_page(c: Console, request: Request) -> Response:
    who, session = c.viewer(request)
    boards, errors = dash.load_all(c.settings)
    return c.page(
        request,
        "dashboards.html",
        who,
        session,
        boards=sorted(boards.values(), key=lambda b: b.title),
        errors=errors,
    )


# ---- the chart builder -------------------------------------------------------------------
def _builder(
    c: Console,
    request: Request,
    who: Principal,
    session: Any,
    fields: dict[str, str],
    *,
    error: str | None = None,
    status: int = 200,
) -> Response:
    """The builder page: pick a saved query; its columns fill the x/y/series pickers; with
    enough fields chosen, the chart as the dashboard will draw it."""
    history = QueryHistory(c.settings)
    ctx: dict[str, Any] = {"fields": fields, "error": error, "columns": [], "numeric": [], "preview": None}
    ctx["saved"] = history.list_saved(who.name)
    ctx["types"] = dash.BUILDER_TYPES
    ctx["formats"] = dash.NUMBER_FORMATS
    boards, _ = dash.load_all(c.settings)
    ctx["mine"] = sorted(b.name for b in boards.values() if b.owner == who.name)
    entry = history.saved_query(who.name, fields["saved"]) if fields["saved"] else None
    if fields["saved"] and entry is None:
        ctx["error"] = error or "no such saved query (it was deleted, or it is another user's and not shared)"
    elif entry is not None and not is_query(entry["sql"]):
        ctx["error"] = error or f"“{entry['name']}” is not a SELECT: only a query's result can be charted"
    elif entry is not None:
        d = views.governed_rows(c.spark(), c.settings, who, entry["sql"], dash.MAX_ROWS)
        ctx["query"] = entry
        ctx["columns"] = d["columns"]
        ctx["rows"] = len(d["rows"])
        ctx["numeric"] = [col for col in d["columns"] if any(isinstance(r.get(col), int | float) for r in d["rows"])]
        for key in ("x", "y", "series"):  # columns of a query chosen before this one
            if fields[key] not in d["columns"]:
                fields[key] = ""
        if d["denied"]:
            ctx["error"] = error or d["denied"]
        elif fields["type"] and (fields["x"] or fields["y"]):
            try:
                chart = _chart(c, fields, entry["name"], d["rows"])
                ctx["preview"] = draw(chart, d, 0)
            except dash.DashboardError as exc:
                ctx["error"] = error or f"not yet a chart: {exc}"
    return c.page(request, "chart_builder.html", who, session, status=status, charts=bool(ctx["preview"]), **ctx)


def _chart(c: Console, fields: dict[str, str], query_name: str, rows: list[dict[str, Any]] | None = None) -> dash.Chart:
    return dash.builder_chart(
        type=fields["type"],
        dataset=dash.dataset_name(query_name),
        x=fields["x"],
        y=fields["y"],
        series=fields["series"],
        title=fields["title"],
        agg=fields["agg"],
        format=fields["format"],
        unit=fields["unit"],
        rows=rows,
    )


@routes.get("/dashboards/new")
def chart_builder(
    c: Console,
    request: Request,
    saved: Annotated[str, Query(max_length=64)] = "",
    type: BuilderType = "bar",
    x: Column = "",
    y: Column = "",
    series: Column = "",
    title: Annotated[str, Query(max_length=200)] = "",
    agg: Annotated[str, Query(pattern="^(sum|avg|min|max|count|last)$")] = "sum",
    format: Annotated[str, Query(max_length=20)] = ",.0f",
    unit: Annotated[str, Query(max_length=20)] = "",
    board: Annotated[str, Query(max_length=63)] = "",
    board_title: Annotated[str, Query(max_length=200)] = "",
) -> Response:
    who, session = c.viewer(request)
    fields = dict(saved=saved, type=type, x=x, y=y, series=series, title=title, agg=agg, format=format)
    fields.update(unit=unit, board=board, board_title=board_title)
    return _builder(c, request, who, session, fields)


@routes.post("/dashboards/new")
def chart_save(
    c: Console,
    request: Request,
    csrf: Annotated[str, Form()] = "",
    saved: Annotated[str, Form(max_length=64)] = "",
    type: Annotated[str, Form(pattern="^(bar|line|area|pie|table|kpi)$")] = "bar",
    x: Annotated[str, Form(max_length=128)] = "",
    y: Annotated[str, Form(max_length=128)] = "",
    series: Annotated[str, Form(max_length=128)] = "",
    title: Annotated[str, Form(max_length=200)] = "",
    agg: Annotated[str, Form(pattern="^(sum|avg|min|max|count|last)$")] = "sum",
    format: Annotated[str, Form(max_length=20)] = ",.0f",
    unit: Annotated[str, Form(max_length=20)] = "",
    board: Annotated[str, Form(max_length=63)] = "",
    board_title: Annotated[str, Form(max_length=200)] = "",
) -> Response:
    who, session = c.viewer(request)
    c.check_csrf(request, session, csrf)
    fields = dict(saved=saved, type=type, x=x, y=y, series=series, title=title, agg=agg, format=format)
    fields.update(unit=unit, board=board, board_title=board_title)
    entry = QueryHistory(c.settings).saved_query(who.name, saved) if saved else None
    if entry is None or not is_query(entry["sql"]):
        return _builder(c, request, who, session, fields, error="pick a saved SELECT query to chart", status=400)
    try:
        chart = _chart(c, fields, entry["name"])
        dash.save_chart(c.settings, who.name, board.strip(), board_title, entry["name"], entry["sql"], chart)
    except dash.DashboardError as exc:
        c.audit.record(who.name, "dashboard.save", board, False, reason=str(exc), via="console")
        return _builder(c, request, who, session, fields, error=f"not saved: {exc}", status=400)
    c.audit.record(who.name, "dashboard.save", board, True, via="console", chart=chart.type, query=entry["id"])
    return RedirectResponse(f"/dashboards/{quote(board.strip())}", status_code=303)


@routes.get("/dashboards/{name}/version")
def dashboard_version(c: Console, request: Request, name: str) -> Response:
    c.viewer(request)
    boards, _ = dash.load_all(c.settings)
    if name not in boards:
        return JSONResponse({"detail": f"no dashboard {name}"}, status_code=404)
    return JSONResponse({"version": _feed_version(c, boards[name])})


@routes.get("/dashboards/{name}")
def dashboard_page(c: Console, request: Request, name: str) -> Response:
    who, session = c.viewer(request)
    boards, _ = dash.load_all(c.settings)
    board = boards.get(name)
    if board is None:
        return c.error(request, who, session, 404, f"no dashboard {name}")
    chosen = {
        f.field: request.query_params[f.field]
        for f in board.filters
        if request.query_params.get(f.field) not in (None, "")
    }
    data: dict[str, dict[str, Any]] = {}
    options: dict[str, list[str]] = {}
    for ds, sql in board.datasets.items():
        mine = {k: v for k, v in chosen.items() if any(f.field == k and f.dataset == ds for f in board.filters)}
        data[ds] = views.governed_rows(c.spark(), c.settings, who, dash.filtered_sql(sql, mine), dash.MAX_ROWS)
    for f in board.filters:
        unfiltered = views.governed_rows(c.spark(), c.settings, who, board.datasets[f.dataset], dash.MAX_ROWS)
        options[f.field] = sorted({str(r.get(f.field)) for r in unfiltered["rows"] if r.get(f.field) is not None})
    charts = [draw(chart, _card_rows(c, who, board, chart, data, chosen), i) for i, chart in enumerate(board.charts)]
    c.audit.record(who.name, "dashboard.view", name, True, via="console")
    return c.page(
        request,
        "dashboard.html",
        who,
        session,
        board=board,
        charts=charts,
        options=options,
        chosen=chosen,
        feed_version=_feed_version(c, board),
        queried_at=time.time(),  # shown by the |when filter in the reader's zone
        hidden=[item for item in charts if item["denied"]],
    )


def _card_rows(
    c: Console,
    who: Principal,
    board: dash.Dashboard,
    chart: dash.Chart,
    data: dict[str, dict[str, Any]],
    chosen: dict[str, str],
) -> dict[str, Any]:
    """A card's rows: its dataset's, or, where the viewer may not read the whole dataset, the
    dataset narrowed to the columns this card draws (one unreadable column blanked every card)."""
    whole = data[chart.dataset]
    needed = dash.chart_columns(chart)
    if not whole["denied"] or needed is None:
        return whole
    mine = {k: v for k, v in chosen.items() if any(f.field == k and f.dataset == chart.dataset for f in board.filters)}
    narrowed = dash.narrowed_sql(board.datasets[chart.dataset], needed | {k.lower() for k in mine})
    if narrowed is None:
        return whole
    key = f"{chart.dataset}:{narrowed}"  # cards drawing the same columns share one run
    if key not in data:
        data[key] = views.governed_rows(c.spark(), c.settings, who, dash.filtered_sql(narrowed, mine), dash.MAX_ROWS)
    return data[key]


def add(router: APIRouter, c: Console) -> None:
    """Mount this module's pages on the console's router, in the order they are defined above."""
    routes.mount(router, c)
