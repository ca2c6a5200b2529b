"""The console as an analyst uses it, in headless Chromium at desktop and phone width: editor
tabs (each with its text and last result), results reopened from history without running the
statement again, a saved query charted by the chart builder into a dashboard file, and the
workflow pages (one time format, cron with its next run, clickable steps, expandable events).

Reuses the browser and helpers of test_console.py with a lighter site of its own."""

from __future__ import annotations

import json
import re
import time
import uuid

import pytest
from playwright.sync_api import Page

from shoal import workflows
from shoal.governance import Governance, Principals
from shoal.web.console import dashboards as dash
from shoal.workflows.schedule import Schedules
from tests.support.servers import console_server
from tests.web.test_console import CHROMIUM, PASSWORD, Site, Visit, run_sql, signin

pytestmark = pytest.mark.slow

WIDTHS = {"desktop": (1300, 900), "phone": (390, 844)}
LONG = "step note " * 40  # an event detail longer than the table shows before it is expanded


@pytest.fixture(scope="module")
def site(spark, settings, tmp_path_factory):
    u = uuid.uuid4().hex[:6]
    p = Principals(settings)
    users = {"admin": f"ana_{u}", "analyst": f"ann_{u}", "guest": f"gus_{u}"}
    p.add(users["admin"], admin=True, password=PASSWORD)
    p.add(users["analyst"], password=PASSWORD)
    p.add(users["guest"], password=PASSWORD)
    db = f"an_{u}"
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {db}")
    spark.sql(f"CREATE TABLE {db}.deals (id INT, region STRING, amount DOUBLE) USING iceberg")
    spark.sql(f"INSERT INTO {db}.deals VALUES (1, 'EU', 5.0), (2, 'US', 7.0), (3, 'EU', 9.5), (4, 'APAC', 1200.25)")
    Governance(settings).grant(p.principal(users["admin"]), "SELECT", "TABLE", f"{db}.deals", users["analyst"])

    name = f"steps-{u}"
    definition = tmp_path_factory.mktemp("analyst-wf") / f"{name}.asl.json"
    definition.write_text(
        json.dumps(
            {
                "StartAt": "Prepare",
                "States": {
                    "Prepare": {"Type": "Pass", "Result": {"note": LONG}, "ResultPath": "$.prepared", "Next": "Count"},
                    "Count": {
                        "Type": "Task",
                        "Resource": "shoal:sql",
                        "Parameters": {"QueryString": f"SELECT count(*) AS n FROM {db}.deals", "Dialect": "spark"},
                        "End": True,
                    },
                },
            }
        )
    )
    workflows.register(settings, definition, name=name)
    record = workflows.run(settings, name)
    assert record.status == "SUCCEEDED", (record.error, record.cause)
    Schedules(settings).add(f"daily-{u}", name, cron="0 6 * * *")

    with console_server(settings) as base:
        yield Site(base, db, users, {"workflow": name, "execution": record.id}, "")


