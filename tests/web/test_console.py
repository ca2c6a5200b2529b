"""The web console in headless Chromium: sign-in, every page, two users' permission
differences, a dashboard rendered with data and refreshed by its workflow, and XSS cases.

Screenshots of each page land in test-artifacts/console/ (or $SHOAL_TEST_ARTIFACTS/console).
"""

from __future__ import annotations

import datetime as dt
import io
import os
import re
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlencode

import httpx
import pytest
from PIL import Image
from sqlalchemy import text

from shoal import workflows
from shoal.extract import run_extract
from shoal.governance import Governance, Principals
from shoal.governance.access import RawAccess
from shoal.ingest import ingest
from shoal.notify import Notifier
from shoal.recipes import JobRegistry, load_job_file
from shoal.samples import media as media_samples
from shoal.samples import sales
from shoal.search.index import SearchIndex
from shoal.web.console.history import QueryHistory
from tests.support.servers import console_server

pytestmark = pytest.mark.slow

ARTIFACTS = Path(os.environ.get("SHOAL_TEST_ARTIFACTS", Path(__file__).resolve().parents[2] / "test-artifacts"))
CHROMIUM = os.environ.get("SHOAL_CHROMIUM", "/usr/bin/chromium")
PASSWORD = "correct horse battery"
XSS_TEXT = (
    '<script>window.__xss = 1</script><img src=x onerror="window.__xss = 2"> '
    "Maria Garcia signed the lease in Berlin. Contact maria.garcia@example.com."
)
XSS_HTML = """<html><head><title>Lease &lt;script&gt;window.__xss=3&lt;/script&gt;</title></head><body>
<p>Quarterly lease summary for Rotterdam.</p>
<table><tr><th>item</th><th>amount</th></tr>
<tr><td>&lt;img src=x onerror=window.__xss=4&gt;</td><td>1200</td></tr>
<tr><td>deposit</td><td>300</td></tr></table>
</body></html>"""


@dataclass
class Site:
    base: str
    db: str
    users: dict[str, str]
    ids: dict[str, str]
    source: str


@pytest.fixture(scope="module")
def site(spark, settings, tmp_path_factory):
    u = uuid.uuid4().hex[:6]
    p = Principals(settings)
    users = {"admin": f"ada_{u}", "analyst": f"bob_{u}", "guest": f"cyd_{u}"}
    p.add(users["admin"], admin=True, password=PASSWORD)
    p.add(users["analyst"], password=PASSWORD)
    p.add(users["guest"], password=PASSWORD)
    admin = p.principal(users["admin"])

    db = f"web_{u}"
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {db}")
    spark.sql(f"CREATE TABLE {db}.deals (id INT, region STRING, amount DOUBLE, note STRING) USING iceberg")
    spark.sql(
        f"INSERT INTO {db}.deals VALUES (1, 'EU', 5.0, '<script>window.__xss=5</script>'), (2, 'US', 7.0, 'plain'),"
        " (3, 'EU', 9.5, '=HYPERLINK(\"http://x\")')"
    )
    gov = Governance(settings)
    gov.set_owner(f"{db}.deals", users["admin"], "deals by region <b>not bold</b>")
    gov.grant(admin, "SELECT", "TABLE", f"{db}.deals", users["analyst"], row_filter="region = 'EU'")
    # Two columns of three: the editor's completion and schema tree must not show the third.
    spark.sql(f"CREATE TABLE {db}.narrow (id INT, region STRING, margin_secret DOUBLE) USING iceberg")
    gov.grant(admin, "SELECT", "TABLE", f"{db}.narrow", users["analyst"], columns=["id", "region"])
    # Search answers with objects whose shoal.object_index row the reader may select.
    for table in (
        "shoal.text",
        "shoal.entities",
        "shoal.pii",
        "shoal.tables",
        "shoal.faces",
        "shoal.ocr",
        "shoal.object_index",
    ):
        gov.grant(admin, "SELECT", "TABLE", table, users["analyst"])
    gov.grant(admin, "SELECT", "TABLE", "shoal.image_properties", users["analyst"])

    folder = tmp_path_factory.mktemp("console-corpus")
    source = f"web-{u}"
    (folder / "xss.txt").write_text(XSS_TEXT)
    (folder / "lease.html").write_text(XSS_HTML)
    # Content unique to this run: objects are named by content, so copies of other suites' media
    # would become those suites' objects.
    poster = media_samples.text_image(["Console poster", "Quarterly inventory count", f"Run {u}"])
    (folder / "poster.png").write_bytes(media_samples.encode(poster, "PNG"))
    portrait = Image.open(io.BytesIO(media_samples.face_photo())).convert("RGB").crop((40, 0, 420, 380))
    portrait = portrait.transpose(Image.Transpose.FLIP_LEFT_RIGHT)
    portrait.putpixel((0, 0), (int(u[:2], 16), int(u[2:4], 16), int(u[4:6], 16)))
    (folder / "astronaut.png").write_bytes(media_samples.encode(portrait, "PNG"))
    # Tagged with the source: the shared test lake holds other tests' objects, and an
    # unfiltered inventory page (200 rows, by source name) need not reach this source's.
    ingest(spark, settings, str(folder), source_name=source, tags={"site": source})
    run_extract(spark, settings, only=["text/plain", "text/html", "image/png"])
    ids = {
        r.source_path: r.object_id
        for r in spark.sql(
            "SELECT source_path, object_id FROM shoal.objects WHERE source_name = :s", args={"s": source}
        ).collect()
    }
    RawAccess(settings).create(admin, f"web-{u}", prefix=source, principals=[users["analyst"]])
    SearchIndex(settings).update(spark, model=settings.search.model, size=400, overlap=80)

    files = sales.write_pipeline(
        tmp_path_factory.mktemp("console-sales"), opportunities=2000, start=dt.date(2024, 1, 1), days=90
    )
    registry = JobRegistry(settings)
    registry.register(load_job_file(files.sales_job))
    registry.register(load_job_file(files.marketing_job))
    Notifier(settings).create_topic(sales.TOPIC)
    workflows.register(settings, files.definition, name=sales.WORKFLOW)
    first = workflows.run(settings, sales.WORKFLOW)
    assert first.status == "SUCCEEDED", (first.error, first.cause)

    with console_server(settings) as base:
        yield Site(base, db, users, ids, source)


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        b = pw.chromium.launch(
            executable_path=CHROMIUM,
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
            ],
        )
        yield b
        b.close()


class Visit:
    """One signed-in browser context; records console errors and requests leaving the site."""

    def __init__(self, browser, site: Site, who: str) -> None:
        self.site = site
        self.context = browser.new_context(viewport={"width": 1300, "height": 900})
        self.page = self.context.new_page()
        self.errors: list[str] = []
        self.outside: list[str] = []
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.on(
            "request", lambda r: None if r.url.startswith((site.base, "data:")) else self.outside.append(r.url)
        )
        self.who = who
        if who:
            self.sign_in(site.users[who])

    def sign_in(self, name: str, password: str = PASSWORD) -> None:
        self.page.goto(self.site.base + "/catalog")
        assert "/login" in self.page.url
        self.page.fill("#password-form input[name=user]", name)
        self.page.fill("#password-form input[name=password]", password)
        self.page.click("#password-form button")

    def go(self, path: str, shot: str | None = None):
        self.page.goto(self.site.base + path)
        self.page.wait_for_load_state("networkidle")
        if shot:
            out = ARTIFACTS / "console"
            out.mkdir(parents=True, exist_ok=True)
            self.page.screenshot(path=str(out / f"{shot}.png"), full_page=True)
        return self.page

    def xss_fired(self) -> bool:
        return self.page.evaluate("() => window.__xss !== undefined")

    def close(self) -> None:
        assert not self.outside, f"requests left the console: {self.outside}"
        self.context.close()


