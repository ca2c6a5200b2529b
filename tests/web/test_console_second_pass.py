"""Issue 46, the console's second pass: what an analyst tripped over. Objects sorted by the
name shown; one notice for what grants hide; statements say what they did; errors in one
position style, naming the token, with the spot marked; hidden columns and row filters said
on the table page; a refused grant keeps the form; a token's secret exactly; a favicon, a skip
link, extracted header rows as headers; and, in Chromium, pages that fit a 390 px phone.

Over plain HTTP with the console's own sign-in (tests/web/test_console.py), on a small site."""

from __future__ import annotations

import html
import io
import re
import uuid

import pytest
from PIL import Image

from shoal.extract import run_extract
from shoal.governance import Governance, Principals
from shoal.ingest import ingest
from shoal.web.console import dashboards as dash
from tests.support.servers import console_server
from tests.web.test_console import PASSWORD, Site, Visit, browser, signin

pytestmark = pytest.mark.slow
__all__ = ["browser"]  # the imported fixture, used by the phone test

TABLE_HTML = """<html><head><title>Stock {u}</title></head><body><p>Stock count {u}.</p>
<table><tr><th>item</th><th>count</th></tr><tr><td>bolts</td><td>12</td></tr></table></body></html>"""


@pytest.fixture(scope="module")
def site(spark, settings, tmp_path_factory):
    u = uuid.uuid4().hex[:6]
    p = Principals(settings)
    users = {"admin": f"sp_ad_{u}", "analyst": f"sp_an_{u}"}
    p.add(users["admin"], admin=True, password=PASSWORD)
    p.add(users["analyst"], password=PASSWORD)
    db = f"sp_{u}"
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {db}")
    spark.sql(f"CREATE TABLE {db}.deals (id INT, region STRING, amount DOUBLE, secret_note STRING) USING iceberg")
    spark.sql(f"INSERT INTO {db}.deals VALUES (1, 'EU', 5.0, 'a'), (2, 'US', 7.0, 'b'), (3, 'EU', 9.5, 'c')")
    gov = Governance(settings)
    admin = p.principal(users["admin"])
    gov.grant(admin, "SELECT", "TABLE", f"{db}.deals", users["analyst"], columns=["id", "region", "amount"],
              row_filter="region = 'EU'")  # fmt: skip

    # Paths in one order, file names in another: sorting by path is not sorting by name.
    folder = tmp_path_factory.mktemp("second-pass")
    for sub, name in (("a", "zulu.txt"), ("b", "Mike.txt"), ("c", "alpha.txt")):
        (folder / sub).mkdir()
        (folder / sub / name).write_text(f"{name} for run {u}\n")
    (folder / "stock.html").write_text(TABLE_HTML.format(u=u))
    source = f"sp-{u}"
    ingest(spark, settings, str(folder), source_name=source, tags={"site": source})
    run_extract(spark, settings, only=["text/plain", "text/html"])
    ids = {
        r.file_name: r.object_id
        for r in spark.sql(
            "SELECT file_name, object_id FROM shoal.objects WHERE source_name = :s", args={"s": source}
        ).collect()
    }
    phone_dashboard(spark, settings, db, u)

    with console_server(settings) as base:
        yield Site(base, db, users, ids, source)


def phone_dashboard(spark, settings, db: str, u: str) -> None:
    """The built-in sales dashboard (every kind of card, 8 of them) over a copy of its table."""
    spark.sql(
        f"CREATE TABLE {db}.revenue_summary (year INT, month INT, total_weighted_revenue DOUBLE, "
        "total_paid_conversions BIGINT, opportunities BIGINT) USING iceberg"
    )
    rows = ", ".join(f"({2024 + m // 12}, {m % 12 + 1}, {123456.78 * (m + 1)}, {m * 7}, {m * 40})" for m in range(15))
    spark.sql(f"INSERT INTO {db}.revenue_summary VALUES {rows}")
    built_in = (dash.BUILT_IN / "sales-revenue.yaml").read_text(encoding="utf-8")
    board = built_in.replace("name: sales-revenue", f"name: phone-{u}").replace("sales_db.", f"{db}.")
    board = re.sub(r"refresh_after: .*\n", "", board)
    (settings.workspace_dir / "dashboards").mkdir(parents=True, exist_ok=True)
    (settings.workspace_dir / "dashboards" / f"phone-{u}.yaml").write_text(board, encoding="utf-8")


