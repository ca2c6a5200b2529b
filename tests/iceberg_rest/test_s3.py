"""The REST catalog over an S3 warehouse (SeaweedFS on loopback): PyIceberg, DuckDB and Spark
list, read and (PyIceberg, Spark) append with their own S3 keys, and a restricted grant is
refused. The catalog vends no credentials: a client asking for them is told so in the table's
config. The lake is made with PyIceberg; the Spark client is a JVM of its own (S3FileIO needs
the AWS SDK jars, which the test session's Spark does not load), about a minute of the run."""

from __future__ import annotations

import pyarrow as pa
import pytest
from pydantic import SecretStr

from shoal.config import load_settings
from shoal.governance import Governance, Principals
from shoal.iceberg_rest import IcebergRestServer, open_catalog
from tests.iceberg_rest.test_duckdb_client import run_duckdb

ROWS = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "region": ["EU", "US", "EU"]})


@pytest.fixture(scope="module")
def s3_lake(tmp_path_factory):
    from tests.support.servers import seaweedfs

    with seaweedfs(tmp_path_factory.mktemp("s3")) as s3:
        settings = load_settings(
            workspace=tmp_path_factory.mktemp("s3-workspace"),
            warehouse=f"s3://{s3.bucket}/warehouse",
            storage={
                "endpoint": s3.endpoint,
                "access_key": SecretStr(s3.access_key),
                "secret_key": SecretStr(s3.secret_key),
            },
        )
        cat = open_catalog(settings)
        cat.create_namespace("shop")
        cat.create_table("shop.orders", ROWS.schema).append(ROWS)
        cat.create_table("shop.people", ROWS.schema).append(ROWS)
        p = Principals(settings)
        p.add("analyst")
        p.add("cols")
        tokens = {"analyst": p.create_token("analyst")[1], "cols": p.create_token("cols")[1]}
        g, admin = Governance(settings), p.principal("admin")
        g.grant(admin, "SELECT", "TABLE", "shop.orders", "analyst")
        g.grant(admin, "INSERT", "TABLE", "shop.orders", "analyst")
        g.grant(admin, "SELECT", "TABLE", "shop.people", "cols", columns=["id"], table_columns=["id", "region"])
        srv = IcebergRestServer(settings, host="127.0.0.1", port=0).start()
        yield s3, srv, tokens, cat
        srv.stop()


def test_pyiceberg_on_s3_with_its_own_keys(s3_lake):
    from pyiceberg.catalog import load_catalog
    from pyiceberg.exceptions import ForbiddenError

    s3, srv, tokens, server_side = s3_lake

    def client(user: str):
        props = {"oauth2-server-uri": f"{srv.url}/v1/oauth/tokens", "s3.access-key-id": s3.access_key}
        props["s3.secret-access-key"] = s3.secret_key
        return load_catalog(user, type="rest", uri=srv.url, credential=tokens[user], **props)

    analyst = client("analyst")
    assert analyst.list_tables("shop") == [("shop", "orders")]
    table = analyst.load_table("shop.orders")
    assert table.location().startswith(f"s3://{s3.bucket}/warehouse/")
    assert table.io.properties.get("s3.endpoint") == s3.endpoint  # the store's address comes from the catalog
    assert sorted(table.scan().to_arrow().to_pylist(), key=lambda r: r["id"]) == ROWS.to_pylist()
    table.append(pa.table({"id": pa.array([4], pa.int64()), "region": ["US"]}))
    assert len(server_side.load_table("shop.orders").scan().to_arrow()) == 4
    with pytest.raises(ForbiddenError, match="PostgreSQL endpoint"):
        client("cols").load_table("shop.people")


