"""`shoal cluster up|down|status`: a local Spark standalone cluster for development."""

from __future__ import annotations

from typing import Annotated

import typer

from shoal.cli import output
from shoal.cli.context import JsonOpt, out, settings

cluster_app = typer.Typer(
    help="A Spark standalone master and workers on this machine (development).", no_args_is_help=True
)


def _show(data: dict) -> None:
    output.print_kv(
        "Spark cluster",
        {
            k: data[k]
            for k in ("master_url", "webui_url", "running", "alive_workers", "workers", "cores_per_worker")
            if k in data
        }
        | {"memory_per_worker": data.get("memory_per_worker"), "logs": data.get("log_dir")},
    )
    for p in data.get("problems", []):
        output.print_warning(p)


@cluster_app.command("up")
def up(
    workers: Annotated[
        int | None,
        typer.Option(
            "--workers",
            help="Workers to have alive (default [cluster] workers; on a running cluster, the recorded count).",
        ),
    ] = None,
    _json: JsonOpt = False,
) -> None:
    """Start a master and workers, wait until all have registered, print the master URL. On a
    running cluster, start the workers missing (a lost one is replaced; --workers N adds more)."""
    from shoal.cluster import up as start

    with out().progress("cluster") as say:
        st = start(settings(), workers=workers, say=say)

    def as_text() -> None:
        _show(st.to_dict())
        output.out.print(
            output.escape(
                f'Use it: SHOAL_SPARK__MASTER={st.master_url} shoal ...  (or [spark] master = "{st.master_url}")'
            )
        )

    out().show(st.to_dict(), as_text)


@cluster_app.command("down")
def down(_json: JsonOpt = False) -> None:
    """Stop the master and workers started by `shoal cluster up`."""
    from shoal.cluster import down as stop

    stopped = stop(settings())

    def as_text() -> None:
        output.out.print(f"Stopped {stopped} process(es)." if stopped else "No cluster was running.")

    out().show({"stopped_processes": stopped}, as_text)


@cluster_app.command("status")
def status(_json: JsonOpt = False) -> None:
    """The recorded cluster and how many workers the master reports alive (exit 1 when the master is
    down or a worker is missing or dead)."""
    from shoal.cluster import status as current

    st = current(settings())
    if st is None:
        out().line("No cluster started (shoal cluster up).", {"running": False})
        raise typer.Exit(1)
    out().show(st.to_dict(), lambda: _show(st.to_dict()))
    if not st.running or st.alive_workers < st.workers:
        raise typer.Exit(1)
