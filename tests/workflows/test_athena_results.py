"""Athena tasks with `ResultConfiguration.OutputLocation`: the cloud's `<QueryExecutionId>.csv`
written there (local folder and S3), its full path reported, and a location that cannot be
written failing the task."""

from __future__ import annotations

import csv
import io
import uuid
from pathlib import Path

import pytest
from pyarrow import fs as pafs
from pydantic import SecretStr

from shoal import storage
from shoal.config import StorageSettings
from shoal.workflows import Store, definition, run, tasks

# Quotes, a comma, a newline and NULL: what RFC 4180 quoting has to carry.
QUERY = "SELECT n, s FROM (VALUES (1, 'say \"hi\", then'), (2, NULL), (3, 'two\nlines')) AS t(n, s) ORDER BY n"
WANT_ROWS = [["n", "s"], ["1", 'say "hi", then'], ["2", ""], ["3", "two\nlines"]]


def athena_machine(location: str, query: str = QUERY) -> object:
    """An Athena task as exported from the cloud (unedited), then the execution looked up again."""
    states = {
        "Query": {
            "Type": "Task",
            "Resource": "arn:aws:states:::athena:startQueryExecution.sync",
            "Parameters": {
                "QueryString": query,
                "WorkGroup": "primary",
                "ResultConfiguration": {"OutputLocation": location},
            },
            "ResultSelector": {
                "id.$": "$.QueryExecution.QueryExecutionId",
                "output.$": "$.QueryExecution.ResultConfiguration.OutputLocation",
            },
            "ResultPath": "$.query",
            "Catch": [{"ErrorEquals": ["States.TaskFailed"], "ResultPath": "$.failed", "Next": "Done"}],
            "Next": "Describe",
        },
        "Describe": {
            "Type": "Task",
            "Resource": "arn:aws:states:::athena:getQueryExecution",
            "Parameters": {"QueryExecutionId.$": "$.query.id"},
            "ResultSelector": {"output.$": "$.QueryExecution.ResultConfiguration.OutputLocation"},
            "ResultPath": "$.describe",
            "Next": "Done",
        },
        "Done": {"Type": "Succeed"},
    }
    return definition.build(
        {"StartAt": "Query", "States": states}, name=f"athena{uuid.uuid4().hex[:6]}", resource_check=tasks.unsupported
    )


def check_written(text: str, out: dict, location: str) -> None:
    qid = out["query"]["id"]
    assert out["query"]["output"] == out["describe"]["output"] == f"{location.rstrip('/')}/{qid}.csv"
    assert list(csv.reader(io.StringIO(text, newline=""))) == WANT_ROWS
    # Every value double-quoted, quotes doubled; NULL is the empty unquoted field.
    assert text.splitlines()[:3] == ['"n","s"', '"1","say ""hi"", then"', '"2",']


def test_result_csv_is_written_to_a_local_folder(spark, settings, tmp_path) -> None:
    location = f"{tmp_path}/athena-results/"
    rec = run(settings, athena_machine(location))
    assert rec.status == "SUCCEEDED", rec.cause
    out = rec.output
    assert "failed" not in out
    written = Path(out["query"]["output"])
    check_written(written.read_text(encoding="utf-8"), out, location)
    # Only the result itself: no staged file (or .metadata companion) is left beside it.
    assert [p.name for p in written.parent.iterdir()] == [written.name]


def test_statements_without_rows_write_an_empty_result_and_ddl_a_txt(spark, settings, tmp_path) -> None:
    ns = f"athr{uuid.uuid4().hex[:6]}"
    location = f"file://{tmp_path}/res"
    rec = run(settings, athena_machine(location, f"CREATE DATABASE IF NOT EXISTS {ns}"))
    assert rec.status == "SUCCEEDED", rec.cause
    path = rec.output["query"]["output"]
    assert path == f"{location}/{rec.output['query']['id']}.txt" and storage.read_bytes(path) == b""


def test_an_unwritable_location_fails_the_task_naming_it(spark, settings, tmp_path) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("kept\n")
    location = f"{blocker}/results"
    rec = run(settings, athena_machine(location))
    assert rec.status == "SUCCEEDED", rec.cause  # the Catch took it
    failed = rec.output["failed"]
    assert failed["Error"] == "States.TaskFailed"
    assert "cannot write the query result to" in failed["Cause"] and location in failed["Cause"]
    assert blocker.read_text() == "kept\n"
    # The query is recorded as FAILED with the same reason, as getQueryExecution reports it.
    from shoal.workflows.aws import QueryStore

    events = Store(settings).history(rec.id)
    assert not any(e["type"] == "TaskSucceeded" and e["state"] == "Query" for e in events)
    qid = failed["Cause"].split("/results/")[1].split(".csv")[0]
    execution, _ = QueryStore(settings).get(qid)
    assert execution["Status"]["State"] == "FAILED" and location in execution["Status"]["StateChangeReason"]


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    from tests.support.servers import seaweedfs

    with seaweedfs(tmp_path_factory.mktemp("s3")) as server:
        yield server


def test_result_csv_is_written_to_s3(spark, settings, s3, monkeypatch) -> None:
    st = StorageSettings(endpoint=s3.endpoint, access_key=SecretStr(s3.access_key), secret_key=SecretStr(s3.secret_key))
    for var in storage.S3_ENV.values():
        # Recorded before configure() exports them, so the test's end puts back what was there
        # (a delenv of an unset variable records nothing: configure's values stayed for good).
        monkeypatch.setenv(var, "")
    storage.configure(st)
    location = f"s3://{s3.bucket}/athena-results"
    rec = run(settings, athena_machine(location))
    assert rec.status == "SUCCEEDED", rec.cause
    out = rec.output
    assert "failed" not in out
    key = out["query"]["output"].removeprefix("s3://")
    with s3.client().open_input_stream(key) as f:
        check_written(f.read().decode("utf-8"), out, location)
    listed = s3.client().get_file_info(pafs.FileSelector(f"{s3.bucket}/athena-results"))
    assert [i.path for i in listed] == [key]
