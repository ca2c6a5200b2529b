"""`shoal engine start|stop|status`: the warm engine that runs this workspace's commands."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from shoal.cli.context import JsonOpt, current, out, settings

engine_app = typer.Typer(
    help="The warm engine: keeps Spark running so `shoal sql`, `cdc apply`, `ingest`, `extract`, `search`, "
    "`workflow run` and `recipe run` start in about a second (SHOAL_ENGINE=off or --no-engine: run in process).",
    no_args_is_help=True,
)


def _show(title: str, data: dict[str, Any]) -> None:
    out().record(title, data)


@engine_app.command("start")
def start(
    foreground: Annotated[
        bool, typer.Option("--foreground", help="Run in this process until stopped (for a service manager).")
    ] = False,
    wait: Annotated[float, typer.Option("--wait", help="Seconds to wait for the engine to answer.")] = 180.0,
    idle_timeout: Annotated[
        float,
        typer.Option("--idle-timeout", min=0, help="Stop after this many seconds without a command (0: never)."),
    ] = 0.0,
    _json: JsonOpt = False,
) -> None:
    """Start the engine for this workspace (in the background) and wait until it answers. It stops
    with `shoal engine stop`, after --idle-timeout, or when its workspace folder is deleted."""
    from shoal.cli.warm import manage

    s = settings()
    now = manage.status(s)
    if now["running"]:
        _show("Engine already running", now | {"already_running": True})
        return
    if foreground:
        import os
        import sys

        # A fresh interpreter: the engine routes the CLI's state before the CLI is imported.
        config = current().config
        cmd = [sys.executable, "-m", "shoal.cli.warm.server", *(["--config", str(config)] if config else [])]
        cmd += ["--idle-timeout", str(idle_timeout)]
        os.execv(sys.executable, cmd)
    proc = manage.spawn(s, current().config, idle_timeout_s=idle_timeout)
    out().note(f"starting the engine (pid {proc.pid}; Spark takes 10-20 s)")
    _show("Engine started", manage.wait_ready(s, proc, wait) | {"already_running": False})


@engine_app.command("stop")
def stop(
    timeout: Annotated[float, typer.Option("--timeout", help="Seconds to wait for running commands to finish.")] = 60.0,
    _json: JsonOpt = False,
) -> None:
    """Stop the engine; commands it is running finish first (then they are cancelled)."""
    from shoal.cli.warm import manage

    s = settings()
    result = manage.stop(s, timeout)
    if result is None:
        result = {"stopped": False, "workspace": str(s.workspace_dir), "reason": "no engine was running"}
    _show("Engine", result)


@engine_app.command("status")
def status(_json: JsonOpt = False) -> None:
    """Whether an engine serves this workspace (exit 3 when none does), with its numbers."""
    from shoal.cli.warm import manage

    data = manage.status(settings())
    _show("Engine", data)
    if not data["running"]:
        raise typer.Exit(3)


@engine_app.command("archive")
def archive(
    force: Annotated[bool, typer.Option("--force", help="Build it again even when it exists.")] = False,
    _json: JsonOpt = False,
) -> None:
    """Build the JVM class archive that shortens every cold Spark start (a minute, once per machine
    and Spark version; scripts/setup.sh runs it). Commands use it when it exists: `[spark]
    class_archive` ("auto", "off" or a path)."""
    import time

    from shoal import class_archive

    s = settings()
    existing = class_archive.archive_path(s)
    if existing is not None and existing.is_file() and not force:
        _show("Class archive", {"path": str(existing), "bytes": existing.stat().st_size, "built": False})
        return
    out().note("dumping the classes a small Iceberg workload loads (about a minute)")
    t0 = time.monotonic()
    path = class_archive.build(s)
    took = round(time.monotonic() - t0, 1)
    _show("Class archive", {"path": str(path), "bytes": path.stat().st_size, "built": True, "seconds": took})
