"""`shoal workflow|recipe|job|topic|schedule|scheduler` as users run them, including a
resume after the running process was killed."""

from __future__ import annotations

import json
import os
import signal
import time
import uuid
from pathlib import Path

import yaml

from shoal.workflows import Store
from tests.support.helpers import run_cli, shoal_process

REPO = Path(__file__).resolve().parents[2]  # where `tests.support.wftasks` is imported from


def write(path: Path, data: dict) -> Path:
    path.write_text(json.dumps(data))
    return path


def test_run_history_graph_and_list(tmp_path, settings, cli_env, capsys, monkeypatch):
    flow = write(
        tmp_path / f"hello{uuid.uuid4().hex[:6]}.asl.json",
        {
            "StartAt": "Greet",
            "States": {
                "Greet": {"Type": "Pass", "Parameters": {"text.$": "States.Format('hello {}', $.who)"}, "Next": "Done"},
                "Done": {"Type": "Succeed"},
            },
        },
    )
    code, out, _ = run_cli(["workflow", "run", str(flow), "--input", '{"who": "lake"}', "--json"], capsys, monkeypatch)
    assert code == 0
    result = json.loads(out)
    assert result["status"] == "SUCCEEDED" and result["output"] == {"text": "hello lake"}
    code, out, _ = run_cli(["workflow", "history", result["execution_id"], "--json"], capsys, monkeypatch)
    events = json.loads(out)["events"]
    assert [e["type"] for e in events][:3] == ["ExecutionStarted", "PassStateEntered", "PassStateExited"]
    code, out, _ = run_cli(["workflow", "list", "--json"], capsys, monkeypatch)
    assert flow.name.split(".")[0] in {w["name"] for w in json.loads(out)}
    svg = tmp_path / "g.svg"
    code, out, _ = run_cli(
        ["workflow", "graph", flow.name.split(".")[0], "--execution", result["execution_id"], "-o", str(svg)],
        capsys,
        monkeypatch,
    )
    assert code == 0 and "<svg" in svg.read_text()
    code, out, _ = run_cli(
        ["workflow", "executions", "--workflow", flow.name.split(".")[0], "--json"], capsys, monkeypatch
    )
    assert json.loads(out)[0]["execution_id"] == result["execution_id"]


def test_failed_run_and_invalid_definition_exit_non_zero(tmp_path, cli_env, capsys, monkeypatch):
    flow = write(
        tmp_path / "fails.json",
        {"StartAt": "F", "States": {"F": {"Type": "Fail", "Error": "Data.Missing", "Cause": "no rows"}}},
    )
    code, out, err = run_cli(["workflow", "run", str(flow)], capsys, monkeypatch)
    assert code == 1 and "Data.Missing" in out and "shoal workflow resume" in err
    bad = write(
        tmp_path / "bad.json",
        {"StartAt": "A", "States": {"A": {"Type": "Task", "Resource": "shoal:nope", "End": True}}},
    )
    code, out, err = run_cli(["workflow", "validate", str(bad)], capsys, monkeypatch)
    assert code == 1 and "state 'A': field 'Resource': unsupported resource 'shoal:nope'" in err
    code, out, err = run_cli(["workflow", "run", str(flow), "--input", "{not json"], capsys, monkeypatch)
    assert code == 1 and "--input is not valid JSON" in err


