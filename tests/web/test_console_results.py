"""Issue 46, the console's results grid: a result longer than the rows kept with it is sorted
by a column over all of it, exported whole (streamed, governed as the viewer's run, audited),
and paged with a jump to any page; a result kept whole is sorted as kept, without a run. One
audit row per SQL page load. The chart builder preselects x and y, and a chart on a dashboard
its owner built is edited, moved and removed there (by nobody else).

The site's console keeps 100 rows per result (server.console_kept_rows) so that a result
"longer than what is kept" is 250 rows, not 100,000, on a busy test machine."""

from __future__ import annotations

import csv
import io
import re
import uuid
from pathlib import Path

import pytest

from shoal.governance import AuditLog, Governance, Principals
from shoal.web.console import dashboards as dash
from shoal.web.console.history import QueryHistory
from tests.support.servers import console_server
from tests.web.test_console import PASSWORD, Site, Visit, browser, signin
from tests.web.test_console import run_sql as type_and_run

pytestmark = pytest.mark.slow
__all__ = ["browser"]  # the imported fixture

KEPT = 100


@pytest.fixture(scope="module")
def site(spark, settings):
    u = uuid.uuid4().hex[:6]
    p = Principals(settings)
    users = {"admin": f"rg_ad_{u}", "analyst": f"rg_an_{u}"}
    p.add(users["admin"], admin=True, password=PASSWORD)
    p.add(users["analyst"], password=PASSWORD)
    db = f"rg_{u}"
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {db}")
    spark.sql(f"CREATE TABLE {db}.big (id INT, label STRING, amount DECIMAL(10,2)) USING iceberg")
    spark.sql(
        f"INSERT INTO {db}.big SELECT CAST(id AS INT), concat('row ', id), CAST(id AS DECIMAL(10,2)) FROM range(1, 251)"
    )
    gov = Governance(settings)
    admin = p.principal(users["admin"])
    # The analyst reads 200 of the 250 rows: an export runs under that filter, as their run did.
    gov.grant(admin, "SELECT", "TABLE", f"{db}.big", users["analyst"], row_filter="id <= 200")
    small = settings.model_copy(update={"server": settings.server.model_copy(update={"console_kept_rows": KEPT})})
    with console_server(small) as base:
        yield Site(base, db, users, {}, "")


def csrf_of(page: str) -> str:
    return re.search(r'name="csrf" value="([^"]+)"', page).group(1)  # type: ignore[union-attr]


def first_ids(page) -> list[str]:
    return page.locator("#result tbody tr td:first-child").all_inner_texts()


def test_a_result_longer_than_what_is_kept_sorts_exports_and_jumps_over_all_of_it(browser, site, settings):
    v = Visit(browser, site, "analyst")
    page = v.go("/sql")
    type_and_run(page, f"SELECT id, label FROM {site.db}.big")
    assert page.inner_text("#sql-total") == f"more than {KEPT} rows"
    assert page.inner_text("#pages") == "2"

    # Jump to a page.
    page.fill("#jump-page", "2")
    with page.expect_navigation():
        page.click("#jump-go")
    assert first_ids(page)[0] == "51" and "showing 51–100" in page.inner_text("#sql-meta")

    # The whole result, not the kept 100: the analyst's 200 rows (their row filter applies).
    with page.expect_download() as download:
        page.click("#export-all")
    rows = list(csv.reader(io.StringIO(Path(download.value.path()).read_text())))
    assert rows[0] == ["id", "label"] and sorted(int(r[0]) for r in rows[1:]) == list(range(1, 201))

    # Sorted by a column over the whole result: descending puts 200 first, which no kept row is.
    with page.expect_navigation():
        page.click("#result th button[data-column='1']")
    assert first_ids(page)[:2] == ["1", "2"] and page.inner_text("#sql-sorted") == "id ▲"
    with page.expect_navigation():
        page.click("#result th button[data-column='1']")
    assert first_ids(page)[:3] == ["200", "199", "198"] and page.inner_text("#sql-sorted") == "id ▼"
    assert page.get_attribute("#result th[aria-sort]", "aria-sort") == "descending"
    # Its export is the whole result in that order.
    with page.expect_download() as download:
        page.click("#export-all")
    rows = list(csv.reader(io.StringIO(Path(download.value.path()).read_text())))
    assert [int(r[0]) for r in rows[1:]] == list(range(200, 0, -1))
    assert not v.errors, v.errors
    v.close()

    # Audited: the export's statement ran as the analyst, with the rows it sent.
    audit = AuditLog(settings)
    exports = audit.list(principal=site.users["analyst"], action="query.export")
    assert len(exports) == 2 and all(e["decision"] == "allow" for e in exports), exports
    ran = audit.list(principal=site.users["analyst"], action="select", limit=20)
    sent = [r for r in ran if (r.get("detail") or {}).get("rows") == 200]
    assert len(sent) == 2, ran  # the two exports, governed (200 rows, not 250)
    assert sent[0]["fingerprint"] != sent[1]["fingerprint"]  # the second ran the sorted statement


