"""The HTTP API on a real server: authentication, governed query, catalog, access points,
signed URLs, raw reads (traversal, symlink escape), access requests, audit; and a fuzz run
driven by the API's own OpenAPI spec."""

from __future__ import annotations

import os
import threading
import time
import uuid
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
import uvicorn

from shoal.governance import Governance, Principals
from shoal.web import create_app, server_config
from tests.support.servers import free_port


class Api:
    def __init__(self, spark, settings) -> None:
        u = uuid.uuid4().hex[:6]
        self.settings = settings
        self.db = f"api_{u}"
        spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {self.db}")
        spark.sql(f"CREATE TABLE {self.db}.deals (id int, region string, amount double) USING iceberg")
        spark.sql(f"INSERT INTO {self.db}.deals VALUES (1, 'EU', 5.0), (2, 'US', 7.0)")
        p = Principals(settings)
        self.names = {n: f"{n}_{u}" for n in ("alice", "bob", "carol")}
        for n in self.names.values():
            p.add(n)
        g = Governance(settings)
        g.grant(
            p.principal("admin"),
            "SELECT",
            "TABLE",
            f"{self.db}.deals",
            self.names["alice"],
            row_filter="region = 'EU'",
            table_columns=["id", "region", "amount"],
        )
        g.set_owner(f"{self.db}.deals", self.names["carol"], "deals by region")
        self.tokens = {n: p.create_token(full)[1] for n, full in self.names.items()}
        self.tokens["admin"] = p.create_token("admin")[1]
        # Raw zone content, a secret outside it, and a symlink pointing at the secret.
        raw = Path(settings.warehouse_uri) / "raw" / f"apitest{u}"
        (raw / "docs").mkdir(parents=True)
        (raw / "docs" / "report.html").write_text("<script>alert('x')</script><p>quarterly report</p>")
        (raw / "other.txt").write_text("not under the prefix")
        secret = Path(settings.workspace_dir) / f"secret-{u}.txt"
        secret.write_text("top secret")
        os.symlink(secret, raw / "docs" / "escape.txt")
        self.prefix = f"apitest{u}/docs"
        self.ap = f"ap-{u}"
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.server = uvicorn.Server(server_config(settings, create_app(settings), "127.0.0.1", self.port))
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started and time.monotonic() < deadline:
            time.sleep(0.05)

    def client(self, who: str | None = None) -> httpx.Client:
        headers = {"Authorization": f"Bearer {self.tokens[who]}"} if who else {}
        return httpx.Client(base_url=self.base, headers=headers, timeout=120)


@pytest.fixture(scope="module")
def api(spark, settings):
    a = Api(spark, settings)
    yield a
    a.server.should_exit = True
    a.thread.join(timeout=10)


def test_authentication(api, settings):
    assert api.client().get("/api/v1/me").status_code == 401
    assert (
        api.client()
        .get("/api/v1/me", headers={"Authorization": "Bearer shoal_0123456789abcdef_" + "A" * 43})
        .status_code
        == 401
    )
    assert api.client().get("/api/v1/me", headers={"Authorization": "Basic YWRtaW46YWRtaW4="}).status_code == 401
    p = Principals(settings)
    _, expired = p.create_token(api.names["bob"], expires_in_days=-1)
    r = api.client().get("/api/v1/me", headers={"Authorization": f"Bearer {expired}"})
    assert r.status_code == 401 and r.json()["detail"] == "token expired" and r.headers["www-authenticate"] == "Bearer"
    me = api.client("alice").get("/api/v1/me").json()
    assert me == {"name": api.names["alice"], "admin": False, "groups": []}


def test_governed_query_over_http(api):
    ok = api.client("alice").post("/api/v1/query", json={"sql": f"SELECT id, amount FROM {api.db}.deals"})
    assert ok.status_code == 200 and ok.json()["rows"] == [[1, 5.0]]
    denied = api.client("bob").post("/api/v1/query", json={"sql": f"SELECT * FROM {api.db}.deals"})
    assert denied.status_code == 403 and "has no SELECT" in denied.json()["detail"]
    bad = api.client("alice").post("/api/v1/query", json={"sql": "SET x = 1"})
    assert bad.status_code == 403
    assert api.client("alice").post("/api/v1/query", json={"sql": ""}).status_code == 422


