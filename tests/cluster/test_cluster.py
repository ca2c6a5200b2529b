"""Scale-out by configuration only: a Spark standalone master with two workers, started on loopback;
`shoal` commands run on it as separate processes with only SHOAL_* environment variables changed."""

from __future__ import annotations

import json

import pytest

from shoal.samples import corpus as samples
from tests.cluster.support import CHANGES, base_env, run_json, write_changes
from tests.support.servers import free_port

pytestmark = pytest.mark.slow

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

    from shoal.config import load_settings
    from shoal.doctor import _spark_master

    doctor = _spark_master(load_settings(workspace=env["SHOAL_WORKSPACE"], spark={"master": up["master_url"]}))
    assert doctor is not None and doctor.status == "ok" and "2 alive workers" in doctor.detail, doctor
    apps = httpx.get(up["webui_url"] + "/json/", timeout=10).json()["completedapps"]
    assert len([a for a in apps if a["name"] == "shoal"]) >= 4
    assert all(a["cores"] >= 1 for a in apps if a["name"] == "shoal")


def _stderr_lines(err: str) -> list[str]:
    """Shoal's own lines: without the JVM's log4j warnings and its start-up banner."""
    return [ln for ln in err.splitlines() if ln.strip() and " WARN " not in ln and "setLogLevel" not in ln
            and "default log level" not in ln]  # fmt: skip


def _engine_ready(env: dict[str, str], timeout: float) -> bool:
    import subprocess
    import sys
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = [sys.executable, "-m", "shoal.cli.console", "engine", "status"]
        if subprocess.run(status, env=env, capture_output=True, timeout=60).returncode == 0:
            return True
        time.sleep(0.5)
    return False


def test_engine_serve_pg_and_commands_share_the_cluster(cluster, tmp_path):
    """The documented team configuration end to end (docs/scale-out.md, docs/deployment.md): the
    cluster, the warehouse on S3 (SeaweedFS), the catalog in PostgreSQL, `serve --pg` as deployed
    (its warm engine on) answering psql while a command runs in a process of its own; each holds
    its [spark.cores_max] share. Before: the engine took every core and serve's session, and any
    command, waited with none for ever."""
    import psycopg
    from pyarrow import fs as pafs

    from tests.cluster.support import s3_env
    from tests.support.servers import postgres, seaweedfs

    (tmp_path / "pg").mkdir()
    (tmp_path / "s3").mkdir()
    with postgres(tmp_path / "pg") as pg, seaweedfs(tmp_path / "s3") as s3:
        _serve_pg_engine_and_a_command(s3_env(cluster[0], s3, pg), cluster[1], tmp_path)
        files = [f.path for f in s3.client().get_file_info(pafs.FileSelector(f"{s3.bucket}/warehouse", recursive=True))]
        assert any(p.startswith(f"{s3.bucket}/warehouse/share/p/data/") for p in files), files
        with psycopg.connect(
            host="127.0.0.1", port=pg.port, user=pg.user, password=pg.password, dbname=pg.database
        ) as c:
            tables = c.execute("SELECT table_namespace, table_name FROM iceberg_tables").fetchall()
        assert ("share", "p") in tables, tables


