"""`shoal workflow` and `shoal function`: state machines (Amazon States Language) and the callables they name."""

from __future__ import annotations

import json
import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer

from shoal.cli import output
from shoal.cli.context import JsonOpt, out, settings
from shoal.exceptions import ShoalError

workflow_app = typer.Typer(
    help="State machines (Amazon States Language): run, inspect, resume, draw.", no_args_is_help=True
)
function_app = typer.Typer(
    help="Name Python callables so function ARNs (arn:aws:lambda:...:function:NAME) call them.",
    no_args_is_help=True,
)


def read_input(text: str | None) -> Any:
    if text is None:
        return {}
    if text.startswith("@"):
        try:
            text = Path(text[1:]).read_text(encoding="utf-8")
        except OSError as exc:
            raise ShoalError(f"cannot read input file {text[1:]}: {exc.strerror}") from exc
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ShoalError(f"--input is not valid JSON: line {exc.lineno} column {exc.colno}: {exc.msg}") from exc


def _execution_summary(record: Any) -> None:
    data = record.to_dict(full=True)

    def as_text() -> None:
        shown = {k: v for k, v in data.items() if k not in ("input", "trigger") and v is not None}
        if "output" in shown:
            shown["output"] = json.dumps(shown["output"], default=str)[:2000]
        output.print_kv(f"Execution {record.id}", shown)
        if record.status != "SUCCEEDED":
            output.print_warning(
                f"see what happened: shoal workflow history {record.id}; retry from there: shoal workflow resume {record.id}"
            )

    out().show(data, as_text)
    if record.status != "SUCCEEDED":
        sys.exit(1)


# ---- workflow ------------------------------------------------------------------------------------


@workflow_app.command("run")
def workflow_run(
    ref: Annotated[
        str, typer.Argument(metavar="FILE|NAME", help="A definition file (JSON or YAML) or a registered workflow.")
    ],
    input_: Annotated[str | None, typer.Option("--input", help="Execution input as JSON, or @FILE.")] = None,
    name: Annotated[str | None, typer.Option("--name", help="A label for this execution.")] = None,
    notify_on_failure: Annotated[
        str | None, typer.Option("--notify-on-failure", help="Topic told if it fails.")
    ] = None,
    _json: JsonOpt = False,
) -> None:
    """Run a state machine to completion; prints its status and output (exit 1 unless it succeeded)."""
    from shoal import workflows

    with out().progress(f"workflow {Path(ref).name}") as say:
        record = workflows.run(
            settings(), ref, read_input(input_), name=name, notify_on_failure=notify_on_failure, say=say
        )
    _execution_summary(record)


@workflow_app.command("resume")
def workflow_resume(
    execution_id: Annotated[str, typer.Argument(help="Execution id (or a unique prefix of at least 6 characters).")],
    _json: JsonOpt = False,
) -> None:
    """Resume a crashed, failed or timed-out execution from its last completed state."""
    from shoal import workflows

    with out().progress(f"resume {execution_id}") as say:
        record = workflows.resume(settings(), execution_id, say=say)
    _execution_summary(record)


@workflow_app.command("stop")
def workflow_stop(
    execution_id: Annotated[str, typer.Argument(help="Execution id (or a unique prefix of at least 6 characters).")],
    error: Annotated[str | None, typer.Option("--error", help="Error code recorded (default States.Aborted).")] = None,
    cause: Annotated[str | None, typer.Option("--cause", help="Why it was stopped (recorded).")] = None,
    wait: Annotated[bool, typer.Option("--wait/--no-wait", help="Wait until it has stopped.")] = True,
    _json: JsonOpt = False,
) -> None:
    """Stop a running execution (from any process): its states are cancelled and it ends ABORTED."""
    import getpass
    import time

    from shoal.workflows import Store

    store = Store(settings())
    record = store.execution(execution_id)
    store.request_stop(record.id, by=getpass.getuser(), error=error, cause=cause)
    deadline = time.monotonic() + 120
    while wait and store.execution(record.id).status == "RUNNING" and time.monotonic() < deadline:
        time.sleep(0.5)
    after = store.execution(record.id)
    data = after.to_dict()
    out().show(data, lambda: output.print_kv(f"Execution {after.id}", {k: v for k, v in data.items() if v is not None}))
    if wait and after.status == "RUNNING":
        output.print_error(f"{after.id} has not stopped yet (its process checks for stop requests every second)")
        sys.exit(1)


@workflow_app.command("register")
def workflow_register(
    file: Annotated[Path, typer.Argument(help="Definition file (JSON or YAML).")],
    name: Annotated[str | None, typer.Option("--name", help="Workflow name (default: the file name).")] = None,
    _json: JsonOpt = False,
) -> None:
    """Validate a definition and store it under a name (a changed definition gets a new version)."""
    from shoal import workflows

    machine, version = workflows.register(settings(), file, name=name)
    data = {
        "name": machine.name,
        "version": version,
        "states": len(machine.states),
        "resources": sorted(machine.resources),
    }
    out().record(f"Registered workflow {machine.name}", data)


@workflow_app.command("validate")
def workflow_validate(
    file: Annotated[Path, typer.Argument(help="Definition file (JSON or YAML).")], _json: JsonOpt = False
) -> None:
    """Check a definition without running it; every problem names its state and field."""
    from shoal import workflows

    machine = workflows.validate(file)
    data = {"valid": True, "name": machine.name, "states": len(machine.states), "resources": sorted(machine.resources)}
    out().record(f"{file} is valid", data)