def csrf_of(page: str) -> str:
    return re.search(r'name="csrf" value="([^"]+)"', page).group(1)  # type: ignore[union-attr]


def run_sql(client, sql: str) -> str:
    """Post a statement as the SQL page's form does; the page its result redirects to."""
    form = {"sql": sql, "csrf": csrf_of(client.get("/sql").text), "run": "r1"}
    done = client.post("/sql", data=form)
    assert done.status_code == 303, done.text[:500]
    return client.get(done.headers["location"]).text


def listed_names(page: str) -> list[str]:
    return [
        html.unescape(n) for n in re.findall(r'<a href="/objects/[0-9a-f]{32}" title="[0-9a-f]{32}">([^<]*)</a>', page)
    ]


def test_objects_sort_by_the_name_shown_both_ways(site):
    admin = signin(site, site.users["admin"])
    mine = {"tag": f"site={site.source}"}
    for sort, reverse, arrow in (("name", False, "▲"), ("-name", True, "▼")):
        page = admin.get("/objects", params={**mine, "sort": sort}).text
        names = listed_names(page)
        assert len(names) == 4, names
        assert names == sorted(names, key=str.lower, reverse=reverse), (sort, names)
        active = re.search(r'class="sort active" data-sort="(\w+)">[^<]*</a>', page)
        assert active and active.group(1) == "name" and active.group(0).endswith(f"name {arrow}</a>")
    # No sort asked: the default is the name, ascending, as the arrow says.
    page = admin.get("/objects", params=mine).text
    assert listed_names(page) == sorted(listed_names(page), key=str.lower) and "name ▲" in page


def test_an_object_page_names_what_grants_hide_once(site):
    analyst = signin(site, site.users["analyst"])
    page = analyst.get(f"/objects/{site.ids['stock.html']}").text
    assert page.count('id="hidden-notice"') == 1 and 'class="denied"' not in page
    notice = re.search(r'id="hidden-notice"><p>(.*?)</p>', page, re.S).group(1)  # type: ignore[union-attr]
    for what in ("text", "entities", "tables", "form fields", "transcript"):
        assert what in notice, notice
    whole = re.search(r'id="hidden-notice">(.*?)</div>', page, re.S).group(1)  # type: ignore[union-attr]
    assert "no SELECT on shoal.text" in whole and page.count("no SELECT on shoal.text") == 1  # its reason, once
    admin = signin(site, site.users["admin"])
    page = admin.get(f"/objects/{site.ids['stock.html']}").text
    assert 'id="hidden-notice"' not in page
    # The extracted table's header row is a header.
    table = re.search(r'<table class="grid extracted-table">(.*?)</table>', page, re.S).group(1)  # type: ignore[union-attr]
    assert re.search(r'<thead><tr><th scope="col">item</th><th scope="col">count</th></tr></thead>', table), table
    assert "<td>bolts</td>" in table and "<td>item</td>" not in table


