"""The JDBC/ODBC endpoint for BI tools: Spark's Thrift server (HiveServer2 protocol) on the lake.

It is a separate Spark application started with spark-submit, configured exactly like
Shoal's own sessions (same catalog, warehouse, storage, master), so BI tools see the
same tables (`SELECT * FROM inventory.products` over jdbc:hive2://HOST:PORT). Settings
travel in a properties file readable only by the owner: secrets never appear on a command
line. It does not apply Shoal's grants: bind it to loopback (the default) or a network only
trusted service accounts reach.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from shoal.config import Settings
from shoal.exceptions import ShoalError

THRIFT_CLASS = "org.apache.spark.sql.hive.thriftserver.HiveThriftServer2"


def _escape(value: str) -> str:
    # java.util.Properties: backslashes and line breaks must be escaped.
    return value.replace("\\", "\\\\").replace("\n", "\\n")


def properties_file(settings: Settings) -> Path:
    from shoal.spark import spark_conf

    conf = spark_conf(settings)
    conf["spark.app.name"] = "shoal-thrift"
    conf["spark.sql.catalogImplementation"] = "hive"  # the Thrift server needs Hive's session layer
    # Hive sessions resolve catalog classes through the system class loader, which does not
    # see spark.jars: put the same jars on the driver's class path too.
    conf["spark.driver.extraClassPath"] = ":".join(j for j in conf["spark.jars"].split(",") if j)
    path = settings.workspace_dir / "thrift" / "spark.properties"
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        for k, v in sorted(conf.items()):
            f.write(f"{k}={_escape(v)}\n")
    return path


def command(settings: Settings, host: str, port: int) -> list[str]:
    from shoal.cluster import spark_home

    return [
        str(spark_home() / "bin" / "spark-submit"),
        "--class",
        THRIFT_CLASS,
        "--properties-file",
        str(properties_file(settings)),
        "--driver-memory",
        settings.spark.driver_memory,
        "--hiveconf",
        f"hive.server2.thrift.port={port}",
        "--hiveconf",
        f"hive.server2.thrift.bind.host={host}",
        "spark-internal",
    ]


def start(settings: Settings, *, host: str | None = None, port: int | None = None, timeout: float = 180) -> Any:
    """Start the Thrift server; returns (process, jdbc_url) once it accepts connections."""
    from shoal.cluster import spark_home

    host = host or settings.server.thrift_host
    port = port or settings.server.thrift_port
    with socket.socket() as s:
        if s.connect_ex((host, port)) == 0:
            raise ShoalError(f"port {port} on {host} is taken", hint="pass --thrift-port or set [server] thrift_port")
    # A BI session starts with `USE default` (or the database in its JDBC URL): make sure the
    # lake catalog has that namespace, or every connection without one would be refused.
    from shoal.spark import get_spark

    get_spark(settings).sql("CREATE NAMESPACE IF NOT EXISTS `default`")
    log = settings.workspace_dir / "thrift" / "thrift.log"
    env = {
        **os.environ,
        "SPARK_HOME": str(spark_home()),
        "PYSPARK_PYTHON": sys.executable,
        "SPARK_LOCAL_IP": os.environ.get("SPARK_LOCAL_IP", "127.0.0.1"),
    }
    cmd = command(settings, host, port)
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            cmd, env=env, cwd=settings.workspace_dir, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    deadline = time.monotonic() + timeout
    while True:
        if proc.poll() is not None:
            raise ShoalError(f"the Thrift server exited with code {proc.returncode}", hint=f"see {log}")
        with socket.socket() as s:
            if s.connect_ex((host, port)) == 0:
                break
        if time.monotonic() > deadline:
            stop(proc)
            raise ShoalError(
                f"the Thrift server did not listen on {host}:{port} within {timeout:g} s", hint=f"see {log}"
            )
        time.sleep(0.5)
    return proc, f"jdbc:hive2://{host}:{port}/default"


def stop(proc: subprocess.Popen) -> None:
    import signal

    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(20)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(5)
