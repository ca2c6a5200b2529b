"""Task resources: what a Task state's `Resource` runs.

Shoal's own resources are `shoal:recipe`, `shoal:sql`, `shoal:cdc`, `shoal:extract`,
`shoal:notify`, `shoal:python`, `shoal:job`, `shoal:crawl`, `shoal:quality` and `shoal:enrich`;
their results are Shoal's own (documented) shapes. The service-integration ARNs that cloud
definitions use take the cloud's parameter names and return the cloud's result shapes
(see shoal.workflows.aws):

    arn:aws:states:::databrew:startJobRun[.sync]          registered recipe job  {"Name"}
    arn:aws:states:::athena:startQueryExecution[.sync]    SQL                    {"QueryString", "QueryExecutionContext"}
    arn:aws:states:::athena:getQueryResults / getQueryExecution                  {"QueryExecutionId", "MaxResults", "NextToken"}
    arn:aws:states:::sns:publish                          notification           {"TopicArn", "Message", "Subject"}
    arn:aws:states:::glue:startJobRun[.sync]              registered job         {"JobName", "Arguments"}
    arn:aws:states:::glue:startCrawler                    named crawler          {"Name"}
    arn:aws:states:::lambda:invoke / arn:aws:lambda:...   registered function    {"FunctionName", "Payload"}
    arn:aws:states:::states:startExecution[.sync[:2]]     registered workflow    {"StateMachineArn", "Input", "Name"}

Every handler runs to completion before the state finishes, with or without `.sync`.
"""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from shoal.exceptions import ShoalError
from shoal.workflows import aws
from shoal.workflows.errors import StatesError
from shoal.workflows.functions import load_callable
from shoal.workflows.interpreter import TaskContext
from shoal.workflows.params import need as _need
from shoal.workflows.params import task_params as _params
from shoal.workflows.publish import notify

Handler = Callable[[TaskContext, Any], Any]
_ARN = re.compile(
    r"^arn:aws[\w-]*:states:[^:]*:[^:]*:(?P<service>[\w-]+):(?P<api>\w+)(?P<suffix>\.sync(?::2)?|\.waitForTaskToken)?$"
)
_LAMBDA_ARN = re.compile(r"^arn:aws[\w-]*:lambda:[^:]*:[^:]*:function:(?P<name>[\w.-]+)(?::[\w$-]+)?$")


def recipe(ctx: TaskContext, params: Any) -> Any:
    from shoal.recipes import JobRegistry, run_job

    p = _params(params)
    job = JobRegistry(ctx.settings).resolve(_need(p, "Job", "Name", "JobName"))
    if job.kind == "python":
        return _call_entry_point(job.callable_ref, {**job.arguments, **(p.get("Arguments") or {})})
    if job.kind == "glue":
        from shoal.glue import run_defined_job

        assert job.script is not None  # a glue job's definition requires its script
        args = {str(k): str(v) for k, v in (p.get("Arguments") or {}).items()}
        summary = run_defined_job(ctx.settings, job.name, job.script, job.arguments, args, say=ctx.say)
        return {"JobName": job.name, "RunId": summary["run_id"], "State": summary["status"], **summary}
    result = run_job(ctx.spark(), ctx.settings, job, say=ctx.say).to_dict()
    return {"JobName": job.name, "RunId": result["run_id"], "State": "SUCCEEDED", **result}


def sql(ctx: TaskContext, params: Any) -> Any:
    from shoal.sql import to_json_value
    from shoal.sql.external import SqlRunner

    p = _params(params)
    query = _need(p, "QueryString", "Query", "Sql")
    db = p.get("Database") or (p.get("QueryExecutionContext") or {}).get("Database")
    runner = SqlRunner(ctx.spark(), ctx.settings, dialect=str(p.get("Dialect", "athena")).lower(), database_name=db)
    limit = int(p.get("MaxRows", 100))
    result, statements = runner.execute(query, limit=limit)
    rows = [{c: to_json_value(v) for c, v in zip(result.columns, row, strict=True)} for row in result.rows]
    return {
        "QueryExecutionId": uuid.uuid4().hex,
        "Status": {"State": "SUCCEEDED"},
        "Statements": statements,
        "ResultSet": {"Columns": result.columns, "Rows": rows},
    }


