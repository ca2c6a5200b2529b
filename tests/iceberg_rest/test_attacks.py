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
    for bad in ("Bearer nonsense", "Bearer shoalrest_0123456789abcdef.9999999999.1700000000." + "0" * 64, "Basic eDp5"):
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


# ---- the security review's findings (each failed on the first version of the catalog) -----------


def _fresh_table(connect, lake, rows: int = 2):
    """A table of the lake's database made by admin, with `rows` one-row appends: dbadmin (ALL on
    the database) may INSERT and ALTER it but is not its owner."""
    import uuid

    from pyiceberg.schema import Schema
    from pyiceberg.types import LongType, NestedField

    admin = connect(lake.admin_token)
    tbl = admin.create_table((lake.db, f"t_{uuid.uuid4().hex[:8]}"), Schema(NestedField(1, "id", LongType())))
    for i in range(rows):
        tbl.append(pa.table({"id": pa.array([i], pa.int64())}))
    return admin.load_table(tbl.name())


def _append(meta, manifest_list: str, parent: int | None = -1, sid: int | None = None) -> dict:
    import time

    sid = sid or max(s.snapshot_id for s in meta.snapshots) + 7919
    snap = {
        "snapshot-id": sid,
        "parent-snapshot-id": meta.current_snapshot_id if parent == -1 else parent,
        "sequence-number": meta.last_sequence_number + 1,
        "timestamp-ms": int(time.time() * 1000),
        "manifest-list": manifest_list,
        "summary": {"operation": "append"},
        "schema-id": meta.current_schema_id,
    }
    return {
        "updates": [
            {"action": "add-snapshot", "snapshot": snap},
            {"action": "set-snapshot-ref", "ref-name": "main", "type": "branch", "snapshot-id": sid},
        ]
    }


def _manifest_list(tbl, manifests, sid: int) -> str:
    import uuid

    from pyiceberg.manifest import write_manifest_list

    path = f"{tbl.metadata.location}/metadata/snap-{uuid.uuid4().hex}.avro"
    meta = tbl.metadata
    with write_manifest_list(
        format_version=meta.format_version,
        output_file=tbl.io.new_output(path),
        snapshot_id=sid,
        parent_snapshot_id=meta.current_snapshot_id,
        sequence_number=meta.last_sequence_number + 1,
        avro_compression="null",
    ) as w:
        w.add_manifests(manifests)
    return path


def test_an_append_label_cannot_remove_data(http, bearer, connect, lake):
    """H1: a snapshot labelled "append" by a non-owner is checked against its files."""
    from pyiceberg.manifest import ManifestContent

    tbl = _fresh_table(connect, lake)
    h, url = bearer(lake.tokens["dbadmin"]), f"/v1/namespaces/{lake.db}/tables/{tbl.name()[-1]}"
    meta = tbl.metadata
    first, current = meta.snapshots[0], meta.current_snapshot()
    sid = current.snapshot_id + 7919
    live = current.manifests(tbl.io)
    relabelled = type(live[0])(*live[0]._data)
    relabelled[3] = ManifestContent.DELETES  # the content field: a carried data manifest read as deletes
    bodies = {
        "rollback": _append(meta, first.manifest_list),  # an older snapshot's manifest list
        "reused": _append(meta, current.manifest_list),
        "empty": _append(meta, _manifest_list(tbl, [], sid), sid=sid),
        "drops": _append(meta, _manifest_list(tbl, live[1:], sid), sid=sid),
        "relabelled": _append(meta, _manifest_list(tbl, [relabelled, *live[1:]], sid), sid=sid),
        "stale parent": _append(meta, _manifest_list(tbl, live, sid), parent=first.snapshot_id, sid=sid),
    }
    for what, body in bodies.items():
        r = http.post(url, json=body, headers=h)
        assert r.status_code == 403, (what, r.text[:300])
        err = _err(r)
        assert err["code"] == 403 and "not an append" in err["message"], (what, err)
    after = connect(lake.admin_token).load_table(tbl.name())
    assert after.metadata_location == tbl.metadata_location and len(after.scan().to_arrow()) == 2
    # A real append by the same principal still goes through (PyIceberg's fast append).
    connect(lake.tokens["dbadmin"]).load_table(tbl.name()).append(pa.table({"id": pa.array([9], pa.int64())}))
    assert len(connect(lake.admin_token).load_table(tbl.name()).scan().to_arrow()) == 3