def test_sign_in_sessions_csrf_and_logout(browser, site, settings):
    v = Visit(browser, site, "")
    v.sign_in(site.users["analyst"], "wrong password")
    assert "/login" in v.page.url and "wrong user name or password" in v.page.inner_text("#login-error")
    v.go("/login", "login")
    v.sign_in(site.users["analyst"])
    assert v.page.url.endswith("/catalog") and v.page.inner_text("#whoami").startswith(site.users["analyst"])
    session = {c["name"]: c for c in v.context.cookies()}["shoal_session"]
    assert session["httpOnly"] and session["sameSite"] == "Lax"

    # A state-changing request without the form's CSRF token is refused, even with the cookie.
    jar = {"shoal_session": session["value"]}
    r = httpx.post(site.base + "/sql", data={"sql": "SELECT 1"}, cookies=jar, follow_redirects=False)
    assert r.status_code == 403
    token = v.go("/sql").get_attribute("#sql-form input[name=csrf]", "value")
    r = httpx.post(site.base + "/sql", data={"sql": "SELECT 1", "csrf": token}, cookies=jar, follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"].startswith("/sql?q=")
    # Only local paths after sign-in: no open redirect.
    r = httpx.get(site.base + "/login?next=//evil.example/x")
    assert 'name="next" value="/catalog"' in r.text

    v.page.click("#logout")
    assert "/login" in v.page.url
    r = httpx.get(site.base + "/catalog", cookies=jar, follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"].startswith("/login")
    v.close()

    # Sign-in with an API token instead of a password.
    _tid, secret = Principals(settings).create_token(site.users["guest"])
    t = Visit(browser, site, "")
    t.page.goto(site.base + "/catalog")
    t.page.click("details summary")
    t.page.fill("#token-form input[name=token]", secret)
    t.page.click("#token-form button")
    assert t.page.inner_text("#whoami").startswith(site.users["guest"])
    t.close()


def signin(site: Site, user: str, password: str = PASSWORD, token: str | None = None) -> httpx.Client:
    """A console session over plain HTTP: the sign-in form's CSRF cookie, then the form."""
    client = httpx.Client(base_url=site.base, timeout=120, follow_redirects=False)
    client.get("/login")
    form = {"csrf": client.cookies["shoal_login_csrf"], "next": "/catalog"}
    form.update({"method": "token", "token": token} if token else {"user": user, "password": password})
    r = client.post("/login", data=form)
    assert r.status_code == 303
    return client


def signed_in(client: httpx.Client) -> bool:
    return client.get("/catalog").status_code == 200


def test_table_page_snapshots_only_for_unrestricted_readers(site):
    admin = signin(site, site.users["admin"])
    page = admin.get(f"/catalog/{site.db}/deals").text
    assert 'id="snapshots"' in page and "snapshots-denied" not in page and "append" in page
    analyst = signin(site, site.users["analyst"])
    page = analyst.get(f"/catalog/{site.db}/deals").text
    assert 'id="snapshots"' not in page and "snapshots-denied" in page and 'id="sample"' in page


def test_inventory_text_filter_follows_text_grants(site):
    """The guest may list objects (metadata is open) but holds no grant on shoal.text."""
    analyst = signin(site, site.users["analyst"])
    page = analyst.get("/objects", params={"text": "lease Berlin"}).text
    assert "xss.txt" in page
    guest = signin(site, site.users["guest"])
    mine = {"tag": f"site={site.source}"}
    assert "xss.txt" in guest.get("/objects", params=mine).text  # the inventory itself stays open
    for words in ("lease Berlin", "maria.garcia", "Garc"):
        page = guest.get("/objects", params={"text": words, **mine}).text
        assert "xss.txt" not in page and "lease.html" not in page, words


def test_workflow_pages_are_governed(site, settings):
    from shoal.governance import AuditLog
    from shoal.workflows import Store

    execution = Store(settings).list_executions(workflow=sales.WORKFLOW, limit=1)[0].id
    analyst = signin(site, site.users["analyst"])
    assert 'href="/workflows"' not in analyst.get("/catalog").text  # no link to what they may not see
    for path in (
        "/workflows",
        f"/workflows/{sales.WORKFLOW}",
        f"/workflows/{sales.WORKFLOW}/graph.svg",
        f"/executions/{execution}",
        f"/executions/{execution}/graph.svg",
    ):
        r = analyst.get(path)
        assert r.status_code == 403 and "TaskStateEntered" not in r.text, path
    csrf = re.search(r'name="csrf" value="([^"]+)"', analyst.get("/catalog").text).group(1)
    assert analyst.post(f"/workflows/{sales.WORKFLOW}/start", data={"csrf": csrf}).status_code == 403
    assert analyst.post(f"/executions/{execution}/resume", data={"csrf": csrf}).status_code == 403
    denied = AuditLog(settings).list(principal=site.users["analyst"], decision="deny", limit=20)
    assert {"workflow.list", "workflow.view", "workflow.start", "workflow.resume"} <= {e["action"] for e in denied}

    # SELECT on the workflow: its pages, executions and graphs, but no start or resume.
    p, gov = Principals(settings), Governance(settings)
    grant = gov.grant(p.principal("admin"), "SELECT", "WORKFLOW", sales.WORKFLOW, site.users["analyst"])
    try:
        assert 'href="/workflows"' in analyst.get("/catalog").text
        listing = analyst.get("/workflows")
        assert listing.status_code == 200 and sales.WORKFLOW in listing.text
        for path in (f"/workflows/{sales.WORKFLOW}", f"/executions/{execution}", f"/executions/{execution}/graph.svg"):
            assert analyst.get(path).status_code == 200, path
        assert 'id="start"' not in analyst.get(f"/workflows/{sales.WORKFLOW}").text
        assert analyst.post(f"/workflows/{sales.WORKFLOW}/start", data={"csrf": csrf}).status_code == 403
        other = f"other-{site.db}"
        assert analyst.get(f"/workflows/{other}").status_code == 403
    finally:
        gov.revoke(p.principal("admin"), grant.id)
    assert analyst.get(f"/workflows/{sales.WORKFLOW}").status_code == 403


def test_sessions_end_with_their_token_and_password_and_sign_in_is_throttled(site, settings):
    from shoal.governance import AuditLog

    p = Principals(settings)
    token_id, token = p.create_token(site.users["guest"])
    by_token = signin(site, "", token=token)
    by_password = signin(site, site.users["guest"])
    assert signed_in(by_token) and signed_in(by_password)
    p.revoke_token(token_id)
    assert not signed_in(by_token) and signed_in(by_password)

    name = f"pw_{uuid.uuid4().hex[:6]}"
    p.add(name, password=PASSWORD)
    first, second = signin(site, name), signin(site, name)
    p.set_password(name, PASSWORD + " again")  # from the CLI: every session of theirs ends
    assert not signed_in(first) and not signed_in(second)

    # Five wrong passwords lock the account: the right one is then refused, with a generic message.
    for _ in range(settings.governance.throttle_account_failures):
        assert not signed_in(signin(site, name, "not the password"))
    locked = httpx.Client(base_url=site.base, timeout=120)
    locked.get("/login")
    r = locked.post(
        "/login",
        data={"csrf": locked.cookies["shoal_login_csrf"], "user": name, "password": PASSWORD + " again"},
        follow_redirects=False,
    )
    assert r.status_code == 303 and "/login" in r.headers["location"] and "shoal_session" not in r.cookies
    assert "Too many failed sign-ins" in locked.get(r.headers["location"]).text
    assert any(
        e["action"] == "console.login" and e["reason"] == "throttled"
        for e in AuditLog(settings).list(principal=name, decision="deny", limit=10)
    )
    p.remove(name)


def test_sql_editor_errors_are_audited_and_csv_headers_defused(site, settings, monkeypatch):
    from shoal.governance import AuditLog, GovernedSql

    analyst = signin(site, site.users["analyst"])
    csrf = re.search(r'name="csrf" value="([^"]+)"', analyst.get("/sql").text).group(1)
    r = analyst.post("/sql", data={"csrf": csrf, "sql": "SELECT 1 AS `=HYPERLINK(1)`, 2 AS `@x`, 3 AS ok"})
    query_id = r.headers["location"].split("q=")[1]
    assert analyst.get(f"/sql/{query_id}.csv").text.splitlines()[0] == "'=HYPERLINK(1),'@x,ok"

    def boom(*_args, **_kwargs):
        raise RuntimeError("something nobody foresaw")

    monkeypatch.setattr(GovernedSql, "execute", boom)
    r = analyst.post("/sql", data={"csrf": csrf, "sql": "SELECT 2"})
    assert r.status_code == 303
    page = analyst.get(r.headers["location"])
    assert page.status_code == 200 and "the query failed" in page.text and "foresaw" not in page.text
    failed_id = r.headers["location"].split("q=")[1]
    assert analyst.get(f"/sql/{failed_id}.csv").status_code == 400
    # The first query's CSV is its kept result: nothing runs again, so the failure cannot reach it.
    assert analyst.get(f"/sql/{query_id}.csv").status_code == 200
    errors = [
        e for e in AuditLog(settings).list(principal=site.users["analyst"], limit=10) if e["action"] == "api.error"
    ]
    assert errors and errors[0]["decision"] == "deny"


def test_sql_editor_runs_a_statement_once_and_views_replay_its_kept_result(site, settings, spark):
    """Run is the only thing that executes: the page it redirects to, later views and the CSV
    show the result kept from that run (no SQL: no audit rows but each page view's own
    `query.page`), and only to its author."""
    from shoal.governance import AuditLog

    admin_name = site.users["admin"]
    admin = signin(site, admin_name)
    csrf = re.search(r'name="csrf" value="([^"]+)"', admin.get("/sql").text).group(1)
    table = f"{site.db}.once_{uuid.uuid4().hex[:6]}"
    assert admin.post("/sql", data={"csrf": csrf, "sql": f"CREATE TABLE {table} (n INT) USING iceberg"}).is_redirect
    r = admin.post("/sql", data={"csrf": csrf, "sql": f"INSERT INTO {table} VALUES (1), (2)"})
    assert r.status_code == 303
    assert admin.get(r.headers["location"]).status_code == 200  # the redirect, followed
    assert spark.sql(f"SELECT count(*) FROM {table}").first()[0] == 2  # inserted once, not twice

    r = admin.post("/sql", data={"csrf": csrf, "sql": f"SELECT n, 'x' AS tag FROM {table} ORDER BY n"})
    location = r.headers["location"]
    query_id = location.split("q=")[1]
    assert len(query_id) >= 20 and not query_id.isdigit()  # random, not a sequence number
    audit = AuditLog(settings)

    def ran() -> list[dict]:
        return [r for r in audit.list(principal=admin_name, limit=10_000) if r["action"] != "query.page"]

    before = ran()
    for _ in range(2):
        page = admin.get(location)
        assert page.status_code == 200 and 'id="sql-kept"' in page.text
        csv_text = admin.get(f"/sql/{query_id}.csv").text
        assert csv_text.splitlines() == ["n,tag", "1,x", "2,x"]
    assert admin.get(f"/sql?q={query_id}&page=2").status_code == 200
    assert ran() == before  # views ran nothing
    assert len(audit.list(principal=admin_name, action="query.page", limit=10)) >= 3  # the views, once each
    assert spark.sql(f"SELECT count(*) FROM {table}").first()[0] == 2

    # Another user gets exactly what a missing id gets.
    other = signin(site, site.users["analyst"])
    for path in (location, f"/sql/{query_id}.csv", "/sql?q=no-such-query", "/sql/no-such-query.csv"):
        r = other.get(path)
        assert r.status_code == 404 and table not in r.text, path
    assert other.get(location).text.count("no such query") == other.get("/sql?q=nope").text.count("no such query")
    # A GET can no longer run anything, whatever its parameters.
    assert other.get("/sql", params={"sql": f"INSERT INTO {table} VALUES (3)"}).status_code == 200
    assert spark.sql(f"SELECT count(*) FROM {table}").first()[0] == 2


def test_sign_in_page_shows_only_its_own_messages(site):
    spoof = "Your account is suspended. Call +1 555 0100 with your password"
    r = httpx.get(site.base + "/login", params={"error": spoof})
    assert r.status_code == 200 and "suspended" not in r.text and 'id="login-error"' not in r.text
    r = httpx.get(site.base + "/login", params={"error": "throttled"})
    assert "Too many failed sign-ins" in r.text
    # A failed sign-in redirects with a code, not with text.
    client = httpx.Client(base_url=site.base, timeout=120)
    client.get("/login")
    r = client.post(
        "/login",
        data={"csrf": client.cookies["shoal_login_csrf"], "user": site.users["guest"], "password": "nope"},
        follow_redirects=False,
    )
    assert "error=password" in r.headers["location"]
    assert "wrong user name or password" in client.get(r.headers["location"]).text


def test_a_console_session_ends_when_its_token_expires(site, settings):
    from shoal.lake.database import utcnow

    p = Principals(settings)
    token_id, token = p.create_token(site.users["guest"], expires_in_days=1 / 24)
    client = httpx.Client(base_url=site.base, timeout=120, follow_redirects=False)
    client.get("/login")
    r = client.post("/login", data={"csrf": client.cookies["shoal_login_csrf"], "method": "token", "token": token})
    max_age = int(re.search(r"shoal_session=[^;]+;.*?Max-Age=(\d+)", r.headers["set-cookie"], re.I).group(1))
    assert 0 < max_age <= 3600  # the cookie ends with the token, not after session_hours
    assert signed_in(client)
    with p.engine.begin() as conn:  # the clock passes the token's expiry
        conn.execute(
            text("UPDATE shoal_tokens SET expires_at = :t WHERE id = :i"),
            {"t": utcnow() - dt.timedelta(seconds=1), "i": token_id},
        )
    assert not signed_in(client)


def test_deciding_a_request_in_the_console_reveals_nothing(site, settings):
    from shoal.governance.access import AccessRequests

    made = AccessRequests(settings).request(
        Principals(settings).principal(site.users["guest"]), f"{site.db}.deals", "for the probe test"
    )
    analyst = signin(site, site.users["analyst"])  # neither owner nor admin
    csrf = re.search(r'name="csrf" value="([^"]+)"', analyst.get("/governance").text).group(1)

    def answer(request_id: int) -> str:
        r = analyst.post(f"/governance/requests/{request_id}/approve", data={"csrf": csrf})
        assert r.status_code == 303
        return analyst.get(r.headers["location"]).text

    probe, missing = answer(made["id"]), answer(2**31 - 9)
    assert f"no access request {made['id']}" in probe and "no access request 2147483639" in missing
    assert "deals" not in probe.split('id="gov-message"')[1].split("</")[0]
    assert AccessRequests(settings).get(made["id"])["status"] == "pending"
    # The governance page's notices are chosen by a code too: no text from the URL is shown.
    spoof = analyst.get("/governance", params={"message": "Call +1 555 0100", "done": "Call +1 555 0100"}).text
    assert "555 0100" not in spoof and 'id="gov-message"' not in spoof
    named = analyst.get("/governance", params={"done": "sent", "id": made["id"]}).text
    assert 'id="gov-message"' not in named  # a request the viewer may not see is never named


def test_catalog_and_table_pages_differ_by_user(browser, site):
    name = f"{site.db}.deals"
    a = Visit(browser, site, "analyst")
    page = a.go("/catalog", "catalog-analyst")
    assert page.inner_text(f"tr[data-table='{name}'] td:nth-child(4)") == "SELECT"
    page = a.go(f"/catalog/{site.db}/deals", "table-analyst")
    rows = page.locator("#sample tbody tr")
    assert rows.count() == 2  # the row filter: EU only
    assert "<script>window.__xss=5</script>" in page.inner_text("#sample")
    assert "deals by region <b>not bold</b>" in page.inner_text("dl.facts")
    assert page.locator("#schema tbody tr").count() == 4
    # Row-filtered: no snapshot history (its record counts cover rows the analyst may not see).
    assert page.locator("#snapshots").count() == 0 and page.locator("#snapshots-denied").count() == 1
    assert not a.xss_fired()
    a.close()

    # No privilege on deals: its metadata is hidden too ([governance] tables_visible_to_all).
    g = Visit(browser, site, "guest")
    page = g.go("/catalog", "catalog-guest")
    assert page.locator(f"tr[data-table='{name}']").count() == 0
    refused = g.page.request.get(f"{site.base}/catalog/{site.db}/deals")
    assert refused.status == 403 and "not visible" in refused.text()
    g.close()


def run_sql(page, sql: str, *, keys: bool = False) -> None:
    """Type a statement into the editor and run it (the Run button, or Ctrl+Enter)."""
    page.wait_for_selector("#sql-form .cm-content")
    page.fill("#sql-form .cm-content", sql)
    with page.expect_navigation():
        if keys:
            page.keyboard.press("Control+Enter")
        else:
            page.click("#run")


def test_sql_editor_paging_csv_history_and_escaping(browser, site):
    a = Visit(browser, site, "analyst")
    page = a.go("/sql")
    assert page.locator("#sql-text").is_hidden() and page.locator(".cm-editor").is_visible()  # the editor took over
    run_sql(page, "SELECT explode(sequence(1, 120)) AS n", keys=True)  # Ctrl+Enter runs
    assert page.locator("#result tbody tr").count() == 50 and page.inner_text("#result tbody tr:first-child") == "1"
    assert page.inner_text("#sql-total") == "120 rows"
    assert re.fullmatch(r"[\d.]+ (ms|s) · ran .+", page.inner_text("#sql-timing"))
    colors = page.evaluate(
        """() => { const line = document.querySelector('#sql-form .cm-line');
        const kw = [...line.querySelectorAll('span')].find(s => s.textContent === 'SELECT');
        return kw ? [getComputedStyle(kw).color, getComputedStyle(line).color] : null; }"""
    )
    assert colors and colors[0] != colors[1], colors  # SQL keywords highlighted
    page.click("#next")
    assert page.inner_text("#result tbody tr:first-child") == "51"
    page.click("#next")
    assert page.locator("#result tbody tr").count() == 20 and page.locator("#next").count() == 0
    a.go(page.url.replace(a.site.base, ""), "sql")

    run_sql(page, f"SELECT id, region, note FROM {site.db}.deals ORDER BY id")
    assert page.locator("#result tbody tr").count() == 2 and page.inner_text("#sql-total") == "2 rows"
    with page.expect_download() as download:
        page.click("#csv")
    csv_text = Path(download.value.path()).read_text()
    assert csv_text.splitlines()[0] == "id,region,note"
    assert "US" not in csv_text and "'=HYPERLINK" in csv_text  # governed rows; formulas defused

    run_sql(page, "SELECT '<img src=x onerror=window.__xss=6>' AS h")
    assert page.inner_text("#result tbody td") == "<img src=x onerror=window.__xss=6>"
    assert not a.xss_fired()
    history = page.inner_text("#history")
    assert "sequence(1, 120)" in history and f"{site.db}.deals" in history and "120 rows" in history
    # One time format: relative, with the exact local time and its zone on hover.
    ran = page.locator("#history time.when").first
    # Relative time: "now" within the first second (Intl's numeric "auto"), "N seconds ago" after.
    assert re.search(r"\bago\b|\bnow\b", ran.inner_text()), ran.inner_text()
    assert re.search(r"\d\d:\d\d:\d\d", ran.get_attribute("title") or "")
    assert not a.errors, a.errors
    a.close()

    g = Visit(browser, site, "guest")
    page = g.go("/sql")
    run_sql(page, f"SELECT * FROM {site.db}.deals")
    assert "has no SELECT" in page.inner_text("#sql-error") and page.locator("#result").count() == 0
    assert "sequence(1, 120)" not in page.inner_text("#history")  # history is private
    g.close()


def test_sql_editor_completes_only_what_the_user_may_read(browser, site):
    """The schema tree and completion come from /sql/schema.json, filtered by the same checks
    as the statement itself: no table without SELECT, no column outside the grant."""
    analyst = signin(site, site.users["analyst"])
    schema = analyst.get("/sql/schema.json").json()
    assert [c["name"] for c in schema[site.db]["narrow"]] == ["id", "region"]  # margin_secret is not granted
    assert [c["name"] for c in schema[site.db]["deals"]] == ["id", "region", "amount", "note"]
    assert "sales_db" not in schema  # no grant there
    guest = signin(site, site.users["guest"])
    assert site.db not in guest.get("/sql/schema.json").json()
    admin = signin(site, site.users["admin"]).get("/sql/schema.json").json()
    assert "margin_secret" in {c["name"] for c in admin[site.db]["narrow"]} and "sales_db" in admin
    assert httpx.get(site.base + "/sql/schema.json", follow_redirects=False).status_code == 303  # signed in only

    a = Visit(browser, site, "analyst")
    page = a.go("/sql")
    page.wait_for_selector("#schema-tree[data-loaded=true]", timeout=60_000)
    tree = page.locator("#schema-tree").text_content() or ""  # folded tables included
    assert "narrow" in tree and "region" in tree and "margin_secret" not in tree and "sales_db" not in tree
    # Completion of a qualified table, then of the columns of the table the statement reads.
    page.click("#sql-form .cm-content")
    page.keyboard.type(f"SELECT * FROM {site.db}.nar")
    page.wait_for_selector(".cm-tooltip-autocomplete")
    assert "narrow" in page.inner_text(".cm-tooltip-autocomplete")
    page.keyboard.press("Escape")
    page.fill("#sql-form .cm-content", f"SELECT  FROM {site.db}.narrow")
    page.keyboard.press("Control+Home")
    for _ in range(7):
        page.keyboard.press("ArrowRight")
    page.keyboard.press("Control+Space")
    page.wait_for_selector(".cm-tooltip-autocomplete")
    options = page.inner_text(".cm-tooltip-autocomplete")
    assert "region" in options and "margin_secret" not in options
    page.keyboard.press("Escape")
    # The tree's SELECT button writes a statement for its table.
    page.locator(f"#schema-tree details.table[data-table='{site.db}.narrow'] button.insert").click()
    assert f"FROM {site.db}.narrow" in page.inner_text("#sql-form .cm-content")
    assert not a.errors, a.errors
    a.close()


def test_saved_queries_private_or_shared_and_cancel(browser, site):
    a = Visit(browser, site, "analyst")
    page = a.go("/sql")
    page.fill("#sql-form .cm-content", "SELECT 'shared one' AS s")
    page.click("#save-box summary")
    page.fill("#save-form input[name=name]", "Team <b>query</b>")
    page.check("#save-form input[name=shared]")
    page.click("#save-form button")
    assert page.inner_text("#sql-notice") == "Query saved." and "Team <b>query</b>" in page.inner_text("#saved")
    shared_url = page.url
    page.fill("#sql-form .cm-content", "SELECT 'mine only' AS s")
    page.fill("#save-form input[name=name]", "Private one")
    page.uncheck("#save-form input[name=shared]")
    page.click("#save-form button")
    private_url = page.url
    assert "SELECT 'mine only'" in page.inner_text("#sql-form .cm-content")

    # Cancel: a statement that would run for minutes stops when its author presses Cancel.
    page.fill(
        "#sql-form .cm-content",
        "SELECT count(*) FROM (SELECT explode(sequence(1, 200000)) AS a) x "
        "CROSS JOIN (SELECT explode(sequence(1, 200000)) AS b) y WHERE a * b = 7",
    )
    page.click("#run")
    page.wait_for_selector("#cancel:visible")
    time.sleep(2)  # let Spark start its jobs
    with page.expect_navigation(timeout=60_000):
        page.click("#cancel")
    assert page.inner_text("#sql-error").startswith("cancelled")
    assert "cancelled" in page.inner_text("#history tbody tr:first-child")
    a.close()

    g = Visit(browser, site, "guest")
    page = g.go("/sql")
    saved = page.inner_text("#saved")
    assert "Team <b>query</b>" in saved and site.users["analyst"] in saved and "Private one" not in saved
    # By its name: the worker's workspace may hold other modules' shared queries (listed first by name).
    page.locator("#saved a", has_text="Team <b>query</b>").click()
    assert "SELECT 'shared one'" in page.inner_text("#sql-form .cm-content")
    assert page.locator("#unsave-form").count() == 0  # only its owner deletes it
    assert g.page.request.get(private_url).status == 404  # private: answered as if missing
    token = page.get_attribute("#sql-form input[name=csrf]", "value")
    saved_id = shared_url.split("saved=")[1].split("&")[0]
    r = page.request.post(f"{site.base}/sql/saved/{saved_id}/delete", form={"csrf": token})
    assert r.ok and "Only the owner" in r.text()  # the redirect, followed
    assert "Team <b>query</b>" in g.go("/sql").inner_text("#saved")
    g.close()


def test_error_pages_phone_width_and_dark_mode(browser, site):
    client = signin(site, site.users["analyst"])
    page = client.get("/no/such/page")
    assert page.status_code == 404 and page.headers["content-type"].startswith("text/html")
    assert 'id="error-message"' in page.text and "Sign out" in page.text
    api = client.get("/api/no/such/thing")
    assert api.status_code == 404 and api.headers["content-type"] == "application/json"
    stranger = httpx.get(site.base + "/nothing-here")
    assert stranger.status_code == 404 and "Sign in" in stranger.text

    a = Visit(browser, site, "admin")
    a.page.set_viewport_size({"width": 390, "height": 844})
    for path in ("/catalog", "/sql", "/objects", "/governance"):
        page = a.go(path, f"phone{path.replace('/', '-')}")
        box = page.locator("#logout").bounding_box()
        assert page.locator("#logout").is_visible() and box and box["x"] + box["width"] <= 390, path
        for link in page.locator("header.top nav a").all():
            b = link.bounding_box()
            assert b and b["x"] + b["width"] <= 390, (path, link.inner_text())
        assert page.evaluate("() => document.documentElement.scrollWidth") <= 400, path  # no sideways page
    a.close()

    dark = browser.new_context(color_scheme="dark")
    page = dark.new_page()
    page.goto(site.base + "/login")
    background = page.evaluate("() => getComputedStyle(document.body).backgroundColor")
    assert background == "rgb(20, 25, 31)", background  # follows the system's dark setting
    dark.close()


def test_object_pages_render_results_escaped(browser, site, settings):
    from shoal.governance import AuditLog

    a = Visit(browser, site, "analyst")
    page = a.go(f"/objects/{site.ids['xss.txt']}", "object-text")
    text = page.inner_text("#text-parts")
    assert "<script>window.__xss = 1</script>" in text and 'onerror="window.__xss = 2"' in text
    page.click("#raw-preview summary")  # the raw file through the access point, as text
    assert "<script>window.__xss = 1</script>" in page.inner_text("#raw-preview pre")
    marks = [(m.inner_text(), m.get_attribute("data-label")) for m in page.locator("#text-parts mark").all()]
    assert ("Maria Garcia", "PII PERSON") in marks and ("Berlin", "PII LOCATION") in marks
    assert [label for _t, label in marks].count("CARDINAL") >= 1  # entities beside the PII
    assert ("maria.garcia@example.com", "PII EMAIL_ADDRESS") in marks, marks
    assert not a.xss_fired()

    page = a.go(f"/objects/{site.ids['lease.html']}", "object-html")
    assert "<script>window.__xss=3</script>" in page.inner_text("#object-title")
    cells = page.locator("table.extracted-table td").all_inner_texts()
    assert "<img src=x onerror=window.__xss=4>" in cells and "1200" in cells
    assert not a.xss_fired()

    page = a.go(f"/objects/{site.ids['astronaut.png']}", "object-image-faces")
    page.wait_for_function("() => document.querySelector('#image-preview img').naturalWidth > 0")
    assert page.locator("#image-preview rect.face").count() == 1
    page = a.go(f"/objects/{site.ids['poster.png']}", "object-image-ocr")
    assert page.locator("#image-preview rect.word").count() >= 5
    assert "download via" in page.inner_text("#raw-links")
    a.close()

    g = Visit(browser, site, "guest")
    page = g.go(f"/objects/{site.ids['xss.txt']}", "object-guest")
    assert page.locator("#text-parts").count() == 0 and "has no SELECT on shoal.text" in page.inner_text("main")
    assert page.locator("#raw-preview").count() == 0
    assert "no access point" in page.inner_text("#raw-links")
    r = g.page.request.get(f"{site.base}/objects/{site.ids['poster.png']}/raw?ap=web-{site.source[4:]}&inline=1")
    assert r.status == 403
    r = g.page.request.get(f"{site.base}/objects/{site.ids['poster.png']}/file?inline=1")
    assert r.status == 403 and r.headers["content-type"].startswith("text/html") and "access point" in r.text()
    g.close()

    # The original: an admin opens it (no access point needed), the analyst through theirs;
    # both reads and the guest's refusal are audited.
    poster = site.ids["poster.png"]
    ad = Visit(browser, site, "admin")
    page = ad.go(f"/objects/{poster}")
    page.wait_for_function("() => document.querySelector('#image-preview img').naturalWidth > 0")
    assert "/file?inline=1" in page.get_attribute("#image-preview img", "src")
    assert "raw_path" not in page.content() and str(settings.workspace_dir) not in page.inner_text("main")
    r = page.request.get(f"{site.base}/objects/{poster}/file")
    assert r.status == 200 and r.body()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (
        r.headers["content-disposition"].startswith("attachment") and "poster.png" in r.headers["content-disposition"]
    )
    inline = page.request.get(f"{site.base}/objects/{poster}/file?inline=1")
    assert inline.headers["content-type"] == "image/png" and "sandbox" in inline.headers["content-security-policy"]
    ad.close()
    analyst_read = httpx.get(
        f"{site.base}/objects/{poster}/file?inline=1", cookies=signin(site, site.users["analyst"]).cookies
    )
    assert analyst_read.status_code == 200 and analyst_read.headers["content-type"] == "image/png"
    audit = AuditLog(settings)
    assert any(
        e["action"] == "object.raw" and e["decision"] == "allow"
        for e in audit.list(principal=site.users["admin"], limit=20)
    )
    assert any(
        e["action"] == "object.raw" and e["decision"] == "deny"
        for e in audit.list(principal=site.users["guest"], limit=20)
    )


def test_inventory_and_search(browser, site):
    a = Visit(browser, site, "analyst")
    page = a.go("/objects?type=image/png", "objects")
    listed = page.inner_text("#objects")
    assert "poster.png" in listed and "xss.txt" not in listed  # rows named by file, not hash
    page = a.go("/objects?text=Maria")
    assert "xss.txt" in page.inner_text("#objects")

    # Every column filled: title, PII yes/no, human sizes; sorted and paged.
    page = a.go(f"/objects?tag=site={site.source}&sort=-size", "objects-sorted")
    row = {r.get_attribute("data-object"): r for r in page.locator("#objects tbody tr").all()}
    assert row[site.ids["xss.txt"]].locator("td.pii").inner_text().startswith("yes")
    assert "EMAIL_ADDRESS" in row[site.ids["xss.txt"]].locator("td.pii").inner_text()
    assert "<script>window.__xss=3</script>" in row[site.ids["lease.html"]].locator("td.title").inner_text()
    sizes = page.locator("#objects td.size").all_inner_texts()
    assert len(sizes) == 4 and all(re.fullmatch(r"\d+ B|\d+\.\d (KiB|MiB)", t) for t in sizes), sizes
    exact = [
        int(t.split()[0].replace(",", ""))
        for t in page.locator("#objects td.size").evaluate_all("cells => cells.map(c => c.title)")
    ]
    assert exact == sorted(exact, reverse=True)  # largest first
    assert "/" not in "".join(page.locator("#objects td.paths").all_inner_texts())  # no server paths
    page = a.go(f"/objects?tag=site={site.source}&sort=name&per=3")
    first_page = page.locator("#objects tbody tr").evaluate_all("rows => rows.map(r => r.dataset.object)")
    page.click("#next")
    second = page.locator("#objects tbody tr").evaluate_all("rows => rows.map(r => r.dataset.object)")
    assert len(first_page) == 3 and len(second) == 1 and page.locator("#next").count() == 0
    assert set(first_page + second) == {site.ids[n] for n in ("xss.txt", "lease.html", "poster.png", "astronaut.png")}
    assert not a.xss_fired()

    page = a.go("/search?q=Maria+Garcia+lease+Berlin&mode=keyword", "search")
    hits = page.locator("#hits li")
    assert hits.count() >= 1
    assert any(site.ids["xss.txt"] in (h.locator("a").get_attribute("href") or "") for h in hits.all())
    assert page.locator("#hits mark").count() >= 1
    assert not a.xss_fired()
    a.close()

    g = Visit(browser, site, "guest")  # no grant on shoal.object_index: nothing to read
    page = g.go("/search?q=Maria+Garcia+lease+Berlin&mode=keyword", "search-guest")
    assert page.inner_text("#hits") == "no results you may read"
    g.close()


def test_dashboard_renders_and_refreshes_after_its_workflow(browser, site):
    a = Visit(browser, site, "admin")
    page = a.go("/dashboards", "dashboards")
    page.click("text=Sales and marketing revenue")
    page.wait_for_function("() => document.querySelectorAll('.vega-chart[data-rendered=true]').length === 4")
    assert page.locator(".vega-chart svg .mark-line path, .vega-chart svg .mark-line").count() >= 1
    assert page.locator(".vega-chart svg .mark-arc path").count() == 3  # one slice per month
    assert page.inner_text("#chart-2") == "2,000"  # opportunities over every month
    assert page.locator("#chart-7 tbody tr").count() == 3  # January to March
    a.go(page.url.replace(site.base, ""), "dashboard")
    page.select_option("#dashboard-filters select[name=year]", "2024")
    page.click("#dashboard-filters button")
    page.wait_for_function("() => document.querySelectorAll('.vega-chart[data-rendered=true]').length === 4")
    assert "year=2024" in page.url and page.inner_text("#chart-2") == "2,000"
    before = page.get_attribute("#dashboard", "data-version")

    # Run the feeding workflow from the console in a second tab; the dashboard reloads itself.
    tab = a.context.new_page()
    tab.goto(site.base + f"/workflows/{sales.WORKFLOW}")
    tab.click("#start")
    tab.wait_for_url(re.compile(r".*/executions/.*"))
    tab.wait_for_function(
        "() => document.querySelector('#execution-status').textContent !== 'RUNNING'", timeout=180_000
    )
    assert tab.inner_text("#execution-status") == "SUCCEEDED"
    execution_id = tab.url.rsplit("/", 1)[1]
    tab.screenshot(path=str(ARTIFACTS / "console" / "execution.png"), full_page=True)
    page.wait_for_function(f"() => document.querySelector('#dashboard').dataset.version !== {before!r}", timeout=30_000)
    page.wait_for_function("() => document.querySelectorAll('.vega-chart[data-rendered=true]').length === 4")
    assert execution_id in page.inner_text("#dashboard .meta")
    assert not a.errors, a.errors
    a.close()

    g = Visit(browser, site, "guest")  # no grant on sales_db: the same dashboard, no data
    page = g.go("/dashboards/sales-revenue", "dashboard-guest")
    assert page.locator(".card .denied").count() == 8 and page.locator(".vega-chart").count() == 0
    g.close()


def test_workflow_pages_start_and_resume(browser, site, spark, settings, tmp_path):
    import json

    name = f"later-{site.db.replace('_', '-')}"
    definition = tmp_path / f"{name}.asl.json"
    definition.write_text(
        json.dumps(
            {
                "StartAt": "Count",
                "States": {
                    "Count": {
                        "Type": "Task",
                        "Resource": "shoal:sql",
                        "Parameters": {"QueryString": f"SELECT count(*) AS n FROM {site.db}.later", "Dialect": "spark"},
                        "End": True,
                    }
                },
            }
        )
    )
    workflows.register(settings, definition, name=name)
    a = Visit(browser, site, "admin")
    page = a.go("/workflows", "workflows")
    assert name in page.inner_text("#workflows") and sales.WORKFLOW in page.inner_text("#executions")
    page = a.go(f"/workflows/{name}", "workflow")
    page.wait_for_function("() => document.querySelector('#workflow-graph').naturalWidth > 0")
    page.click("#start")
    page.wait_for_function(
        "() => document.querySelector('#execution-status').textContent !== 'RUNNING'", timeout=60_000
    )
    assert page.inner_text("#execution-status") == "FAILED"
    assert "TaskStateEntered" in page.inner_text("#history")
    page.wait_for_function("() => document.querySelector('#execution-graph').naturalWidth > 0")
    a.go(page.url.replace(site.base, ""), "execution-failed")
    spark.sql(f"CREATE TABLE {site.db}.later (x INT) USING iceberg")
    page.click("#resume")
    page.wait_for_function(
        "() => !['RUNNING', 'FAILED'].includes(document.querySelector('#execution-status').textContent)",
        timeout=60_000,
    )
    assert page.inner_text("#execution-status") == "SUCCEEDED"
    a.close()

    b = Visit(browser, site, "analyst")
    page = b.go(f"/workflows/{name}")
    assert page.locator("#start").count() == 0
    token = page.get_attribute("form[action='/logout'] input[name=csrf]", "value")
    r = page.request.post(f"{site.base}/workflows/{name}/start", form={"csrf": token, "input": "{}"})
    assert r.status == 403
    b.close()


def test_governance_request_approve_and_audit(browser, site):
    b = Visit(browser, site, "guest")
    page = b.go("/governance")
    page.fill("#request-form input[name=table]", f"{site.db}.deals")
    page.fill("#request-form input[name=reason]", "quarterly <b>review</b>")
    page.click("#request-form button")
    assert "sent" in page.inner_text("#gov-message")
    assert page.locator("#audit").count() == 0
    b.go("/governance", "governance-guest")
    b.close()

    a = Visit(browser, site, "admin")
    page = a.go("/governance")
    row = page.locator("#requests tr", has_text=site.users["guest"]).first
    assert "quarterly <b>review</b>" in row.inner_text()
    row.locator("button.approve").click()
    assert "approved" in page.inner_text("#gov-message")
    page = a.go("/governance", "governance-admin")
    assert "approved" in page.locator("#requests tr", has_text=site.users["guest"]).first.inner_text()
    audit = page.inner_text("#audit")
    assert "console.login" in audit and "access.approve" in audit and "access.request" in audit
    a.close()

    g = Visit(browser, site, "guest")  # the approved grant now shows rows
    page = g.go(f"/catalog/{site.db}/deals")
    assert page.locator("#sample tbody tr").count() == 3
    g.close()


def test_catalog_search_internal_toggle_query_link_and_owner_edits(browser, site, settings):
    from shoal.governance import AuditLog

    analyst = signin(site, site.users["analyst"])
    page = analyst.get("/catalog").text
    assert f'data-table="{site.db}.deals"' in page and 'data-table="shoal.text"' not in page  # internal: hidden
    assert 'data-table="shoal.text"' in analyst.get("/catalog", params={"internal": "1"}).text
    found = analyst.get("/catalog", params={"q": "narrow"}).text
    assert f'data-table="{site.db}.narrow"' in found and f'data-table="{site.db}.deals"' not in found
    assert f'data-table="{site.db}.deals"' in analyst.get("/catalog", params={"q": "REGION <b>"}).text  # description

    # Only the owner (or an admin) edits owner and description; the refusal is audited.
    csrf = re.search(r'name="csrf" value="([^"]+)"', page).group(1)
    r = analyst.post(f"/catalog/{site.db}/deals/about", data={"csrf": csrf, "description": "mine now"})
    assert r.status_code == 403 and "mine now" not in analyst.get(f"/catalog/{site.db}/deals").text
    assert analyst.post(f"/catalog/{site.db}/deals/about", data={"description": "no token"}).status_code == 403
    assert any(
        e["action"] == "table.describe" and e["decision"] == "deny"
        for e in AuditLog(settings).list(principal=site.users["analyst"], limit=20)
    )
    gov = Governance(settings)
    a = Visit(browser, site, "admin")
    try:
        page = a.go(f"/catalog/{site.db}/narrow")
        page.click("#about-edit summary")
        page.fill("#about-form input[name=owner]", site.users["analyst"])
        page.fill("#about-form textarea[name=description]", "Deal margins <i>(two columns granted)</i>")
        page.click("#about-form button")
        assert page.inner_text("#about-saved") == "Saved."
        assert page.inner_text("#description") == "Deal margins <i>(two columns granted)</i>"
        assert page.inner_text("#owner") == site.users["analyst"]
        # Now the analyst owns it, and may edit it too.
        r = analyst.post(f"/catalog/{site.db}/narrow/about", data={"csrf": csrf, "description": "by its owner"})
        assert r.status_code == 303 and "by its owner" in analyst.get(f"/catalog/{site.db}/narrow").text

        # "query" opens the editor with a SELECT of the table, not run.
        page = a.go("/catalog")
        page.click(f"tr[data-table='{site.db}.deals'] a.query-link")
        page.wait_for_selector("#sql-form .cm-content")
        assert f"FROM `{site.db}`.`deals`" in page.inner_text("#sql-form .cm-content")
        assert page.locator("#result").count() == 0
        # Snapshots: labelled for what Iceberg counts; the last total is the table's rows.
        page = a.go(f"/catalog/{site.db}/deals", "table-admin")
        assert "rows in table after" in page.inner_text("#snapshots thead")
        assert page.inner_text("#snapshots tbody tr:first-child td.total") == "3"
        assert not a.errors, a.errors
    finally:
        a.close()
        gov.set_owner(f"{site.db}.narrow", site.users["admin"], "")


def test_screenshots_of_the_main_pages(browser, site, settings):
    """The console as the docs show it, at desktop and phone width, light and dark. Always written to the test
    artifacts (test-artifacts/console/docs/); the docs' copies in docs/images/ are refreshed from there
    by hand (the path guard keeps the suite from writing into the checkout)."""
    out = ARTIFACTS / "console" / "docs"
    out.mkdir(parents=True, exist_ok=True)
    a = Visit(browser, site, "admin")
    page = a.go("/sql")
    run_sql(page, f"SELECT region, count(*) AS deals, sum(amount) AS amount FROM {site.db}.deals GROUP BY region")
    page.wait_for_selector("#schema-tree[data-loaded=true]", timeout=60_000)
    sql_url = page.url.replace(site.base, "")
    by_region = f"SELECT region, count(*) AS deals, sum(amount) AS amount FROM {site.db}.deals GROUP BY region"
    saved = QueryHistory(settings).save(site.users["admin"], "Deals by region", by_region, shared=False)
    builder = "/dashboards/new?" + urlencode(
        {"saved": saved, "type": "bar", "x": "region", "y": "amount", "title": "Amount by region", "unit": "EUR"}
    )
    shots = {
        "console-sql": sql_url,
        "console-catalog": "/catalog",
        "console-objects": f"/objects?tag=site={site.source}",
        "console-object": f"/objects/{site.ids['poster.png']}",
        "console-dashboard": "/dashboards/sales-revenue",
        "console-principals": "/governance/principals",
        "console-chart-builder": builder,
    }
    taken = []
    # Light at desktop width (all pages), at phone width and dark (the pages people read most).
    passes = {"": set(shots), "-phone": {"console-sql", "console-catalog", "console-objects"}}
    passes["-dark"] = {"console-sql", "console-catalog", "console-object", "console-dashboard"}
    for suffix, names in passes.items():
        width = 390 if suffix == "-phone" else 1300
        a.page.set_viewport_size({"width": width, "height": 900 if width > 400 else 844})
        a.page.emulate_media(color_scheme="dark" if suffix == "-dark" else "light")
        for name, path in shots.items():
            if name not in names:
                continue
            page = a.go(path)
            if name == "console-dashboard":
                page.wait_for_function("() => document.querySelectorAll('.vega-chart[data-rendered]').length === 4")
            if name == "console-chart-builder":
                page.wait_for_selector(".vega-chart[data-rendered=true]")
            if name == "console-sql":
                page.wait_for_selector("#schema-tree[data-loaded=true]", timeout=60_000)
            if suffix == "-dark":  # the dark shots show the dark theme, not a light page
                assert page.evaluate("getComputedStyle(document.body).backgroundColor") == "rgb(20, 25, 31)"
            page.screenshot(path=str(out / f"{name}{suffix}.jpg"), type="jpeg", quality=70)
            taken.append(f"{name}{suffix}")
    assert all((out / f"{n}.jpg").stat().st_size > 5_000 for n in taken)
    assert not a.errors, a.errors
    a.close()


def test_admins_grant_revoke_and_search_the_audit_log(browser, site, settings):
    """Grant and revoke from the console (admins only, CSRF, audited), and the audit page's
    filters, paging and CSV export."""
    grantee = f"gina_{uuid.uuid4().hex[:6]}"
    Principals(settings).add(grantee, password=PASSWORD)
    try:
        analyst = signin(site, site.users["analyst"])
        csrf = re.search(r'name="csrf" value="([^"]+)"', analyst.get("/governance").text).group(1)
        assert 'id="grant-form"' not in analyst.get("/governance").text
        form = {"privilege": "SELECT", "kind": "TABLE", "target": f"{site.db}.deals", "grantee": grantee}
        assert analyst.post("/governance/grants", data={**form, "csrf": csrf}).status_code == 403
        assert analyst.get("/governance/audit").status_code == 403
        assert analyst.get("/governance/audit.csv").status_code == 403

        a = Visit(browser, site, "admin")
        page = a.go("/governance")
        page.click("#grant-box summary")
        page.fill("#grant-form input[name=target]", f"{site.db}.deals")
        page.fill("#grant-form input[name=grantee]", grantee)
        page.fill("#grant-form input[name=columns]", "id, region")
        page.fill("#grant-form input[name=row_filter]", "region = 'US'")
        page.click("#grant-form button")
        assert "made" in page.inner_text("#gov-message")
        grant_id = int(page.inner_text("#gov-message").split()[1])
        row = page.locator(f"#grants tr[data-grant='{grant_id}']")
        assert grantee in row.inner_text() and "region = 'US'" in row.inner_text()
        reader = signin(site, grantee)
        assert [c["name"] for c in reader.get("/sql/schema.json").json()[site.db]["deals"]] == ["id", "region"]
        row.locator("button.revoke").click()
        assert (
            "revoked" in page.inner_text("#gov-message") and page.locator(f"tr[data-grant='{grant_id}']").count() == 0
        )
        assert site.db not in reader.get("/sql/schema.json").json()
        # A bad grant is refused with its reason, and audited.
        admin = signin(site, site.users["admin"])
        token = re.search(r'name="csrf" value="([^"]+)"', admin.get("/governance").text).group(1)
        bad = admin.post("/governance/grants", data={**form, "columns": "no_such_col", "csrf": token})
        assert bad.status_code == 400 and "not granted" in bad.text

        # The audit page: filters, paging, CSV.
        page = a.go(f"/governance/audit?principal={site.users['admin']}&action=grant", "audit")
        texts = page.locator("#audit tbody tr").all_inner_texts()
        assert texts and all("grant" in t for t in texts) and any("deny" in t for t in texts)
        page = a.go(f"/governance/audit?principal={site.users['analyst']}&decision=deny&per=2")
        first = page.locator("#audit tbody tr td:first-child").all_inner_texts()
        page.click("#next")
        second = page.locator("#audit tbody tr td:first-child").all_inner_texts()
        assert len(first) == 2 and second and not set(first) & set(second) and int(first[-1]) > int(second[0])
        today = dt.datetime.now(dt.UTC).date()
        page = a.go(f"/governance/audit?resource={site.db}.deals&since={today}&until={today}")
        assert page.locator("#audit tbody tr").count() >= 1
        page = a.go(f"/governance/audit?resource={site.db}.deals&until={today - dt.timedelta(days=2)}")
        assert page.inner_text("#audit tbody") == "no audit rows match"
        csv_text = admin.get(
            "/governance/audit.csv", params={"action": "revoke", "principal": site.users["admin"]}
        ).text
        lines = csv_text.splitlines()
        assert lines[0] == "id,ts,principal,action,resource,decision,reason,detail"
        assert any(f",revoke,{grant_id}," in line for line in lines[1:])
        assert not a.errors, a.errors
        a.close()
    finally:
        Principals(settings).remove(grantee)


def test_sql_editor_is_admitted_like_the_api(site, settings, monkeypatch):
    """The console's statements take the same admission slots as the API's (shoal.admission)."""
    from shoal.admission import admission

    adm = admission(settings)
    monkeypatch.setattr(adm, "slots", 1)
    monkeypatch.setattr(adm, "queue", 0)
    analyst = signin(site, site.users["analyst"])
    csrf = re.search(r'name="csrf" value="([^"]+)"', analyst.get("/sql").text).group(1)
    with adm.enter("someone-else"):
        r = analyst.post("/sql", data={"csrf": csrf, "sql": "SELECT 3"})
        assert r.status_code == 303
        assert "too many queries: 1 running and 0 waiting" in analyst.get(r.headers["location"]).text
