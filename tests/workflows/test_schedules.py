"""Schedules: cron/rate parsing, slots fired once, misfire policies, file triggers, recovery."""

from __future__ import annotations

import datetime as dt
import json
import os
import time
import uuid
from pathlib import Path

import pytest

from shoal.config import load_settings
from shoal.workflows import Store, register
from shoal.workflows import run as run_workflow
from shoal.workflows.errors import WorkflowError
from shoal.workflows.schedule import Scheduler, Schedules, parse_timing


def slots(expr: str, after: str, until: str, anchor: str | None = None) -> list[str]:
    a, u = dt.datetime.fromisoformat(after), dt.datetime.fromisoformat(until)
    return [t.isoformat() for t in parse_timing(expr).slots(a, u, dt.datetime.fromisoformat(anchor or after))]


def test_cloud_cron_rate_and_unix_forms():
    assert slots("cron(0 0 1 * ? *)", "2026-01-15", "2026-04-02") == [
        "2026-02-01T00:00:00",
        "2026-03-01T00:00:00",
        "2026-04-01T00:00:00",
    ]
    # Day-of-week 2 is Monday in the cloud form; MON-FRI names work too.
    assert slots("cron(30 9 ? * 2 *)", "2026-11-22", "2026-12-01") == ["2026-11-23T09:30:00", "2026-11-30T09:30:00"]
    assert slots("cron(0 12 ? * MON-FRI *)", "2026-11-20T13:00", "2026-11-24") == ["2026-11-23T12:00:00"]
    assert slots("cron(0 8 ? * 6L *)", "2026-11-01", "2026-12-31") == [
        "2026-11-27T08:00:00",
        "2026-12-25T08:00:00",
    ]  # last Friday
    assert slots("cron(0 0 1 1 ? 2027)", "2025-01-01", "2028-06-01") == ["2027-01-01T00:00:00"]
    assert slots("rate(6 hours)", "2026-01-01T00:00", "2026-01-01T20:00", "2026-01-01T01:00") == [
        "2026-01-01T01:00:00",
        "2026-01-01T07:00:00",
        "2026-01-01T13:00:00",
        "2026-01-01T19:00:00",
    ]
    assert slots("0 6 * * 1", "2026-11-22", "2026-11-30") == ["2026-11-23T06:00:00"]
    for bad, message in [
        ("cron(0 0 1 * 2 *)", "one of day-of-month and day-of-week must be '?'"),
        ("cron(0 0 1 *)", "takes 6 fields"),
        ("rate(0 days)", "must be positive"),
        ("every tuesday", "invalid schedule"),
        ("61 * * * *", "not a cron expression"),
    ]:
        with pytest.raises(WorkflowError, match=message):
            parse_timing(bad)


@pytest.fixture
def flow(settings, tmp_path) -> str:
    path = tmp_path / f"sched{uuid.uuid4().hex[:6]}.json"
    path.write_text(json.dumps({"StartAt": "Echo", "States": {"Echo": {"Type": "Pass", "End": True}}}))
    return register(settings, path)[0].name


def starter(settings, results):
    def start(workflow, input_, execution_id, topic, schedule):
        results.append(
            run_workflow(settings, workflow, input_, execution_id=execution_id, trigger={"schedule": schedule})
        )

    return start


def test_cron_slot_fires_once_even_across_schedulers(settings, flow):
    name = f"s{uuid.uuid4().hex[:6]}"
    schedules = Schedules(settings)
    schedules.add(name, flow, cron="cron(* * * * ? *)")
    schedules.advance(name, dt.datetime(2026, 1, 1, 0, 0, 30))
    results: list = []
    first = Scheduler(settings, starter(settings, results))
    fired = first.tick(now=dt.datetime(2026, 1, 1, 0, 1, 10))
    first.wait()
    assert [f.slots for f in fired if f.schedule == name] == [["2026-01-01T00:01:00Z"]]
    # A second scheduler (or a restart that lost last_slot) cannot fire the same slot again.
    schedules.advance(name, dt.datetime(2026, 1, 1, 0, 0, 30))
    second = Scheduler(settings, starter(settings, results))
    assert [f for f in second.tick(now=dt.datetime(2026, 1, 1, 0, 1, 20)) if f.schedule == name] == []
    second.wait()
    mine = [r for r in results if r.trigger == {"schedule": name}]
    assert len(mine) == 1 and mine[0].status == "SUCCEEDED"
    assert mine[0].input["slot"] == "2026-01-01T00:01:00Z" and mine[0].input["trigger"] == "schedule"
    assert [f["slot"] for f in schedules.fired(name)] == ["2026-01-01T00:01:00Z"]


