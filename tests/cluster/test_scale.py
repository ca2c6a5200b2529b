"""Scale-out by configuration only: the same `shoal` commands against PostgreSQL and S3.

Every server is real and started here on loopback: PostgreSQL 15 and SeaweedFS (S3). Commands
run as separate processes with only SHOAL_* environment variables changed. The Spark standalone
cluster (test_cluster.py) and the Thrift endpoint (test_thrift.py) have modules of their own, so
a parallel run can give them to different processes.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys

import psycopg
import pytest
from pyarrow import fs as pafs

from shoal.samples import corpus as samples
from tests.cluster.support import CHANGES, base_env, run, run_json, s3_env, write_changes
from tests.support.servers import free_port, postgres, seaweedfs, wait_port

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    root = tmp_path_factory.mktemp("servers")
    (root / "pg").mkdir()
    (root / "s3").mkdir()
    with postgres(root / "pg") as pg, seaweedfs(root / "s3") as s3:
        yield pg, s3


def test_postgresql_catalog_and_s3_storage_run_the_same_commands(servers, tmp_path):
    pg, s3 = servers
    env = s3_env(base_env(tmp_path / "ws"), s3, pg)
    source = tmp_path / "changes"
    write_changes(source)
    first = run_json(
        ["cdc", "apply", str(source), "--table", "inv.p", "--key", "product_id", "--sequence", "last_update_time"], env
    )
    assert first["inserted"] == 2 and first["committed"]
    (source / "20240102-000001.csv").write_text(CHANGES)
    second = run_json(
        ["cdc", "apply", str(source), "--table", "inv.p", "--key", "product_id", "--sequence", "last_update_time"], env
    )
    assert (second["updated"], second["deleted"]) == (1, 1)
    # Now and then in one query (one process, one JVM start): the rows now, the count at the first commit.
    then = f"(SELECT count(*) FROM inv.p VERSION AS OF {first['snapshot_id']})"
    query = f"SELECT product_id, price, {then} AS n_then FROM inv.p ORDER BY 1"
    now = json.loads(run(["sql", query, "-f", "json"], env).stdout)
    assert now == [{"product_id": 2, "price": 2.5, "n_then": 2}]
    # Table files are on S3, the catalog rows in PostgreSQL, nothing on local disk.
    files = [f.path for f in s3.client().get_file_info(pafs.FileSelector(f"{s3.bucket}/warehouse", recursive=True))]
    assert any(p.startswith(f"{s3.bucket}/warehouse/inv/p/data/") and p.endswith(".parquet") for p in files)
    assert any("/_shoal/cdc-ledgers/inv/p/" in p for p in files)
    assert not (tmp_path / "ws" / "catalog.db").exists() and not (tmp_path / "ws" / "warehouse").exists()
    with psycopg.connect(host="127.0.0.1", port=pg.port, user=pg.user, password=pg.password, dbname=pg.database) as c:
        tables = {r[0] for r in c.execute("SELECT table_name FROM iceberg_tables").fetchall()}
        assert "p" in tables
    # Athena-style external tables over files in the bucket (Spark reads them through s3a).
    import pyarrow as pa
    import pyarrow.parquet as pq

    with s3.client().open_output_stream(f"{s3.bucket}/ext/orders/part-0.parquet") as f:
        pq.write_table(pa.table({"id": [1, 2, 3], "amount": [10.0, 20.5, 30.0]}), f)
    ddl = (
        "CREATE EXTERNAL TABLE ext.orders (id bigint, amount double) STORED AS PARQUET "
        f"LOCATION 's3://{s3.bucket}/ext/orders/'"
    )
    # One process (one JVM start): the last statement's result is printed.
    query = f"CREATE DATABASE IF NOT EXISTS ext; {ddl}; SELECT sum(amount) AS total FROM ext.orders"
    total = json.loads(run(["sql", "--dialect", "athena", query, "-f", "json"], env).stdout)
    assert total == [{"total": 60.5}]


def test_raw_objects_from_s3_are_ingested_and_extracted_onto_s3(servers, tmp_path):
    pg, s3 = servers
    env = s3_env(base_env(tmp_path / "ws"), s3, pg)
    client = s3.client()
    with client.open_output_stream(f"{s3.bucket}/incoming/reviews/grinder.txt") as f:
        f.write(samples.POSITIVE_REVIEW.encode())
    with client.open_output_stream(f"{s3.bucket}/incoming/invoices/invoice-1001.pdf") as f:
        f.write(samples.invoice_pdf())
    ingested = run_json(["ingest", f"s3://{s3.bucket}/incoming", "--source-name", "inbox"], env)
    assert ingested["new"] == 2 and ingested["errors"] == 0
    assert all(f["raw_path"].startswith(f"s3://{s3.bucket}/warehouse/raw/inbox/") for f in ingested["files"])
    extracted = run_json(["extract"], env)
    assert extracted["objects"] == 2 and not extracted["problems"]
    objects = run_json(["catalog", "objects"], env)
    assert {o["source_path"]: o["status"] for o in objects} == {
        "reviews/grinder.txt": "ok",
        "invoices/invoice-1001.pdf": "ok",
    }
    assert all(p.startswith(f"s3://{s3.bucket}/warehouse/extracted/") for o in objects for p in o["extracted_paths"])
    # Governance state (principals, grants, audit) lives in the same PostgreSQL database.
    run(["principal", "add", "ana"], env)
    run(["grant", "SELECT", "ON", "TABLE", "shoal.object_index", "TO", "ana", "--columns", "source_path,status"], env)
    seen = json.loads(
        run(["sql", "SELECT source_path FROM shoal.object_index ORDER BY 1", "--as", "ana", "-f", "json"], env).stdout
    )
    assert [r["source_path"] for r in seen] == ["invoices/invoice-1001.pdf", "reviews/grinder.txt"]
    with psycopg.connect(host="127.0.0.1", port=pg.port, user=pg.user, password=pg.password, dbname=pg.database) as c:
        actions = [r[0] for r in c.execute("SELECT action FROM shoal_audit ORDER BY id").fetchall()]
        assert actions == ["grant", "select"]  # the grant, then the governed query
        with pytest.raises(psycopg.errors.RaiseException):
            c.execute("DELETE FROM shoal_audit")  # append-only, enforced by the database
    # Raw objects on S3 are served through an access point by the HTTP API, streamed.
    run(["access-point", "create", "inbox-reviews", "--principal", "ana", "--prefix", "inbox"], env)
    token = run_json(["token", "create", "ana"], env)["token"]
    port = free_port()
    api = subprocess.Popen(
        [sys.executable, "-m", "shoal.cli.console", "--no-engine", "serve", "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_port(port, 120, api)
        first = ingested["files"][0]
        raw_rel = first["raw_path"].split("/warehouse/raw/", 1)[1]
        import httpx

        got = httpx.get(
            f"http://127.0.0.1:{port}/raw/inbox-reviews/{raw_rel}",
            headers={"Authorization": f"Bearer {token}"},
            timeout=60,
        )
        assert got.status_code == 200, got.text
        assert hashlib.sha256(got.content).hexdigest()[:32] == first["object_id"]  # the bytes ingested
        assert int(got.headers["content-length"]) == len(got.content) > 0
        denied = httpx.get(f"http://127.0.0.1:{port}/raw/inbox-reviews/{raw_rel}", timeout=30)
        assert denied.status_code in (401, 403)
    finally:
        api.terminate()
        api.wait(30)


def test_table_locks_span_hosts_through_postgresql(servers, tmp_path):
    from shoal.config import load_settings
    from shoal.exceptions import ShoalError
    from shoal.lake.locks import table_lock

    pg, _s3 = servers
    catalog = {"type": "postgresql", "uri": pg.jdbc_uri, "user": pg.user, "password": pg.password}
    # Two workspaces stand for two hosts: no shared lock files, only the shared catalog.
    here = load_settings(workspace=tmp_path / "host-a", catalog=catalog)
    there = load_settings(workspace=tmp_path / "host-b", catalog=catalog)
    with table_lock(here, "inv.p"):
        with (
            pytest.raises(ShoalError, match="locked by another Shoal process"),
            table_lock(there, "inv.p", timeout_s=1),
        ):
            pass
        with table_lock(there, "inv.q", timeout_s=1):  # other tables stay free
            pass
    with table_lock(there, "inv.p", timeout_s=1):  # released with the block
        pass
    assert not (tmp_path / "host-a" / "locks").exists()