def test_statements_say_what_they_did(site):
    admin = signin(site, site.users["admin"])
    page = run_sql(admin, f"INSERT INTO {site.db}.deals VALUES (10, 'EU', 1.0, 'x')")
    assert re.search(r'<strong id="sql-total">1 row inserted</strong>', page), page[page.find("sql-meta") :][:300]
    assert "showing 1" not in page
    page = run_sql(admin, f"INSERT INTO {site.db}.deals VALUES (11, 'US', 2.0, 'y'), (12, 'US', 3.0, 'z')")
    assert '<strong id="sql-total">2 rows inserted</strong>' in page
    # The analyst's INSERT is governed: refused without the privilege, no count of anything.
    analyst = signin(site, site.users["analyst"])
    page = run_sql(analyst, f"INSERT INTO {site.db}.deals VALUES (13, 'EU', 1.0, 'w')")
    assert 'id="sql-error"' in page and "inserted" not in page
    page = run_sql(admin, f"SELECT id FROM {site.db}.deals WHERE id = 10")
    assert '<strong id="sql-total">1 row</strong>' in page
    # The history lists each INSERT by the rows it wrote, not as "0 rows".
    history = re.search(r'id="history">(.*?)</table>', page, re.S).group(1)  # type: ignore[union-attr]
    assert re.search(r"VALUES \(10, [^<]*</code></td>\s*<td>1 row inserted</td>", history), history
    assert re.search(r"VALUES \(11, [^<]*</code></td>\s*<td>2 rows inserted</td>", history), history
    assert re.search(r"WHERE id = 10</code></td>\s*<td>1 row</td>", history), history


def error_of(page: str) -> str:
    return html.unescape(re.search(r'<p class="error" id="sql-error">(.*?)</p>', page, re.S).group(1))  # type: ignore[union-attr]


def spot_of(page: str) -> tuple[str, str, str]:
    found = re.search(
        r'id="sql-error-spot" data-line="(\d+)" data-column="(\d+)">.*?<mark class="error-token" id="sql-error-token">(.*?)</mark>',
        page,
        re.S,
    )
    assert found, "no error spot marked"
    return found.group(1), found.group(2), html.unescape(found.group(3))


def test_errors_name_the_token_in_one_position_style_and_mark_the_spot(site):
    analyst = signin(site, site.users["analyst"])  # checked by the governance parser (sqlglot)
    page = run_sql(analyst, f"SELECT id\nFROM {site.db}.deals\nWHERE region = = 'EU'")
    error = error_of(page)
    assert "'='" in error and "(line 3, column 16)" in error, error
    assert "Col:" not in error and " pos " not in error
    assert spot_of(page) == ("3", "16", "=")

    admin = signin(site, site.users["admin"])  # run as written: Spark's parser finds this one
    page = run_sql(admin, f"SELECT id,\nFROM {site.db}.deals")
    error, column = error_of(page), len(f"FROM {site.db}") + 1
    assert "'.'" in error and f"(line 2, column {column})" in error, error
    assert not re.search(r"\bpos \d", error)
    assert spot_of(page) == ("2", str(column), ".")
    # Leading blank lines: the statement runs stripped, the spot is counted in the editor's text.
    page = run_sql(admin, f"\n\n  SELECT id,\nFROM {site.db}.deals")
    assert spot_of(page) == ("4", str(column), ".")


def test_the_table_page_says_what_the_grant_hides(site):
    analyst = signin(site, site.users["analyst"])
    page = analyst.get(f"/catalog/{site.db}/deals").text
    rows = dict(re.findall(r"<tr(?: class=\"col-hidden\")?><td>(\w+)(.*?)</td>", page))
    assert "hidden from you" in rows["secret_note"] and "hidden from you" not in rows["region"]
    assert '<tr class="col-hidden"><td>secret_note' in page
    assert 'id="rows-filtered"' in page and "Rows filtered by your grant" in page
    assert "region = " not in page  # the filter is the grantor's text: said, not shown
    admin = signin(site, site.users["admin"])
    page = admin.get(f"/catalog/{site.db}/deals").text
    assert "hidden from you" not in page and 'id="rows-filtered"' not in page


