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
    fields: dict[str, Any],
    *,
    error: str | None = None,
    status: int = 200,
    editing: dict[str, Any] | None = None,
) -> Response:
    """The builder page: pick a saved query; its columns fill the x/y/series pickers; with
    enough fields chosen, the chart as the dashboard will draw it. `editing`: a chart of one of
    the viewer's dashboards ({board, chart, dataset, sql}), its dataset in place of a saved query.
    An x or y not chosen yet (None) is preselected from the result's types: x the first text or
    date column, y the first numeric one."""
    history = QueryHistory(c.settings)
    auto = {key for key in ("x", "y") if fields[key] is None}
    fields.update({key: "" for key in auto})
    ctx: dict[str, Any] = {"fields": fields, "error": error, "columns": [], "numeric": [], "preview": None}
    ctx["saved"] = history.list_saved(who.name)
    ctx["types"] = dash.BUILDER_TYPES
    ctx["formats"] = dash.NUMBER_FORMATS
    ctx["editing"] = editing
    boards, _ = dash.load_all(c.settings)
    ctx["mine"] = sorted(b.name for b in boards.values() if b.owner == who.name)
    if editing is not None:
        entry: dict[str, Any] | None = {"id": None, "name": editing["dataset"], "sql": editing["sql"]}
    else:
        entry = history.saved_query(who.name, fields["saved"]) if fields["saved"] else None
    if editing is None and fields["saved"] and entry is None:
        ctx["error"] = error or "no such saved query (it was deleted, or it is another user's and not shared)"
    elif entry is not None and not is_query(entry["sql"]):
        ctx["error"] = error or f"“{entry['name']}” is not a SELECT: only a query's result can be charted"
    elif entry is not None:
        d = views.governed_rows(c.spark(), c.settings, who, entry["sql"], dash.MAX_ROWS)
        ctx["query"] = entry
        ctx["columns"] = d["columns"]
        ctx["rows"] = len(d["rows"])
        ctx["numeric"] = dash.numeric_columns(d["columns"], d["types"]) or [
            col for col in d["columns"] if any(isinstance(r.get(col), int | float) for r in d["rows"])
        ]
        for key in ("x", "y", "series"):  # columns of a query chosen before this one
            if fields[key] not in d["columns"]:
                if fields[key] and key != "series":
                    auto.add(key)
                fields[key] = ""
        for key, column in dash.preselected(d["columns"], d["types"]).items():
            if key in auto:
                fields[key] = column
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
    x: Annotated[str | None, Query(max_length=128)] = None,  # None: not chosen yet (preselected)
    y: Annotated[str | None, Query(max_length=128)] = None,
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


# ---- a builder-made dashboard's charts: edit, remove, move (its owner only) ----------------
def _editable(c: Console, who: Principal, name: str, chart: int) -> tuple[dash.Dashboard, dash.Chart]:
    board = dash.builder_board(c.settings, who.name, name)
    if not 0 <= chart < len(board.charts):
        raise dash.DashboardError(f"dashboard {name} has no chart {chart + 1}")
    return board, board.charts[chart]


@routes.get("/dashboards/{name}/charts/{chart}/edit")
def chart_edit(
    c: Console,
    request: Request,
    name: str,
    chart: int,
    type: Annotated[str | None, Query(pattern="^(bar|line|area|pie|table|kpi)$")] = None,
    x: Column = "",
    y: Column = "",
    series: Column = "",
    title: Annotated[str, Query(max_length=200)] = "",
    agg: Annotated[str, Query(pattern="^(sum|avg|min|max|count|last)$")] = "sum",
    format: Annotated[str, Query(max_length=20)] = ",.0f",
    unit: Annotated[str, Query(max_length=20)] = "",
) -> Response:
    """The builder over a chart of the viewer's dashboard: its fields as saved, or (once the
    form is changed) as chosen; saving replaces the chart in place."""
    who, session = c.viewer(request)
    try:
        board, current = _editable(c, who, name, chart)
    except dash.DashboardError as exc:
        return c.refuse(request, who, session, "dashboard.save", name, str(exc))
    if type is None:
        fields: dict[str, Any] = dash.builder_fields(current)
    else:
        fields = dict(type=type, x=x, y=y, series=series, title=title, agg=agg, format=format, unit=unit)
    fields.update(saved="", board=name, board_title="")
    editing = {"board": name, "chart": chart, "dataset": current.dataset, "sql": board.datasets[current.dataset]}
    return _builder(c, request, who, session, fields, editing=editing)


