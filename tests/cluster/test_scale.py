"""Scale-out by configuration only: the same `shoal` commands against PostgreSQL, S3 and a cluster.

Every server is real and started here on loopback: PostgreSQL 15, SeaweedFS (S3), a Spark
standalone master with two workers, Spark's Thrift server queried with beeline. Commands run
as separate processes with only SHOAL_* environment variables changed.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest
from pyarrow import fs as pafs

from shoal.samples import corpus as samples
from tests.support.servers import free_port, postgres, seaweedfs, wait_port

pytestmark = pytest.mark.slow

LOAD = (
    "product_id,name,price,op,last_update_time\n1,apple,1.5,I,2024-01-01T00:00:00\n2,pear,2.0,I,2024-01-01T00:00:00\n"
)
CHANGES = "product_id,name,price,op,last_update_time\n2,pear,2.5,U,2024-01-02T00:00:00\n1,,,D,2024-01-02T00:00:00\n"
WORKFLOW = {
    "StartAt": "Both",
    "States": {
        "Both": {
            "Type": "Parallel",
            "Branches": [
                {
                    "StartAt": "Count",
                    "States": {
                        "Count": {
                            "Type": "Task",
                            "Resource": "shoal:sql",
                            "Parameters": {"QueryString": "SELECT count(*) AS n FROM inv.p"},
                            "End": True,
                        }
                    },
                },
                {
                    "StartAt": "Sum",
                    "States": {
                        "Sum": {
                            "Type": "Task",
                            "Resource": "shoal:sql",
                            "Parameters": {"QueryString": "SELECT sum(price) AS s FROM inv.p"},
                            "End": True,
                        }
                    },
                },
            ],
            "End": True,
        }
    },
}


def run(args: list[str], env: dict[str, str], timeout: float = 400) -> subprocess.CompletedProcess:
    done = subprocess.run(
        [sys.executable, "-m", "shoal.cli.console", *args], env=env, capture_output=True, text=True, timeout=timeout
    )
    assert done.returncode == 0, f"shoal {' '.join(args)} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


def run_json(args: list[str], env: dict[str, str], timeout: float = 400):
    return json.loads(run([*args, "--json"] if "--json" not in args else args, env, timeout).stdout)


def base_env(workspace: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SHOAL_")}
    env.update({"SHOAL_WORKSPACE": str(workspace), "SHOAL_SPARK__SHUFFLE_PARTITIONS": "2"})
    return env


def write_changes(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "LOAD00000001.csv").write_text(LOAD)


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    root = tmp_path_factory.mktemp("servers")
    (root / "pg").mkdir()
    (root / "s3").mkdir()
    with postgres(root / "pg") as pg, seaweedfs(root / "s3") as s3:
        yield pg, s3


def s3_env(env: dict[str, str], s3, pg) -> dict[str, str]:
    return {
        **env,
        "SHOAL_WAREHOUSE": f"s3://{s3.bucket}/warehouse",
        "SHOAL_STORAGE__ENDPOINT": s3.endpoint,
        "SHOAL_STORAGE__ACCESS_KEY": s3.access_key,
        "SHOAL_STORAGE__SECRET_KEY": s3.secret_key,
        "SHOAL_CATALOG__TYPE": "postgresql",
        "SHOAL_CATALOG__URI": pg.jdbc_uri,
        "SHOAL_CATALOG__USER": pg.user,
        "SHOAL_CATALOG__PASSWORD": pg.password,
    }


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
    now = json.loads(run(["sql", "SELECT product_id, price FROM inv.p ORDER BY 1", "-f", "json"], env).stdout)
    assert now == [{"product_id": 2, "price": 2.5}]
    then = json.loads(
        run(["sql", f"SELECT count(*) AS n FROM inv.p VERSION AS OF {first['snapshot_id']}", "-f", "json"], env).stdout
    )
    assert then == [{"n": 2}]
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
    run(["sql", "--dialect", "athena", f"CREATE DATABASE IF NOT EXISTS ext; {ddl}"], env)
    total = json.loads(run(["sql", "SELECT sum(amount) AS total FROM ext.orders", "-f", "json"], env).stdout)
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


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    workspace = tmp_path_factory.mktemp("cluster-ws")
    env = base_env(workspace)
    env.update({"SHOAL_CLUSTER__PORT": str(free_port()), "SHOAL_CLUSTER__WEBUI_PORT": str(free_port())})
    up = run_json(["cluster", "up", "--workers", "2"], env, timeout=200)
    try:
        assert up["alive_workers"] == 2 and up["running"]
        yield {**env, "SHOAL_SPARK__MASTER": up["master_url"]}, up
    finally:
        down = run_json(["cluster", "down"], env)
        assert down["stopped_processes"] == 3


def test_cluster_runs_cdc_extraction_and_a_workflow(cluster, tmp_path):
    env, up = cluster
    source = tmp_path / "changes"
    write_changes(source)
    (source / "20240102-000001.csv").write_text(CHANGES)
    applied = run_json(
        ["cdc", "apply", str(source), "--table", "inv.p", "--key", "product_id", "--sequence", "last_update_time"], env
    )
    assert applied["inserted"] + applied["updated"] >= 1 and applied["committed"]
    docs = tmp_path / "docs"
    samples.write_corpus(docs)
    run_json(["ingest", str(docs), "--source-name", "inbox"], env)
    extracted = run_json(["extract", "--only", "text/*,application/pdf"], env)
    assert extracted["objects"] >= 4 and not [p for p in extracted["problems"] if p["status"] == "timeout"]
    assert extracted["statuses"]["entities"]["ok"] >= 3
    definition = tmp_path / "wf.json"
    definition.write_text(json.dumps(WORKFLOW))
    execution = run_json(["workflow", "run", str(definition)], env)
    assert execution["status"] == "SUCCEEDED", execution
    counts = [b["ResultSet"]["Rows"][0] for b in execution["output"]]
    assert counts == [{"n": 1}, {"s": 2.5}]
    # The work ran on the cluster's executors, not in a local driver.
    status = run_json(["cluster", "status"], {k: v for k, v in env.items() if k != "SHOAL_SPARK__MASTER"})
    assert status["alive_workers"] == 2
    import httpx

    apps = httpx.get(up["webui_url"] + "/json/", timeout=10).json()["completedapps"]
    assert len([a for a in apps if a["name"] == "shoal"]) >= 4
    assert all(a["cores"] >= 1 for a in apps if a["name"] == "shoal")


def test_thrift_endpoint_answers_beeline(tmp_path):
    from shoal.cluster import spark_home

    env = base_env(tmp_path / "ws")
    source = tmp_path / "changes"
    write_changes(source)
    run_json(
        ["cdc", "apply", str(source), "--table", "inv.p", "--key", "product_id", "--sequence", "last_update_time"], env
    )
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "shoal.cli.console", "serve", "--thrift-only", "--thrift-port", str(port)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        wait_port(port, 240, server)
        beeline = str(spark_home() / "bin" / "beeline")
        done = subprocess.run(
            [beeline, "-u", f"jdbc:hive2://127.0.0.1:{port}/default", "-n", "bi", "--silent=true"]
            + ["--outputformat=csv2", "-e", "SELECT product_id, name FROM inv.p ORDER BY product_id"],
            env={**env, "SPARK_HOME": str(spark_home())},
            capture_output=True,
            text=True,
            timeout=120,
        )
        prompt = re.compile(r"^\d+: jdbc:hive2://\S+> ")
        lines = [prompt.sub("", line) for line in done.stdout.splitlines() if line.strip()]
        assert lines[-3:] == ["product_id,name", "1,apple", "2,pear"], done.stdout + done.stderr
        props = (tmp_path / "ws" / "thrift" / "spark.properties").stat().st_mode & 0o777
        assert props == 0o600
    finally:
        import signal

        os.killpg(server.pid, signal.SIGTERM)
        server.wait(60)
    # TERM to `shoal serve` stops the Thrift server it started (its own process group).
    gone = subprocess.run(["pgrep", "-f", f"hive.server2.thrift.port={port}"], capture_output=True)
    assert gone.returncode == 1, gone.stdout


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