def cdc(ctx: TaskContext, params: Any) -> Any:
    from shoal.cdc import ApplyOptions, apply_changes

    p = _params(params)
    keys = _need(p, "Key", "Keys")
    opts = ApplyOptions(
        table=_need(p, "Table"),
        keys=[keys] if isinstance(keys, str) else list(keys),
        # Debezium sources carry their own order: Sequence is needed for the DMS formats only.
        sequence=p.get("Sequence") or "",
        partition_by=p.get("PartitionBy"),
        op_column=p.get("OpColumn"),
        on_error=p.get("OnError"),
        write_mode=p.get("WriteMode"),
        reapply=bool(p.get("Reapply", False)),
        format=p.get("Format"),
        schema=p.get("Schema"),
    )
    try:
        return apply_changes(ctx.spark(), ctx.settings, _need(p, "Source"), opts, say=ctx.say).to_dict()
    except ShoalError as exc:
        worded = exc.in_terms_of(CDC_PARAMETERS)
        if worded is exc:
            raise
        raise worded from exc


# ApplyOptions' fields as the shoal:cdc task's parameters: the library's errors name them so.
CDC_PARAMETERS = {
    "keys": "Key",
    "sequence": "Sequence",
    "partition_by": "PartitionBy",
    "op_column": "OpColumn",
    "on_error": "OnError",
    "write_mode": "WriteMode",
    "format": "Format",
    "schema": "Schema",
}


def crawl(ctx: TaskContext, params: Any) -> Any:
    from shoal.catalog.crawl import crawl as run_crawl

    p = _params(params)
    result = run_crawl(
        ctx.spark(),
        ctx.settings,
        _need(p, "Path", "Location"),
        _need(p, "Table"),
        fmt=p.get("Format", "auto"),
        say=ctx.say,
    )
    return result.to_dict()


def quality(ctx: TaskContext, params: Any) -> Any:
    """Run a ruleset; failing `fail` rules raise Quality.RulesFailed unless OnFailure is "warn"."""
    from shoal.quality import load_ruleset, run_ruleset

    p = _params(params)
    result = run_ruleset(ctx.spark(), ctx.settings, load_ruleset(_need(p, "Ruleset")), say=ctx.say)
    on_failure = str(p.get("OnFailure", "fail")).lower()
    if result.failed and on_failure != "warn":
        rules = ", ".join(f"{r.rule} ({r.observed})" for r in result.failed)
        raise StatesError("Quality.RulesFailed", f"{result.ruleset} on {result.table}: {rules}")
    return result.to_dict()


def enrich(ctx: TaskContext, params: Any) -> Any:
    from shoal.enrich import load_job, run_job

    p = _params(params)
    job = load_job(_need(p, "Job"))
    return run_job(ctx.spark(), ctx.settings, job, force=bool(p.get("Force", False)), say=ctx.say).to_dict()


def predict(ctx: TaskContext, params: Any) -> Any:
    """Score a table with a registered model (`shoal model predict --table`)."""
    from shoal.models import get_model
    from shoal.models.score import predict_table

    p = _params(params)
    columns = p.get("Columns") or []
    keep = p.get("Keep") or []
    record = get_model(ctx.settings, _need(p, "Model"))
    return predict_table(
        ctx.spark(),
        record,
        _need(p, "Table"),
        [columns] if isinstance(columns, str) else list(columns),
        _need(p, "Into"),
        keep=[keep] if isinstance(keep, str) else list(keep),
    )


def extract(ctx: TaskContext, params: Any) -> Any:
    from shoal.extract import run_extract
    from shoal.ingest import ingest

    p = _params(params)
    spark = ctx.spark()
    out: dict[str, Any] = {}
    if p.get("Source"):
        tags = p.get("Tags") or {}
        out["ingest"] = ingest(spark, ctx.settings, p["Source"], source_name=p.get("SourceName"), tags=tags).to_dict()
    only = p.get("Only")
    result = run_extract(
        spark, ctx.settings, force=bool(p.get("Force")), only=[only] if isinstance(only, str) else only, say=ctx.say
    )
    out["extract"] = result.to_dict()
    return out


def python(ctx: TaskContext, params: Any) -> Any:
    p = _params(params)
    ref = _need(p, "EntryPoint", "FunctionName", "Function")
    payload = p.get("Payload", {k: v for k, v in p.items() if k not in ("EntryPoint", "FunctionName", "Function")})
    return _call_entry_point(str(ref), payload)


