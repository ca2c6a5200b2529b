"""Cloud service integrations: the `arn:aws:states:::SERVICE:API[.sync]` resources.

A state machine written for the cloud selects from its tasks' results with `ResultSelector`
and `ResultPath` written against the cloud's result shapes, so these handlers return those
shapes (the service APIs' responses as the cloud's workflow service hands them on:
timestamps as epoch milliseconds, PascalCase keys):

    athena:startQueryExecution.sync   GetQueryExecution   {"QueryExecution": {...}}
    athena:startQueryExecution        StartQueryExecution {"QueryExecutionId"}
    athena:getQueryExecution          GetQueryExecution
    athena:getQueryResults            GetQueryResults     {"ResultSet": {"Rows", "ResultSetMetadata"}, "UpdateCount"}
    databrew:startJobRun.sync         DescribeJobRun      {"RunId", "JobName", "State", "Outputs", ...}
    databrew:startJobRun              StartJobRun         {"RunId"}
    glue:startJobRun.sync             GetJobRun.JobRun    {"Id", "JobName", "JobRunState", "Arguments", ...}
    glue:startJobRun                  StartJobRun         {"JobRunId"}
    glue:startCrawler                 StartCrawler        {}
    sns:publish                       Publish             {"MessageId", "SdkHttpMetadata", "SdkResponseMetadata"}
    lambda:invoke                     Invoke              {"ExecutedVersion", "Payload", "StatusCode", ...}
    states:startExecution.sync        DescribeExecution   {"Output": "<JSON text>", "Status", ...}
    states:startExecution.sync:2      DescribeExecution   {"Output": <JSON>, ...}
    states:startExecution             StartExecution      {"ExecutionArn", "StartDate"}

Every call runs to completion before the state finishes, with or without `.sync`: a
request-response call returns the start response after the work is done (a query's result
is then kept for `athena:getQueryResults`; a failed query is recorded as FAILED there, as in
the cloud, rather than failing the start). With `ResultConfiguration.OutputLocation` the
query's result file is also written there, `<OutputLocation>/<QueryExecutionId>.csv` (`.txt`
for DDL), whole or not at all; a location that cannot be written fails the query. Errors
keep Shoal's names (JobError, SqlError, ...), so existing `Catch` blocks on
`States.ALL`/`States.TaskFailed` match as before.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import json
import re
import time
import uuid
from typing import Any

from sqlalchemy import Column, DateTime, MetaData, String, Table, Text, delete, insert, select

from shoal.config import Settings
from shoal.lake import database
from shoal.workflows.errors import TASK_FAILED, StatesError
from shoal.workflows.functions import load_callable, resolve_function
from shoal.workflows.interpreter import TaskContext
from shoal.workflows.params import need as _need
from shoal.workflows.params import task_params as _params
from shoal.workflows.publish import notify

# ---- helpers ---------------------------------------------------------------------------------


def _ms(when: float | None = None) -> int:
    """Epoch milliseconds: how the cloud's workflow service hands on API timestamps."""
    return int((time.time() if when is None else when) * 1000)


def _request_id() -> str:
    return str(uuid.uuid4())


def _http_metadata(request_id: str, content_type: str = "text/xml") -> dict[str, Any]:
    headers = {
        "Content-Type": content_type,
        "Date": dt.datetime.now(dt.UTC).strftime("%a, %d %b %Y %H:%M:%S GMT"),
        "x-amzn-RequestId": request_id,
    }
    return {
        "AllHttpHeaders": {k: [v] for k, v in headers.items()},
        "HttpHeaders": headers,
        "HttpStatusCode": 200,
    }


def _sdk(request_id: str, content_type: str = "text/xml") -> dict[str, Any]:
    return {
        "SdkHttpMetadata": _http_metadata(request_id, content_type),
        "SdkResponseMetadata": {"RequestId": request_id},
    }


# ---- Athena ----------------------------------------------------------------------------------

RESULT_MAX_ROWS = 100_000
RESULT_MAX_BYTES = 16 * 1024 * 1024
RESULT_RETENTION_DAYS = 45  # how long the cloud keeps query history
PAGE_MAX = 1000