def test_a_refused_grant_keeps_the_form_and_a_token_is_shown_exactly(site, settings):
    admin = signin(site, site.users["admin"])
    csrf = csrf_of(admin.get("/governance").text)
    typed = {
        "privilege": "SELECT",
        "kind": "TABLE",
        "target": f"{site.db}.deals",
        "grantee": site.users["analyst"],
        "columns": "id, region",
        "row_filter": "region = = 'EU' <b>",
        "masks": "",
        "csrf": csrf,
    }
    r = admin.post("/governance/grants", data=typed)
    assert r.status_code == 400
    page = r.text
    assert 'id="grant-form"' in page and 'id="grant-error"' in page and "not granted" in page
    assert '<details id="grant-box" open>' in page
    assert 'value="region = = &#39;EU&#39; &lt;b&gt;"' in page  # as typed, escaped
    assert 'name="columns" placeholder="a, b" value="id, region"' in page
    assert (
        f'name="target" required placeholder="db.table, db, tag=value or workflow" list="grant-tables" autocomplete="off" value="{site.db}.deals"'
        in page
    )
    assert "<option selected>TABLE</option>" in page

    r = admin.post("/governance/tokens", data={"principal": site.users["analyst"], "description": "x", "csrf": csrf})
    found = re.search(r'<code id="token-secret"[^>]*>([^<]+)</code>', r.text)
    assert found and 'id="copy-token"' in r.text and 'data-copy="token-secret"' in r.text
    secret = found.group(1)
    assert "_" in secret and Principals(settings).authenticate(secret).name == site.users["analyst"]


def test_favicon_skip_link(site):
    client = signin(site, site.users["analyst"])
    icon = client.get("/favicon.ico")
    assert icon.status_code == 200 and icon.headers["content-type"] == "image/x-icon"
    assert Image.open(io.BytesIO(icon.content)).format == "ICO"
    page = client.get("/catalog").text
    assert re.search(r'<body>\s*<a class="skip" href="#main" id="skip-link">Skip to content</a>', page)
    assert '<main id="main" tabindex="-1">' in page and 'rel="icon"' in page
    assert client.get("/static/favicon.svg").status_code == 200


@pytest.mark.parametrize("what", ["dashboard", "object"])
def test_pages_fit_a_phone(browser, site, what):
    """At 390 px nothing makes the page scroll sideways: dashboard cards, object ids and paths."""
    from tests.web.test_console_analyst import assert_fits

    v = Visit(browser, site, "admin")
    v.page.set_viewport_size({"width": 390, "height": 844})
    path = {
        "dashboard": f"/dashboards/phone-{site.db.removeprefix('sp_')}",
        "object": f"/objects/{site.ids['stock.html']}",
    }[what]
    page = v.go(path, f"phone-{what}")
    if what == "dashboard":
        page.wait_for_selector(".vega-chart[data-rendered=true]")
        assert page.locator(".card").count() == 8
    assert_fits(page)
    v.close()


# The editor's selection: [line, column, text], both counted from 1.
PICKED = """() => { const s = window.shoalSqlEditor.view.state; const r = s.selection.main;
  const line = s.doc.lineAt(r.from); return [line.number, r.from - line.from + 1, s.sliceDoc(r.from, r.to)]; }"""


def test_the_editor_selects_the_token_an_error_names(browser, site):
    from tests.web.test_console import run_sql as type_and_run

    v = Visit(browser, site, "analyst")
    page = v.go("/sql")
    type_and_run(page, f"SELECT id\nFROM {site.db}.deals\nWHERE region = = 'EU'")
    page.wait_for_selector("#sql-error-spot")
    assert page.inner_text("#sql-error-token") == "="
    assert page.evaluate(PICKED) == [3, 16, "="]
    # Leading blank lines stay in the editor's text, and the spot counts them.
    type_and_run(page, f"\n\nSELECT id\nFROM {site.db}.deals\nWHERE region = = 'EU'")
    page.wait_for_selector("#sql-error-spot")
    assert page.get_attribute("#sql-error-spot", "data-line") == "5"
    assert page.evaluate(PICKED) == [5, 16, "="]
    v.close()