def test_resume_after_the_process_was_killed(tmp_path, settings, cli_env):
    log, counter = tmp_path / "log", tmp_path / "counter"
    flow = write(
        tmp_path / f"killme{uuid.uuid4().hex[:6]}.json",
        {
            "StartAt": "First",
            "States": {
                "First": {
                    "Type": "Task",
                    "Resource": "shoal:python",
                    "Parameters": {"EntryPoint": "tests.support.wftasks:mark", "log": str(log), "label": "first"},
                    "ResultPath": "$.first",
                    "Next": "Slow",
                },
                "Slow": {
                    "Type": "Task",
                    "Resource": "shoal:python",
                    "Parameters": {"EntryPoint": "tests.support.wftasks:slow_first", "counter": str(counter)},
                    "ResultPath": "$.slow",
                    "Next": "Last",
                },
                "Last": {
                    "Type": "Task",
                    "Resource": "shoal:python",
                    "Parameters": {"EntryPoint": "tests.support.wftasks:mark", "log": str(log), "label": "last"},
                    "ResultPath": "$.last",
                    "End": True,
                },
            },
        },
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = shoal_process(["workflow", "run", str(flow), "--json"], env)
    store = Store(settings)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not counter.exists():
        time.sleep(0.1)
    assert counter.exists(), proc.communicate(timeout=5)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    record = next(r for r in store.list_executions(flow.name.split(".")[0]))
    assert record.status == "RUNNING"
    listed = shoal_process(["workflow", "executions", "--json"], env)
    out, _ = listed.communicate(timeout=60)
    assert any(e["execution_id"] == record.id and "process gone" in e["status"] for e in json.loads(out))
    resumed = shoal_process(["workflow", "resume", record.id[:-2], "--json"], env)
    out, err = resumed.communicate(timeout=120)
    assert resumed.returncode == 0, err
    result = json.loads(out)
    assert result["status"] == "SUCCEEDED"
    assert result["output"]["slow"] == {"calls": 2} and result["output"]["first"] == {"marked": "first"}
    assert log.read_text().split() == ["first", "last"]  # the completed state did not run again


def test_recipe_job_topic_schedule_commands(tmp_path, spark, settings, cli_env, capsys, monkeypatch):
    data = tmp_path / "sales.csv"
    data.write_text("day,amount,region\n2024-01-02,10,EU\n2024-02-03,5,\n2024-02-04,7,NA\n")
    (tmp_path / "recipe.json").write_text(
        json.dumps(
            [
                {"Action": {"Operation": "MONTH", "Parameters": {"sourceColumn": "day", "targetColumn": "month"}}},
                {"Action": {"Operation": "FILL_WITH_CUSTOM", "Parameters": {"sourceColumn": "region", "value": "??"}}},
            ]
        )
    )
    name = f"cli-job-{uuid.uuid4().hex[:6]}"
    job = tmp_path / "job.yaml"
    job.write_text(
        yaml.safe_dump(
            {
                "name": name,
                "input": {"path": "sales.csv"},
                "recipe": "recipe.json",
                "outputs": [{"path": "out", "format": "json", "partition_columns": ["month"]}],
            }
        )
    )
    code, out, _ = run_cli(["job", "register", str(job), "--json"], capsys, monkeypatch)
    assert code == 0 and json.loads(out)["name"] == name
    code, out, _ = run_cli(["recipe", "run", name, "--json"], capsys, monkeypatch)
    assert code == 0, out
    assert json.loads(out)["rows_out"] == 3 and sorted(p.name for p in (tmp_path / "out").iterdir() if p.is_dir()) == [
        "month=1",
        "month=2",
    ]
    code, out, _ = run_cli(["recipe", "profile", str(data), "--json"], capsys, monkeypatch)
    cols = {c["column"]: c for c in json.loads(out)["columns"]}
    assert cols["region"]["missing"] == 1 and cols["amount"]["max"] == 10
    topic = f"cli-{uuid.uuid4().hex[:6]}"
    notes = tmp_path / "notes.jsonl"
    assert run_cli(["topic", "create", topic], capsys, monkeypatch)[0] == 0
    assert run_cli(["topic", "subscribe", topic, "--file", str(notes)], capsys, monkeypatch)[0] == 0
    code, out, _ = run_cli(["topic", "publish", topic, "-m", "hello", "-s", "subj", "--json"], capsys, monkeypatch)
    assert code == 0 and json.loads(out)["delivered"] == 1 and json.loads(notes.read_text())["message"] == "hello"
    flow = write(
        tmp_path / f"cron{uuid.uuid4().hex[:6]}.json", {"StartAt": "P", "States": {"P": {"Type": "Pass", "End": True}}}
    )
    sched = f"s-{uuid.uuid4().hex[:6]}"
    code, out, _ = run_cli(
        ["schedule", "add", sched, "--workflow", str(flow), "--cron", "cron(0 0 1 * ? *)", "--json"],
        capsys,
        monkeypatch,
    )
    assert code == 0 and json.loads(out)["kind"] == "cron"
    code, out, _ = run_cli(["schedule", "list", "--json"], capsys, monkeypatch)
    assert any(s["name"] == sched and s["next_run"] for s in json.loads(out))
    code, out, _ = run_cli(["scheduler", "--once", "--json"], capsys, monkeypatch)
    assert code == 0 and not [f for f in json.loads(out)["fired"] if f["schedule"] == sched]
    assert run_cli(["schedule", "remove", sched], capsys, monkeypatch)[0] == 0
