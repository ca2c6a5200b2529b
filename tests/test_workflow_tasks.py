"""Task resources that reach the other capabilities: CDC apply, ingest + extract, registered
jobs through the ETL-job ARN, and Python callables through the function ARNs."""

from __future__ import annotations

import uuid

import yaml
from helpers import write_csv

from shoal.recipes import JobRegistry, load_job_file
from shoal.workflows import definition, run, tasks


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


def test_etl_job_and_function_arns(settings, tmp_path):
    name = f"py-job-{uuid.uuid4().hex[:6]}"
    job_file = tmp_path / "job.yaml"
    job_file.write_text(
        yaml.safe_dump({"name": name, "type": "python", "entry_point": "wftasks:add", "arguments": {"a": 1}})
    )
    JobRegistry(settings).register(load_job_file(job_file))
    m = build(
        {
            "Etl": {
                "Type": "Task",
                "Resource": "arn:aws:states:::glue:startJobRun.sync",
                "Parameters": {"JobName": name, "Arguments": {"b": 41}},
                "ResultPath": "$.etl",
                "Next": "Fn",
            },
            "Fn": {
                "Type": "Task",
                "Resource": "arn:aws:states:::lambda:invoke",
                "Parameters": {"FunctionName": "wftasks:echo", "Payload": {"v.$": "$.etl.Result.sum"}},
                "ResultPath": "$.fn",
                "Next": "Direct",
            },
            # A function ARN names an entry point in the `shoal.tasks` group; none is installed here.
            "Direct": {
                "Type": "Task",
                "Resource": "arn:aws:lambda:eu-west-1:123456789012:function:report-builder:live",
                "Catch": [{"ErrorEquals": ["States.Runtime"], "ResultPath": "$.direct", "Next": "Done"}],
                "Next": "Done",
            },
            "Done": {"Type": "Succeed"},
        }
    )
    rec = run(settings, m, {"x": 1})
    assert rec.status == "SUCCEEDED", rec.cause
    assert rec.output["etl"] == {"JobName": name, "JobRunState": "SUCCEEDED", "Result": {"sum": 42}}
    assert rec.output["fn"] == {"v": 42}
    assert rec.output["direct"]["Error"] == "States.Runtime"
    assert "no entry point 'report-builder' in group 'shoal.tasks'" in rec.output["direct"]["Cause"]
