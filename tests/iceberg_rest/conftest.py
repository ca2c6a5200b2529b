"""Shared by the Iceberg REST catalog's tests: a small governed lake and the catalog on loopback,
one of each for the whole test session (tests add rows and tables, and compare with what
Shoal's Spark reads at that moment)."""

from __future__ import annotations

import uuid

import pytest

from shoal.governance import Governance, Principals
from shoal.iceberg_rest import IcebergRestServer

CANARY = "CANARY-SSN-4b1d"  # in a table nobody but admin may read
ROWS = [(1, "EU", 10.0), (2, "US", 20.0), (3, "EU", 30.0)]


class Lake:
    """db.sales (analyst: whole-table SELECT + INSERT + ALTER; reader: SELECT only, via a group),
    db.hr (admin only), db.opps (column, row and mask grants for three other users), a second
    database nobody else may read, and dbadmin with ALL on the database."""

    def __init__(self, spark, settings) -> None:
        u = uuid.uuid4().hex[:6]
        self.db, self.hidden_db = f"ir_{u}", f"irh_{u}"
        self.sales, self.hr, self.opps = f"{self.db}.sales", f"{self.db}.hr", f"{self.db}.opps"
        spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {self.db}")
        spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {self.hidden_db}")
        spark.sql(f"CREATE TABLE {self.sales} (id int, region string, amount double) USING iceberg")
        spark.createDataFrame(ROWS, "id int, region string, amount double").writeTo(self.sales).append()
        spark.sql(f"INSERT INTO {self.sales} VALUES (4, 'US', 40.0)")  # a second snapshot for time travel
        spark.sql(f"CREATE TABLE {self.hr} (id int, ssn string) USING iceberg")
        spark.sql(f"INSERT INTO {self.hr} VALUES (1, '{CANARY}')")
        spark.sql(f"CREATE TABLE {self.opps} (id int, region string, email string) USING iceberg")
        spark.sql(f"INSERT INTO {self.opps} VALUES (1, 'EU', 'a@eu.example')")
        spark.sql(f"CREATE TABLE {self.hidden_db}.secret (id int) USING iceberg")
        p = Principals(settings)
        self.names = {k: f"{k}_{u}" for k in ("analyst", "reader", "cols", "rows", "mask", "dbadmin", "nobody")}
        self.group = f"readers_{u}"
        for name in self.names.values():
            p.add(name)
        p.add(self.group, kind="group")
        p.add_member(self.group, self.names["reader"])
        self.tokens = {k: p.create_token(n)[1] for k, n in self.names.items()}
        self.admin_token = p.create_token("admin")[1]
        g = Governance(settings)
        admin = p.principal("admin")
        cols = ["id", "region", "email"]
        for priv in ("SELECT", "INSERT", "ALTER"):
            g.grant(admin, priv, "TABLE", self.sales, self.names["analyst"])
        g.grant(admin, "SELECT", "TABLE", self.sales, self.group)
        g.grant(admin, "SELECT", "TABLE", self.opps, self.names["cols"], columns=["id", "region"], table_columns=cols)
        g.grant(admin, "SELECT", "TABLE", self.opps, self.names["rows"], row_filter="region = 'EU'", table_columns=cols)
        g.grant(admin, "SELECT", "TABLE", self.opps, self.names["mask"], masks={"email": "hash"}, table_columns=cols)
        g.grant(admin, "ALL", "DATABASE", self.db, self.names["dbadmin"])


@pytest.fixture(scope="session")
def lake(spark, settings):
    return Lake(spark, settings)


@pytest.fixture(scope="session")
def rest(settings, lake):
    srv = IcebergRestServer(settings, host="127.0.0.1", port=0).start()
    yield srv
    srv.stop()


@pytest.fixture(scope="session")
def connect(rest):
    """A PyIceberg REST client signed in with a Shoal token (OAuth2 client credentials)."""
    from pyiceberg.catalog import load_catalog

    def _connect(token: str, **extra: str):
        return load_catalog(
            "shoal",
            type="rest",
            uri=rest.url,
            credential=token,
            **{"oauth2-server-uri": f"{rest.url}/v1/oauth/tokens"},
            **extra,
        )

    return _connect


@pytest.fixture(scope="session")
def http(rest):
    """Raw HTTP against the catalog, for what no client library would send."""
    import httpx

    with httpx.Client(base_url=rest.url, timeout=60) as client:
        yield client


@pytest.fixture(scope="session")
def bearer(http):
    def _bearer(token: str) -> dict[str, str]:
        r = http.post("/v1/oauth/tokens", data={"grant_type": "client_credentials", "client_secret": token})
        assert r.status_code == 200, r.text
        return {"Authorization": f"Bearer {r.json()['access_token']}"}

    return _bearer