@pytest.fixture(scope="module")
def browser():
    """Debian's Chromium, launched as test_console.py launches it."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu", "--disable-sync"])
        yield b
        b.close()


def visit(browser, site: Site, who: str, width: str) -> Visit:
    v = Visit(browser, site, who)
    w, h = WIDTHS[width]
    v.page.set_viewport_size({"width": w, "height": h})
    return v


def history_rows(page: Page) -> int:
    return page.locator("#history tbody tr").count()


def tab_names(page: Page) -> list[str]:
    return page.locator("#sql-tabs .tab-name").all_inner_texts()


def assert_fits(page: Page) -> None:
    """Nothing wider than the viewport at phone width (wide tables scroll inside themselves)."""
    over = page.evaluate("() => document.documentElement.scrollWidth - window.innerWidth")
    wide = page.evaluate(
        """() => [...document.querySelectorAll('main *')].filter(e => e.getBoundingClientRect().right >
        window.innerWidth + 1 && ![...e.children].some(c => c.getBoundingClientRect().right > window.innerWidth + 1))
        .slice(0, 5).map(e => e.tagName + '#' + e.id + '.' + e.className)"""
    )
    assert over <= 1, f"the page is {over}px wider than the screen: {wide}"


@pytest.mark.parametrize("width", ["desktop", "phone"])
def test_analyst_writes_runs_saves_and_charts_a_query(browser, site, settings, width):
    a = visit(browser, site, "analyst", width)
    page = a.go("/sql")
    page.wait_for_selector("#sql-tabs .sql-tab")
    assert tab_names(page) == ["Query 1"]

    # Tab 1 runs a statement; tab 2 another; each keeps its own text and last result.
    by_region = f"SELECT region, sum(amount) AS amount FROM {site.db}.deals GROUP BY region ORDER BY region"
    run_sql(page, by_region)
    assert page.inner_text("#sql-total") == "3 rows"
    first_result = page.url
    page.click("#tab-new")
    page.wait_for_selector("#sql-tabs .sql-tab:nth-child(2).active")
    assert page.locator("#result").count() == 0 and page.inner_text("#sql-form .cm-content").strip() == ""
    run_sql(page, "SELECT 42 AS answer")
    assert page.inner_text("#result tbody td") == "42"
    page.once("dialog", lambda d: d.accept("The answer"))
    page.click("#sql-tabs .sql-tab.active .tab-rename")
    assert tab_names(page) == ["Query 1", "The answer"]
    page.fill("#sql-form .cm-content", "SELECT 43 AS draft")  # typed, not run: kept with the tab
    time.sleep(1)
    runs = history_rows(page)

    # Back to tab 1: its text and its result, read from the history entry (no new run).
    with page.expect_navigation():
        page.click("#sql-tabs .sql-tab:nth-child(1) .tab-name")
    page.wait_for_selector("#sql-tabs .sql-tab:nth-child(1).active")
    assert page.url == first_result and page.inner_text("#sql-total") == "3 rows"
    assert "GROUP BY region" in page.inner_text("#sql-form .cm-content")
    assert history_rows(page) == runs  # reopened, not run again
    with page.expect_navigation():
        page.click("#sql-tabs .sql-tab:nth-child(2) .tab-name")
    page.wait_for_selector("#sql-tabs .sql-tab:nth-child(2).active")
    assert "SELECT 43 AS draft" in page.inner_text("#sql-form .cm-content")
    assert page.inner_text("#result tbody td") == "42"  # its last result, beside its newer text
    # Tabs outlive the page: a new visit finds them as they were left.
    page = a.go("/sql")
    page.wait_for_selector("#sql-tabs .sql-tab.active")
    assert tab_names(page) == ["Query 1", "The answer"]
    with page.expect_navigation():
        page.click("#sql-tabs .sql-tab:nth-child(2) .tab-close")
    page.wait_for_selector("#sql-tabs .sql-tab.active")
    assert tab_names(page) == ["Query 1"] and page.inner_text("#sql-total") == "3 rows"

    # A history entry reopens its kept result without running the statement again.
    entry = page.locator("#history tbody tr", has_text="42 AS answer").locator("a").first
    with page.expect_navigation():
        entry.click()
    assert page.inner_text("#result tbody td") == "42" and history_rows(page) == runs
    assert "42 AS answer" in " ".join(tab_names(page)) or len(tab_names(page)) == 2
    guest = visit(browser, site, "guest", width)
    assert guest.page.request.get(page.url).status == 404  # only its runner may reopen a result
    guest.close()

    # Save the query, then chart it from the dashboards page.
    with page.expect_navigation():
        page.click("#sql-tabs .sql-tab:nth-child(1) .tab-name")
    query_name = f"Deals by region {width}"
    page.click("#save-box summary")
    page.fill("#save-form input[name=name]", query_name)
    page.click("#save-form button")
    assert page.inner_text("#sql-notice") == "Query saved."
    assert query_name in tab_names(page)  # the tab takes the saved query's name
    if width == "phone":
        assert_fits(page)

    page = a.go("/dashboards")
    with page.expect_navigation():
        page.click("#new-chart")
    with page.expect_navigation():
        page.select_option("#builder-saved", label=query_name)
    assert "3 rows" in page.inner_text("#builder-query")
    # x and y come preselected from the result's types: the first text column, the first number.
    assert page.input_value("#builder-x") == "region" and page.input_value("#builder-y") == "amount"
    with page.expect_navigation():
        page.select_option("#builder-type", "kpi")
    assert page.inner_text("#chart-0") == "1,222"  # the KPI preview: the sum of amounts
    with page.expect_navigation():
        page.select_option("#builder-type", "bar")
    page.fill("#builder-title", "Amount by region")
    page.fill("#builder-unit", "EUR")
    with page.expect_navigation():
        page.click("#preview")
    page.wait_for_selector("#chart-0[data-rendered=true]")
    axis = page.inner_text("#chart-0")
    assert "Amount EUR" in axis and "Region" in axis  # axis titles in words, with the unit
    if width == "phone":
        assert_fits(page)
    board = f"analyst-{width}-{site.db.replace('_', '-')}"
    page.fill("#builder-board", board)
    page.fill("#builder-board-title", "Regions <b>board</b>")
    with page.expect_navigation():
        page.click("#save-chart")
    assert page.url.endswith(f"/dashboards/{board}")
    assert page.inner_text("h1") == "Regions <b>board</b>"  # escaped
    page.wait_for_selector(".vega-chart[data-rendered=true]")
    assert "Amount by region" in page.inner_text("#chart-0-card")

    # The file is the same YAML the dashboards read, owned by its builder.
    written = dash.load_file(settings.workspace_dir / "dashboards" / f"{board}.yaml")
    assert written.owner == site.users["analyst"] and [c.type for c in written.charts] == ["bar"]
    assert written.charts[0].x == "region" and written.charts[0].y == "amount" and written.charts[0].unit == "EUR"
    assert list(written.datasets.values()) == [by_region]
    # A second chart joins the same dashboard (a table, sorted largest first, numbers formatted).
    page = a.go("/dashboards/new")
    saved_id = a.page.evaluate(
        "(name) => [...document.querySelectorAll('#builder-saved option')].find(o => o.textContent === name).value",
        query_name,
    )
    page = a.go(f"/dashboards/new?saved={saved_id}&type=table&x=region&y=amount&format=,.2f&board={board}")
    assert page.locator("#chart-0 tbody tr:first-child").inner_text().split("\t")[:2] == ["APAC", "1,200.25"]
    with page.expect_navigation():
        page.click("#save-chart")
    page.wait_for_selector(".vega-chart[data-rendered=true]")
    assert page.locator("#chart-1 tbody tr").count() == 3
    assert [c.type for c in dash.load_file(settings.workspace_dir / "dashboards" / f"{board}.yaml").charts] == [
        "bar",
        "table",
    ]
    assert not a.errors, a.errors
    a.close()

    # Nobody else adds to it (their own dashboard needs another name); the refusal is explained.
    g = visit(browser, site, "guest", width)
    page = g.go("/sql")
    token = page.get_attribute("#sql-form input[name=csrf]", "value")
    r = page.request.post(
        f"{site.base}/dashboards/new",
        form={"csrf": token, "saved": saved_id, "type": "bar", "x": "region", "y": "amount", "board": board},
    )
    assert r.status == 400 and "pick a saved SELECT query" in r.text()  # not shared: as if missing
    g.close()


def test_builder_refuses_others_dashboards_and_non_queries(site, settings):
    analyst = signin(site, site.users["analyst"])
    admin = signin(site, site.users["admin"])

    def form(client, sql: str, name: str, **extra: str):
        page = client.get("/sql").text
        token = re.search(r'name="csrf" value="([^"]+)"', page).group(1)
        r = client.post("/sql/saved", data={"csrf": token, "name": name, "sql": sql, "shared": "1"})
        saved = r.headers["location"].split("saved=")[1].split("&")[0]
        return {"csrf": token, "saved": saved, "type": "bar", "x": "region", "y": "amount", **extra}

    board = f"mine-{site.db.replace('_', '-')}"
    ok = form(analyst, f"SELECT region, amount FROM {site.db}.deals", "Shared deals", board=board)
    r = analyst.post("/dashboards/new", data=ok)
    assert r.status_code == 303 and r.headers["location"] == f"/dashboards/{board}"
    theirs = form(admin, f"SELECT region, amount FROM {site.db}.deals", "Admin deals", board=board)
    r = admin.post("/dashboards/new", data=theirs)
    assert r.status_code == 400 and "belongs to" in r.text
    r = admin.post("/dashboards/new", data={**theirs, "board": "sales-revenue"})  # a built-in one
    assert r.status_code == 400 and "pick another name" in r.text
    r = admin.post("/dashboards/new", data={**theirs, "board": "../etc"})
    assert r.status_code == 400 and "dashboard name" in r.text
    write = form(admin, f"INSERT INTO {site.db}.deals VALUES (9, 'XX', 1.0)", "Not a query", board="writes")
    r = admin.post("/dashboards/new", data=write)
    assert r.status_code == 400 and "pick a saved SELECT query" in r.text
    r = admin.get(f"/dashboards/new?saved={write['saved']}")
    assert "is not a SELECT" in r.text  # the preview never runs it
    assert not (settings.workspace_dir / "dashboards" / "writes.yaml").exists()
    r = analyst.post("/dashboards/new", data={**ok, "csrf": "forged"})
    assert r.status_code == 403


@pytest.mark.parametrize("width", ["desktop", "phone"])
def test_workflow_pages_times_cron_steps_and_events(browser, site, width):
    a = visit(browser, site, "admin", width)
    page = a.go("/workflows")
    row = page.locator("#schedules tbody tr", has_text=site.ids["workflow"])
    assert "0 6 * * *" in row.inner_text()
    nxt = row.locator("td.next-run time.when")
    assert re.search(r"\d\d:\d\d:\d\d", nxt.get_attribute("title") or "")  # the exact local time on hover
    assert re.search(r"06:00:00", nxt.get_attribute("datetime") or "")
    body = page.inner_text("main")
    assert not re.search(r"\d\d:\d\d:\d\d\.\d", body), "a timestamp with fractions of a second"
    assert page.locator("#workflows time.when").count() >= 2  # updated and last run, as times
    if width == "phone":
        assert_fits(page)

    page = a.go(f"/executions/{site.ids['execution']}")
    assert not re.search(r"\d\d:\d\d:\d\d\.\d", page.inner_text("main"))
    page.wait_for_selector("#graph-figure[data-interactive=true]")
    assert page.locator("#execution-graph").is_hidden() and page.locator("#execution-graph-svg").is_visible()
    step = page.locator("#steps details.step[data-node='/Count']")
    assert not step.evaluate("d => d.open")
    page.locator("#execution-graph-svg g.node[data-node='/Count']").click()
    assert step.evaluate("d => d.open")
    assert '"n": 4' in step.locator(".step-output").inner_text().replace(" ", " ")
    assert "Count" in step.locator("summary").inner_text() and "succeeded" in step.locator("summary").inner_text()
    page.locator("#execution-graph-svg g.node[data-node='/Prepare']").click()
    assert "step note" in page.locator("#steps details.step[data-node='/Prepare'] .step-output").inner_text()

    # A long event detail folds instead of being cut: expanding it shows all of it.
    detail = page.locator("#history details.event-detail").first
    assert detail.locator("summary").inner_text().endswith("...")
    detail.locator("summary").click()
    assert LONG.strip() in " ".join(detail.locator("pre").inner_text().split()) + " "
    if width == "phone":
        assert_fits(page)
    assert not a.errors, a.errors
    a.close()