def test_alter_cannot_set_code_or_storage_properties(http, bearer, connect, lake, settings):
    """H2 and L3: only allowlisted properties for non-admins, in commits and in creates."""
    h, url = bearer(lake.tokens["analyst"]), f"/v1/namespaces/{lake.db}/tables/sales"
    for key in ("write.py-location-provider.impl", "py-io-impl", "s3.endpoint", "s3.access-key-id", "format-version"):
        body = {"updates": [{"action": "set-properties", "updates": {key: "runpy.run_path"}}]}
        err = _err(http.post(url, json=body, headers=h))
        assert err["code"] == 403 and "admins only" in err["message"] and key in err["message"], err
    body = {"updates": [{"action": "remove-properties", "removals": ["py-io-impl"]}]}
    assert _err(http.post(url, json=body, headers=h))["code"] == 403
    denied = AuditLog(settings).list(principal=lake.names["analyst"], limit=5)
    assert denied[0]["detail"]["properties"] == ["py-io-impl"] and "runpy" not in str(denied)
    create = {"name": "evil", "schema": {"type": "struct", "fields": []}, "properties": {"py-io-impl": "x.Y"}}
    err = _err(http.post(f"/v1/namespaces/{lake.db}/tables", json=create, headers=bearer(lake.tokens["dbadmin"])))
    assert err["code"] == 403 and "py-io-impl" in err["message"]
    ok = {"updates": [{"action": "set-properties", "updates": {"comment": "fine", "team_owner": "sales"}}]}
    tbl = _fresh_table(connect, lake, rows=1)
    t_url = f"/v1/namespaces/{lake.db}/tables/{tbl.name()[-1]}"
    assert http.post(t_url, json=ok, headers=bearer(lake.tokens["dbadmin"])).status_code == 200


def test_table_properties_never_choose_the_servers_file_io(http, bearer, connect, lake):
    """H2: a FileIO class (or endpoint) named by a table property is not used by the server,
    and non-admins may not commit to a table that carries one until an admin removes it."""
    tbl = _fresh_table(connect, lake, rows=1)
    admin, url = bearer(lake.admin_token), f"/v1/namespaces/{lake.db}/tables/{tbl.name()[-1]}"
    body = {"updates": [{"action": "set-properties", "updates": {"py-io-impl": "shoal_no_such_module.FileIO"}}]}
    r = http.post(url, json=body, headers=admin)  # an admin may; the server does not import it
    assert r.status_code == 200, r.text
    assert http.get(url, headers=admin).status_code == 200
    ok = {"updates": [{"action": "set-properties", "updates": {"comment": "x"}}]}
    err = _err(http.post(url, json=ok, headers=bearer(lake.tokens["dbadmin"])))
    assert err["code"] == 403 and "py-io-impl" in err["message"]
    assert (
        http.post(
            url, json={"updates": [{"action": "remove-properties", "removals": ["py-io-impl"]}]}, headers=admin
        ).status_code
        == 200
    )