def test_catalog_browsing(api):
    # Bob holds no privilege on deals: the table's metadata is hidden ([governance] tables_visible_to_all).
    assert f"{api.db}.deals" not in {t["name"] for t in api.client("bob").get("/api/v1/catalog/tables").json()}
    assert api.client("bob").get(f"/api/v1/catalog/tables/{api.db}/deals").status_code == 403
    tables = {t["name"]: t for t in api.client("alice").get("/api/v1/catalog/tables").json()}
    deals = tables[f"{api.db}.deals"]
    assert deals["owner"] == api.names["carol"] and "SELECT" in deals["privileges"]
    schema = api.client("alice").get(f"/api/v1/catalog/tables/{api.db}/deals").json()
    assert [c["name"] for c in schema["columns"]] == ["id", "region", "amount"] and schema[
        "description"
    ] == "deals by region"


def test_access_points_and_raw_reads(api):
    admin, alice, bob = api.client("admin"), api.client("alice"), api.client("bob")
    body = {"name": api.ap, "prefix": api.prefix, "principals": [api.names["alice"]]}
    assert bob.post("/api/v1/access-points", json=body).status_code == 403  # admins only
    created = admin.post("/api/v1/access-points", json=body)
    assert created.status_code == 201 and created.json()["read_only"] is True
    r = alice.get(f"/raw/{api.ap}/{api.prefix}/report.html")
    assert r.status_code == 200 and b"quarterly report" in r.content
    # Untrusted HTML never renders in the API's origin.
    assert r.headers["content-type"] == "application/octet-stream" and r.headers["x-content-type-options"] == "nosniff"
    assert "sandbox" in r.headers["content-security-policy"] and "attachment" in r.headers["content-disposition"]
    assert bob.get(f"/raw/{api.ap}/{api.prefix}/report.html").status_code == 403
    assert api.client().get(f"/raw/{api.ap}/{api.prefix}/report.html").status_code == 401
    prefix_root = api.prefix.split("/")[0]
    for path in (
        f"{prefix_root}/other.txt",  # outside the prefix
        f"{api.prefix}/escape.txt",  # a symlink out of the raw zone
        f"{api.prefix}/%2e%2e/other.txt",  # traversal, encoded so the client keeps it
        f"{api.prefix}/..%2f..%2f..%2fcatalog.db",
        f"{api.prefix}/missing.txt",
    ):
        resp = alice.get(f"/raw/{api.ap}/{path}")
        assert resp.status_code in (400, 403, 404), (path, resp.status_code)
        assert b"top secret" not in resp.content and b"not under the prefix" not in resp.content


def test_signed_urls(api):
    alice, anon = api.client("alice"), api.client()
    signed = alice.post(
        f"/api/v1/access-points/{api.ap}/sign", json={"path": f"{api.prefix}/report.html", "expires_in": 60}
    )
    assert signed.status_code == 200
    url = signed.json()["url"]
    assert anon.get(url).status_code == 200
    parts = urlsplit(url)
    q = {k: v[0] for k, v in parse_qs(parts.query).items()}
    tampered = dict(q, signature=("0" if q["signature"][0] != "0" else "1") + q["signature"][1:])
    assert anon.get(parts.path, params=tampered).status_code == 403
    assert anon.get(parts.path, params=dict(q, expires=str(int(q["expires"]) + 3600))).status_code == 403
    assert anon.get(parts.path.replace("report.html", "escape.txt"), params=q).status_code == 403
    assert anon.get(parts.path, params=dict(q, principal=api.names["bob"])).status_code == 403
    short = alice.post(
        f"/api/v1/access-points/{api.ap}/sign", json={"path": f"{api.prefix}/report.html", "expires_in": 1}
    ).json()["url"]
    time.sleep(2.1)
    expired = anon.get(short)
    assert expired.status_code == 403 and "expired" in expired.json()["detail"]
    # Only what the signer may read can be signed.
    assert (
        api.client("bob")
        .post(f"/api/v1/access-points/{api.ap}/sign", json={"path": f"{api.prefix}/report.html"})
        .status_code
        == 403
    )


