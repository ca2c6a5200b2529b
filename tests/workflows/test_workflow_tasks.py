"""Task resources that reach the other capabilities: CDC apply, ingest + extract, registered
jobs through the ETL-job ARN, and Python callables through the function ARNs."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import yaml

from shoal.notify import Notifier
from shoal.recipes import JobRegistry, load_job_file
from shoal.workflows import Store, definition, register, run, tasks
from tests.support.helpers import run_cli, write_csv


def build(states: dict) -> object:
    return definition.build(
        {"StartAt": next(iter(states)), "States": states},
        name=f"tasks{uuid.uuid4().hex[:6]}",
        resource_check=tasks.unsupported,
    )


def test_cdc_task_applies_change_files(spark, settings, tmp_path, table_name):
    src = tmp_path / "changes"
    src.mkdir()
    write_csv(
        src,
        "LOAD00000001.csv",
        [["I", 1, "a", "one", 5, "2024-01-01 00:00:00"], ["I", 2, "b", "two", 7, "2024-01-01 00:00:00"]],
    )
    write_csv(
        src,
        "20240102-000000.csv",
        [["U", 1, "a", "one", 4, "2024-01-02 00:00:00"], ["D", 2, "b", "two", 7, "2024-01-02 00:00:00"]],
    )
    m = build(
        {
            "Apply": {
                "Type": "Task",
                "Resource": "shoal:cdc",
                "Parameters": {"Source": str(src), "Table": table_name, "Key": "product_id", "Sequence": "updated_at"},
                "ResultSelector": {
                    "inserted.$": "$.inserted",
                    "deleted.$": "$.deleted",
                    "files.$": "States.ArrayLength($.files_applied)",
                },
                "End": True,
            }
        }
    )
    rec = run(settings, m)
    assert rec.status == "SUCCEEDED", rec.cause
    assert rec.output == {"inserted": 1, "deleted": 0, "files": 2}  # net effect of one batch
    assert [tuple(r) for r in spark.sql(f"SELECT product_id, quantity FROM {table_name}").collect()] == [(1, 4)]


def test_cdc_task_errors_name_its_parameters_not_cli_flags(spark, settings, tmp_path, table_name):
    """The library names ApplyOptions' fields; the task says them as its own parameters."""
    src = tmp_path / "changes"
    src.mkdir()
    write_csv(src, "LOAD00000001.csv", [["I", 1, "a", "one", 5, "2024-01-01 00:00:00"]])
    m = build(
        {
            "Apply": {
                "Type": "Task",
                "Resource": "shoal:cdc",
                "Parameters": {"Source": str(src), "Table": table_name, "Key": "sku", "Sequence": "updated_at"},
                "End": True,
            }
        }
    )
    rec = run(settings, m)
    assert rec.status == "FAILED"
    assert rec.error == "SourceError", rec.cause
    assert "Key column 'sku' is not in the change files" in rec.cause and "--key" not in rec.cause


def test_extract_task_ingests_and_extracts(spark, settings, tmp_path):
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    (inbox / "note.txt").write_text("Shoal workflows ingest and extract documents on a schedule.\n")
    m = build(
        {
            "Extract": {
                "Type": "Task",
                "Resource": "shoal:extract",
                "Parameters": {"Source": str(inbox), "SourceName": f"wf{uuid.uuid4().hex[:6]}", "Only": "text/plain"},
                "ResultSelector": {"new.$": "$.ingest.new", "objects.$": "$.extract.objects"},
                "End": True,
            }
        }
    )
    rec = run(settings, m)
    assert rec.status == "SUCCEEDED", rec.cause
    assert rec.output["new"] == 1 and rec.output["objects"] >= 1


