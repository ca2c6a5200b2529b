"""Attacks on the Iceberg REST catalog: signing in without a valid token, reusing a revoked
one, seeing what is not granted, reading past column/row/mask restrictions, committing
without grants or with another table's files. Each refusal is checked to leave nothing
written, and refused loads and commits to be on the audit record."""

from __future__ import annotations

import pyarrow as pa
import pytest

from shoal.governance import AuditLog, Principals


def _err(r) -> dict:
    body = r.json()
    assert set(body) == {"error"} and {"message", "type", "code"} <= set(body["error"]), body
    assert body["error"]["code"] == r.status_code
    return body["error"]


def test_sign_in_refuses_bad_credentials(http, lake, settings):
    assert _err(http.get("/v1/config"))["type"] == "NotAuthorizedException"
    for bad in ("Bearer nonsense", "Bearer shoalrest_0123456789abcdef.9999999999." + "0" * 64, "Basic eDp5"):
        r = http.get("/v1/namespaces", headers={"Authorization": bad})
        assert r.status_code == 401, (bad, r.text)
    good = http.post(
        "/v1/oauth/tokens", data={"grant_type": "client_credentials", "client_secret": lake.tokens["analyst"]}
    )
    forged = good.json()["access_token"][:-4] + "0000"  # any change to the bearer breaks its HMAC
    assert http.get("/v1/namespaces", headers={"Authorization": f"Bearer {forged}"}).status_code == 401
    wrong = lake.tokens["analyst"][:-4] + "AAAA"
    r = http.post("/v1/oauth/tokens", data={"grant_type": "client_credentials", "client_secret": wrong})
    assert r.status_code == 401 and r.json()["error"] == "invalid_client"
    r = http.post(
        "/v1/oauth/tokens",
        data={
            "grant_type": "client_credentials",
            "client_id": lake.names["reader"],
            "client_secret": lake.tokens["analyst"],
        },
    )
    assert r.status_code == 401  # one user's token does not sign in as another
    assert wrong not in str(AuditLog(settings).list(limit=20))  # secrets never reach the audit


def test_revoked_or_expired_token_ends_its_bearers(http, bearer, settings, lake):
    p = Principals(settings)
    tid, token = p.create_token(lake.names["analyst"])
    headers = bearer(token)
    assert http.get("/v1/namespaces", headers=headers).status_code == 200
    p.revoke_token(tid)
    for h in (headers, {"Authorization": f"Bearer {token}"}):
        r = http.get("/v1/namespaces", headers=h)
        assert r.status_code == 401 and "revoked" in _err(r)["message"]
    r = http.post("/v1/oauth/tokens", data={"grant_type": "client_credentials", "client_secret": token})
    assert r.status_code == 401
    _, short = p.create_token(lake.names["analyst"], expires_in_days=1e-9)
    r = http.post("/v1/oauth/tokens", data={"grant_type": "client_credentials", "client_secret": short})
    assert r.status_code == 401 and "expired" in r.json()["error_description"]


def test_listing_and_loading_hide_what_is_not_granted(http, bearer, lake):
    h = bearer(lake.tokens["nobody"])
    assert http.get("/v1/namespaces", headers=h).json()["namespaces"] == []
    for path in (
        f"/v1/namespaces/{lake.db}",
        f"/v1/namespaces/{lake.db}/tables",
        f"/v1/namespaces/{lake.hidden_db}/tables",
    ):
        assert _err(http.get(path, headers=h))["type"] == "NoSuchNamespaceException"
    h = bearer(lake.tokens["analyst"])
    missing = _err(http.get(f"/v1/namespaces/{lake.db}/tables/no_such_table", headers=h))["message"]
    hidden = _err(http.get(f"/v1/namespaces/{lake.db}/tables/hr", headers=h))["message"]
    assert hidden == missing.replace("no_such_table", "hr")  # unreadable reads as absent
    assert http.head(f"/v1/namespaces/{lake.db}/tables/hr", headers=h).status_code == 404
    assert http.head(f"/v1/namespaces/{lake.hidden_db}", headers=h).status_code == 404


def test_restricted_grants_are_refused_with_the_pointer(http, bearer, lake, settings):
    for user in ("cols", "rows", "mask"):
        h = bearer(lake.tokens[user])
        listed = http.get(f"/v1/namespaces/{lake.db}/tables", headers=h).json()["identifiers"]
        assert [t["name"] for t in listed] == ["opps"]
        err = _err(http.get(f"/v1/namespaces/{lake.db}/tables/opps", headers=h))
        assert err["code"] == 403 and "PostgreSQL endpoint" in err["message"], (user, err)
        audit = AuditLog(settings).list(principal=lake.names[user], limit=5)
        assert any(a["action"] == "iceberg.load" and a["decision"] == "deny" for a in audit)


def test_commits_without_grants_write_nothing(connect, lake, spark, settings):
    from pyiceberg.exceptions import ForbiddenError
    from pyiceberg.types import StringType

    reader = connect(lake.tokens["reader"]).load_table(lake.sales)  # SELECT only
    before = (reader.metadata_location, spark.sql(f"SELECT count(*) FROM {lake.sales}").first()[0])
    row = pa.table({"id": pa.array([666], pa.int32()), "region": ["EU"], "amount": [6.0]})
    with pytest.raises(ForbiddenError, match="needs INSERT"):
        reader.append(row)
    with pytest.raises(ForbiddenError, match="needs ALTER"), reader.update_schema() as update:
        update.add_column("sneaky", StringType())
    analyst = connect(lake.tokens["analyst"]).load_table(lake.sales)  # INSERT, not the owner
    with pytest.raises(ForbiddenError, match="owner"):
        analyst.overwrite(row)
    with pytest.raises(ForbiddenError, match="admins only"), analyst.transaction() as tx:
        tx.set_properties({"write.data.path": "/tmp/elsewhere"})
    after = connect(lake.admin_token).load_table(lake.sales)
    assert (after.metadata_location, spark.sql(f"SELECT count(*) FROM {lake.sales}").first()[0]) == before
    assert "sneaky" not in spark.table(lake.sales).columns
    denied = [a for a in AuditLog(settings).list(principal=lake.names["reader"], limit=20) if a["decision"] == "deny"]
    assert any(a["action"] == "iceberg.commit" for a in denied)