def test_vended_credentials_are_refused_plainly(s3_lake):
    import httpx

    _, srv, tokens, _ = s3_lake
    r = httpx.post(
        f"{srv.url}/v1/oauth/tokens", data={"grant_type": "client_credentials", "client_secret": tokens["analyst"]}
    )
    headers = {
        "Authorization": f"Bearer {r.json()['access_token']}",
        "X-Iceberg-Access-Delegation": "vended-credentials",
    }
    config = httpx.get(f"{srv.url}/v1/namespaces/shop/tables/orders", headers=headers).json()["config"]
    assert "unsupported" in config["shoal.vended-credentials"]
    assert not any("secret" in k or "access-key" in k or "token" in k for k in config)  # the server's keys stay


def test_duckdb_on_s3(s3_lake, tmp_path):
    s3, srv, tokens, _ = s3_lake
    args = {
        "url": srv.url,
        "users": {"analyst": tokens["analyst"], "cols": tokens["cols"]},
        "read": ["shop.orders", "shop.people"],
        "s3": {"key": s3.access_key, "secret": s3.secret_key, "endpoint": s3.endpoint.removeprefix("http://")},
    }
    out = run_duckdb(tmp_path, args)
    assert out["analyst"]["tables"] == ["shop.orders"]
    assert [r[0] for r in out["analyst"]["shop.orders"]][:3] == [1, 2, 3]
    assert "PostgreSQL endpoint" in out["cols"]["shop.people"]["error"]


SPARK_CLIENT = r"""
import json, sys
from pyspark.sql import SparkSession

args = json.loads(sys.argv[1])
builder = (
    SparkSession.builder.master("local[1]")
    .config("spark.jars", ",".join(args["jars"]))
    .config("spark.ui.enabled", "false")
    .config("spark.driver.bindAddress", "127.0.0.1")
    .config("spark.driver.host", "127.0.0.1")
)
for user, token in args["users"].items():
    p = f"spark.sql.catalog.{user}"
    # docs/engines.md, Spark on an S3 warehouse: S3FileIO with the client's own keys; the
    # endpoint, region and path style come from the catalog's table config.
    for key, value in {
        "": "org.apache.iceberg.spark.SparkCatalog",
        ".type": "rest",
        ".uri": args["url"],
        ".credential": token,
        ".oauth2-server-uri": args["url"] + "/v1/oauth/tokens",
        ".io-impl": "org.apache.iceberg.aws.s3.S3FileIO",
        ".s3.access-key-id": args["key"],
        ".s3.secret-access-key": args["secret"],
    }.items():
        builder = builder.config(p + key, value)
spark = builder.getOrCreate()
out = {"tables": sorted(r["tableName"] for r in spark.sql("SHOW TABLES IN analyst.shop").collect())}
spark.sql("INSERT INTO analyst.shop.orders VALUES (10, 'EU')")
out["ids"] = sorted(r["id"] for r in spark.table("analyst.shop.orders").collect())
try:
    spark.table("cols.shop.people").collect()
    out["cols"] = "read"
except Exception as exc:
    out["cols"] = str(exc)
print("RESULT " + json.dumps(out))
"""


@pytest.mark.slow  # a JVM of its own: 60-90 s on the 2-core machine
def test_spark_on_s3(s3_lake, tmp_path):
    import json
    import subprocess
    import sys

    from shoal.spark import iceberg_runtime_jar, s3_jars

    s3, srv, tokens, server_side = s3_lake
    script = tmp_path / "spark_client.py"
    script.write_text(SPARK_CLIENT)
    args = {
        "url": srv.url,
        "users": {"analyst": tokens["analyst"], "cols": tokens["cols"]},
        "key": s3.access_key,
        "secret": s3.secret_key,
        "jars": [iceberg_runtime_jar(), *s3_jars()],
    }
    proc = subprocess.run(
        [sys.executable, str(script), json.dumps(args)], capture_output=True, text=True, timeout=300, cwd=tmp_path
    )
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, proc.stderr[-3000:]
    out = json.loads(lines[0].removeprefix("RESULT "))
    assert out["tables"] == ["orders"]
    assert 10 in out["ids"] and {1, 2, 3} <= set(out["ids"])
    assert 10 in [r["id"] for r in server_side.load_table("shop.orders").scan().to_arrow().to_pylist()]
    assert "PostgreSQL endpoint" in out["cols"]
