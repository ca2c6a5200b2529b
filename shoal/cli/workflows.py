"""Commands for pipelines: `shoal workflow`, `recipe`, `job`, `topic`, `schedule`, `scheduler`."""

from __future__ import annotations

import json
import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer

from shoal.cli import output
from shoal.cli.context import settings, state
from shoal.exceptions import ShoalError

workflow_app = typer.Typer(
    help="State machines (Amazon States Language): run, inspect, resume, draw.", no_args_is_help=True
)
recipe_app = typer.Typer(help="Data-prep recipe jobs and dataset profiles.", no_args_is_help=True)
job_app = typer.Typer(help="Register jobs (recipe or Python) that workflows run by name.", no_args_is_help=True)
topic_app = typer.Typer(
    help="Notification topics and their subscriptions (email, webhook, file).", no_args_is_help=True
)
schedule_app = typer.Typer(help="Run workflows on a schedule or when files arrive.", no_args_is_help=True)
function_app = typer.Typer(
    help="Name Python callables so function ARNs (arn:aws:lambda:...:function:NAME) call them.",
    no_args_is_help=True,
)

JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON object.")]


def register(app: typer.Typer) -> None:
    app.add_typer(workflow_app, name="workflow")
    app.add_typer(recipe_app, name="recipe")
    app.add_typer(job_app, name="job")
    app.add_typer(topic_app, name="topic")
    app.add_typer(schedule_app, name="schedule")
    app.add_typer(function_app, name="function")
    app.command("scheduler")(scheduler)


def _input(text: str | None) -> Any:
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


def _execution_summary(record: Any, json_out: bool) -> None:
    data = record.to_dict(full=True)
    if json_out:
        output.print_json(data)
    else:
        shown = {k: v for k, v in data.items() if k not in ("input", "trigger") and v is not None}
        if "output" in shown:
            shown["output"] = json.dumps(shown["output"], default=str)[:2000]
        output.print_kv(f"Execution {record.id}", shown)
        if record.status != "SUCCEEDED":
            output.print_warning(
                f"see what happened: shoal workflow history {record.id}; retry from there: shoal workflow resume {record.id}"
            )
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
    json_out: JsonOpt = False,
) -> None:
    """Run a state machine to completion; prints its status and output (exit 1 unless it succeeded)."""
    from shoal import workflows

    state["json"] = json_out
    with output.progress(not json_out, f"workflow {Path(ref).name}") as say:
        record = workflows.run(settings(), ref, _input(input_), name=name, notify_on_failure=notify_on_failure, say=say)
    _execution_summary(record, json_out)


@workflow_app.command("resume")
def workflow_resume(
    execution_id: Annotated[str, typer.Argument(help="Execution id (or a unique prefix of at least 6 characters).")],
    json_out: JsonOpt = False,
) -> None:
    """Resume a crashed, failed or timed-out execution from its last completed state."""
    from shoal import workflows

    state["json"] = json_out
    with output.progress(not json_out, f"resume {execution_id}") as say:
        record = workflows.resume(settings(), execution_id, say=say)
    _execution_summary(record, json_out)


@workflow_app.command("stop")
def workflow_stop(
    execution_id: Annotated[str, typer.Argument(help="Execution id (or a unique prefix of at least 6 characters).")],
    error: Annotated[str | None, typer.Option("--error", help="Error code recorded (default States.Aborted).")] = None,
    cause: Annotated[str | None, typer.Option("--cause", help="Why it was stopped (recorded).")] = None,
    wait: Annotated[bool, typer.Option("--wait/--no-wait", help="Wait until it has stopped.")] = True,
    json_out: JsonOpt = False,
) -> None:
    """Stop a running execution (from any process): its states are cancelled and it ends ABORTED."""
    import getpass
    import time

    from shoal.workflows import Store

    state["json"] = json_out
    store = Store(settings())
    record = store.execution(execution_id)
    store.request_stop(record.id, by=getpass.getuser(), error=error, cause=cause)
    deadline = time.monotonic() + 120
    while wait and store.execution(record.id).status == "RUNNING" and time.monotonic() < deadline:
        time.sleep(0.5)
    after = store.execution(record.id)
    data = after.to_dict()
    if json_out:
        output.print_json(data)
    else:
        output.print_kv(f"Execution {after.id}", {k: v for k, v in data.items() if v is not None})
    if wait and after.status == "RUNNING":
        output.print_error(f"{after.id} has not stopped yet (its process checks for stop requests every second)")
        sys.exit(1)


