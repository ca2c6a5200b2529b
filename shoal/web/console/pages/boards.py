"""Dashboard pages: datasets run as the viewer, charts drawn by Vega-Lite in the browser."""

from __future__ import annotations

import time
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from shoal.web.console import dashboards as dash
from shoal.web.console import views
from shoal.web.console.base import Console


def add(router: APIRouter, c: Console) -> None:
    # ---- dashboards ------------------------------------------------------------------------
    def _feed_version(board: dash.Dashboard) -> str:
        from shoal.workflows import Store

        store = Store(c.settings)
        latest = []
        for wf in board.refresh_after:
            done = store.list_executions(workflow=wf, status="SUCCEEDED", limit=1)
            if done:
                latest.append(f"{done[0].id}@{done[0].stopped_at.isoformat() if done[0].stopped_at else ''}")
        return "|".join(latest)

    @router.get("/dashboards")
    def dashboards_page(request: Request) -> Response:
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

    @router.get("/dashboards/{name}/version")
    def dashboard_version(request: Request, name: str) -> Response:
        c.viewer(request)
        boards, _ = dash.load_all(c.settings)
        if name not in boards:
            return JSONResponse({"detail": f"no dashboard {name}"}, status_code=404)
        return JSONResponse({"version": _feed_version(boards[name])})

    @router.get("/dashboards/{name}")
    def dashboard_page(request: Request, name: str) -> Response:
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
                    item["rows"] = dash.table_rows(chart, cols, d["rows"])
                else:
                    item["spec"] = dash.vega_lite(chart, d["rows"])
            charts.append(item)
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
            feed_version=_feed_version(board),
            queried_at=time.time(),  # shown by the |when filter in the reader's zone
        )