@routes.post("/dashboards/{name}/charts/{chart}")
def chart_replace(
    c: Console,
    request: Request,
    name: str,
    chart: int,
    csrf: Annotated[str, Form()] = "",
    type: Annotated[str, Form(pattern="^(bar|line|area|pie|table|kpi)$")] = "bar",
    x: Annotated[str, Form(max_length=128)] = "",
    y: Annotated[str, Form(max_length=128)] = "",
    series: Annotated[str, Form(max_length=128)] = "",
    title: Annotated[str, Form(max_length=200)] = "",
    agg: Annotated[str, Form(pattern="^(sum|avg|min|max|count|last)$")] = "sum",
    format: Annotated[str, Form(max_length=20)] = ",.0f",
    unit: Annotated[str, Form(max_length=20)] = "",
) -> Response:
    who, session = c.viewer(request)
    c.check_csrf(request, session, csrf)
    fields = dict(type=type, x=x, y=y, series=series, title=title, agg=agg, format=format, unit=unit)
    try:
        board, current = _editable(c, who, name, chart)
        new = _chart(c, {**fields}, current.dataset).model_copy(update={"dataset": current.dataset})

        def replace(charts: list[dict[str, Any]]) -> None:
            charts[chart] = new.model_dump(exclude_defaults=True)

        dash.change_charts(c.settings, who.name, name, replace)
    except dash.DashboardError as exc:
        return c.refuse(request, who, session, "dashboard.save", name, f"not saved: {exc}")
    c.audit.record(who.name, "dashboard.save", name, True, via="console", change="edit", chart=chart + 1)
    return RedirectResponse(f"/dashboards/{quote(name)}#chart-{chart}-card", status_code=303)


@routes.post("/dashboards/{name}/charts/{chart}/remove")
def chart_remove(c: Console, request: Request, name: str, chart: int, csrf: Annotated[str, Form()] = "") -> Response:
    who, session = c.viewer(request)
    c.check_csrf(request, session, csrf)
    try:
        _editable(c, who, name, chart)

        def remove(charts: list[dict[str, Any]]) -> None:
            del charts[chart]

        left = dash.change_charts(c.settings, who.name, name, remove)
    except dash.DashboardError as exc:
        return c.refuse(request, who, session, "dashboard.save", name, str(exc))
    c.audit.record(who.name, "dashboard.save", name, True, via="console", change="remove", chart=chart + 1)
    return RedirectResponse(f"/dashboards/{quote(name)}" if left else "/dashboards", status_code=303)


@routes.post("/dashboards/{name}/charts/{chart}/move")
def chart_move(
    c: Console,
    request: Request,
    name: str,
    chart: int,
    to: Annotated[str, Form(pattern="^(up|down)$")],
    csrf: Annotated[str, Form()] = "",
) -> Response:
    """Swap a chart with the one before (up) or after (down) it."""
    who, session = c.viewer(request)
    c.check_csrf(request, session, csrf)
    other = chart - 1 if to == "up" else chart + 1
    try:
        board, _ = _editable(c, who, name, chart)
        if not 0 <= other < len(board.charts):
            raise dash.DashboardError(f"chart {chart + 1} is already the {'first' if to == 'up' else 'last'}")

        def swap(charts: list[dict[str, Any]]) -> None:
            charts[chart], charts[other] = charts[other], charts[chart]

        dash.change_charts(c.settings, who.name, name, swap)
    except dash.DashboardError as exc:
        return c.refuse(request, who, session, "dashboard.save", name, str(exc))
    c.audit.record(who.name, "dashboard.save", name, True, via="console", change=f"move {to}", chart=chart + 1)
    return RedirectResponse(f"/dashboards/{quote(name)}#chart-{other}-card", status_code=303)


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
    try:
        editable = dash.builder_board(c.settings, who.name, name).source == board.source
    except dash.DashboardError:
        editable = False  # deny by default: another's, hand-written or built in
    return c.page(
        request,
        "dashboard.html",
        who,
        session,
        editable=editable,
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