@workflow_app.command("register")
def workflow_register(
    file: Annotated[Path, typer.Argument(help="Definition file (JSON or YAML).")],
    name: Annotated[str | None, typer.Option("--name", help="Workflow name (default: the file name).")] = None,
    json_out: JsonOpt = False,
) -> None:
    """Validate a definition and store it under a name (a changed definition gets a new version)."""
    from shoal import workflows

    state["json"] = json_out
    machine, version = workflows.register(settings(), file, name=name)
    data = {
        "name": machine.name,
        "version": version,
        "states": len(machine.states),
        "resources": sorted(machine.resources),
    }
    output.print_json(data) if json_out else output.print_kv(f"Registered workflow {machine.name}", data)


@workflow_app.command("validate")
def workflow_validate(
    file: Annotated[Path, typer.Argument(help="Definition file (JSON or YAML).")], json_out: JsonOpt = False
) -> None:
    """Check a definition without running it; every problem names its state and field."""
    from shoal import workflows

    state["json"] = json_out
    machine = workflows.validate(file)
    data = {"valid": True, "name": machine.name, "states": len(machine.states), "resources": sorted(machine.resources)}
    output.print_json(data) if json_out else output.print_kv(f"{file} is valid", data)


@workflow_app.command("list")
def workflow_list(json_out: JsonOpt = False) -> None:
    """Registered workflows with their version and last run."""
    from shoal.workflows import Store

    state["json"] = json_out
    rows = Store(settings()).list_workflows()
    if json_out:
        output.print_json(rows)
        return
    output.print_rows(
        "Workflows",
        ["name", "version", "last run", "source"],
        [[r["name"], r["version"], r["last_run"] or "-", r["source"]] for r in rows],
    )


@workflow_app.command("executions")
def workflow_executions(
    workflow: Annotated[str | None, typer.Option("--workflow", "-w", help="Only this workflow.")] = None,
    status: Annotated[
        str | None, typer.Option("--status", help="RUNNING, SUCCEEDED, FAILED, TIMED_OUT or ABORTED.")
    ] = None,
    limit: Annotated[int, typer.Option("--limit")] = 50,
    json_out: JsonOpt = False,
) -> None:
    """Executions, newest first."""
    from shoal.workflows import Store
    from shoal.workflows.store import owner_alive

    state["json"] = json_out
    records = Store(settings()).list_executions(workflow, status, limit)
    rows = []
    for r in records:
        d = r.to_dict()
        if r.status == "RUNNING" and not owner_alive(r):
            d["status"] = "RUNNING (process gone: resume it)"
        rows.append(d)
    if json_out:
        output.print_json(rows)
        return
    output.print_rows(
        "Executions",
        ["execution id", "workflow", "status", "started", "duration s", "error"],
        [
            [d["execution_id"], d["workflow"], d["status"], d["started_at"], d["duration_s"] or "", d["error"] or ""]
            for d in rows
        ],
    )


@workflow_app.command("history")
def workflow_history(
    execution_id: Annotated[str, typer.Argument(help="Execution id (or a unique prefix).")],
    json_out: JsonOpt = False,
) -> None:
    """Every event of an execution: states entered and exited with input and output, retries, failures."""
    from shoal.workflows import Store

    state["json"] = json_out
    store = Store(settings())
    record = store.execution(execution_id)
    events = store.history(record.id)
    if json_out:
        output.print_json({"execution": record.to_dict(), "events": events})
        return
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
    out: Annotated[
        Path | None, typer.Option("--output", "-o", help="File to write (default NAME.FORMAT; '-' for stdout).")
    ] = None,
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
    if out is not None and str(out) == "-":
        sys.stdout.buffer.write(data)
        return
    target = out or Path(f"{Path(ref).name.split('.')[0]}.{fmt.value}")
    target.write_bytes(data)
    output.out.print(str(target))