def test_statistics_paths_are_the_owners_and_inside_the_table(http, bearer, connect, lake, settings):
    """H3: statistics files name what snapshot expiry deletes."""
    tbl = _fresh_table(connect, lake, rows=1)
    url = f"/v1/namespaces/{lake.db}/tables/{tbl.name()[-1]}"
    hr = connect(lake.admin_token).load_table(lake.hr)
    victim = hr.inspect.files().column("file_path")[0].as_py()
    sid = tbl.metadata.current_snapshot_id
    stats = {
        "snapshot-id": sid,
        "statistics-path": victim,
        "file-size-in-bytes": 1,
        "file-footer-size-in-bytes": 1,
        "blob-metadata": [],
    }
    for body in (
        {"updates": [{"action": "set-statistics", "snapshot-id": sid, "statistics": stats}]},
        {
            "updates": [
                {
                    "action": "set-partition-statistics",
                    "partition-statistics": {"snapshot-id": sid, "statistics-path": victim, "file-size-in-bytes": 1},
                }
            ]
        },
    ):
        err = _err(http.post(url, json=body, headers=bearer(lake.tokens["dbadmin"])))
        assert err["code"] == 403 and "owner" in err["message"], err
        err = _err(http.post(url, json=body, headers=bearer(lake.admin_token)))  # not even an admin's
        assert err["code"] == 403 and "outside the table's location" in err["message"], err
    denied = AuditLog(settings).list(principal="admin", limit=1)[0]
    assert denied["detail"]["statistics"] == [victim]
    assert connect(lake.admin_token).load_table(lake.hr).inspect.files().num_rows == 1


def test_bad_bodies_are_refused_in_the_spec_shape_and_audited(http, bearer, lake, settings):
    """M1 and L3: deep nesting and oversized bodies are 400/413 errors, audited, no traceback."""
    h, url = bearer(lake.tokens["analyst"]), f"/v1/namespaces/{lake.db}/tables/sales"
    err = _err(http.post(url, content=b"[" * 100_000, headers=h))
    assert err["code"] == 400 and "nests too deeply" in err["message"], err
    row = AuditLog(settings).list(principal=lake.names["analyst"], limit=1)[0]
    assert row["action"] == "iceberg.commit" and row["decision"] == "deny" and "nests" in row["reason"]
    deep: dict = {"updates": []}
    for _ in range(120):
        deep = {"a": deep}
    assert _err(http.post(url, json=deep, headers=h))["code"] == 400
    big = b'{"updates": [], "pad": "' + b"x" * (17 * 1024 * 1024) + b'"}'
    for path in (url, "/v1/oauth/tokens"):
        r = http.post(path, content=big, headers=h)
        assert _err(r)["code"] == 413, path


def test_failed_sign_ins_are_recorded_as_anonymous(http, settings):
    """L1: a claimed client_id is a claim, kept short in the detail."""
    for cid in ("admin", "z" * 200_000):
        r = http.post(
            "/v1/oauth/tokens", data={"grant_type": "client_credentials", "client_id": cid, "client_secret": "junk"}
        )
        assert r.status_code == 401
        row = AuditLog(settings).list(principal="anonymous", limit=1)[0]
        assert row["principal"] == "anonymous" and row["detail"]["claimed_id"] == cid[:64], row


def test_a_bearer_cannot_be_refreshed_forever(http, settings, lake):
    """L2: token exchange keeps the first sign-in time, and refuses past iceberg_rest_session_s."""
    import time

    from shoal.iceberg_rest import bearer as b

    tid, token = Principals(settings).create_token(lake.names["analyst"])
    exchange = {"grant_type": "urn:ietf:params:oauth:grant-type:token-exchange"}
    old = b.issue(settings, tid, 3600, signed_in_at=int(time.time()) - settings.server.iceberg_rest_session_s - 5)
    assert http.get("/v1/config", headers={"Authorization": f"Bearer {old}"}).status_code == 200  # still valid...
    r = http.post("/v1/oauth/tokens", data={**exchange, "subject_token": old})
    assert r.status_code == 401 and "sign in again" in r.json()["error_description"]  # ...but not renewable
    fresh = http.post("/v1/oauth/tokens", data={"grant_type": "client_credentials", "client_secret": token})
    first = fresh.json()["access_token"]
    renewed = http.post("/v1/oauth/tokens", data={**exchange, "subject_token": first}).json()["access_token"]
    assert b.signed_in_at(renewed) == b.signed_in_at(first)
