"""`shoal schedule` and `shoal scheduler`: run workflows on a schedule or when files arrive."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from shoal.cli.context import JsonOpt, out, settings
from shoal.cli.workflows import read_input

app = typer.Typer(help="Run workflows on a schedule or when files arrive.", no_args_is_help=True)


# ---- schedules -------------------------------------------------------------------------------------


@app.command("create")
@app.command("add", hidden=True)
def schedule_add(
    name: Annotated[str, typer.Argument()],
    workflow: Annotated[
        str, typer.Option("--workflow", help="A registered workflow (or a definition file, registered now).")
    ],
    cron: Annotated[
        str | None, typer.Option("--cron", help="cron(0 0 1 * ? *), rate(1 day) or a 5-field cron expression (UTC).")
    ] = None,
    on_new_files: Annotated[
        str | None, typer.Option("--on-new-files", help="Start when files appear under this folder/prefix.")
    ] = None,
    input_: Annotated[
        str | None, typer.Option("--input", help="Execution input as JSON (merged with trigger details).")
    ] = None,
    notify_on_failure: Annotated[
        str | None, typer.Option("--notify-on-failure", help="Topic told when an execution fails.")
    ] = None,
    _json: JsonOpt = False,
) -> None:
    """Schedule a workflow; `shoal scheduler` runs the schedules."""
    from shoal import workflows
    from shoal.workflows.schedule import Schedules

    s = settings()
    machine = workflows.load_machine(s, workflow)
    record = Schedules(s).add(
        name,
        machine.name,
        cron=cron,
        on_new_files=on_new_files,
        input_=read_input(input_) if input_ else None,
        notify_topic=notify_on_failure,
    )
    record = {k: v for k, v in record.items() if not k.startswith("_")}
    out().record(f"Schedule {name}", record)


@app.command("list")
def schedule_list(_json: JsonOpt = False) -> None:
    """Schedules with their next run."""
    from shoal.workflows.schedule import Schedules

    rows = [{k: v for k, v in r.items() if not k.startswith("_")} for r in Schedules(settings()).list()]
    out().table(
        "Schedules",
        ["name", "workflow", "when", "enabled", "next run"],
        [
            [
                r["name"],
                r["workflow"],
                r["expression"] if r["kind"] != "files" else f"new files in {r['expression']}",
                r["enabled"],
                r.get("next_run") or "-",
            ]
            for r in rows
        ],
        rows,
    )


@app.command("delete")
@app.command("remove", hidden=True)
def schedule_remove(name: Annotated[str, typer.Argument()], _json: JsonOpt = False) -> None:
    """Delete a schedule."""
    from shoal.workflows.schedule import Schedules

    Schedules(settings()).remove(name)
    out().done(f"schedule {name} removed")


@app.command("pause")
def schedule_pause(name: Annotated[str, typer.Argument()], _json: JsonOpt = False) -> None:
    """Stop firing a schedule (slots while paused are not caught up)."""
    from shoal.workflows.schedule import Schedules

    Schedules(settings()).set_enabled(name, False)
    out().done(f"schedule {name} paused")


@app.command("unpause")
def schedule_unpause(name: Annotated[str, typer.Argument()], _json: JsonOpt = False) -> None:
    """Fire a paused schedule again from now on."""
    from shoal.workflows.schedule import Schedules

    Schedules(settings()).set_enabled(name, True)
    out().done(f"schedule {name} enabled")


def scheduler(
    once: Annotated[
        bool, typer.Option("--once", help="Check every schedule once, wait for what started, and exit.")
    ] = False,
    _json: JsonOpt = False,
) -> None:
    """Run the schedules and file triggers (restart-safe; a slot never fires twice)."""
    from shoal import workflows
    from shoal.spark import set_role
    from shoal.workflows.schedule import Scheduler

    set_role("scheduler")
    s = settings()
    results: list[dict[str, Any]] = []

    def start(workflow: str, input_: Any, execution_id: str, topic: str | None, schedule: str) -> None:
        record = workflows.run(
            s, workflow, input_, execution_id=execution_id, trigger={"schedule": schedule}, notify_on_failure=topic
        )
        results.append({"schedule": schedule, **record.to_dict()})
        out().note(f"{schedule}: {record.id} {record.status}")

    def say(message: str) -> None:
        out().note(message, label="scheduler")

    sched = Scheduler(s, start, say=say)
    if not once:
        say(f"polling every {s.workflows.poll_s:g} s (Ctrl-C stops)")
    try:
        sched.run(once=once)
    except KeyboardInterrupt:
        sched.stop.set()
        sched.wait()
    fired = [{"schedule": f.schedule, "execution_id": f.execution_id, "slots": f.slots} for f in sched.fired]
    # People followed the run on stderr; there is no summary to print.
    out().show({"fired": fired, "executions": results}, lambda: None)