def test_etl_job_and_function_arns(settings, tmp_path, capsys, monkeypatch, cli_env):
    name = f"py-job-{uuid.uuid4().hex[:6]}"
    fn = f"adder-{uuid.uuid4().hex[:6]}"
    job_file = tmp_path / "job.yaml"
    job_file.write_text(
        yaml.safe_dump(
            {"name": name, "type": "python", "entry_point": "tests.support.wftasks:add", "arguments": {"a": 1}}
        )
    )
    JobRegistry(settings).register(load_job_file(job_file))
    code, out, _ = run_cli(["function", "register", fn, "tests.support.wftasks:add", "--json"], capsys, monkeypatch)
    assert code == 0 and json.loads(out)["target"] == "tests.support.wftasks:add"
    m = build(
        {
            "Etl": {
                "Type": "Task",
                "Resource": "arn:aws:states:::glue:startJobRun.sync",
                "Parameters": {"JobName": name, "Arguments": {"b": 41}},
                # GetJobRun's JobRun, as the cloud hands it on
                "ResultSelector": {"state.$": "$.JobRunState", "id.$": "$.Id", "b.$": "$.Arguments.b"},
                "ResultPath": "$.etl",
                "Next": "EtlAsync",
            },
            "EtlAsync": {
                "Type": "Task",
                "Resource": "arn:aws:states:::glue:startJobRun",
                "Parameters": {"JobName": name, "Arguments": {"b": 1}},
                "ResultPath": "$.started",
                "Next": "Fn",
            },
            "Fn": {
                "Type": "Task",
                "Resource": "arn:aws:states:::lambda:invoke",
                "Parameters": {
                    "FunctionName": f"arn:aws:lambda:eu-west-1:123456789012:function:{fn}:live",
                    "Payload": {"a.$": "$.etl.b", "b": 1},
                },
                "ResultSelector": {"sum.$": "$.Payload.sum", "status.$": "$.StatusCode"},
                "ResultPath": "$.fn",
                "Next": "ByModule",
            },
            "ByModule": {
                "Type": "Task",
                "Resource": "arn:aws:states:::lambda:invoke",
                "Parameters": {"FunctionName": "tests.support.wftasks:echo", "Payload": {"v": 1}},
                "ResultSelector": {"echo.$": "$.Payload"},
                "ResultPath": "$.echo",
                "Next": "Bare",
            },
            # A bare function ARN: the function's own output is the result.
            "Bare": {
                "Type": "Task",
                "Resource": f"arn:aws:lambda:eu-west-1:123456789012:function:{fn}",
                "Parameters": {"a": 2, "b": 3},
                "ResultPath": "$.bare",
                "Next": "Missing",
            },
            "Missing": {
                "Type": "Task",
                "Resource": "arn:aws:lambda:eu-west-1:123456789012:function:report-builder:live",
                "Catch": [
                    {"ErrorEquals": ["Lambda.ResourceNotFoundException"], "ResultPath": "$.direct", "Next": "Done"}
                ],
                "Next": "Done",
            },
            "Done": {"Type": "Succeed"},
        }
    )
    rec = run(settings, m, {"x": 1})
    assert rec.status == "SUCCEEDED", rec.cause
    out = rec.output
    assert out["etl"]["state"] == "SUCCEEDED" and out["etl"]["b"] == 41 and out["etl"]["id"].startswith("jr_")
    assert list(out["started"]) == ["JobRunId"]
    assert out["fn"] == {"sum": 42, "status": 200}
    assert out["bare"] == {"sum": 5}
    assert out["direct"]["Error"] == "Lambda.ResourceNotFoundException"
    assert "shoal function register report-builder" in out["direct"]["Cause"]
    events = Store(settings).history(rec.id)
    invoke = next(e for e in events if e["type"] == "TaskSucceeded" and e["state"] == "ByModule")["output"]
    assert set(invoke) == {"ExecutedVersion", "Payload", "SdkHttpMetadata", "SdkResponseMetadata", "StatusCode"}
    assert invoke["Payload"] == {"v": 1} and invoke["SdkHttpMetadata"]["HttpStatusCode"] == 200
    code, out_text, _ = run_cli(["function", "list", "--json"], capsys, monkeypatch)
    assert fn in {f["name"] for f in json.loads(out_text)}


