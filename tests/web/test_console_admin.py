"""The console's governance editing in headless Chromium: principals and groups, grants with
column and mask pickers and effective grants, API tokens, access points; each POST refused
without its CSRF token and for non-admins; every change audited under the admin's own name;
the pages at desktop and 390 px phone width.

A small site of its own (two users and one table): test_console.py's site ingests and extracts
a corpus, which these pages do not need. Its browser fixture and helpers are reused.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator

import pytest

from shoal.governance import AuditLog, AuthError, Governance, GovernanceError, Principals
from shoal.governance.access import RawAccess
from tests.support.servers import console_server
from tests.web.test_console import PASSWORD, Site, Visit, browser, signin

__all__ = ["browser"]  # the imported fixture, used by the tests below

pytestmark = pytest.mark.slow

PHONE = {"width": 390, "height": 844}


@pytest.fixture(scope="module")
def admin_site(spark, settings) -> Iterator[Site]:
    u = uuid.uuid4().hex[:6]
    p = Principals(settings)
    users = {"admin": f"adm_{u}", "analyst": f"ann_{u}"}
    p.add(users["admin"], admin=True, password=PASSWORD)
    p.add(users["analyst"], password=PASSWORD)
    db = f"adm_{u}"
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {db}")
    spark.sql(f"CREATE TABLE {db}.people (id INT, name STRING, email STRING, region STRING) USING iceberg")
    spark.sql(f"INSERT INTO {db}.people VALUES (1, 'Ann', 'ann@example.com', 'EU'), (2, 'Bo', 'bo@example.com', 'US')")
    with console_server(settings) as base:
        yield Site(base, db, users, {}, "")
    for name in users.values():
        p.remove(name)


def csrf_of(html: str) -> str:
    return re.search(r'name="csrf" value="([^"]+)"', html).group(1)


def admin_visit(browser, site: Site, *, phone: bool = False) -> Visit:
    v = Visit(browser, site, "admin")
    if phone:
        v.page.set_viewport_size(PHONE)
    v.page.on("dialog", lambda d: d.accept())  # the delete buttons ask first
    return v


def fits_phone(page) -> bool:
    """Nothing wider than the phone's screen but what scrolls in its own box."""
    return page.evaluate("() => document.documentElement.scrollWidth") <= PHONE["width"]


def audited(settings, who: str, action: str, resource: str | None = None) -> list[dict]:
    rows = AuditLog(settings).list(principal=who, action=action, limit=1000)
    return [r for r in rows if resource is None or r["resource"] == resource]


def test_principals_and_groups_from_the_console(browser, admin_site, settings):
    u = uuid.uuid4().hex[:6]
    user, group = f"newbie_{u}", f"team_{u}"
    admin = admin_site.users["admin"]
    v = admin_visit(browser, admin_site)
    page = v.go("/governance/principals", "principals")
    assert page.locator("#gov-tabs a.active").inner_text() == "Principals"
    page.click("#user-box summary")
    page.fill("#user-form input[name=name]", user)
    page.fill("#user-form input[name=password]", PASSWORD)
    page.click("#user-form button")
    assert page.inner_text("#gov-message") == "user created"
    assert page.locator(f"#users tr[data-principal='{user}']").count() == 1
    page.fill("#group-form input[name=name]", group)
    page.click("#group-form button")
    assert page.inner_text("#gov-message") == "group created"
    row = page.locator(f"#groups tr[data-group='{group}']")
    row.locator("select[name=member]").select_option(user)
    row.locator("form.add-member button").click()
    assert page.inner_text("#gov-message") == "member added"
    assert group in Principals(settings).principal(user).groups
    assert user in page.locator(f"#groups tr[data-group='{group}']").inner_text()
    page.locator(f"#groups tr[data-group='{group}'] button.remove-member").click()
    assert page.inner_text("#gov-message") == "member removed"
    assert group not in Principals(settings).principal(user).groups
    # A bad name is refused with the library's reason, and audited.
    page.click("#user-box summary")
    page.fill("#user-form input[name=name]", "x")
    page.eval_on_selector("#user-form input[name=name]", "el => el.removeAttribute('pattern')")
    page.fill("#user-form input[name=name]", "9bad")
    page.click("#user-form button")
    assert "principal.create refused" in page.inner_text("#error-message")
    assert any(r["decision"] == "deny" for r in audited(settings, admin, "principal.create", "9bad"))

    page = v.go("/governance/principals")
    page.locator(f"#groups tr[data-group='{group}'] button.delete").click()
    assert page.inner_text("#gov-message") == "principal deleted"
    page.locator(f"#users tr[data-principal='{user}'] button.delete").click()
    assert page.inner_text("#gov-message") == "principal deleted"
    names = {r["name"] for r in Principals(settings).list()}
    assert user not in names and group not in names
    # The admin cannot delete themself here (no button, and the POST is refused).
    assert page.locator(f"#users tr[data-principal='{admin}'] button.delete").count() == 0
    # Every change is one row under the admin's own name, never under "admin".
    for action, resource in (
        ("principal.create", user),
        ("principal.create", group),
        ("group.add", group),
        ("group.remove", group),
        ("principal.delete", group),
        ("principal.delete", user),
    ):
        rows = [r for r in audited(settings, admin, action, resource) if r["decision"] == "allow"]
        assert len(rows) == 1, (action, resource, rows)
        assert not audited(settings, "admin", action, resource)
    assert not v.errors, v.errors
    v.close()

    phone = admin_visit(browser, admin_site, phone=True)
    page = phone.go("/governance/principals", "principals-phone")
    assert fits_phone(page) and page.locator("#gov-tabs a", has_text="Audit log").is_visible()
    phone.close()