def test_a_result_kept_whole_sorts_as_kept_and_refusals(site):
    admin = signin(site, site.users["admin"])
    form = {"sql": f"SELECT id, label, amount FROM {site.db}.big WHERE id <= 30", "csrf": "", "run": "r"}
    form["csrf"] = csrf_of(admin.get("/sql").text)
    qid = admin.post("/sql", data=form).headers["location"].split("q=")[1]
    # Decimals are kept as text: sorted as numbers (30.00 before 9.00 descending).
    page = admin.get("/sql", params={"q": qid, "order": -3}).text
    assert re.findall(r'<tr><td class="num">(\d+)</td>', page)[:3] == ["30", "29", "28"]
    assert 'id="sql-sorted">amount ▼' in page and 'id="export-all"' not in page
    assert re.findall(r"^(\d+),", admin.get(f"/sql/{qid}.csv", params={"order": -3}).text, re.M)[:2] == ["30", "29"]
    # The sort form of a result kept whole only redirects: nothing runs again.
    done = admin.post(f"/sql/{qid}/sort", data={"order": 2, "csrf": form["csrf"]})
    assert done.status_code == 303 and done.headers["location"] == f"/sql?q={qid}&order=2"
    # CSRF as every form; another user's entry is a 404, as a missing one.
    assert admin.post(f"/sql/{qid}/sort", data={"order": 2}).status_code == 403
    assert admin.post(f"/sql/{qid}/export", data={}).status_code == 403
    analyst = signin(site, site.users["analyst"])
    token = csrf_of(analyst.get("/sql").text)
    assert analyst.post(f"/sql/{qid}/export", data={"csrf": token}).status_code == 404
    assert analyst.post(f"/sql/{qid}/sort", data={"order": 1, "csrf": token}).status_code == 404
    # Only a single query runs again for an export.
    form["sql"] = f"INSERT INTO {site.db}.big VALUES (999, 'x', 1)"
    wrote = admin.post("/sql", data=form).headers["location"].split("q=")[1]
    assert admin.post(f"/sql/{wrote}/export", data={"csrf": form["csrf"]}).status_code == 400


def test_a_sql_page_load_is_one_audit_row(browser, site, settings):
    """The page view's row carries what the schema tree shows: no second `catalog.schema` row."""
    v = Visit(browser, site, "analyst")
    v.go("/catalog")
    audit = AuditLog(settings)
    before = audit.list(principal=site.users["analyst"], limit=1)[0]["id"]
    page = v.go("/sql")
    page.wait_for_selector("#schema-tree[data-loaded=true]")
    assert page.locator(f"#schema-tree details.table[data-table='{site.db}.big']").count() == 1
    rows = [r for r in audit.list(principal=site.users["analyst"], limit=50) if r["id"] > before]
    assert [r["action"] for r in rows] == ["query.page"], rows
    assert rows[0]["decision"] == "allow" and rows[0]["detail"]["tables"] >= 1
    assert not v.errors, v.errors
    v.close()