def test_athena_arns_return_cloud_shapes_and_keep_results(spark, settings, tmp_path):
    ns = f"ath{uuid.uuid4().hex[:6]}"
    values = "SELECT n, s FROM (VALUES (1, 'a'), (2, 'b'), (3, NULL)) AS t(n, s) ORDER BY n"
    m = build(
        {
            "Create": {
                "Type": "Task",
                "Resource": "arn:aws:states:::athena:startQueryExecution.sync",
                "Parameters": {
                    "QueryString": f"CREATE TABLE {ns}.nums AS {values}",
                    "WorkGroup": "primary",
                    "ResultConfiguration": {"OutputLocation": f"{tmp_path}/athena/"},
                },
                "ResultSelector": {
                    "state.$": "$.QueryExecution.Status.State",
                    "type.$": "$.QueryExecution.StatementType",
                    "output.$": "$.QueryExecution.ResultConfiguration.OutputLocation",
                    "id.$": "$.QueryExecution.QueryExecutionId",
                    "took.$": "$.QueryExecution.Statistics.TotalExecutionTimeInMillis",
                },
                "ResultPath": "$.create",
                "Next": "Start",
            },
            "Start": {
                "Type": "Task",
                "Resource": "arn:aws:states:::athena:startQueryExecution",
                "Parameters": {
                    "QueryString": f"SELECT n, s FROM {ns}.nums ORDER BY n",
                    "QueryExecutionContext": {"Database": ns},
                },
                "ResultPath": "$.start",
                "Next": "Page1",
            },
            "Page1": {
                "Type": "Task",
                "Resource": "arn:aws:states:::athena:getQueryResults",
                "Parameters": {"QueryExecutionId.$": "$.start.QueryExecutionId", "MaxResults": 2},
                "ResultSelector": {
                    "header.$": "$.ResultSet.Rows[0].Data[*].VarCharValue",
                    "first.$": "$.ResultSet.Rows[1].Data[0].VarCharValue",
                    "types.$": "$.ResultSet.ResultSetMetadata.ColumnInfo[*].Type",
                    "next.$": "$.NextToken",
                },
                "ResultPath": "$.page1",
                "Next": "Page2",
            },
            "Page2": {
                "Type": "Task",
                "Resource": "arn:aws:states:::athena:getQueryResults",
                "Parameters": {
                    "QueryExecutionId.$": "$.start.QueryExecutionId",
                    "MaxResults": 2,
                    "NextToken.$": "$.page1.next",
                },
                "ResultSelector": {"rows.$": "$.ResultSet.Rows", "count.$": "$.UpdateCount"},
                "ResultPath": "$.page2",
                "Next": "Describe",
            },
            "Describe": {
                "Type": "Task",
                "Resource": "arn:aws:states:::athena:getQueryExecution",
                "Parameters": {"QueryExecutionId.$": "$.start.QueryExecutionId"},
                "ResultSelector": {
                    "state.$": "$.QueryExecution.Status.State",
                    "db.$": "$.QueryExecution.QueryExecutionContext.Database",
                },
                "ResultPath": "$.describe",
                "Next": "Broken",
            },
            # Without .sync a failing query still starts; its failure shows when results are asked for.
            "Broken": {
                "Type": "Task",
                "Resource": "arn:aws:states:::athena:startQueryExecution",
                "Parameters": {"QueryString": "SELECT * FROM no_such_db.no_such_table"},
                "ResultPath": "$.broken",
                "Next": "BrokenResults",
            },
            "BrokenResults": {
                "Type": "Task",
                "Resource": "arn:aws:states:::athena:getQueryResults",
                "Parameters": {"QueryExecutionId.$": "$.broken.QueryExecutionId"},
                "Catch": [
                    {"ErrorEquals": ["Athena.InvalidRequestException"], "ResultPath": "$.failed", "Next": "Done"}
                ],
                "Next": "Done",
            },
            "Done": {"Type": "Succeed"},
        }
    )
    rec = run(settings, m)
    assert rec.status == "SUCCEEDED", rec.cause
    out = rec.output
    assert out["create"]["state"] == "SUCCEEDED" and out["create"]["type"] == "DML"
    assert out["create"]["output"] == f"{tmp_path}/athena/{out['create']['id']}.csv"
    assert Path(out["create"]["output"]).read_text() == ""  # a CTAS has no result set
    assert isinstance(out["create"]["took"], int)
    assert list(out["start"]) == ["QueryExecutionId"]
    # Athena's first row holds the column names; every value is text, NULL an empty datum.
    assert out["page1"]["header"] == ["n", "s"] and out["page1"]["first"] == "1"
    assert out["page1"]["types"] == ["integer", "varchar"]
    assert out["page2"] == {
        "rows": [{"Data": [{"VarCharValue": "2"}, {"VarCharValue": "b"}]}, {"Data": [{"VarCharValue": "3"}, {}]}],
        "count": 0,
    }
    assert out["describe"] == {"state": "SUCCEEDED", "db": ns}
    assert "Final query state: FAILED" in out["failed"]["Cause"]
    # The query and its result are kept in the catalog database, by QueryExecutionId.
    from shoal.workflows.aws import QueryStore

    execution, result = QueryStore(settings).get(out["start"]["QueryExecutionId"])
    assert execution["Status"]["State"] == "SUCCEEDED" and len(result["rows"]) == 3
    sync = next(
        e["output"] for e in Store(settings).history(rec.id) if e["type"] == "TaskSucceeded" and e["state"] == "Create"
    )
    qe = sync["QueryExecution"]
    assert set(qe) >= {
        "QueryExecutionId",
        "Query",
        "StatementType",
        "Status",
        "Statistics",
        "ResultConfiguration",
        "QueryExecutionContext",
        "WorkGroup",
    }
    assert qe["Status"]["CompletionDateTime"] >= qe["Status"]["SubmissionDateTime"] > 1_600_000_000_000