def test_access_request_flow(api):
    bob, alice, carol = api.client("bob"), api.client("alice"), api.client("carol")
    req = bob.post("/api/v1/access-requests", json={"table": f"{api.db}.deals", "reason": "quarterly revenue review"})
    assert req.status_code == 201 and req.json()["status"] == "pending"
    rid = req.json()["id"]
    # Not the owner: answered exactly like an id that does not exist, naming neither table nor state.
    probe = alice.post(f"/api/v1/access-requests/{rid}/approve")
    missing = alice.post("/api/v1/access-requests/2147483000/approve")
    assert probe.status_code == missing.status_code == 404
    assert probe.json()["detail"].replace(str(rid), "N") == missing.json()["detail"].replace("2147483000", "N")
    assert api.db not in probe.text and "pending" not in probe.text
    # The requester cannot decide their own request either.
    assert bob.post(f"/api/v1/access-requests/{rid}/approve").status_code == 404
    assert any(r["id"] == rid for r in carol.get("/api/v1/access-requests", params={"status": "pending"}).json())
    approved = carol.post(f"/api/v1/access-requests/{rid}/approve", json={"note": "ok for Q3"})
    assert approved.status_code == 200 and approved.json()["grant_id"]
    rows = bob.post("/api/v1/query", json={"sql": f"SELECT count(*) FROM {api.db}.deals"}).json()["rows"]
    assert rows == [[2]]
    assert carol.post(f"/api/v1/access-requests/{rid}/reject").status_code == 400  # already decided
    # A decided request is no more visible to a stranger than a pending one.
    late = alice.post(f"/api/v1/access-requests/{rid}/reject")
    assert late.status_code == 404 and "approved" not in late.text and api.db not in late.text


def test_audit_over_http(api):
    assert api.client("alice").get("/api/v1/audit").status_code == 403
    entries = api.client("admin").get("/api/v1/audit", params={"limit": 1000}).json()
    reads = [e for e in entries if e["action"] == "raw.read" and e["principal"] == api.names["alice"]]
    assert {e["decision"] for e in reads} == {"allow", "deny"}
    assert any(e["action"] == "api.auth" and e["decision"] == "deny" for e in entries)


def test_api_headers_and_docs_from_local_assets(api, settings):
    r = api.client("alice").get("/api/v1/me")
    assert r.headers["x-content-type-options"] == "nosniff"
    assert r.headers["content-security-policy"] == "default-src 'none'; frame-ancestors 'none'"
    assert api.client().get("/api/v1/me").headers["content-security-policy"].startswith("default-src 'none'")
    assert api.client().get("/openapi.json").status_code == 200
    # Swagger UI and ReDoc load every script from this server (an air-gapped one included).
    for page, asset in (("/docs", "swagger-ui-bundle.js"), ("/redoc", "redoc.standalone.js")):
        r = api.client().get(page)
        assert r.status_code == 200
        assert f"/docs-assets/{asset}" in r.text
        assert "cdn." not in r.text and "googleapis" not in r.text
        assert "default-src 'self'" in r.headers["content-security-policy"]
        js = api.client().get(f"/docs-assets/{asset}")
        assert js.status_code == 200 and len(js.content) > 100_000
    # Turned off, neither page exists.
    from fastapi.testclient import TestClient

    quiet = settings.model_copy(update={"server": settings.server.model_copy(update={"api_docs": False})})
    with TestClient(create_app(quiet)) as client:
        assert client.get("/docs").status_code == 404 and client.get("/redoc").status_code == 404
        assert client.get("/openapi.json").status_code == 200


def test_healthz_needs_no_sign_in_and_says_only_up_or_down(api, settings, tmp_path):
    r = api.client().get("/healthz")
    assert r.status_code == 200 and r.json() == {"status": "ok"}
    assert r.headers["cache-control"] == "no-store"
    # The catalog database becomes unreachable while the server runs: 503, and the reason
    # stays in the server log.
    import shutil

    from fastapi.testclient import TestClient

    from shoal.config import load_settings
    from shoal.lake import database

    own = load_settings(workspace=str(tmp_path / "ws"))
    with TestClient(create_app(own)) as client:
        assert client.get("/healthz").status_code == 200
        database.dispose()
        for f in own.workspace_dir.glob("catalog.db*"):
            f.unlink()
        (own.workspace_dir / "catalog.db").mkdir()  # a folder where the database file should be
        r = client.get("/healthz")
        database.dispose()
        shutil.rmtree(own.workspace_dir)
    assert r.status_code == 503 and r.json() == {"status": "unavailable"}