@pytest.mark.parametrize(
    ("policy", "expected"),
    [
        ("fire_once", ["2026-01-01T00:10:00Z"]),
        ("skip", []),
        ("fire_all", ["2026-01-01T00:05:00Z", "2026-01-01T00:10:00Z"]),
    ],
)
def test_misfire_policies(settings, flow, policy, expected):
    s = load_settings(workspace=settings.workspace_dir, workflows={"misfire_policy": policy, "poll_s": 5})
    name = f"m{uuid.uuid4().hex[:6]}"
    Schedules(s).add(name, flow, cron="*/5 * * * *")
    Schedules(s).advance(name, dt.datetime(2026, 1, 1, 0, 0, 30))
    results: list = []
    scheduler = Scheduler(s, starter(s, results))
    # The scheduler was down from 00:00:30 until 00:12:00: the 00:05 and 00:10 slots were missed.
    fired = [f for f in scheduler.tick(now=dt.datetime(2026, 1, 1, 0, 12, 0)) if f.schedule == name]
    scheduler.wait()
    assert sorted(slot for f in fired for slot in f.slots) == expected
    assert len([r for r in results if r.trigger == {"schedule": name}]) == len(expected)
    # Whatever the policy, the missed slots are settled: the next tick fires nothing.
    later = Scheduler(s, starter(s, results))
    assert [f for f in later.tick(now=dt.datetime(2026, 1, 1, 0, 12, 30)) if f.schedule == name] == []
    later.wait()


def test_file_trigger_starts_one_execution_per_batch_of_new_files(settings, flow, tmp_path):
    s = load_settings(workspace=settings.workspace_dir, workflows={"settle_s": 0.2})
    landing = tmp_path / "landing"
    landing.mkdir()
    name = f"f{uuid.uuid4().hex[:6]}"
    Schedules(s).add(name, flow, on_new_files=str(landing), input_={"team": "sales"})
    for i in range(2):
        (landing / f"part-{i}.csv").write_text(f"id\n{i}\n")
    past = time.time() - 10
    for f in landing.iterdir():
        os.utime(f, (past, past))
    (landing / "still-writing.csv").write_text("id\n")  # too new: not settled yet
    results: list = []
    scheduler = Scheduler(s, starter(s, results))
    fired = [f for f in scheduler.tick() if f.schedule == name]
    scheduler.wait()
    assert len(fired) == 1
    mine = [r for r in results if r.id == fired[0].execution_id]
    files = sorted(Path(f["path"]).name for f in mine[0].input["files"])
    assert files == ["part-0.csv", "part-1.csv"] and mine[0].input["team"] == "sales"
    # Nothing new: nothing fires. A settled new file fires once more.
    again = Scheduler(s, starter(s, results))
    time.sleep(0.3)
    fired2 = [f for f in again.tick() if f.schedule == name]
    again.wait()
    assert [sorted(Path(x.split("|")[0]).name for x in f.slots) for f in fired2] == [["still-writing.csv"]]
    third = Scheduler(s, starter(s, results))
    assert [f for f in third.tick() if f.schedule == name] == []
    third.wait()


def test_claimed_but_never_started_slot_is_recovered(settings, flow):
    name = f"r{uuid.uuid4().hex[:6]}"
    schedules = Schedules(settings)
    schedules.add(name, flow, cron="rate(1 day)")
    execution_id = f"{flow}-orphan-{uuid.uuid4().hex[:6]}"
    assert schedules.claim(name, ["2026-01-01T00:00:00Z"], execution_id) == ["2026-01-01T00:00:00Z"]
    assert schedules.claim(name, ["2026-01-01T00:00:00Z"], "other") == []
    results: list = []
    scheduler = Scheduler(settings, starter(settings, results))
    scheduler.recover()
    scheduler.wait()
    assert Store(settings).execution(execution_id).status == "SUCCEEDED"
    assert not [o for o in schedules.orphan_claims() if o["schedule"] == name]


def test_schedule_records(settings, flow):
    name = f"x{uuid.uuid4().hex[:6]}"
    s = Schedules(settings)
    s.add(name, flow, cron="cron(0 0 1 * ? *)")
    listed = {r["name"]: r for r in s.list()}
    assert listed[name]["next_run"].endswith("-01T00:00:00Z")
    with pytest.raises(WorkflowError, match="already exists"):
        s.add(name, flow, cron="rate(1 day)")
    with pytest.raises(WorkflowError, match="exactly one of"):
        s.add(f"{name}b", flow)
    s.set_enabled(name, False)
    assert {r["name"]: r for r in s.list()}[name]["enabled"] is False
    s.remove(name)
    with pytest.raises(WorkflowError, match="no schedule named"):
        s.get(name)