def test_databrew_sns_and_crawler_arns(spark, settings, tmp_path, capsys, monkeypatch, cli_env):
    data = tmp_path / "in" / "orders.csv"
    data.parent.mkdir(parents=True)
    data.write_text("order_id,ordered,amount\n1,2024-01-05,10.5\n2,2024-01-20,4\n")
    job_name = f"orders-{uuid.uuid4().hex[:6]}"
    job_file = tmp_path / "orders.job.yaml"
    job_file.write_text(
        yaml.safe_dump(
            {
                "Name": job_name,
                "Input": {"Path": "in/orders.csv", "Format": "csv"},
                "Outputs": [
                    {
                        "Location": {"Path": "out/orders"},
                        "Format": "PARQUET",
                        "CompressionFormat": "SNAPPY",
                        "Overwrite": True,
                    }
                ],
            }
        )
    )
    JobRegistry(settings).register(load_job_file(job_file))
    topic = f"t-{uuid.uuid4().hex[:6]}"
    Notifier(settings).create_topic(topic)
    Notifier(settings).subscribe(topic, "file", str(tmp_path / "notes.jsonl"))
    crawler = f"orders-crawler-{uuid.uuid4().hex[:6]}"
    table = f"crawled{uuid.uuid4().hex[:6]}.orders"
    code, out, _ = run_cli(
        [
            "catalog",
            "crawler",
            "create",
            crawler,
            "--path",
            str(tmp_path / "out" / "orders"),
            "--table",
            table,
            "--json",
        ],
        capsys,
        monkeypatch,
    )
    assert code == 0 and json.loads(out)["format"] == "auto"
    m = build(
        {
            "Prep": {
                "Type": "Task",
                "Resource": "arn:aws:states:::databrew:startJobRun.sync",
                "Parameters": {"Name": job_name},
                "ResultSelector": {
                    "run.$": "$.RunId",
                    "state.$": "$.State",
                    "job.$": "$.JobName",
                    "format.$": "$.Outputs[0].Format",
                    "compression.$": "$.Outputs[0].CompressionFormat",
                },
                "ResultPath": "$.prep",
                "Next": "PrepAsync",
            },
            "PrepAsync": {
                "Type": "Task",
                "Resource": "arn:aws:states:::databrew:startJobRun",
                "Parameters": {"Name": job_name},
                "ResultPath": "$.prep_async",
                "Next": "Crawl",
            },
            "Crawl": {
                "Type": "Task",
                "Resource": "arn:aws:states:::glue:startCrawler",
                "Parameters": {"Name": crawler},
                "ResultPath": "$.crawl",
                "Next": "Tell",
            },
            "Tell": {
                "Type": "Task",
                "Resource": "arn:aws:states:::sns:publish",
                "Parameters": {"TopicArn": f"arn:aws:sns:eu-west-1:123456789012:{topic}", "Message": "done"},
                "ResultSelector": {"id.$": "$.MessageId", "http.$": "$.SdkHttpMetadata.HttpStatusCode"},
                "ResultPath": "$.tell",
                "Next": "NoCrawler",
            },
            "NoCrawler": {
                "Type": "Task",
                "Resource": "arn:aws:states:::glue:startCrawler",
                "Parameters": {"Name": "ghost"},
                "Catch": [{"ErrorEquals": ["Glue.EntityNotFoundException"], "ResultPath": "$.ghost", "Next": "Done"}],
                "Next": "Done",
            },
            "Done": {"Type": "Succeed"},
        }
    )
    rec = run(settings, m)
    assert rec.status == "SUCCEEDED", rec.cause
    out = rec.output
    assert out["prep"]["state"] == "SUCCEEDED" and out["prep"]["job"] == job_name and out["prep"]["run"]
    assert (out["prep"]["format"], out["prep"]["compression"]) == ("PARQUET", "SNAPPY")
    assert list(out["prep_async"]) == ["RunId"]
    assert out["crawl"] == {}
    assert out["tell"]["http"] == 200 and out["tell"]["id"]
    assert out["ghost"]["Error"] == "Glue.EntityNotFoundException"
    # The crawler made the table; the date column stayed text, as the data-prep service keeps it.
    from shoal.catalog.crawl import versions
    from shoal.sql.external import SqlRunner

    assert dict(versions(settings, table)[-1]["columns"]) == {
        "order_id": "int",
        "ordered": "string",
        "amount": "double",
    }
    assert SqlRunner(spark, settings).execute(f"SELECT count(*) FROM {table}")[0].rows == [(2,)]