# ---- recipes and jobs ------------------------------------------------------------------------------


@recipe_app.command("run")
def recipe_run(
    job: Annotated[str, typer.Argument(metavar="JOB", help="A job file (YAML or JSON) or a registered job name.")],
    json_out: JsonOpt = False,
) -> None:
    """Run a recipe job: read the input, apply the recipe's steps, write every output."""
    from shoal.recipes import JobRegistry, run_job
    from shoal.spark import get_spark

    state["json"] = json_out
    s = settings()
    definition = JobRegistry(s).resolve(job)
    with output.progress(not json_out, f"recipe {definition.name}") as say:
        result = run_job(get_spark(s), s, definition, say=say).to_dict()
    if json_out:
        output.print_json(result)
        return
    outputs = result.pop("outputs")
    output.print_kv(f"Recipe job {definition.name} succeeded", result)
    output.print_rows("Outputs", ["target", "rows", "files"], [[o["target"], o["rows"], o["files"]] for o in outputs])


class DataFormat(StrEnum):
    auto = "auto"
    csv = "csv"
    json = "json"
    parquet = "parquet"
    orc = "orc"
    iceberg = "iceberg"


@recipe_app.command("profile")
def recipe_profile(
    dataset: Annotated[
        str, typer.Argument(help="A path (file or folder), a table NS.TABLE, or a job (profiles its input).")
    ],
    fmt: Annotated[DataFormat, typer.Option("--format", "-f", help="Format of a path.")] = DataFormat.auto,
    top: Annotated[int, typer.Option("--top", help="Most frequent values per column.")] = 5,
    json_out: JsonOpt = False,
) -> None:
    """Per-column statistics: type, missing values, distinct values, min/max/mean, lengths, top values."""
    from shoal.recipes import Dataset, JobRegistry, profile, read_dataset
    from shoal.spark import get_spark

    state["json"] = json_out
    s = settings()
    if Path(dataset).exists() and (Path(dataset).is_dir() or Path(dataset).suffix.lower() not in (".yaml", ".yml")):
        raw: dict[str, Any] = {"path": dataset}
        if fmt != DataFormat.auto:
            raw["format"] = fmt.value
        ds = Dataset.parse(raw, Path.cwd(), "dataset")
    elif Path(dataset).is_file():
        ds = JobRegistry(s).resolve(dataset).input
    elif fmt in (DataFormat.auto, DataFormat.iceberg) and "." in dataset and "/" not in dataset:
        ds = Dataset(format="iceberg", table=dataset)
    else:
        job = JobRegistry(s).get(dataset)
        if job is None or job.input is None:
            raise ShoalError(f"{dataset!r} is not a path, a table or a recipe job")
        ds = job.input
    with output.progress(not json_out, "profile") as say:
        say(ds.describe())
        result = profile(read_dataset(get_spark(s), ds), top=top)
    if json_out:
        output.print_json({"dataset": ds.describe(), **result})
        return
    rows = []
    for c in result["columns"]:
        top_values = ", ".join(f"{t['value']} ({t['count']})" for t in c.get("top_values", [])[:3])
        rng = (
            f"{c.get('min')} .. {c.get('max')}" if "min" in c else f"len {c.get('min_length')} .. {c.get('max_length')}"
        )
        rows.append(
            [
                c["column"],
                c["type"],
                f"{c['missing']} ({c['missing_pct']}%)",
                c["distinct"],
                rng,
                c.get("mean", ""),
                top_values,
            ]
        )
    output.print_rows(
        f"Profile of {ds.describe()}: {result['rows']} rows",
        ["column", "type", "missing", "distinct~", "range", "mean", "top values"],
        rows,
    )