def test_forged_forwarded_for_is_ignored(api, settings):
    from shoal.governance import AuditLog

    ap = f"{api.ap}-net"
    body = {"name": ap, "prefix": api.prefix, "principals": [api.names["alice"]], "cidrs": ["10.0.0.0/8"]}
    assert api.client("admin").post("/api/v1/access-points", json=body).status_code == 201
    forged = {"X-Forwarded-For": "10.1.2.3", "X-Forwarded-Proto": "https"}
    r = api.client("alice").get(f"/raw/{ap}/{api.prefix}/report.html", headers=forged)
    assert r.status_code == 403 and "127.0.0.1" in r.json()["detail"]
    row = next(
        e
        for e in AuditLog(settings).list(principal=api.names["alice"], limit=50)
        if e["resource"] == (f"{ap}:{api.prefix}/report.html")
    )
    assert row["decision"] == "deny" and row["detail"]["client"] == "127.0.0.1"
    # Behind a configured proxy the header is believed, from that proxy only.
    trusted = settings.model_copy(
        update={"server": settings.server.model_copy(update={"trusted_proxies": ["10.0.0.1"]})}
    )
    config = server_config(trusted, create_app(trusted), "127.0.0.1", 1)
    assert config.proxy_headers and config.forwarded_allow_ips == ["10.0.0.1"]
    assert not server_config(settings, create_app(settings)).proxy_headers


def test_token_guessing_is_throttled(api, settings):
    from shoal.governance import AuditLog

    p = Principals(settings)
    name = f"guess_{uuid.uuid4().hex[:6]}"
    p.add(name)
    token_id, token = p.create_token(name)
    wrong = f"shoal_{token_id}_" + ("B" if token[-43] == "A" else "A") + token[-42:]
    for _ in range(settings.governance.throttle_account_failures):
        assert api.client().get("/api/v1/me", headers={"Authorization": f"Bearer {wrong}"}).status_code == 401
    r = api.client().get("/api/v1/me", headers={"Authorization": f"Bearer {token}"})  # right, but locked
    assert r.status_code == 429 and int(r.headers["retry-after"]) >= 1
    entries = AuditLog(settings).list(principal="anonymous", decision="deny", limit=20)
    assert any(e["action"] == "api.auth" and e["reason"] == "throttled" for e in entries)
    assert api.client("alice").get("/api/v1/me").status_code == 200  # other tokens are unaffected


def test_unexpected_query_errors_are_audited_400s(api, settings, monkeypatch):
    from shoal.governance import AuditLog, GovernedSql

    def boom(*_args, **_kwargs):
        raise RuntimeError("something nobody foresaw")

    monkeypatch.setattr(GovernedSql, "execute", boom)
    r = api.client("alice").post("/api/v1/query", json={"sql": "SELECT 1"})
    assert r.status_code == 400 and "foresaw" not in r.text
    latest = AuditLog(settings).list(principal=api.names["alice"], limit=5)
    assert any(e["action"] == "api.error" and e["resource"] == "/api/v1/query" for e in latest)


def test_fuzz_the_api_from_its_openapi_spec(api):
    import schemathesis
    from hypothesis import HealthCheck, given, settings

    schema = schemathesis.openapi.from_url(f"{api.base}/openapi.json")
    failures: list[tuple] = []
    calls = []

    def fuzzer(operation, headers):
        @given(case=operation.as_strategy())
        @settings(max_examples=12, deadline=None, database=None, suppress_health_check=list(HealthCheck))
        def fuzz(case):
            response = case.call(base_url=api.base, headers=headers)
            calls.append(response.status_code)
            if response.status_code >= 500:
                failures.append((case.method, case.formatted_path, response.status_code, response.text[:300]))
            if not headers and case.path not in ("/openapi.json", "/healthz"):  # open by design
                assert response.status_code in (401, 403, 404, 405, 422), (case.method, case.path, response.status_code)

        return fuzz

    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 14
    for who in ("alice", None):
        headers = {"Authorization": f"Bearer {api.tokens[who]}"} if who else {}
        for operation in operations:
            fuzzer(operation, headers)()
    assert failures == []
    assert len(calls) > 100 and {200, 403, 401} <= set(calls)