def test_the_builder_preselects_and_a_chart_is_edited_moved_and_removed(browser, site, settings):
    analyst = site.users["analyst"]
    sql = f"SELECT label, id, amount FROM {site.db}.big WHERE id <= 3"
    saved = QueryHistory(settings).save(analyst, "Three rows", sql, shared=False)
    board = "rg-" + site.db.split("_")[1]
    path = settings.workspace_dir / "dashboards" / f"{board}.yaml"
    v = Visit(browser, site, "analyst")
    # x: the first text column, y: the first numeric one; the preview is drawn at once.
    page = v.go(f"/dashboards/new?saved={saved}")
    assert page.input_value("#builder-x") == "label" and page.input_value("#builder-y") == "id"
    page.wait_for_selector("#chart-0[data-rendered=true]")
    page.fill("#builder-board", board)
    with page.expect_navigation():
        page.click("#save-chart")
    page = v.go(f"/dashboards/new?saved={saved}&type=kpi&y=amount&title=Total&board={board}")
    with page.expect_navigation():
        page.click("#save-chart")
    assert [c.type for c in dash.load_file(path).charts] == ["bar", "kpi"]

    # Move the KPI before the bar chart.
    assert page.locator("#chart-0-card .chart-up").count() == 0  # the first cannot go up
    with page.expect_navigation():
        page.click("#chart-1-card .chart-up")
    assert [c.type for c in dash.load_file(path).charts] == ["kpi", "bar"]
    assert page.inner_text("#chart-0") == "6"  # the sum of amounts, first now

    # Edit it: the builder opens with its fields; saving replaces it in place.
    with page.expect_navigation():
        page.click("#chart-0-card .chart-edit")
    assert "Edit chart 1" in page.inner_text("h1")
    assert page.input_value("#builder-type") == "kpi" and page.input_value("#builder-y") == "amount"
    with page.expect_navigation():
        page.select_option("#builder-agg", "max")
    assert page.inner_text("#chart-0") == "3"
    with page.expect_navigation():
        page.click("#save-chart")
    charts = dash.load_file(path).charts
    assert [(c.type, c.agg) for c in charts] == [("kpi", "max"), ("bar", "sum")] and page.inner_text("#chart-0") == "3"

    # Remove the bar chart; its dataset stays while the KPI uses it.
    with page.expect_navigation():
        page.click("#chart-1-card .chart-remove")
    board_now = dash.load_file(path)
    assert [c.type for c in board_now.charts] == ["kpi"] and len(board_now.datasets) == 1
    assert not v.errors, v.errors
    v.close()

    # Nobody else: no tools on the page, and their POSTs are refused (the file is unchanged).
    admin = signin(site, site.users["admin"])
    page_html = admin.get(f"/dashboards/{board}").text
    assert "chart-remove" not in page_html and "chart-edit" not in page_html
    token = csrf_of(admin.get("/sql").text)
    assert admin.post(f"/dashboards/{board}/charts/0/remove", data={"csrf": token}).status_code == 403
    assert admin.post(f"/dashboards/{board}/charts/0/move", data={"csrf": token, "to": "down"}).status_code == 403
    assert admin.get(f"/dashboards/{board}/charts/0/edit").status_code == 403
    assert admin.post("/dashboards/sales-revenue/charts/0/remove", data={"csrf": token}).status_code == 403
    assert [c.agg for c in dash.load_file(path).charts] == ["max"]
    # The owner without the CSRF token: refused too.
    mine = signin(site, analyst)
    assert mine.post(f"/dashboards/{board}/charts/0/remove", data={}).status_code == 403
    assert dash.load_file(path).charts
