"""Shared by the PostgreSQL endpoint's tests: a small governed lake and a server on loopback."""

from __future__ import annotations

import uuid

import psycopg
import pytest

from shoal.bi.pg import PgServer
from shoal.governance import Governance, Principals

CANARY_NOTE = "CANARY-NOTE-7f3e"  # in a column analyst may not see
CANARY_US = "canary-us@hidden.example"  # in a row analyst's filter excludes
CANARY_SSN = "CANARY-SSN-91c2"  # in a table analyst has no grant on
CANARIES = (CANARY_NOTE, CANARY_US, CANARY_SSN)
ROWS = [
    (1, "EU", 10.0, "ann@eu.example", CANARY_NOTE),
    (2, "US", 20.0, CANARY_US, CANARY_NOTE),
    (3, "EU", 30.0, "cy@eu.example", CANARY_NOTE),
]
PASSWORD = "s3cret-Passw0rd"


class Lake:
    def __init__(self, spark, settings) -> None:
        u = uuid.uuid4().hex[:6]
        self.db = f"bi_{u}"
        self.opps, self.hr = f"{self.db}.opps", f"{self.db}.hr"
        spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {self.db}")
        schema = "id int, region string, revenue double, email string, notes string"
        spark.sql(f"CREATE TABLE {self.opps} ({schema}) USING iceberg")
        spark.createDataFrame(ROWS, schema).writeTo(self.opps).append()
        spark.sql(f"CREATE TABLE {self.hr} (id int, ssn string) USING iceberg")
        spark.sql(f"INSERT INTO {self.hr} VALUES (1, '{CANARY_SSN}')")
        spark.sql(f"CREATE TABLE {self.db}.inbox (id int, email string) USING iceberg")
        self.analyst = f"analyst_{u}"
        self.other = f"other_{u}"
        p = Principals(settings)
        p.add(self.analyst, password=PASSWORD)
        p.add(self.other, password="other-password")
        _, self.token = p.create_token(self.analyst, description="bi test")
        _, self.other_token = p.create_token(self.other)
        g = Governance(settings)
        admin = p.principal("admin")
        g.grant(
            admin,
            "SELECT",
            "TABLE",
            self.opps,
            self.analyst,
            columns=["id", "region", "revenue", "email"],
            row_filter="region = 'EU'",
            masks={"email": "hash"},
            table_columns=["id", "region", "revenue", "email", "notes"],
        )
        g.grant(admin, "INSERT", "TABLE", f"{self.db}.inbox", self.analyst)
        g.grant(admin, "SELECT", "TABLE", f"{self.db}.inbox", self.analyst)


@pytest.fixture(scope="module")
def lake(spark, settings):
    return Lake(spark, settings)


@pytest.fixture(scope="module")
def server(spark, settings):
    srv = PgServer(settings, spark=spark, host="127.0.0.1", port=0).start()
    yield srv
    srv.stop()


@pytest.fixture
def connect(server, lake):
    opened: list[psycopg.Connection] = []

    # sslmode=require, as docs/bi.md tells clients: with libpq's default "prefer", a failed
    # sign-in over TLS is retried without it (SCRAM), which would count and audit it twice.
    def _connect(
        user: str | None = None, password: str = PASSWORD, autocommit: bool = True, sslmode: str = "require"
    ) -> psycopg.Connection:
        host, port = server.address
        conn = psycopg.connect(
            host=host,
            port=port,
            user=user or lake.analyst,
            password=password,
            dbname="lake",
            autocommit=autocommit,
            connect_timeout=20,
            sslmode=sslmode,
            options="-c shoal.dialect=spark",  # these tests send Spark SQL (PostgreSQL's: test_bi_catalog.py)
        )
        opened.append(conn)
        return conn

    yield _connect
    for c in opened:
        c.close()


@pytest.fixture
def pg(server, lake):
    """A psycopg connection as the analyst, in the default (PostgreSQL) dialect."""
    host, port = server.address
    conn = psycopg.connect(host=host, port=port, user=lake.analyst, password=PASSWORD, dbname="lake",
                           autocommit=True, connect_timeout=20, sslmode="require")  # fmt: skip
    yield conn
    conn.close()