def test_non_admins_and_missing_csrf_tokens_are_refused(admin_site, settings):
    admin = signin(admin_site, admin_site.users["admin"])
    analyst = signin(admin_site, admin_site.users["analyst"])
    ghost = f"ghost_{uuid.uuid4().hex[:6]}"
    posts = {
        "/governance/principals": {"name": ghost, "kind": "user"},
        f"/governance/principals/{admin_site.users['analyst']}/delete": {},
        "/governance/groups/everyone/members": {"member": admin_site.users["analyst"]},
        f"/governance/groups/everyone/members/{admin_site.users['analyst']}/remove": {},
        "/governance/tokens": {"principal": admin_site.users["analyst"]},
        "/governance/tokens/0123456789abcdef/revoke": {},
        "/governance/access-points": {"name": f"ap-{ghost[6:]}", "principals": admin_site.users["analyst"]},
        "/governance/access-points/nope/delete": {},
    }
    token = csrf_of(analyst.get("/governance").text)
    for path, form in posts.items():
        # No token (even an admin's session): the CSRF page, and nothing changed.
        r = admin.post(path, data=form)
        assert r.status_code == 403 and "did not come from this console" in r.text, path
        # A non-admin with a good token: refused, and audited as a denial.
        r = analyst.post(path, data={**form, "csrf": token})
        assert r.status_code == 403 and "only admins" in r.text, path
    for path in ("/governance/principals", "/governance/tokens", "/governance/columns.json?table=a.b"):
        assert analyst.get(path).status_code == 403, path
    assert analyst.get("/governance/access-points").status_code == 200  # their own access points
    assert ghost not in {r["name"] for r in Principals(settings).list()}
    assert not Principals(settings).list_tokens(admin_site.users["analyst"])
    denied = AuditLog(settings).list(principal=admin_site.users["analyst"], decision="deny", limit=100)
    assert {"principal.create", "principal.delete", "token.create", "access_point.create"} <= {
        r["action"] for r in denied
    }
    # The non-admin's page has no admin tabs.
    tabs = analyst.get("/governance").text
    assert 'href="/governance/access-points"' in tabs and 'href="/governance/principals"' not in tabs