def job(ctx: TaskContext, params: Any) -> Any:
    """An ETL job run: any registered job, recipe or Python."""
    from shoal.recipes import JobRegistry, run_job

    p = _params(params)
    registered = JobRegistry(ctx.settings).resolve(_need(p, "JobName", "Name"))
    args = p.get("Arguments") or {}
    if registered.kind == "python":
        result = _call_entry_point(registered.callable_ref, {**registered.arguments, **args})
        return {"JobName": registered.name, "JobRunState": "SUCCEEDED", "Result": result}
    out = run_job(ctx.spark(), ctx.settings, registered, say=ctx.say).to_dict()
    return {"JobName": registered.name, "JobRunState": "SUCCEEDED", "Id": out["run_id"], **out}


def _call_entry_point(ref: str, payload: Any) -> Any:
    return load_callable(ref)(payload)


NATIVE: dict[str, Handler] = {
    "shoal:recipe": recipe,
    "shoal:sql": sql,
    "shoal:cdc": cdc,
    "shoal:extract": extract,
    "shoal:notify": notify,
    "shoal:python": python,
    "shoal:job": job,
    "shoal:crawl": crawl,
    "shoal:quality": quality,
    "shoal:enrich": enrich,
    "shoal:predict": predict,
}
_SERVICES: dict[tuple[str, str], dict[str, Handler]] = aws.SERVICES


def unsupported(resource: str) -> str | None:
    """Why `resource` cannot run here, or None when it can (used by definition validation)."""
    try:
        resolve(resource)
    except StatesError as exc:
        return exc.cause
    return None


def resolve(resource: str) -> Handler:
    if resource in NATIVE:
        return NATIVE[resource]
    m = _ARN.match(resource)
    if m:
        if m.group("suffix") == ".waitForTaskToken":
            raise StatesError("States.Runtime", f"{resource}: callback tasks (.waitForTaskToken) are not supported")
        variants = _SERVICES.get((m.group("service"), m.group("api")))
        if variants is not None:
            suffix = m.group("suffix") or ""
            if suffix not in variants:
                forms = " or ".join(f"{m.group('service')}:{m.group('api')}{s}" for s in variants)
                raise StatesError("States.Runtime", f"{resource}: supported as {forms}")
            return variants[suffix]
    lam = _LAMBDA_ARN.match(resource)
    if lam:
        return aws.function_arn(resource)
    known = ", ".join(sorted(NATIVE)) + ", " + ", ".join(f"arn:aws:states:::{s}:{a}" for s, a in _SERVICES)
    raise StatesError("States.Runtime", f"unsupported resource {resource!r} (supported: {known})")


# Task parameters that name files or folders. In a definition file they are relative to that
# file's folder (like a job file's datasets), so a registered workflow runs the same from the
# scheduler, `resume` or any other folder. Job names are taken as files only when such a file
# sits beside the definition; otherwise they stay names of registered jobs.
_PATH_PARAMETERS: dict[Handler, tuple[tuple[str, ...], bool]] = {
    cdc: (("Source",), False),
    extract: (("Source",), False),
    crawl: (("Path", "Location"), False),
    quality: (("Ruleset",), False),
    enrich: (("Job",), False),
    recipe: (("Job", "Name", "JobName"), True),
    job: (("JobName", "Name"), True),
    aws.databrew_start_job_run: (("Name", "Job", "JobName"), True),
    aws.databrew_start_job_run_sync: (("Name", "Job", "JobName"), True),
    aws.glue_start_job_run: (("JobName", "Name"), True),
    aws.glue_start_job_run_sync: (("JobName", "Name"), True),
}


def anchor_paths(definition: dict[str, Any], base: Path) -> None:
    """Make the path parameters of every task in `definition` absolute under `base` (in place)."""
    for state in (definition.get("States") or {}).values():
        if not isinstance(state, dict):
            continue
        for branch in state.get("Branches") or []:
            if isinstance(branch, dict):
                anchor_paths(branch, base)
        for key in ("Iterator", "ItemProcessor"):
            if isinstance(state.get(key), dict):
                anchor_paths(state[key], base)
        if state.get("Type") != "Task" or not isinstance(state.get("Resource"), str):
            continue
        try:
            handler = resolve(state["Resource"])
        except StatesError:
            continue
        keys, only_existing = _PATH_PARAMETERS.get(handler, ((), False))
        for block in ("Parameters", "Arguments"):
            params = state.get(block)
            if not isinstance(params, dict):
                continue
            for key in keys:
                value = params.get(key)
                if not isinstance(value, str) or not value or "://" in value or value.startswith("{%"):
                    continue
                path = Path(value).expanduser()
                if path.is_absolute():
                    continue
                if only_existing and not (base / path).is_file():
                    continue
                params[key] = os.path.normpath(base / path)
