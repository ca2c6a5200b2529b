"""Spark's Thrift endpoint, started by `shoal serve --thrift-only`, queried with beeline."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from tests.cluster.support import base_env, run_json, write_changes
from tests.support.servers import free_port, wait_port

pytestmark = pytest.mark.slow


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