def test_a_dashboard_draws_each_card_the_viewer_may_read(site, spark, settings):
    """One column the analyst may not read in a dataset hid every card; now only the card that
    draws it is hidden, and the page says which and why."""
    u = site.db.removeprefix("sp_")
    spark.sql(f"CREATE TABLE {site.db}.board (region STRING, amount DOUBLE, secret STRING) USING iceberg")
    spark.sql(f"INSERT INTO {site.db}.board VALUES ('EU', 5.0, 's1'), ('US', 7.0, 's2')")
    admin = Principals(settings).principal(site.users["admin"])
    Governance(settings).grant(
        admin, "SELECT", "TABLE", f"{site.db}.board", site.users["analyst"], columns=["region", "amount"]
    )
    (settings.workspace_dir / "dashboards" / f"cards-{u}.yaml").write_text(
        f"""name: cards-{u}
title: Cards {u}
datasets:
  board: SELECT region, amount, secret FROM {site.db}.board
charts:
  - {{type: kpi, title: Amount, dataset: board, value: amount, agg: sum}}
  - {{type: bar, title: By region, dataset: board, x: region, y: amount}}
  - {{type: table, title: Secrets, dataset: board, columns: [region, secret]}}
""",
        encoding="utf-8",
    )
    page = signin(site, site.users["analyst"]).get(f"/dashboards/cards-{u}").text
    assert re.search(r'<p class="kpi" id="chart-0">12</p>', page), page[page.find('id="chart-0"') - 200 :][:400]
    assert 'id="chart-1-spec"' in page
    secrets = page[page.index('id="chart-2-card"') :]
    assert '<p class="denied">Hidden: ' in secrets[: secrets.index("</section>")]
    notice = re.search(r'id="hidden-cards"><p>(.*?)</p>', page, re.S)
    assert notice and "1 of 3 cards hidden" in notice.group(1) and "“Secrets”" in notice.group(1)
    assert page.count('class="denied"') == 1
    page = signin(site, site.users["admin"]).get(f"/dashboards/cards-{u}").text
    assert (
        'id="hidden-cards"' not in page
        and 'class="denied"' not in page
        and '<p class="kpi" id="chart-0">12</p>' in page
    )


def test_the_audit_filter_offers_the_actions_on_record(site):
    admin = signin(site, site.users["admin"])
    run_sql(admin, "SELECT 1 AS one")  # recorded as `select`, not as anything under `query.`
    admin.get("/objects", params={"tag": f"site={site.source}"})  # recorded as catalog.objects
    page = admin.get("/governance/audit").text
    assert 'list="audit-actions"' in page
    datalist = re.search(r'<datalist id="audit-actions">(.*?)</datalist>', page, re.S).group(1)  # type: ignore[union-attr]
    offered = re.findall(r'<option value="([^"]+)">', datalist)
    assert {"select", "catalog.objects", "catalog."} <= set(offered) and offered == sorted(offered), offered
    rows = admin.get("/governance/audit", params={"action": "select", "principal": site.users["admin"]}).text
    assert "<td>select</td>" in rows  # what the list offers, the filter finds


CHART_COLOURS = """() => { const svg = document.querySelector('#chart-3 svg');
  const label = svg.querySelector('.role-axis-label text');
  return [getComputedStyle(svg).backgroundColor, label.getAttribute('fill') || getComputedStyle(label).fill]; }"""


def test_charts_follow_dark_mode(browser, site):
    """In dark mode a chart is drawn on the card's dark background with light labels, not in a
    white box; in light mode it keeps dark labels."""
    v = Visit(browser, site, "admin")
    for scheme in ("dark", "light"):
        v.page.emulate_media(color_scheme=scheme)
        page = v.go(f"/dashboards/phone-{site.db.removeprefix('sp_')}", f"dashboard-{scheme}")
        page.wait_for_selector("#chart-3[data-rendered=true]")
        background, label = page.evaluate(CHART_COLOURS)
        white = label.lower() in ("#fff", "rgb(255, 255, 255)")
        if scheme == "dark":
            assert background in ("rgba(0, 0, 0, 0)", "transparent") and white, (background, label)
        else:
            assert not white, label
    v.close()