state_tables = MetaData()
athena_queries = Table(
    "shoal_athena_queries",
    state_tables,
    Column("query_execution_id", String(64), primary_key=True),
    Column("execution", Text, nullable=False),  # the GetQueryExecution QueryExecution object
    Column(
        "result", Text
    ),  # {"columns": [...ColumnInfo], "header": bool, "rows": [[str|None]], "truncated", "update_count"}
    Column("created_at", DateTime, nullable=False, index=True),
)

_DML_HEADS = ("SELECT", "WITH", "VALUES", "TABLE", "INSERT", "UPDATE", "DELETE", "MERGE", "UNLOAD")
_ROW_HEADS = ("SELECT", "WITH", "VALUES", "TABLE")
_UTILITY = re.compile(r"^(DESCRIBE|DESC|EXPLAIN|SHOW\s+CREATE)\b", re.I)
_CTAS = re.compile(r"^CREATE\s+TABLE\b.*?\bAS\s*\(?\s*(SELECT|WITH|VALUES)\b", re.I | re.S)
_COMMENTS = re.compile(r"(--[^\n]*\n?|/\*.*?\*/)", re.S)


def statement_type(sql: str) -> tuple[str, bool]:
    """(StatementType, whether the statement returns rows with a header row)."""
    from shoal.sql import split_statements

    statements = split_statements(sql) or [sql]
    text = _COMMENTS.sub(" ", statements[-1]).strip().lstrip("(").strip()
    head = text.split(None, 1)[0].upper() if text else ""
    if head in _DML_HEADS or _CTAS.match(text):
        return "DML", head in _ROW_HEADS
    if _UTILITY.match(text):
        return "UTILITY", False
    return "DDL", False


def athena_type(spark_type: str) -> tuple[str, int, int]:
    """(Athena type name, precision, scale) for a Spark simple type string."""
    t = spark_type.lower()
    m = re.match(r"decimal\((\d+),\s*(\d+)\)", t)
    if m:
        return "decimal", int(m.group(1)), int(m.group(2))
    base = re.split(r"[<(]", t, maxsplit=1)[0]
    return {
        "string": ("varchar", 2147483647, 0),
        "int": ("integer", 10, 0),
        "integer": ("integer", 10, 0),
        "bigint": ("bigint", 19, 0),
        "smallint": ("smallint", 5, 0),
        "tinyint": ("tinyint", 3, 0),
        "double": ("double", 17, 0),
        "float": ("real", 17, 0),
        "boolean": ("boolean", 0, 0),
        "date": ("date", 0, 0),
        "timestamp": ("timestamp", 3, 0),
        "timestamp_ntz": ("timestamp", 3, 0),
        "binary": ("varbinary", 1073741824, 0),
        "array": ("array", 0, 0),
        "map": ("map", 0, 0),
        "struct": ("row", 0, 0),
    }.get(base, ("varchar", 2147483647, 0))