def test_every_api_route_declares_a_response_model(settings):
    """Typed answers everywhere: each /api/v1 route names a pydantic model (or a list of one),
    and the OpenAPI schema documents it; a 204 has no body to describe."""
    from typing import get_args, get_origin

    from fastapi.routing import APIRoute
    from pydantic import BaseModel

    def walk(routes):
        for route in routes:
            # FastAPI 0.16x keeps an included router whole (its routes carry the full path).
            inner = getattr(route, "original_router", None)
            yield from walk(inner.routes) if inner is not None else [route]

    app = create_app(settings)
    routes = [r for r in walk(app.routes) if isinstance(r, APIRoute) and r.path.startswith("/api/v1/")]
    assert len(routes) >= 24
    schema = app.openapi()["paths"]
    for route in routes:
        where = f"{sorted(route.methods)} {route.path}"
        if route.status_code == 204:
            assert route.response_model is None, where
            continue
        model = route.response_model
        inner = get_args(model)[0] if get_origin(model) is list else model
        assert isinstance(inner, type) and issubclass(inner, BaseModel), f"{where}: {model!r}"
        for method in route.methods:
            answer = schema[route.path][method.lower()]["responses"][str(route.status_code or 200)]
            body = answer["content"]["application/json"]["schema"]
            assert "$ref" in body or "$ref" in body.get("items", {}), f"{where}: {body}"


def test_typed_answers_carry_the_librarys_json(api, settings):
    """The response models change no answer: each equals what the library returns."""
    import json

    from shoal.governance import AuditLog
    from shoal.governance.access import AccessRequests, RawAccess

    admin, bob = api.client("admin"), api.client("bob")
    me = bob.get("/api/v1/me").json()
    assert me == {"name": api.names["bob"], "admin": False, "groups": []}
    name = f"typed-{uuid.uuid4().hex[:6]}"
    body = {"name": name, "prefix": api.prefix, "principals": [api.names["bob"]]}
    created = admin.post("/api/v1/access-points", json=body)
    assert created.status_code == 201
    assert created.json() == json.loads(json.dumps(RawAccess(settings).get(name)))
    assert admin.get("/api/v1/access-points").json() == json.loads(json.dumps(RawAccess(settings).list()))
    req = bob.post("/api/v1/access-requests", json={"table": f"{api.db}.deals", "reason": "typed answer check"})
    assert req.status_code == 201 and req.json() == AccessRequests(settings).get(req.json()["id"])
    assert req.json()["decided_at"] is None and "decided_at" in req.json()  # nulls stay, as before
    listed = admin.get("/api/v1/access-requests").json()
    assert listed == AccessRequests(settings).list(Principals(settings).principal("admin"))[: len(listed)]
    entries = admin.get("/api/v1/audit", params={"limit": 300}).json()
    library = {e["id"]: e for e in AuditLog(settings).list(limit=1000)}
    assert entries and all(e == json.loads(json.dumps(library[e["id"]])) for e in entries)
    # An entry without details has no "detail" key (not a null one), as before.
    assert any("detail" not in e for e in entries) and any("detail" in e for e in entries)


def test_admission_answers_429_and_503_with_retry_after(api, settings, monkeypatch):
    from shoal.admission import admission

    adm = admission(settings)  # the one the app uses
    monkeypatch.setattr(adm, "slots", 1)
    monkeypatch.setattr(adm, "queue", 0)
    query = {"sql": f"SELECT id, amount FROM {api.db}.deals"}
    with adm.enter("someone-else"):
        full = api.client("alice").post("/api/v1/query", json=query)
        assert full.status_code == 429 and int(full.headers["retry-after"]) >= 1
        assert "too many queries" in full.json()["detail"]
        monkeypatch.setattr(adm, "queue", 4)
        monkeypatch.setattr(adm, "timeout_s", 0.5)
        waited = api.client("alice").post("/api/v1/query", json=query)
        assert waited.status_code == 503 and int(waited.headers["retry-after"]) >= 1
        assert "waited 0.5 s for a slot" in waited.json()["detail"]
    assert api.client("alice").post("/api/v1/query", json=query).status_code == 200