@workflow_app.command("list")
def workflow_list(_json: JsonOpt = False) -> None:
    """Registered workflows with their version and last run."""
    from shoal.workflows import Store

    rows = Store(settings()).list_workflows()
    out().table(
        "Workflows",
        ["name", "version", "last run", "source"],
        [[r["name"], r["version"], r["last_run"] or "-", r["source"]] for r in rows],
        rows,
    )


@workflow_app.command("executions")
def workflow_executions(
    workflow: Annotated[str | None, typer.Option("--workflow", "-w", help="Only this workflow.")] = None,
    status: Annotated[
        str | None, typer.Option("--status", help="RUNNING, SUCCEEDED, FAILED, TIMED_OUT or ABORTED.")
    ] = None,
    limit: Annotated[int, typer.Option("--limit")] = 50,
    _json: JsonOpt = False,
) -> None:
    """Executions, newest first."""
    from shoal.workflows import Store
    from shoal.workflows.store import owner_alive

    records = Store(settings()).list_executions(workflow, status, limit)
    rows = []
    for r in records:
        d = r.to_dict()
        if r.status == "RUNNING" and not owner_alive(r):
            d["status"] = "RUNNING (process gone: resume it)"
        rows.append(d)
    out().table(
        "Executions",
        ["execution id", "workflow", "status", "started", "duration s", "error"],
        [
            [d["execution_id"], d["workflow"], d["status"], d["started_at"], d["duration_s"] or "", d["error"] or ""]
            for d in rows
        ],
        rows,
    )


@workflow_app.command("history")
def workflow_history(
    execution_id: Annotated[str, typer.Argument(help="Execution id (or a unique prefix).")],
    _json: JsonOpt = False,
) -> None:
    """Every event of an execution: states entered and exited with input and output, retries, failures."""
    from shoal.workflows import Store

    store = Store(settings())
    record = store.execution(execution_id)
    events = store.history(record.id)

    def as_text() -> None:
        rows = []
        for e in events:
            detail = {k: v for k, v in e.items() if k not in ("id", "timestamp", "type", "state", "scope")}
            rows.append(
                [
                    e["id"],
                    e["timestamp"][11:23],
                    e["type"],
                    f"{e['scope']}/{e['state']}" if e["scope"] else (e["state"] or ""),
                    json.dumps(detail, default=str)[:160],
                ]
            )
        output.print_rows(f"History of {record.id} ({record.status})", ["#", "time", "event", "state", "detail"], rows)

    out().show({"execution": record.to_dict(), "events": events}, as_text)


class GraphFormat(StrEnum):
    svg = "svg"
    png = "png"
    dot = "dot"


@workflow_app.command("graph")
def workflow_graph(
    ref: Annotated[str, typer.Argument(metavar="NAME|FILE", help="A registered workflow or a definition file.")],
    execution: Annotated[
        str | None, typer.Option("--execution", "-e", help="Colour states by this execution's outcome.")
    ] = None,
    fmt: Annotated[GraphFormat, typer.Option("--format", "-f")] = GraphFormat.svg,
    output_file: Annotated[
        Path | None, typer.Option("--output", "-o", help="File to write (default NAME.FORMAT; '-' for stdout).")
    ] = None,
    _json: JsonOpt = False,
) -> None:
    """Draw the state machine (Graphviz), optionally coloured by an execution."""
    from shoal import workflows
    from shoal.workflows import Store, graph

    s = settings()
    history = None
    if execution:
        store = Store(s)
        record = store.execution(execution)
        definition, title, history = (
            record.definition,
            f"{record.workflow}: {record.id} ({record.status})",
            store.history(record.id),
        )
    else:
        machine = workflows.load_machine(s, ref) if not Path(ref).is_file() else workflows.validate(ref)
        definition, title = machine.definition, machine.name
    data = graph.render(definition, title=title, fmt=fmt.value, history=history)
    if output_file is not None and str(output_file) == "-":
        sys.stdout.buffer.write(data)
        return
    target = output_file or Path(f"{Path(ref).name.split('.')[0]}.{fmt.value}")
    target.write_bytes(data)
    out().done(str(target))


# ---- functions -------------------------------------------------------------------------------------


@function_app.command("register")
def function_register(
    name: Annotated[str, typer.Argument(help="Function name, as the last part of a function ARN.")],
    target: Annotated[str, typer.Argument(help="The Python callable, module:function.")],
    description: Annotated[str | None, typer.Option("--description", help="What it does.")] = None,
    _json: JsonOpt = False,
) -> None:
    """Register (or replace) a function: `arn:aws:lambda:REGION:ACCOUNT:function:NAME[:ALIAS]` and
    `lambda:invoke` with that FunctionName call TARGET with the payload."""
    from shoal.workflows.functions import FunctionRegistry

    data = FunctionRegistry(settings()).register(name, target, description=description)
    out().record(f"Registered function {name}", data)


@function_app.command("list")
def function_list(_json: JsonOpt = False) -> None:
    """Registered functions."""
    from shoal.workflows.functions import FunctionRegistry

    rows = FunctionRegistry(settings()).list()
    out().table(
        "Functions",
        ["name", "target", "description", "updated"],
        [[r["name"], r["target"], r["description"] or "", r["updated_at"]] for r in rows],
        rows,
    )


@function_app.command("delete")
@function_app.command("remove", hidden=True)
def function_remove(name: Annotated[str, typer.Argument(help="Function name.")], _json: JsonOpt = False) -> None:
    """Forget a registered function."""
    from shoal.workflows.functions import FunctionRegistry

    if not FunctionRegistry(settings()).remove(name):
        raise ShoalError(f"no function named {name!r}", hint="list them with `shoal function list`")
    data = {"removed": name}
    out().line(f"Removed function {name}", data)