def test_tokens_are_shown_once_listed_without_secrets_and_revoked(browser, admin_site, settings):
    analyst = admin_site.users["analyst"]
    v = admin_visit(browser, admin_site)
    page = v.go("/governance/tokens")
    page.select_option("#token-form select[name=principal]", analyst)
    page.fill("#token-form input[name=description]", "nightly <b>export</b>")
    page.fill("#token-form input[name=expires_days]", "7")
    page.click("#token-form button")
    secret = page.inner_text("#token-secret")
    token_id = re.match(r"shoal_([0-9a-f]{16})_", secret).group(1)
    assert Principals(settings).authenticate(secret).name == analyst
    row = page.locator(f"#tokens tr[data-token='{token_id}']")
    assert "nightly <b>export</b>" in row.inner_text() and "active" in row.inner_text()
    v.go("/governance/tokens", "tokens")
    html = page.content()
    assert secret not in html and secret.split("_")[-1] not in html and page.locator("#token-secret").count() == 0
    # The audit row names the token by id only.
    rows = audited(settings, admin_site.users["admin"], "token.create", token_id)
    assert len(rows) == 1 and rows[0]["detail"]["user"] == analyst
    assert not [r for r in AuditLog(settings).list(limit=500) if secret.split("_")[-1] in str(r)]
    page.locator(f"#tokens tr[data-token='{token_id}'] button.revoke").click()
    assert page.inner_text("#gov-message") == "token revoked"
    assert "revoked" in page.locator(f"#tokens tr[data-token='{token_id}']").inner_text()
    with pytest.raises(AuthError):
        Principals(settings).authenticate(secret)
    assert len(audited(settings, admin_site.users["admin"], "token.revoke", token_id)) == 1
    assert not v.errors, v.errors
    v.close()

    phone = admin_visit(browser, admin_site, phone=True)
    page = phone.go("/governance/tokens", "tokens-phone")
    assert fits_phone(page)
    phone.close()


def test_access_points_created_and_deleted(browser, admin_site, settings):
    name = f"ap-{uuid.uuid4().hex[:6]}"
    analyst = admin_site.users["analyst"]
    v = admin_visit(browser, admin_site)
    page = v.go("/governance/access-points")
    page.fill("#access-point-form input[name=name]", name)
    page.fill("#access-point-form input[name=prefix]", "inbox/2026")
    page.select_option("#access-point-form select[name=principals]", [analyst])
    page.fill("#access-point-form input[name=tags]", "site=berlin")
    page.fill("#access-point-form input[name=cidrs]", "10.0.0.0/8")
    page.click("#access-point-form button")
    assert page.inner_text("#gov-message") == "access point created"
    made = RawAccess(settings).get(name)
    assert made["principals"] == [analyst] and made["prefix"] == "inbox/2026" and made["tags"] == {"site": "berlin"}
    assert "site=berlin" in page.locator(f"tr[data-access-point='{name}']").inner_text()
    v.go("/governance/access-points", "access-points")
    # The analyst sees it (it names them), without the admin's buttons.
    mine = signin(admin_site, analyst).get("/governance/access-points").text
    assert f'data-access-point="{name}"' in mine and "access-point-form" not in mine
    page.locator(f"tr[data-access-point='{name}'] button.delete").click()
    assert page.inner_text("#gov-message") == "access point deleted"
    with pytest.raises(GovernanceError):
        RawAccess(settings).get(name)
    for action in ("access_point.create", "access_point.delete"):
        assert len(audited(settings, admin_site.users["admin"], action, name)) == 1
    # A bad network is refused with its reason.
    page.fill("#access-point-form input[name=name]", name)
    page.select_option("#access-point-form select[name=principals]", [analyst])
    page.fill("#access-point-form input[name=cidrs]", "not-a-network")
    page.click("#access-point-form button")
    assert "invalid network" in page.inner_text("#error-message")
    assert not v.errors, v.errors
    v.close()

    phone = admin_visit(browser, admin_site, phone=True)
    page = phone.go("/governance/access-points", "access-points-phone")
    assert fits_phone(page)
    phone.close()