def varchar(value: Any) -> str | None:
    """A value as Athena's result set writes it (every value is text)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dt.datetime):
        return value.strftime("%Y-%m-%d %H:%M:%S.") + f"{value.microsecond // 1000:03d}"
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, decimal.Decimal | int | float):
        return str(value)
    if isinstance(value, bytes | bytearray):
        return " ".join(f"{b:02x}" for b in value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(varchar(v) or "null" for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{varchar(k)}={varchar(v) or 'null'}" for k, v in value.items()) + "}"
    if hasattr(value, "asDict"):
        return "{" + ", ".join(f"{k}={varchar(v) or 'null'}" for k, v in value.asDict().items()) + "}"
    return str(value)


class QueryStore:
    """Query executions and their results, kept in the catalog database by QueryExecutionId."""

    def __init__(self, settings: Settings) -> None:
        self.engine = database.engine(settings, state_tables)

    def put(self, execution: dict[str, Any], result: dict[str, Any] | None) -> None:
        cutoff = database.utcnow() - dt.timedelta(days=RESULT_RETENTION_DAYS)
        with self.engine.begin() as conn:
            conn.execute(delete(athena_queries).where(athena_queries.c.created_at < cutoff))
            conn.execute(
                insert(athena_queries).values(
                    query_execution_id=execution["QueryExecutionId"],
                    execution=json.dumps(execution),
                    result=json.dumps(result) if result is not None else None,
                    created_at=database.utcnow(),
                )
            )

    def get(self, query_execution_id: str) -> tuple[dict[str, Any], dict[str, Any] | None]:
        with self.engine.connect() as conn:
            row = conn.execute(
                select(athena_queries).where(athena_queries.c.query_execution_id == query_execution_id)
            ).first()
        if row is None:
            raise StatesError("Athena.InvalidRequestException", f"QueryExecution {query_execution_id} was not found")
        return json.loads(row.execution), json.loads(row.result) if row.result else None


def _stored_result(query: str, result: Any) -> dict[str, Any]:
    """The rows kept for GetQueryResults, cut to RESULT_MAX_ROWS and RESULT_MAX_BYTES."""
    kind, header = statement_type(query)
    if kind == "DDL" and re.match(r"^\s*(CREATE|DROP|ALTER|MSCK)\b", _COMMENTS.sub(" ", query), re.I):
        return {"columns": [], "header": False, "rows": [], "truncated": False, "update_count": 0}
    if kind == "DML" and not header:  # INSERT, CTAS, UNLOAD ...: no result set
        return {"columns": [], "header": False, "rows": [], "truncated": False, "update_count": 0}
    columns = []
    for name, typ in zip(result.columns, result.types, strict=True):
        athena, precision, scale = athena_type(typ)
        columns.append(
            {
                "CatalogName": "hive",
                "SchemaName": "",
                "TableName": "",
                "Name": name,
                "Label": name,
                "Type": athena,
                "Precision": precision,
                "Scale": scale,
                "Nullable": "UNKNOWN",
                "CaseSensitive": athena == "varchar",
            }
        )
    rows: list[list[str | None]] = []
    size, truncated = 0, len(result.rows) > RESULT_MAX_ROWS
    for raw in result.rows[:RESULT_MAX_ROWS]:
        row = [varchar(v) for v in raw]
        size += len(json.dumps(row))
        if size > RESULT_MAX_BYTES:
            truncated = True
            break
        rows.append(row)
    return {"columns": columns, "header": header, "rows": rows, "truncated": truncated, "update_count": 0}


def _result_file_uri(location: str, qid: str, kind: str) -> str:
    """Where the cloud puts a query's result: `<OutputLocation>/<QueryExecutionId>.csv` for DML
    (queries), `.txt` for DDL and utility statements."""
    return f"{location.rstrip('/')}/{qid}.{'csv' if kind == 'DML' else 'txt'}"


def _csv_field(value: str | None) -> str:
    # Athena quotes every value (RFC 4180: a quote inside is doubled); NULL is an empty, unquoted field.
    return "" if value is None else '"' + value.replace('"', '""') + '"'


def _write_result_file(uri: str, kind: str, stored: dict[str, Any], raw: Any) -> None:
    """Write the query's result file at `uri` through the storage layer, whole or not at all.

    The rows are the ones this query returned to the task's session (governed as any query),
    rendered as getQueryResults renders them. The binary `.metadata` companion is not written."""
    from shoal import storage

    rows: list[list[str | None]] = []
    if stored["columns"]:  # statements without a result set (CREATE, INSERT, CTAS ...) write an empty file
        if len(raw.rows) > RESULT_MAX_ROWS:
            # A cut file would pass for the whole result: refuse it rather than lose rows quietly.
            raise StatesError(
                TASK_FAILED,
                f"the result is larger than Shoal keeps ({RESULT_MAX_ROWS} rows); {uri} was not written",
            )
        rows = [[varchar(v) for v in row] for row in raw.rows]
    names = [c["Name"] for c in stored["columns"]]
    if kind == "DML":
        lines = ([names] if stored["header"] else []) + rows
        text = "".join(",".join(_csv_field(v) for v in line) + "\n" for line in lines)
    else:  # DDL / utility results are plain text, a row a line, columns tab-separated
        text = "".join("\t".join(v or "" for v in row) + "\n" for row in rows)
    try:
        storage.write_bytes_atomic(uri, text.encode("utf-8"))
    except Exception as exc:
        raise StatesError(TASK_FAILED, f"cannot write the query result to {uri}: {exc}") from exc


def _run_query(ctx: TaskContext, p: dict[str, Any]) -> tuple[dict[str, Any], Exception | None]:
    """Run the query now; record it (SUCCEEDED or FAILED) with its result. (QueryExecution, error)."""
    from shoal.sql.external import SqlRunner

    query = str(_need(p, "QueryString"))
    context = {"Catalog": "awsdatacatalog", **(p.get("QueryExecutionContext") or {})}
    kind, _ = statement_type(query)
    qid = str(uuid.uuid4())
    submitted = time.time()
    execution: dict[str, Any] = {
        "QueryExecutionId": qid,
        "Query": query,
        "StatementType": kind,
        "ResultConfiguration": {},
        "ResultReuseConfiguration": {"ResultReuseByAgeConfiguration": {"Enabled": False}},
        "QueryExecutionContext": context,
        "Status": {"State": "RUNNING", "SubmissionDateTime": _ms(submitted)},
        "WorkGroup": p.get("WorkGroup") or "primary",
        "EngineVersion": {"SelectedEngineVersion": "AUTO", "EffectiveEngineVersion": "Shoal (Spark SQL)"},
    }
    # Without a location (a workgroup default Shoal does not keep) the result is only kept for
    # getQueryResults; with one, the cloud's result file is written there as well.
    location = (p.get("ResultConfiguration") or {}).get("OutputLocation")
    result_file = _result_file_uri(str(location), qid, kind) if location else None
    if result_file:
        execution["ResultConfiguration"] = {"OutputLocation": result_file}
    if p.get("ExecutionParameters"):
        execution["ExecutionParameters"] = list(p["ExecutionParameters"])
    error: Exception | None = None
    result = None
    try:
        runner = SqlRunner(ctx.spark(), ctx.settings, dialect="athena", database_name=context.get("Database"))
        started = time.time()
        raw, _ = runner.execute(query, limit=RESULT_MAX_ROWS + 1)
        result = _stored_result(query, raw)
        if result_file:
            _write_result_file(result_file, kind, result, raw)
    except Exception as exc:  # noqa: BLE001 - a failed query is the execution's recorded failure, as the service reports it
        error = exc
        started = time.time()
    done = time.time()
    execution["Status"] = {
        "State": "FAILED" if error else "SUCCEEDED",
        "SubmissionDateTime": _ms(submitted),
        "CompletionDateTime": _ms(done),
    }
    if error:
        execution["Status"]["StateChangeReason"] = str(error)
        execution["Status"]["AthenaError"] = {
            "ErrorCategory": 2,  # USER
            "ErrorType": 1300 if kind == "DDL" else 1000,
            "Retryable": False,
            "ErrorMessage": str(error),
        }
    total = _ms(done) - _ms(submitted)
    execution["Statistics"] = {
        "EngineExecutionTimeInMillis": _ms(done) - _ms(started),
        "DataScannedInBytes": 0,  # not measured by Shoal
        "TotalExecutionTimeInMillis": total,
        "QueryQueueTimeInMillis": 0,
        "ServicePreProcessingTimeInMillis": 0,
        "QueryPlanningTimeInMillis": 0,
        "ServiceProcessingTimeInMillis": max(0, total - (_ms(done) - _ms(started))),
        "ResultReuseInformation": {"ReusedPreviousResult": False},
    }
    QueryStore(ctx.settings).put(execution, result)
    return execution, error


def athena_start_query_execution_sync(ctx: TaskContext, params: Any) -> Any:
    execution, error = _run_query(ctx, _params(params))
    if error is not None:
        raise error
    return {"QueryExecution": execution}


def athena_start_query_execution(ctx: TaskContext, params: Any) -> Any:
    execution, _ = _run_query(ctx, _params(params))
    return {"QueryExecutionId": execution["QueryExecutionId"]}


def athena_get_query_execution(ctx: TaskContext, params: Any) -> Any:
    execution, _ = QueryStore(ctx.settings).get(str(_need(_params(params), "QueryExecutionId")))
    return {"QueryExecution": execution}


def _token(qid: str, offset: int) -> str:
    return base64.urlsafe_b64encode(f"{qid}/{offset}".encode()).decode()


def _offset(qid: str, token: Any) -> int:
    if token in (None, ""):
        return 0
    try:
        owner, _, offset = base64.urlsafe_b64decode(str(token).encode()).decode().rpartition("/")
        if owner == qid:
            return int(offset)
    except (ValueError, UnicodeDecodeError):
        pass
    raise StatesError("Athena.InvalidRequestException", f"NextToken {token!r} is not valid for query {qid}")


def athena_get_query_results(ctx: TaskContext, params: Any) -> Any:
    p = _params(params)
    qid = str(_need(p, "QueryExecutionId"))
    execution, result = QueryStore(ctx.settings).get(qid)
    state = execution["Status"]["State"]
    if state != "SUCCEEDED" or result is None:
        reason = execution["Status"].get("StateChangeReason", "")
        raise StatesError(
            "Athena.InvalidRequestException",
            f"Query did not finish successfully. Final query state: {state}" + (f"\n{reason}" if reason else ""),
        )
    page = int(p.get("MaxResults") or PAGE_MAX)
    if not 1 <= page <= PAGE_MAX:
        raise StatesError("Athena.InvalidRequestException", f"MaxResults must be between 1 and {PAGE_MAX}")
    start = _offset(qid, p.get("NextToken"))
    rows: list[list[str | None]] = []
    if result["header"]:
        rows.append([c["Name"] for c in result["columns"]])
    rows.extend(result["rows"])
    end = start + page
    if result["truncated"] and end > len(rows):
        raise StatesError(
            "Athena.InvalidRequestException",
            f"the result of query {qid} was larger than Shoal keeps ({RESULT_MAX_ROWS} rows, "
            f"{RESULT_MAX_BYTES // (1024 * 1024)} MiB); only its first {len(rows)} rows can be read",
        )
    out: dict[str, Any] = {
        "ResultSet": {
            "Rows": [{"Data": [{} if v is None else {"VarCharValue": v} for v in row]} for row in rows[start:end]],
            "ResultSetMetadata": {"ColumnInfo": result["columns"]},
        },
        "UpdateCount": result["update_count"],
    }
    if end < len(rows):
        out["NextToken"] = _token(qid, end)
    return out


# ---- DataBrew and Glue jobs ------------------------------------------------------------------


def _run_registered_job(ctx: TaskContext, ref: str, arguments: dict[str, Any]) -> tuple[Any, Any, float, float]:
    """(job, run result or None, started, finished) for a registered recipe, Glue or Python job
    (a recipe run's JobResult, a Glue run's summary, None for Python)."""
    from shoal.recipes import JobRegistry, run_job

    job = JobRegistry(ctx.settings).resolve(ref)
    started = time.time()
    result: Any
    if job.kind == "python":
        load_callable(job.callable_ref)({**job.arguments, **arguments})
        result = None
    elif job.kind == "glue":
        from shoal.glue import run_defined_job

        assert job.script is not None  # a glue job's definition requires its script
        result = run_defined_job(
            ctx.settings,
            job.name,
            job.script,
            job.arguments,
            {str(k): str(v) for k, v in arguments.items()},
            say=ctx.say,
        )
    else:
        result = run_job(ctx.spark(), ctx.settings, job, say=ctx.say)
    return job, result, started, time.time()


def _location(path: str) -> dict[str, str]:
    if path.startswith(("s3://", "s3a://")):
        bucket, _, key = path.split("://", 1)[1].partition("/")
        return {"Bucket": bucket, "Key": key}
    return {"Bucket": "", "Key": path}


def _describe_job_run(job: Any, run_id: str, started: float, finished: float) -> dict[str, Any]:
    outputs, catalog_outputs = [], []
    for out in job.outputs:
        if out.format == "iceberg":
            ns, _, table = out.table.partition(".")
            catalog_outputs.append(
                {"CatalogId": "shoal", "DatabaseName": ns, "TableName": table, "Overwrite": out.mode == "replace"}
            )
            continue
        entry: dict[str, Any] = {"Format": out.format.upper(), "Location": _location(out.path)}
        if out.compression:
            entry["CompressionFormat"] = out.compression.upper()
        if out.partition_columns:
            entry["PartitionColumns"] = list(out.partition_columns)
        entry["Overwrite"] = out.mode == "replace"
        outputs.append(entry)
    run: dict[str, Any] = {
        "Attempt": 0,
        "CompletedOn": _ms(finished),
        "ExecutionTime": int(round(finished - started)),
        "JobName": job.name,
        "JobSample": {"Mode": "FULL_DATASET"},
        "LogSubscription": "ENABLE",
        "Outputs": outputs,
        "RunId": run_id,
        "StartedOn": _ms(started),
        "State": "SUCCEEDED",
    }
    if job.input is not None:
        run["DatasetName"] = job.input.table or str(job.input.path).rstrip("/").rsplit("/", 1)[-1]
    if catalog_outputs:
        run["DataCatalogOutputs"] = catalog_outputs
    return run


def _databrew(ctx: TaskContext, params: Any) -> dict[str, Any]:
    p = _params(params)
    job, result, started, finished = _run_registered_job(
        ctx, _need(p, "Name", "Job", "JobName"), p.get("Arguments") or {}
    )
    run_id = result.run_id if result is not None else f"db_{uuid.uuid4().hex}"
    return _describe_job_run(job, run_id, started, finished)


def databrew_start_job_run_sync(ctx: TaskContext, params: Any) -> Any:
    return _databrew(ctx, params)


def databrew_start_job_run(ctx: TaskContext, params: Any) -> Any:
    return {"RunId": _databrew(ctx, params)["RunId"]}


def _glue(ctx: TaskContext, params: Any) -> dict[str, Any]:
    p = _params(params)
    arguments = p.get("Arguments") or {}
    job, result, started, finished = _run_registered_job(ctx, _need(p, "JobName", "Name"), arguments)
    run_id = result["run_id"] if job.kind == "glue" else f"jr_{uuid.uuid4().hex}{uuid.uuid4().hex}"
    return {
        "Arguments": arguments,
        "Attempt": 0,
        "CompletedOn": _ms(finished),
        "ExecutionTime": int(round(finished - started)),
        "Id": run_id,
        "JobMode": "SCRIPT",
        "JobName": job.name,
        "JobRunState": "SUCCEEDED",
        "LastModifiedOn": _ms(finished),
        "PredecessorRuns": [],
        "StartedOn": _ms(started),
        "Timeout": 2880,
    }


def glue_start_job_run_sync(ctx: TaskContext, params: Any) -> Any:
    return _glue(ctx, params)


def glue_start_job_run(ctx: TaskContext, params: Any) -> Any:
    return {"JobRunId": _glue(ctx, params)["Id"]}


def glue_start_crawler(ctx: TaskContext, params: Any) -> Any:
    """Run a named crawler (`shoal catalog crawler create`) now; the cloud answers `{}`."""
    from shoal.catalog.crawl import crawl, get_crawler

    name = str(_need(_params(params), "Name"))
    crawler = get_crawler(ctx.settings, name)
    if crawler is None:
        raise StatesError(
            "Glue.EntityNotFoundException",
            f"Crawler entry with name {name} does not exist (create it with "
            f"`shoal catalog crawler create {name} --path PATH --table NS.TABLE`)",
        )
    crawl(ctx.spark(), ctx.settings, crawler.path, crawler.table, fmt=crawler.format, say=ctx.say)
    return {}


# ---- SNS and Lambda --------------------------------------------------------------------------


def sns_publish(ctx: TaskContext, params: Any) -> Any:
    result = notify(ctx, params)
    return {"MessageId": result["MessageId"], **_sdk(_request_id())}


def _invoke(ctx: TaskContext, ref: str, payload: Any) -> Any:
    return resolve_function(ctx.settings, ref)(payload)


def lambda_invoke(ctx: TaskContext, params: Any) -> Any:
    p = _params(params)
    ref = str(_need(p, "FunctionName"))
    payload = p.get("Payload", {})
    request_id = _request_id()
    kind = str(p.get("InvocationType") or "RequestResponse")
    meta = _sdk(request_id, "application/json")
    meta["SdkHttpMetadata"]["HttpHeaders"]["X-Amz-Executed-Version"] = "$LATEST"
    meta["SdkHttpMetadata"]["AllHttpHeaders"]["X-Amz-Executed-Version"] = ["$LATEST"]
    if kind == "DryRun":
        return {"Payload": "", "StatusCode": 204, **meta}
    output = _invoke(ctx, ref, payload)
    if kind == "Event":  # run now, answer as an accepted asynchronous call does
        meta["SdkHttpMetadata"]["HttpStatusCode"] = 202
        return {"Payload": "", "StatusCode": 202, **meta}
    return {"ExecutedVersion": "$LATEST", "Payload": output, **meta, "StatusCode": 200}


def function_arn(name: str) -> Any:
    """The handler for a bare function ARN: the function's own output is the result."""

    def handler(ctx: TaskContext, params: Any) -> Any:
        return _invoke(ctx, name, params if params is not None else {})

    return handler


