"""The REST catalog over a PostgreSQL catalog database (what server deployments use): PyIceberg
lists, reads and appends, and a commit that lost a race is a 409 (the conditional pointer swap
runs on PostgreSQL). The lake is made with PyIceberg; no Spark."""

from __future__ import annotations

import httpx
import pyarrow as pa
import pytest
from pydantic import SecretStr

from shoal.config import load_settings
from shoal.governance import Governance, Principals
from shoal.iceberg_rest import IcebergRestServer, open_catalog

ROWS = pa.table({"id": pa.array([1, 2], pa.int64())})


@pytest.fixture(scope="module")
def pg_rest(tmp_path_factory):
    from tests.support.servers import postgres

    with postgres(tmp_path_factory.mktemp("pg")) as pg:
        settings = load_settings(
            workspace=tmp_path_factory.mktemp("pg-workspace"),
            catalog={"type": "postgresql", "uri": pg.jdbc_uri, "user": pg.user, "password": SecretStr(pg.password)},
        )
        cat = open_catalog(settings)
        cat.create_namespace("shop")
        cat.create_table("shop.orders", ROWS.schema).append(ROWS)
        cat.create_table("shop.secret", ROWS.schema)
        p = Principals(settings)
        p.add("analyst")
        token = p.create_token("analyst")[1]
        g, admin = Governance(settings), p.principal("admin")
        for privilege in ("SELECT", "INSERT", "ALTER"):
            g.grant(admin, privilege, "TABLE", "shop.orders", "analyst")
        srv = IcebergRestServer(settings, host="127.0.0.1", port=0).start()
        yield srv, token, cat
        srv.stop()


def test_pyiceberg_and_a_lost_race_on_postgresql(pg_rest):
    from pyiceberg.catalog import load_catalog

    srv, token, server_side = pg_rest
    client = load_catalog(
        "pg", type="rest", uri=srv.url, credential=token, **{"oauth2-server-uri": f"{srv.url}/v1/oauth/tokens"}
    )
    assert client.list_tables("shop") == [("shop", "orders")]
    table = client.load_table("shop.orders")
    old_snapshot = table.metadata.current_snapshot_id
    table.append(pa.table({"id": pa.array([3], pa.int64())}))
    assert sorted(r["id"] for r in server_side.load_table("shop.orders").scan().to_arrow().to_pylist()) == [1, 2, 3]

    bearer = httpx.post(
        f"{srv.url}/v1/oauth/tokens", data={"grant_type": "client_credentials", "client_secret": token}
    ).json()["access_token"]
    stale = {
        "requirements": [{"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": old_snapshot}],
        "updates": [{"action": "set-properties", "updates": {"comment": "late"}}],
    }
    r = httpx.post(
        f"{srv.url}/v1/namespaces/shop/tables/orders", json=stale, headers={"Authorization": f"Bearer {bearer}"}
    )
    assert r.status_code == 409 and r.json()["error"]["type"] == "CommitFailedException"