@recipe_app.command("operations")
def recipe_operations(json_out: JsonOpt = False) -> None:
    """The recipe operations Shoal runs."""
    from shoal.recipes import OPERATIONS

    state["json"] = json_out
    names = sorted(OPERATIONS)
    output.print_json(names) if json_out else output.out.print("\n".join(names))


@job_app.command("register")
def job_register(
    file: Annotated[Path, typer.Argument(help="Job file (YAML or JSON, or a DataBrew describe-job export).")],
    dataset: Annotated[
        Path | None,
        typer.Option("--dataset", help="DataBrew describe-dataset export (default: DATASETNAME.json beside FILE)."),
    ] = None,
    recipe: Annotated[
        Path | None,
        typer.Option("--recipe", help="DataBrew recipe JSON (default: RECIPENAME.json beside FILE)."),
    ] = None,
    json_out: JsonOpt = False,
) -> None:
    """Validate a job file and store it under its name (workflows refer to it by that name)."""
    from shoal.recipes import JobRegistry, load_job_file

    state["json"] = json_out
    job = load_job_file(file, dataset=dataset, recipe=recipe)
    JobRegistry(settings()).register(job)
    data = {"name": job.name, "kind": job.kind, "steps": len(job.steps), "outputs": [o.describe() for o in job.outputs]}
    output.print_json(data) if json_out else output.print_kv(f"Registered job {job.name}", data)


@job_app.command("list")
def job_list(json_out: JsonOpt = False) -> None:
    """Registered jobs."""
    from shoal.recipes import JobRegistry

    state["json"] = json_out
    rows = JobRegistry(settings()).list()
    if json_out:
        output.print_json(rows)
        return
    output.print_rows(
        "Jobs",
        ["name", "kind", "source", "updated"],
        [[r["name"], r["kind"], r["source"], r["updated_at"]] for r in rows],
    )


# ---- functions -------------------------------------------------------------------------------------


@function_app.command("register")
def function_register(
    name: Annotated[str, typer.Argument(help="Function name, as the last part of a function ARN.")],
    target: Annotated[str, typer.Argument(help="The Python callable, module:function.")],
    description: Annotated[str | None, typer.Option("--description", help="What it does.")] = None,
    json_out: JsonOpt = False,
) -> None:
    """Register (or replace) a function: `arn:aws:lambda:REGION:ACCOUNT:function:NAME[:ALIAS]` and
    `lambda:invoke` with that FunctionName call TARGET with the payload."""
    from shoal.workflows.functions import FunctionRegistry

    state["json"] = json_out
    data = FunctionRegistry(settings()).register(name, target, description=description)
    output.print_json(data) if json_out else output.print_kv(f"Registered function {name}", data)


@function_app.command("list")
def function_list(json_out: JsonOpt = False) -> None:
    """Registered functions."""
    from shoal.workflows.functions import FunctionRegistry

    state["json"] = json_out
    rows = FunctionRegistry(settings()).list()
    if json_out:
        output.print_json(rows)
        return
    output.print_rows(
        "Functions",
        ["name", "target", "description", "updated"],
        [[r["name"], r["target"], r["description"] or "", r["updated_at"]] for r in rows],
    )


@function_app.command("remove")
def function_remove(name: Annotated[str, typer.Argument(help="Function name.")], json_out: JsonOpt = False) -> None:
    """Forget a registered function."""
    from shoal.workflows.functions import FunctionRegistry

    state["json"] = json_out
    if not FunctionRegistry(settings()).remove(name):
        raise ShoalError(f"no function named {name!r}", hint="list them with `shoal function list`")
    data = {"removed": name}
    output.print_json(data) if json_out else output.out.print(f"Removed function {name}")


# ---- topics ----------------------------------------------------------------------------------------