# ---- child executions ------------------------------------------------------------------------


def _child(ctx: TaskContext, params: Any) -> tuple[dict[str, Any], Any]:
    from shoal.workflows.store import SUCCEEDED

    if ctx.run_workflow is None:
        raise StatesError(
            "States.Runtime", "this interpreter was made without a workflow runner: child executions cannot start"
        )
    p = _params(params)
    arn = str(_need(p, "StateMachineArn"))
    workflow = arn.rsplit(":", 1)[-1]
    input_ = p.get("Input", {})
    if isinstance(input_, str):
        try:
            input_ = json.loads(input_)
        except json.JSONDecodeError as exc:
            raise StatesError("States.Runtime", f"Input is not JSON text: {exc}") from exc
    record = ctx.run_workflow(
        ctx.settings,
        workflow,
        input_,
        name=p.get("Name"),
        trigger={"parent_execution": ctx.execution_id, "state": ctx.state},
        say=ctx.say,
    )
    account = arn.rsplit(":", 2)[0] if ":stateMachine:" in arn else "arn:aws:states::"
    describe = {
        "ExecutionArn": f"{account}:execution:{workflow}:{record.id}",
        "Input": input_,
        "InputDetails": {"Included": True},
        "Name": record.name or record.id,
        "StartDate": _ms(record.started_at.replace(tzinfo=dt.UTC).timestamp()),
        "StateMachineArn": arn,
        "Status": record.status,
    }
    if record.stopped_at is not None:
        describe["StopDate"] = _ms(record.stopped_at.replace(tzinfo=dt.UTC).timestamp())
    if record.status == SUCCEEDED:
        describe["Output"] = record.output
        describe["OutputDetails"] = {"Included": True}
    else:
        describe["Error"] = record.error
        describe["Cause"] = record.cause
    return describe, record