def test_commit_cannot_publish_another_tables_files(http, bearer, connect, lake, spark):
    hr = connect(lake.admin_token).load_table(lake.hr)
    snap = hr.metadata.current_snapshot()
    sales = connect(lake.tokens["analyst"]).load_table(lake.sales)
    body = {
        "requirements": [{"type": "assert-table-uuid", "uuid": str(sales.metadata.table_uuid)}],
        "updates": [
            {
                "action": "add-snapshot",
                "snapshot": {
                    **snap.model_dump(by_alias=True, exclude_none=True),
                    "parent-snapshot-id": sales.metadata.current_snapshot_id,
                    "sequence-number": sales.metadata.last_sequence_number + 1,
                },
            },
            {"action": "set-snapshot-ref", "ref-name": "main", "type": "branch", "snapshot-id": snap.snapshot_id},
        ],
    }
    r = http.post(f"/v1/namespaces/{lake.db}/tables/sales", json=body, headers=bearer(lake.tokens["analyst"]))
    err = _err(r)
    assert err["code"] == 403 and "outside the table's location" in err["message"]
    assert spark.sql(f"SELECT count(*) FROM {lake.sales} WHERE region IS NULL").first()[0] == 0
    # A manifest list elsewhere on the host is refused by its path, before anything opens it.
    body["updates"][0]["snapshot"]["manifest-list"] = "/etc/passwd"
    r = http.post(f"/v1/namespaces/{lake.db}/tables/sales", json=body, headers=bearer(lake.tokens["analyst"]))
    assert "outside the table's location: /etc/passwd" in _err(r)["message"]


def test_stale_commit_is_a_409(http, bearer, connect, lake):
    sales = connect(lake.tokens["analyst"]).load_table(lake.sales)
    body = {
        "requirements": [{"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": 1}],
        "updates": [{"action": "set-properties", "updates": {"comment": "x"}}],
    }
    r = http.post(f"/v1/namespaces/{lake.db}/tables/sales", json=body, headers=bearer(lake.tokens["analyst"]))
    assert _err(r)["type"] == "CommitFailedException" and r.status_code == 409
    assert connect(lake.admin_token).load_table(lake.sales).metadata_location == sales.metadata_location


def test_nested_namespaces_and_admin_operations_deny_by_default(http, bearer, connect, lake):
    admin = bearer(lake.admin_token)
    r = http.post("/v1/namespaces", json={"namespace": [lake.db, "inner"]}, headers=admin)
    assert r.status_code == 200, r.text
    from pyiceberg.schema import Schema
    from pyiceberg.types import LongType, NestedField

    connect(lake.admin_token).create_table((lake.db, "inner", "deep"), Schema(NestedField(1, "id", LongType())))
    nested = f"{lake.db}%1Finner"  # levels joined by the unit separator
    h = bearer(lake.tokens["dbadmin"])  # ALL on the top-level database: not on what is nested in it
    assert http.get("/v1/namespaces", params={"parent": lake.db}, headers=h).json()["namespaces"] == []
    assert http.get(f"/v1/namespaces/{nested}/tables/deep", headers=h).status_code == 404
    assert http.get(f"/v1/namespaces/{nested}/tables/deep", headers=admin).status_code == 200
    assert http.post("/v1/namespaces", json={"namespace": ["mine"]}, headers=h).status_code == 403
    h = bearer(lake.tokens["analyst"])
    assert _err(http.delete(f"/v1/namespaces/{lake.db}/tables/sales", headers=h))["code"] == 403
    body = {"name": "x", "schema": {"type": "struct", "fields": []}, "location": "/tmp/x"}
    assert (
        http.post(f"/v1/namespaces/{lake.db}/tables", json=body, headers=bearer(lake.tokens["dbadmin"])).status_code
        == 403
    )


def test_a_bearer_carries_no_grants(http, bearer, settings, lake):
    """Grants are read per request: revoking one ends access under a bearer issued before."""
    from shoal.governance import Governance

    p, g = Principals(settings), Governance(settings)
    user = f"{lake.names['nobody']}_later"
    p.add(user)
    grant = g.grant(p.principal("admin"), "SELECT", "TABLE", lake.sales, user)
    h = bearer(p.create_token(user)[1])
    assert http.get(f"/v1/namespaces/{lake.db}/tables/sales", headers=h).status_code == 200
    g.revoke(p.principal("admin"), grant.id)
    assert http.get(f"/v1/namespaces/{lake.db}/tables/sales", headers=h).status_code == 404
    assert http.get("/v1/namespaces", headers=h).json()["namespaces"] == []


def test_malformed_commits_are_refused_with_where(http, bearer, lake):
    h = bearer(lake.tokens["analyst"])
    r = http.post(f"/v1/namespaces/{lake.db}/tables/sales", json={"updates": [{"action": "bogus"}]}, headers=h)
    err = _err(r)
    assert err["code"] == 400 and err["message"].startswith("invalid updates[0]"), err
    r = http.post(f"/v1/namespaces/{lake.db}/tables/sales", content=b"{not json", headers=h)
    assert _err(r)["type"] == "BadRequestException"
