"""`shoal serve`: the HTTP API and web console, and the BI endpoints (PostgreSQL protocol, Thrift)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Annotated

import typer

from shoal.cli import output
from shoal.cli.context import settings

# EX_TEMPFAIL: serve's Spark JVM died. Serve does not rebuild Spark in process (every router,
# the PostgreSQL endpoint and caches hold the dead session); it exits and its service manager
# (deploy/systemd's Restart=on-failure, compose's restart policy) starts a fresh one.
EXIT_JVM_DIED = 75


class JvmWatch(threading.Thread):
    """Calls `stop` `grace_s` seconds after this process's Spark JVM dies (checked twice a
    second; a JVM is watched once one is started). Meanwhile /healthz, the API and the
    PostgreSQL endpoint answer "unavailable" (they ask shoal.spark.jvm_down themselves)."""

    def __init__(self, grace_s: float, stop: Callable[[], None]) -> None:
        super().__init__(name="shoal-jvm-watch", daemon=True)
        self.grace_s, self.stop, self.reason = grace_s, stop, None

    def run(self) -> None:
        from shoal.spark import jvm_down

        while (reason := jvm_down()) is None:
            time.sleep(0.5)
        self.reason = reason  # type: ignore[assignment]
        output.err.print(
            f"serve: {reason}; answering 'unavailable' for {self.grace_s:g} s, then exiting with code"
            f" {EXIT_JVM_DIED} so that the service manager restarts it"
        )
        time.sleep(self.grace_s)
        self.stop()


def serve(
    host: Annotated[
        str | None, typer.Option("--host", help="Address to bind (default [server] host, 127.0.0.1).")
    ] = None,
    port: Annotated[int | None, typer.Option("--port", help="Port (default [server] port, 8080).")] = None,
    thrift: Annotated[
        bool,
        typer.Option("--thrift", help="Also start the JDBC/ODBC endpoint (Spark Thrift server) for BI tools."),
    ] = False,
    thrift_port: Annotated[
        int | None, typer.Option("--thrift-port", help="Thrift port (default [server] thrift_port, 10000).")
    ] = None,
    thrift_only: Annotated[
        bool, typer.Option("--thrift-only", help="Serve only the Thrift endpoint (no HTTP API).")
    ] = False,
    pg: Annotated[
        bool,
        typer.Option("--pg", help="Also serve the governed PostgreSQL-protocol endpoint for BI tools (psql, drivers)."),
    ] = False,
    pg_port: Annotated[
        int | None, typer.Option("--pg-port", help="PostgreSQL endpoint port (default [server] pg_port, 5433).")
    ] = None,
    pg_only: Annotated[
        bool, typer.Option("--pg-only", help="Serve only the PostgreSQL endpoint (no HTTP API).")
    ] = False,
    iceberg_rest: Annotated[
        bool,
        typer.Option(
            "--iceberg-rest",
            help="Also serve the governed Iceberg REST catalog for other engines (PyIceberg, DuckDB, Spark, Trino).",
        ),
    ] = False,
    iceberg_rest_only: Annotated[
        bool,
        typer.Option("--iceberg-rest-only", help="Serve only the Iceberg REST catalog (no HTTP API, no Spark)."),
    ] = False,
    iceberg_rest_port: Annotated[
        int | None,
        typer.Option(
            "--iceberg-rest-port", help="Iceberg REST catalog port (default [server] iceberg_rest_port, 8181)."
        ),
    ] = None,
) -> None:
    """Serve the HTTP API and console (OpenAPI at /openapi.json); --pg adds the governed PostgreSQL
    endpoint for BI tools; --iceberg-rest the governed Iceberg REST catalog for other engines
    (docs/engines.md); --thrift adds Spark's JDBC/ODBC endpoint (not governed: trusted operators)."""
    import uvicorn

    from shoal.cli.context import current
    from shoal.cli.warm import manage as engine  # serve keeps a warm engine for the CLI beside it
    from shoal.spark import set_role
    from shoal.web import create_app, server_config

    set_role("serve")  # its own session's share of a cluster; its engine has the engine's
    s = settings()
    engine_proc = (
        None if thrift_only or pg_only or iceberg_rest_only else engine.start_beside_serve(s, current().config)
    )
    iceberg_rest = iceberg_rest or iceberg_rest_only
    proc = None
    pg_server = None
    rest_server = None
    if thrift or thrift_only or pg or pg_only or iceberg_rest:
        import signal
        import sys

        # A TERM (service manager, kill) must still stop the endpoints in `finally`.
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    done = threading.Event()  # the endpoints without uvicorn wait for it
    http: list[uvicorn.Server] = []

    def stop_serving() -> None:
        done.set()
        for server in http:
            server.should_exit = True

    watch = JvmWatch(s.server.unavailable_exit_s, stop_serving)
    if not (thrift_only or iceberg_rest_only):  # those start no Spark in this process
        watch.start()
    try:
        if thrift or thrift_only:
            from shoal.bi import thrift as thrift_server

            output.err.print("starting the Thrift JDBC/ODBC server (a Spark application; about 20 s)")
            proc, url = thrift_server.start(s, port=thrift_port)
            output.err.print(
                f"JDBC: {url}  (e.g. beeline -u {url}); it does not apply Shoal's grants (trusted operators only)"
            )
        if pg or pg_only:
            from shoal.bi.pg import PgServer

            pg_server = PgServer(s, port=pg_port).start()
            pg_host, bound = pg_server.address
            output.err.print(
                f"PostgreSQL endpoint (governed) on {pg_host}:{bound}: "
                f'psql "host={pg_host} port={bound} user=USER dbname=lake sslmode=require"'
                " (a password or an API token; docs/bi.md)"
            )
        if iceberg_rest:
            from shoal.iceberg_rest import IcebergRestServer

            rest_server = IcebergRestServer(s, port=iceberg_rest_port).start()
            output.err.print(
                f"Iceberg REST catalog (governed) on {rest_server.url}: clients sign in with an API token "
                "as the OAuth2 client secret (docs/engines.md)"
            )
        if iceberg_rest_only:  # no HTTP API: wait for the other endpoints, or until Ctrl-C or TERM
            proc.wait() if proc is not None else done.wait()
            return
        if thrift_only or (pg_only and proc is not None):
            assert proc is not None
            proc.wait()
            return
        if pg_only:
            assert pg_server is not None
            done.wait()  # until Ctrl-C, TERM or the JVM's death
        else:
            docs = " (docs at /docs)" if s.server.api_docs else ""
            output.err.print(f"Shoal API on http://{host or s.server.host}:{port or s.server.port}{docs}")
            http.append(uvicorn.Server(server_config(s, create_app(s), host, port)))
            http[0].run()
        if watch.reason is not None:
            raise typer.Exit(EXIT_JVM_DIED)
    finally:
        engine.stop_beside_serve(engine_proc)
        if proc is not None:
            thrift_server.stop(proc)
        if pg_server is not None:
            pg_server.stop()
        if rest_server is not None:
            rest_server.stop()