def _as_text(describe: dict[str, Any]) -> dict[str, Any]:
    out = dict(describe)
    out["Input"] = json.dumps(out["Input"], separators=(",", ":"))
    if "Output" in out:
        out["Output"] = json.dumps(out["Output"], separators=(",", ":"))
    return out


def _fail_unless_succeeded(describe: dict[str, Any], as_text: bool) -> None:
    if describe["Status"] != "SUCCEEDED":
        shown = _as_text(describe) if as_text else describe
        raise StatesError("States.TaskFailed", json.dumps(shown, default=str))


def states_start_execution_sync(ctx: TaskContext, params: Any) -> Any:
    describe, _ = _child(ctx, params)
    _fail_unless_succeeded(describe, True)
    return _as_text(describe)


def states_start_execution_sync2(ctx: TaskContext, params: Any) -> Any:
    describe, _ = _child(ctx, params)
    _fail_unless_succeeded(describe, False)
    return describe


def states_start_execution(ctx: TaskContext, params: Any) -> Any:
    """Runs the child to its end (it does not outlive this state), then answers as a start does.
    A failed child does not fail this state, as in the cloud: its record says why."""
    describe, _ = _child(ctx, params)
    return {"ExecutionArn": describe["ExecutionArn"], "StartDate": describe["StartDate"]}


SERVICES: dict[tuple[str, str], dict[str, Any]] = {
    ("athena", "startQueryExecution"): {"": athena_start_query_execution, ".sync": athena_start_query_execution_sync},
    ("athena", "getQueryExecution"): {"": athena_get_query_execution},
    ("athena", "getQueryResults"): {"": athena_get_query_results},
    ("databrew", "startJobRun"): {"": databrew_start_job_run, ".sync": databrew_start_job_run_sync},
    ("glue", "startJobRun"): {"": glue_start_job_run, ".sync": glue_start_job_run_sync},
    ("glue", "startCrawler"): {"": glue_start_crawler},
    ("sns", "publish"): {"": sns_publish},
    ("lambda", "invoke"): {"": lambda_invoke},
    ("states", "startExecution"): {
        "": states_start_execution,
        ".sync": states_start_execution_sync,
        ".sync:2": states_start_execution_sync2,
    },
}