def _serve_pg_engine_and_a_command(env: dict[str, str], up: dict, tmp_path) -> None:
    import shutil
    import subprocess
    import sys
    import threading

    import psycopg

    from tests.cluster.support import active_apps, run
    from tests.support.servers import wait_port

    run(["principal", "add", "ops", "--admin"], env)
    token = run_json(["token", "create", "ops"], env)["token"]
    port, pg_port = free_port(), free_port()
    serve = subprocess.Popen(
        [sys.executable, "-m", "shoal.cli.console", "serve", "--pg", "--port", str(port), "--pg-port", str(pg_port)],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        wait_port(pg_port, 120, serve)
        # serve's engine answers once its warm-up job ran: it got executors beside serve's session.
        assert _engine_ready(env, 150), "serve's warm engine got no executors beside serve's own session"
        source = tmp_path / "changes"
        write_changes(source)
        applied = run_json(
            ["--no-engine", "cdc", "apply", str(source), "--table", "share.p", "--key", "product_id",
             "--sequence", "last_update_time"],
            {**env, "SHOAL_SPARK__EXECUTOR_WAIT_S": "90"}, timeout=240,
        )  # fmt: skip
        assert applied["inserted"] == 2
        via_engine = json.loads(run(["sql", "SELECT count(*) AS n FROM share.p", "-f", "json"], env).stdout)
        assert via_engine == [{"n": 2}]

        def ask() -> list[tuple]:
            with psycopg.connect(
                host="127.0.0.1", port=pg_port, user="ops", password=token, dbname="lake",
                connect_timeout=20, sslmode="require", autocommit=True,
            ) as conn:  # fmt: skip
                return conn.execute("SELECT product_id, name FROM share.p ORDER BY product_id").fetchall()

        answers: list[list[tuple]] = []  # a daemon thread: a query that never returns fails the test, not hangs it
        asking = threading.Thread(target=lambda: answers.append(ask()), daemon=True)
        asking.start()
        asking.join(180)
        assert answers == [[(1, "apple"), (2, "pear")]]
        if shutil.which("psql"):  # as the docs tell a person to connect
            dsn = f"host=127.0.0.1 port={pg_port} user=ops dbname=lake sslmode=require"
            psql = subprocess.run(
                ["psql", "-X", "-A", "-t", dsn, "-c", "SELECT count(*) FROM share.p"],
                env={**env, "PGPASSWORD": token, "PGCONNECT_TIMEOUT": "20"}, capture_output=True, text=True,
                timeout=180,
            )  # fmt: skip
            assert psql.returncode == 0 and psql.stdout.split() == ["2"], psql.stderr
        shoal_apps = [a for a in active_apps(up["webui_url"]) if a["name"] == "shoal"]
        assert len(shoal_apps) >= 2 and all(a["cores"] <= 1 for a in shoal_apps), shoal_apps
    finally:
        serve.terminate()
        serve.wait(90)
        subprocess.run([sys.executable, "-m", "shoal.cli.console", "engine", "stop"], env=env, capture_output=True)


def test_a_command_without_executors_fails_naming_the_cluster_state(cluster):
    """Executors larger than any worker never come: the wait is bounded and says why."""
    from tests.cluster.support import SLOW_SQL, shoal_proc

    env, _up = cluster
    slow = {**env, "SHOAL_SPARK__EXECUTOR_WAIT_S": "5", "SHOAL_SPARK__CONF": '{"spark.executor.memory": "4g"}'}
    done = shoal_proc(["--no-engine", "sql", SLOW_SQL], slow)
    _out, err = done.communicate(timeout=180)
    assert done.returncode == 1 and "Traceback" not in err, err
    assert "no executor from spark://" in err and "alive workers" in err and "executor_wait_s" in err


def test_ctrl_c_ends_a_cluster_command_with_one_line(cluster):
    import signal

    from tests.cluster.support import SLOW_SQL, active_apps, shoal_proc, wait_running_app, wait_tasks_running

    env, up = cluster
    before = {a["id"] for a in active_apps(up["webui_url"])}
    proc = shoal_proc(["--no-engine", "sql", SLOW_SQL], env)
    wait_tasks_running(env["SHOAL_WORKSPACE"], wait_running_app(up["webui_url"], before))
    proc.send_signal(signal.SIGINT)
    _out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130 and _stderr_lines(err) == ["error: interrupted"], err


def test_a_worker_lost_mid_job_fails_the_job_and_cluster_up_replaces_it(cluster):
    """Every worker killed while a job runs: the job fails within [spark] stall_timeout_s naming the
    dead workers (before: 'applying 0/3 tasks' for ever); `cluster status` exits 1 until
    `cluster up` starts the missing workers."""
    import os
    import signal
    import subprocess
    import sys

    from tests.cluster.support import SLOW_SQL, active_apps, shoal_proc, wait_running_app, wait_tasks_running

    env, up = cluster
    before = {a["id"] for a in active_apps(up["webui_url"])}
    proc = shoal_proc(["--no-engine", "sql", SLOW_SQL], {**env, "SHOAL_SPARK__STALL_TIMEOUT_S": "8"})
    wait_tasks_running(env["SHOAL_WORKSPACE"], wait_running_app(up["webui_url"], before))
    plain = {k: v for k, v in env.items() if k != "SHOAL_SPARK__MASTER"}
    for pid in run_json(["cluster", "status"], plain)["pids"][1:]:  # the master stays
        os.kill(pid, signal.SIGKILL)
    _out, err = proc.communicate(timeout=120)
    assert proc.returncode == 1 and "Traceback" not in err, err
    assert "made no progress for 8 s" in err and "DEAD" in err and "shoal cluster up" in err, err
    status = subprocess.run(
        [sys.executable, "-m", "shoal.cli.console", "cluster", "status"], env=plain, capture_output=True
    )
    assert status.returncode == 1
    again = run_json(["cluster", "up"], plain, timeout=200)
    assert again["alive_workers"] == 2 and len(again["pids"]) == 3
    assert (
        subprocess.run(
            [sys.executable, "-m", "shoal.cli.console", "cluster", "status"], env=plain, capture_output=True
        ).returncode
        == 0
    )