def test_child_executions(settings, tmp_path):
    child_name = f"child{uuid.uuid4().hex[:6]}"
    child = tmp_path / f"{child_name}.asl.json"
    child.write_text(
        json.dumps(
            {
                "StartAt": "Add",
                "States": {
                    "Add": {
                        "Type": "Task",
                        "Resource": "shoal:python",
                        "Parameters": {"EntryPoint": "tests.support.wftasks:add", "Payload.$": "$"},
                        "Next": "Check",
                    },
                    "Check": {
                        "Type": "Choice",
                        "Choices": [{"Variable": "$.sum", "NumericGreaterThan": 100, "Next": "TooBig"}],
                        "Default": "Ok",
                    },
                    "TooBig": {"Type": "Fail", "Error": "Child.TooBig", "Cause": "sum over 100"},
                    "Ok": {"Type": "Succeed"},
                },
            }
        )
    )
    register(settings, child)
    arn = f"arn:aws:states:eu-west-1:123456789012:stateMachine:{child_name}"
    m = build(
        {
            "Sync": {
                "Type": "Task",
                "Resource": "arn:aws:states:::states:startExecution.sync",
                "Parameters": {"StateMachineArn": arn, "Input": {"a": 1, "b": 2}},
                "ResultSelector": {"out.$": "States.StringToJson($.Output)", "status.$": "$.Status"},
                "ResultPath": "$.sync",
                "Next": "Sync2",
            },
            "Sync2": {
                "Type": "Task",
                "Resource": "arn:aws:states:::states:startExecution.sync:2",
                "Parameters": {"StateMachineArn": arn, "Input": {"a": 2, "b.$": "$.sync.out.sum"}, "Name": "second"},
                "ResultSelector": {"sum.$": "$.Output.sum", "arn.$": "$.ExecutionArn", "name.$": "$.Name"},
                "ResultPath": "$.sync2",
                "Next": "Async",
            },
            "Async": {
                "Type": "Task",
                "Resource": "arn:aws:states:::states:startExecution",
                "Parameters": {"StateMachineArn": arn, "Input": {"a": 1, "b": 1}},
                "ResultPath": "$.started",
                "Next": "Failing",
            },
            "Failing": {
                "Type": "Task",
                "Resource": "arn:aws:states:::states:startExecution.sync:2",
                "Parameters": {"StateMachineArn": arn, "Input": {"a": 100, "b": 1}},
                "Catch": [{"ErrorEquals": ["States.TaskFailed"], "ResultPath": "$.failed", "Next": "Done"}],
                "Next": "Done",
            },
            "Done": {"Type": "Succeed"},
        }
    )
    rec = run(settings, m)
    assert rec.status == "SUCCEEDED", rec.cause
    out = rec.output
    assert out["sync"] == {"out": {"sum": 3}, "status": "SUCCEEDED"}
    assert out["sync2"]["sum"] == 5 and out["sync2"]["name"] == "second"
    assert out["sync2"]["arn"].startswith(f"arn:aws:states:eu-west-1:123456789012:execution:{child_name}:")
    assert set(out["started"]) == {"ExecutionArn", "StartDate"} and isinstance(out["started"]["StartDate"], int)
    failed = json.loads(out["failed"]["Cause"])
    assert failed["Status"] == "FAILED" and failed["Error"] == "Child.TooBig"
    children = [e for e in Store(settings).list_executions(workflow=child_name)]
    assert len(children) == 4