def test_grant_with_pickers_effective_grants_and_revoke(browser, admin_site, settings):
    analyst = admin_site.users["analyst"]
    table = f"{admin_site.db}.people"
    group = f"readers_{uuid.uuid4().hex[:6]}"
    p = Principals(settings)
    p.add(group, kind="group")
    p.add_member(group, analyst)
    try:
        v = admin_visit(browser, admin_site)
        page = v.go("/governance")
        page.click("#grant-box summary")
        page.fill("#grant-form input[name=target]", table)
        page.wait_for_selector(f"#grant-picker[data-loaded='{table}']")
        picked = page.locator("#picker-columns [data-column]")
        assert picked.evaluate_all("els => els.map(e => e.dataset.column)") == ["id", "name", "email", "region"]
        for col in ("id", "email", "region"):
            page.check(f"#picker-columns [data-column='{col}'] input.pick-col")
        page.select_option("#picker-columns [data-column='email'] select.pick-mask", "email")
        assert page.input_value("#grant-form input[name=columns]") == "id, email, region"
        assert page.input_value("#grant-form input[name=masks]") == "email=email"
        page.fill("#grant-form input[name=grantee]", group)
        page.fill("#grant-form input[name=row_filter]", "region = 'EU'")
        page.click("#grant-form button")
        assert "made" in page.inner_text("#gov-message")
        grant_id = int(page.inner_text("#gov-message").split()[1])
        g = Governance(settings).get(grant_id)
        assert (g.grantee, g.columns, g.masks, g.row_filter) == (
            group,
            ["id", "email", "region"],
            {"email": "email"},
            "region = 'EU'",
        )
        # The analyst's effective grants include the group's.
        page = v.go(f"/governance?for={analyst}#effective", "governance-effective")
        row = page.locator(f"#effective tr[data-grant='{grant_id}']")
        assert group in row.inner_text() and "email=email" in row.inner_text()
        # Grants on workflows and databases take the library's privileges (ALTER was refused before).
        page.click("#grant-box summary")
        page.select_option("#grant-form select[name=privilege]", "DESCRIBE")
        page.select_option("#grant-form select[name=kind]", "DATABASE")
        page.fill("#grant-form input[name=target]", admin_site.db)
        page.fill("#grant-form input[name=grantee]", analyst)
        page.click("#grant-form button")
        db_grant = int(page.inner_text("#gov-message").split()[1])
        assert Governance(settings).get(db_grant).privilege == "DESCRIBE"
        for gid in (grant_id, db_grant):
            page.locator(f"#grants tr[data-grant='{gid}'] button.revoke").click()
            assert "revoked" in page.inner_text("#gov-message")
        assert not [g for g in Governance(settings).list() if g.id in (grant_id, db_grant)]
        assert len(audited(settings, admin_site.users["admin"], "revoke", str(grant_id))) == 1
        assert not v.errors, v.errors
        v.close()

        phone = admin_visit(browser, admin_site, phone=True)
        page = phone.go("/governance", "governance-phone")
        assert fits_phone(page) and page.locator("#gov-tabs").is_visible()
        page = phone.go("/governance/audit", "audit-phone")
        assert page.locator("#gov-tabs a.active").inner_text() == "Audit log"
        phone.close()
    finally:
        p.remove(group)


def test_an_object_page_view_is_one_audit_row(admin_site, settings, spark, tmp_path):
    """The object page runs a governed query per result table; the view is one row that lists
    them, and a refused read (no grant on a result table) is still a row of its own."""
    from shoal.extract import run_extract
    from shoal.ingest import ingest

    u = uuid.uuid4().hex[:6]
    (tmp_path / "note.txt").write_text(f"Audit note {u}: Ann met Bo in Lisbon.")
    source = f"adm-{u}"
    ingest(spark, settings, str(tmp_path), source_name=source)
    run_extract(spark, settings, only=["text/plain"])
    object_id = spark.sql("SELECT object_id FROM shoal.objects WHERE source_name = :s", args={"s": source}).first()[0]
    analyst = admin_site.users["analyst"]
    admin_principal = Principals(settings).principal(admin_site.users["admin"])
    grant = Governance(settings).grant(admin_principal, "SELECT", "TABLE", "shoal.text", analyst)
    try:
        client = signin(admin_site, analyst)
        log = AuditLog(settings)
        before = log.list(principal=analyst, limit=1)[0]["id"]
        page = client.get(f"/objects/{object_id}")
        assert page.status_code == 200 and f"Audit note {u}" in page.text
        rows = [r for r in log.list(principal=analyst, limit=100) if r["id"] > before]
        views = [r for r in rows if r["action"] == "catalog.object"]
        assert len(views) == 1 and views[0]["resource"] == object_id
        reads = views[0]["detail"]["reads"]
        assert [r["resource"] for r in reads] == ["shoal.text"] and len(reads[0]["fingerprint"]) == 32
        # Every other row of the view is a refusal (the result tables without a grant), one each.
        others = [r for r in rows if r["action"] != "catalog.object"]
        assert others and all(r["decision"] == "deny" and r["reason"] for r in others)
        assert len(rows) == 1 + len(others)
    finally:
        Governance(settings).revoke(admin_principal, grant.id)