@topic_app.command("create")
def topic_create(
    name: Annotated[str, typer.Argument()],
    description: Annotated[str | None, typer.Option("--description")] = None,
    json_out: JsonOpt = False,
) -> None:
    """Create a topic (no-op if it exists)."""
    from shoal.notify import Notifier

    state["json"] = json_out
    created = Notifier(settings()).create_topic(name, description)
    output.print_json({"topic": name, "created": created}) if json_out else output.out.print(
        f"topic {name} {'created' if created else 'already exists'}"
    )


@topic_app.command("subscribe")
def topic_subscribe(
    name: Annotated[str, typer.Argument(help="Topic name.")],
    email: Annotated[str | None, typer.Option("--email", help="Send email (SMTP settings in [notify.smtp]).")] = None,
    webhook: Annotated[str | None, typer.Option("--webhook", help="POST JSON (Slack-compatible) to this URL.")] = None,
    file: Annotated[Path | None, typer.Option("--file", help="Append one JSON line per message to this file.")] = None,
    json_out: JsonOpt = False,
) -> None:
    """Add a subscription to a topic."""
    from shoal.notify import Notifier

    state["json"] = json_out
    given = [(p, v) for p, v in (("email", email), ("webhook", webhook), ("file", file)) if v is not None]
    if len(given) != 1:
        raise ShoalError("give exactly one of --email, --webhook, --file")
    protocol, endpoint = given[0]
    sub_id = Notifier(settings()).subscribe(name, protocol, str(endpoint))
    output.print_json(
        {"topic": name, "subscription_id": sub_id, "protocol": protocol}
    ) if json_out else output.out.print(f"subscription {sub_id}: {protocol} on topic {name}")


@topic_app.command("unsubscribe")
def topic_unsubscribe(subscription_id: Annotated[int, typer.Argument()]) -> None:
    """Remove a subscription by id."""
    from shoal.notify import Notifier

    Notifier(settings()).unsubscribe(subscription_id)
    output.out.print(f"subscription {subscription_id} removed")


@topic_app.command("list")
def topic_list(json_out: JsonOpt = False) -> None:
    """Topics and their subscriptions (webhook URLs shown without their path)."""
    from shoal.notify import Notifier

    state["json"] = json_out
    topics = Notifier(settings()).list_topics()
    if json_out:
        output.print_json(topics)
        return
    rows = [
        [t["name"], s["id"], s["protocol"], s["endpoint"]]
        for t in topics
        for s in t["subscriptions"] or [{"id": "", "protocol": "-", "endpoint": ""}]
    ]
    output.print_rows("Topics", ["topic", "subscription", "protocol", "endpoint"], rows)


@topic_app.command("delete")
def topic_delete(name: Annotated[str, typer.Argument()]) -> None:
    """Delete a topic and its subscriptions."""
    from shoal.notify import Notifier

    Notifier(settings()).delete_topic(name)
    output.out.print(f"topic {name} deleted")


@topic_app.command("publish")
def topic_publish(
    name: Annotated[str, typer.Argument()],
    message: Annotated[str, typer.Option("--message", "-m")],
    subject: Annotated[str | None, typer.Option("--subject", "-s")] = None,
    json_out: JsonOpt = False,
) -> None:
    """Send a message to every subscriber (exit 1 if any delivery failed)."""
    from shoal.notify import Notifier

    state["json"] = json_out
    result = Notifier(settings()).publish(name, message, subject=subject)
    if json_out:
        output.print_json(result.to_dict())
    else:
        output.print_rows(
            f"Message {result.message_id}: {result.delivered} delivered, {result.failed} failed",
            ["subscription", "protocol", "endpoint", "status", "attempts", "error"],
            [
                [d.subscription_id, d.protocol, d.endpoint, d.status, d.attempts, d.error or ""]
                for d in result.deliveries
            ],
        )
    if result.failed:
        sys.exit(1)


@topic_app.command("deliveries")
def topic_deliveries(limit: Annotated[int, typer.Option("--limit")] = 50, json_out: JsonOpt = False) -> None:
    """Recent deliveries, newest first."""
    from shoal.notify import Notifier

    state["json"] = json_out
    rows = Notifier(settings()).history(limit)
    if json_out:
        output.print_json(rows)
        return
    output.print_rows(
        "Deliveries",
        ["time", "topic", "protocol", "endpoint", "status", "attempts", "error"],
        [
            [r["ts"], r["topic"], r["protocol"], r["endpoint"], r["status"], r["attempts"], r["error"] or ""]
            for r in rows
        ],
    )


# ---- schedules -------------------------------------------------------------------------------------


@schedule_app.command("add")
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
    json_out: JsonOpt = False,
) -> None:
    """Schedule a workflow; `shoal scheduler` runs the schedules."""
    from shoal import workflows
    from shoal.workflows.schedule import Schedules

    state["json"] = json_out
    s = settings()
    machine = workflows.load_machine(s, workflow)
    record = Schedules(s).add(
        name,
        machine.name,
        cron=cron,
        on_new_files=on_new_files,
        input_=_input(input_) if input_ else None,
        notify_topic=notify_on_failure,
    )
    record = {k: v for k, v in record.items() if not k.startswith("_")}
    output.print_json(record) if json_out else output.print_kv(f"Schedule {name}", record)


@schedule_app.command("list")
def schedule_list(json_out: JsonOpt = False) -> None:
    """Schedules with their next run."""
    from shoal.workflows.schedule import Schedules

    state["json"] = json_out
    rows = [{k: v for k, v in r.items() if not k.startswith("_")} for r in Schedules(settings()).list()]
    if json_out:
        output.print_json(rows)
        return
    output.print_rows(
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
    )


@schedule_app.command("remove")
def schedule_remove(name: Annotated[str, typer.Argument()]) -> None:
    """Delete a schedule."""
    from shoal.workflows.schedule import Schedules

    Schedules(settings()).remove(name)
    output.out.print(f"schedule {name} removed")


@schedule_app.command("pause")
def schedule_pause(name: Annotated[str, typer.Argument()]) -> None:
    """Stop firing a schedule (slots while paused are not caught up)."""
    from shoal.workflows.schedule import Schedules

    Schedules(settings()).set_enabled(name, False)
    output.out.print(f"schedule {name} paused")


@schedule_app.command("unpause")
def schedule_unpause(name: Annotated[str, typer.Argument()]) -> None:
    """Fire a paused schedule again from now on."""
    from shoal.workflows.schedule import Schedules

    Schedules(settings()).set_enabled(name, True)
    output.out.print(f"schedule {name} enabled")


def scheduler(
    once: Annotated[
        bool, typer.Option("--once", help="Check every schedule once, wait for what started, and exit.")
    ] = False,
    json_out: JsonOpt = False,
) -> None:
    """Run the schedules and file triggers (restart-safe; a slot never fires twice)."""
    from shoal import workflows
    from shoal.workflows.schedule import Scheduler

    state["json"] = json_out
    s = settings()
    results: list[dict[str, Any]] = []

    def start(workflow: str, input_: Any, execution_id: str, topic: str | None, schedule: str) -> None:
        record = workflows.run(
            s, workflow, input_, execution_id=execution_id, trigger={"schedule": schedule}, notify_on_failure=topic
        )
        results.append({"schedule": schedule, **record.to_dict()})
        if not json_out:
            output.err.print(f"{schedule}: {record.id} {record.status}")

    say = (
        (lambda m: None)
        if json_out
        else (lambda m: output.err.print(f"[dim]scheduler:[/] {output.escape(m)}", markup=True))
    )
    sched = Scheduler(s, start, say=say)
    if not once:
        say(f"polling every {s.workflows.poll_s:g} s (Ctrl-C stops)")
    try:
        sched.run(once=once)
    except KeyboardInterrupt:
        sched.stop.set()
        sched.wait()
    if json_out:
        output.print_json(
            {
                "fired": [
                    {"schedule": f.schedule, "execution_id": f.execution_id, "slots": f.slots} for f in sched.fired
                ],
                "executions": results,
            }
        )
