"""The state machine engine: every state type, paths, intrinsics, retry/catch, timeouts,
Parallel and Map semantics, validation messages, history and resume (no Spark needed)."""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from shoal import workflows
from shoal.workflows import definition, tasks
from shoal.workflows.errors import DefinitionError
from tests.support import wftasks


def machine(states: dict[str, Any], start: str | None = None, **top: Any) -> workflows.StateMachine:
    d = {"StartAt": start or next(iter(states)), "States": states, **top}
    return definition.build(d, name=f"t{uuid.uuid4().hex[:8]}", resource_check=tasks.unsupported)


def run(settings, states: dict[str, Any], input_: Any = None, **top: Any) -> workflows.ExecutionRecord:
    return workflows.run(settings, machine(states, **top), input_ if input_ is not None else {})


def py(fn: str, **extra: Any) -> dict[str, Any]:
    return {
        "Type": "Task",
        "Resource": "shoal:python",
        "Parameters": {"EntryPoint": f"tests.support.wftasks:{fn}", **extra},
    }


def history_types(settings, record) -> list[str]:
    return [e["type"] for e in workflows.Store(settings).history(record.id)]


# ---- states and data flow ----------------------------------------------------------------------


def test_pass_paths_and_result_processing(settings):
    rec = run(
        settings,
        {
            "Shape": {
                "Type": "Pass",
                "InputPath": "$.order",
                "Parameters": {
                    "id.$": "$.id",
                    "total.$": "States.MathAdd($.net, $.tax)",
                    "static": 1,
                    "ctx.$": "$$.State.Name",
                },
                "ResultPath": "$.shaped",
                "OutputPath": "$.shaped",
                "Next": "Keep",
            },
            "Keep": {"Type": "Pass", "Result": {"ok": True}, "ResultPath": "$.flags.result", "Next": "Discard"},
            "Discard": {"Type": "Pass", "Result": "ignored", "ResultPath": None, "End": True},
        },
        {"order": {"id": "A-1", "net": 100, "tax": 20}, "other": "dropped"},
    )
    assert rec.status == "SUCCEEDED"
    assert rec.output == {"id": "A-1", "total": 120, "static": 1, "ctx": "Shape", "flags": {"result": {"ok": True}}}


def test_intrinsic_functions(settings):
    rec = run(
        settings,
        {
            "F": {
                "Type": "Pass",
                "Parameters": {
                    "greeting.$": "States.Format('Hello, {}! You have {} items.', $.name, $.n)",
                    "parsed.$": "States.StringToJson($.json)",
                    "text.$": "States.JsonToString($.obj)",
                    "arr.$": "States.Array(1, 'two', $.n)",
                    "chunks.$": "States.ArrayPartition($.items, 2)",
                    "has.$": "States.ArrayContains($.items, 3)",
                    "range.$": "States.ArrayRange(1, 9, 4)",
                    "second.$": "States.ArrayGetItem($.items, 1)",
                    "len.$": "States.ArrayLength($.items)",
                    "uniq.$": "States.ArrayUnique(States.Array(1, 1, 2))",
                    "b64.$": "States.Base64Encode('hi')",
                    "unb64.$": "States.Base64Decode('aGk=')",
                    "hash.$": "States.Hash('abc', 'SHA-256')",
                    "merged.$": "States.JsonMerge($.obj, States.StringToJson('{\"b\": 3}'), false)",
                    "split.$": "States.StringSplit('a,b;c', ',;')",
                    "uuid.$": "States.UUID()",
                    "quote.$": "States.Format('it\\'s {}', 'ok')",
                },
                "End": True,
            }
        },
        {"name": "Ada", "n": 3, "json": '{"a": [1, 2]}', "obj": {"a": 1, "b": 2}, "items": [1, 2, 3, 4, 5]},
    )
    assert rec.status == "SUCCEEDED", rec.cause
    out = rec.output
    assert out["greeting"] == "Hello, Ada! You have 3 items."
    assert out["parsed"] == {"a": [1, 2]}
    assert out["text"] == '{"a":1,"b":2}'
    assert out["arr"] == [1, "two", 3]
    assert out["chunks"] == [[1, 2], [3, 4], [5]]
    assert out["has"] is True and out["second"] == 2 and out["len"] == 5
    assert out["range"] == [1, 5, 9]
    assert out["uniq"] == [1, 2]
    assert out["b64"] == "aGk=" and out["unb64"] == "hi"
    assert out["hash"] == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    assert out["merged"] == {"a": 1, "b": 3}
    assert out["split"] == ["a", "b", "c"]
    assert len(out["uuid"]) == 36
    assert out["quote"] == "it's ok"


@pytest.mark.parametrize(
    ("rule", "value", "expected"),
    [
        ({"StringEquals": "gold"}, "gold", True),
        ({"StringEquals": "gold"}, "silver", False),
        ({"StringLessThan": "m"}, "apple", True),
        ({"StringGreaterThanEquals": "m"}, "m", True),
        ({"StringMatches": "log-*.txt"}, "log-2024.txt", True),
        ({"StringMatches": "log-*.txt"}, "data.txt", False),
        ({"NumericEquals": 3}, 3, True),
        ({"NumericLessThan": 3}, 2.5, True),
        ({"NumericGreaterThan": 3}, 3, False),
        ({"NumericLessThanEquals": 3}, 3, True),
        ({"NumericEquals": 3}, "3", False),
        ({"BooleanEquals": True}, True, True),
        ({"TimestampLessThan": "2025-01-01T00:00:00Z"}, "2024-06-01T12:00:00Z", True),
        ({"TimestampGreaterThan": "2025-01-01T00:00:00Z"}, "2024-06-01T12:00:00Z", False),
        ({"IsNull": True}, None, True),
        ({"IsNumeric": True}, 1.5, True),
        ({"IsString": True}, 1, False),
        ({"IsBoolean": True}, False, True),
        ({"IsTimestamp": True}, "2024-06-01T12:00:00+02:00", True),
    ],
)
def test_choice_comparators(settings, rule, value, expected):
    rec = run(
        settings,
        {
            "C": {"Type": "Choice", "Choices": [{"Variable": "$.v", **rule, "Next": "Yes"}], "Default": "No"},
            "Yes": {"Type": "Pass", "Result": "yes", "End": True},
            "No": {"Type": "Pass", "Result": "no", "End": True},
        },
        {"v": value},
    )
    assert rec.output == ("yes" if expected else "no")


def test_choice_combinators_paths_presence_and_no_match(settings):
    states = {
        "C": {
            "Type": "Choice",
            "Choices": [
                {
                    "And": [
                        {"Variable": "$.a", "IsPresent": True},
                        {"Not": {"Variable": "$.a", "NumericEqualsPath": "$.b"}},
                    ],
                    "Next": "Different",
                },
                {
                    "Or": [{"Variable": "$.kind", "StringEquals": "x"}, {"Variable": "$.kind", "StringEquals": "y"}],
                    "Next": "XY",
                },
            ],
        },
        "Different": {"Type": "Succeed"},
        "XY": {"Type": "Succeed"},
    }
    rec = run(settings, states, {"a": 1, "b": 2})
    assert [e["state"] for e in workflows.Store(settings).history(rec.id) if e["type"] == "SucceedStateEntered"] == [
        "Different"
    ]
    rec = run(settings, states, {"kind": "y"})
    assert [e["state"] for e in workflows.Store(settings).history(rec.id) if e["type"] == "SucceedStateEntered"] == [
        "XY"
    ]
    rec = run(settings, states, {"kind": "z"})
    assert rec.status == "FAILED" and rec.error == "States.NoChoiceMatched"


def test_wait_seconds_path_and_timestamp(settings):
    started = time.monotonic()
    past = "2020-01-01T00:00:00Z"
    rec = run(
        settings,
        {
            "W1": {"Type": "Wait", "SecondsPath": "$.delay", "Next": "W2"},
            "W2": {"Type": "Wait", "Timestamp": past, "Next": "Done"},
            "Done": {"Type": "Succeed"},
        },
        {"delay": 0.3},
    )
    assert rec.status == "SUCCEEDED"
    assert 0.3 <= time.monotonic() - started < 5


def test_fail_state_with_paths(settings):
    rec = run(
        settings,
        {"F": {"Type": "Fail", "ErrorPath": "$.code", "CausePath": "$.why"}},
        {"code": "Bad.Input", "why": "the id is empty"},
    )
    assert (rec.status, rec.error, rec.cause) == ("FAILED", "Bad.Input", "the id is empty")
    assert history_types(settings, rec)[-2:] == ["FailStateExited", "ExecutionFailed"]


def test_task_result_selector_and_entry_point(settings):
    rec = run(
        settings,
        {
            "T": {
                **py("add", **{"Payload": {"a.$": "$.x", "b": 2}}),
                "ResultSelector": {"total.$": "$.sum"},
                "ResultPath": "$.r",
                "End": True,
            }
        },
        {"x": 40},
    )
    assert rec.output == {"x": 40, "r": {"total": 42}}


# ---- errors, retries, catch, timeouts ---------------------------------------------------------------


def test_retry_backoff_then_success(settings, tmp_path):
    counter = tmp_path / "calls"
    rec = run(
        settings,
        {
            "T": {
                **py("fail_until", counter=str(counter), succeed_on=3),
                "Retry": [{"ErrorEquals": ["ValueError"], "IntervalSeconds": 0.05, "BackoffRate": 2, "MaxAttempts": 3}],
                "End": True,
            }
        },
    )
    assert rec.status == "SUCCEEDED" and rec.output == {"calls": 3}
    events = workflows.Store(settings).history(rec.id)
    retries = [e for e in events if e["type"] == "RetryScheduled"]
    assert [r["attempt"] for r in retries] == [1, 2]
    assert [r["delay_s"] for r in retries] == [0.05, 0.1]


def test_retry_exhausted_then_caught(settings, tmp_path):
    counter = tmp_path / "calls"
    rec = run(
        settings,
        {
            "T": {
                **py("fail_until", counter=str(counter), succeed_on=10),
                "Retry": [
                    {"ErrorEquals": ["KeyError"], "MaxAttempts": 5, "IntervalSeconds": 0.01},
                    {
                        "ErrorEquals": ["States.TaskFailed"],
                        "MaxAttempts": 2,
                        "IntervalSeconds": 0.01,
                        "MaxDelaySeconds": 0.02,
                    },
                ],
                "Catch": [{"ErrorEquals": ["States.ALL"], "ResultPath": "$.err", "Next": "Recover"}],
                "Next": "Never",
            },
            "Never": {"Type": "Fail", "Error": "unreachable"},
            "Recover": {"Type": "Pass", "End": True},
        },
        {"keep": 1},
    )
    assert counter.read_text() == "3"  # first try + 2 retries
    assert rec.status == "SUCCEEDED"
    assert rec.output["keep"] == 1
    assert rec.output["err"]["Error"] == "ValueError" and "call 3 fails" in rec.output["err"]["Cause"]


def test_max_attempts_zero_and_unmatched_errors_fail(settings):
    rec = run(
        settings, {"T": {**py("boom"), "Retry": [{"ErrorEquals": ["States.ALL"], "MaxAttempts": 0}], "End": True}}
    )
    assert (rec.status, rec.error) == ("FAILED", "RuntimeError")
    assert "RetryScheduled" not in history_types(settings, rec)


def test_states_all_does_not_catch_runtime_errors(settings):
    rec = run(
        settings,
        {
            "P": {
                **py("echo"),
                "InputPath": "$.missing",
                "Catch": [{"ErrorEquals": ["States.ALL"], "Next": "Done"}],
                "Next": "Done",
            },
            "Done": {"Type": "Succeed"},
        },
        {"present": 1},
    )
    assert (rec.status, rec.error) == ("FAILED", "States.Runtime")
    assert "missing" in rec.cause


def test_task_timeout_is_caught(settings):
    started = time.monotonic()
    rec = run(
        settings,
        {
            "Slow": {
                **py("sleep", seconds=5),
                "TimeoutSeconds": 0.3,
                "Catch": [{"ErrorEquals": ["States.Timeout"], "ResultPath": "$.e", "Next": "After"}],
                "Next": "After",
            },
            "After": {"Type": "Pass", "End": True},
        },
    )
    assert rec.status == "SUCCEEDED" and rec.output["e"]["Error"] == "States.Timeout"
    assert time.monotonic() - started < 3
    assert "TaskTimedOut" in history_types(settings, rec)


def test_timeout_is_not_a_task_failure(settings):
    rec = run(
        settings,
        {
            "Slow": {
                **py("sleep", seconds=5),
                "TimeoutSeconds": 0.2,
                "Catch": [{"ErrorEquals": ["States.TaskFailed"], "Next": "X"}],
                "End": True,
            },
            "X": {"Type": "Succeed"},
        },
    )
    assert (rec.status, rec.error) == ("FAILED", "States.Timeout")


def test_execution_timeout(settings):
    started = time.monotonic()
    rec = run(settings, {"W": {"Type": "Wait", "Seconds": 30, "End": True}}, TimeoutSeconds=1)
    assert (rec.status, rec.error) == ("TIMED_OUT", "States.Timeout")
    assert time.monotonic() - started < 5


def test_payload_limit(settings):
    rec = run(settings, {"Big": {**py("big"), "End": True}})
    assert (rec.status, rec.error) == ("FAILED", "States.DataLimitExceeded")


def test_result_path_into_a_non_object_fails_cleanly(settings):
    rec = run(settings, {"P": {"Type": "Pass", "Result": 1, "ResultPath": "$.s.inner", "End": True}}, {"s": "text"})
    assert (rec.status, rec.error) == ("FAILED", "States.ResultPathMatchFailure")


# ---- parallel and map --------------------------------------------------------------------------------


def test_parallel_branches_run_concurrently_and_keep_order(settings):
    wftasks.reset_tracking()
    started = time.monotonic()
    rec = run(
        settings,
        {
            "Both": {
                "Type": "Parallel",
                "Branches": [
                    {"StartAt": "A", "States": {"A": {**py("track", seconds=0.5, item="a"), "End": True}}},
                    {"StartAt": "B", "States": {"B": {**py("track", seconds=0.5, item="b"), "End": True}}},
                    {"StartAt": "C", "States": {"C": {"Type": "Pass", "Result": "c", "End": True}}},
                ],
                "End": True,
            }
        },
    )
    assert rec.output == [{"item": "a"}, {"item": "b"}, "c"]
    assert wftasks.max_concurrency() == 2
    assert time.monotonic() - started < 1.0 + 0.5


def test_failing_branch_stops_siblings_and_is_caught(settings):
    started = time.monotonic()
    rec = run(
        settings,
        {
            "Both": {
                "Type": "Parallel",
                "Branches": [
                    {
                        "StartAt": "Long",
                        "States": {
                            "Long": {"Type": "Wait", "Seconds": 30, "Next": "After"},
                            "After": {"Type": "Pass", "End": True},
                        },
                    },
                    {"StartAt": "Broken", "States": {"Broken": {**py("boom"), "End": True}}},
                ],
                "Catch": [{"ErrorEquals": ["RuntimeError"], "ResultPath": "$.failure", "Next": "Handled"}],
                "End": True,
            },
            "Handled": {"Type": "Pass", "End": True},
        },
        {"id": 7},
    )
    assert rec.status == "SUCCEEDED"
    assert rec.output["failure"]["Error"] == "RuntimeError" and rec.output["id"] == 7
    assert time.monotonic() - started < 5  # the 30 s wait was cancelled
    events = workflows.Store(settings).history(rec.id)
    assert not any(e["state"] == "After" for e in events)


def test_parallel_failure_without_catch_fails_execution(settings):
    rec = run(
        settings,
        {
            "P": {
                "Type": "Parallel",
                "Branches": [
                    {"StartAt": "F", "States": {"F": {"Type": "Fail", "Error": "Branch.Broke", "Cause": "x"}}}
                ],
                "End": True,
            }
        },
    )
    assert (rec.status, rec.error, rec.cause) == ("FAILED", "Branch.Broke", "x")


def test_parallel_reports_the_failure_that_stopped_its_siblings(settings):
    # Branch 0 fails only after branch 1's failure stopped the group (like a Spark job whose
    # group was cancelled): the execution names branch 1's error, not the lower index.
    rec = run(
        settings,
        {
            "P": {
                "Type": "Parallel",
                "Branches": [
                    {"StartAt": "Slow", "States": {"Slow": {**py("fail_later", seconds=0.6), "End": True}}},
                    {"StartAt": "Boom", "States": {"Boom": {**py("boom"), "End": True}}},
                ],
                "End": True,
            }
        },
    )
    assert (rec.status, rec.error) == ("FAILED", "RuntimeError"), (rec.error, rec.cause)


def test_map_concurrency_selector_and_context(settings):
    wftasks.reset_tracking()
    rec = run(
        settings,
        {
            "Each": {
                "Type": "Map",
                "ItemsPath": "$.items",
                "MaxConcurrency": 2,
                "ItemSelector": {"item.$": "$$.Map.Item.Value", "index.$": "$$.Map.Item.Index", "seconds": 0.15},
                "ItemProcessor": {
                    "StartAt": "Work",
                    "States": {
                        "Work": {
                            **py("track"),
                            "Parameters": {
                                "EntryPoint": "tests.support.wftasks:track",
                                "item.$": "$.item",
                                "seconds.$": "$.seconds",
                            },
                            "End": True,
                        }
                    },
                },
                "ResultPath": "$.results",
                "End": True,
            }
        },
        {"items": ["a", "b", "c", "d", "e"]},
    )
    assert rec.status == "SUCCEEDED", rec.cause
    assert rec.output["results"] == [{"item": x} for x in "abcde"]
    assert wftasks.max_concurrency() == 2


def test_map_tolerated_failures(settings):
    items = [{"item": i, "fail": i in (1, 3)} for i in range(5)]
    body = {
        "StartAt": "Work",
        "States": {
            "Work": {
                "Type": "Task",
                "Resource": "shoal:python",
                "Parameters": {
                    "EntryPoint": "tests.support.wftasks:track",
                    "item.$": "$.item",
                    "fail.$": "$.fail",
                    "seconds": 0.01,
                },
                "End": True,
            }
        },
    }
    ok = run(settings, {"M": {"Type": "Map", "ItemProcessor": body, "ToleratedFailureCount": 2, "End": True}}, items)
    assert ok.status == "SUCCEEDED"
    assert [r.get("item", r.get("Error")) for r in ok.output] == [0, "ValueError", 2, "ValueError", 4]
    bad = run(settings, {"M": {"Type": "Map", "ItemProcessor": body, "ToleratedFailureCount": 1, "End": True}}, items)
    assert (bad.status, bad.error) == ("FAILED", "States.ExceedToleratedFailureThreshold")
    strict = run(settings, {"M": {"Type": "Map", "Iterator": body, "End": True}}, items)
    assert (strict.status, strict.error) == ("FAILED", "ValueError")


def test_map_items_must_be_a_list(settings):
    rec = run(
        settings,
        {
            "M": {
                "Type": "Map",
                "ItemsPath": "$.x",
                "ItemProcessor": {"StartAt": "P", "States": {"P": {"Type": "Pass", "End": True}}},
                "End": True,
            }
        },
        {"x": {"not": "a list"}},
    )
    assert (rec.status, rec.error) == ("FAILED", "States.Runtime")


# ---- history and resume --------------------------------------------------------------------------


def test_history_records_inputs_outputs_and_order(settings):
    rec = run(
        settings, {"A": {"Type": "Pass", "Result": {"x": 1}, "Next": "B"}, "B": {"Type": "Succeed"}}, {"in": True}
    )
    events = workflows.Store(settings).history(rec.id)
    assert [e["type"] for e in events] == [
        "ExecutionStarted",
        "PassStateEntered",
        "PassStateExited",
        "SucceedStateEntered",
        "SucceedStateExited",
        "ExecutionSucceeded",
    ]
    assert events[0]["input"] == {"in": True}
    assert events[2]["output"] == {"x": 1}
    assert [e["id"] for e in events] == list(range(1, 7))


def test_resume_a_failed_execution_from_the_failed_state(settings, tmp_path):
    log = tmp_path / "log"
    counter = tmp_path / "calls"
    states = {
        "First": {**py("mark", log=str(log), label="first"), "ResultPath": None, "Next": "Fan"},
        "Fan": {
            "Type": "Parallel",
            "Branches": [
                {"StartAt": "Ok", "States": {"Ok": {**py("mark", log=str(log), label="branch-ok"), "End": True}}},
                {
                    "StartAt": "Flaky",
                    "States": {"Flaky": {**py("fail_until", counter=str(counter), succeed_on=2), "End": True}},
                },
            ],
            "ResultPath": "$.fan",
            "Next": "Last",
        },
        "Last": {**py("mark", log=str(log), label="last"), "ResultPath": None, "End": True},
    }
    first = run(settings, states, {"k": 1})
    assert (first.status, first.error) == ("FAILED", "ValueError")
    assert log.read_text().split() == ["first", "branch-ok"]
    resumed = workflows.resume(settings, first.id)
    assert resumed.status == "SUCCEEDED", resumed.cause
    # Neither the first state nor the finished branch ran again.
    assert log.read_text().split() == ["first", "branch-ok", "last"]
    assert resumed.output["fan"][1] == {"calls": 2}
    types = history_types(settings, resumed)
    assert "ExecutionResumed" in types and types[-1] == "ExecutionSucceeded"
    with pytest.raises(workflows.WorkflowError, match="already succeeded"):
        workflows.resume(settings, first.id)


# ---- definitions ---------------------------------------------------------------------------------


def test_invalid_definition_names_every_state_and_field():
    bad = {
        "StartAt": "Missing",
        "States": {
            "A": {"Type": "Pass", "Next": "Nowhere", "Bogus": 1},
            "B": {
                "Type": "Task",
                "Resource": "arn:aws:states:::unknown:thing",
                "End": True,
                "Retry": [{"ErrorEquals": ["States.ALL", "X"]}],
            },
            "C": {"Type": "Choice", "Choices": [{"Variable": "$.x", "NumericEquals": "three", "Next": "A"}]},
            "D": {"Type": "Wait", "End": True},
            "E": {"Type": "Map", "End": True},
            "F": {
                "Type": "Parallel",
                "Branches": [{"StartAt": "X", "States": {"X": {"Type": "Pass", "Next": "A"}}}],
                "End": True,
            },
            "G": {"Type": "Nope"},
            "H": {"Type": "Pass", "Next": "A", "End": True, "ResultPath": "$.a[*]"},
        },
    }
    with pytest.raises(DefinitionError) as info:
        definition.build(bad, name="bad", resource_check=tasks.unsupported)
    text = str(info.value)
    for expected in [
        "StartAt: no state named 'Missing'",
        "state 'A': field 'Next': no state named 'Nowhere'",
        "state 'A': field 'Bogus': not allowed in a Pass state",
        "state 'B': field 'Resource': unsupported resource",
        "state 'B': field 'Retry[0].ErrorEquals': States.ALL must appear alone",
        "state 'C': field 'Choices[0]': NumericEquals needs a number",
        "state 'D': needs exactly one of Seconds",
        "state 'E': field 'ItemProcessor': is required",
        "Branches[0]: state 'X': field 'Next': no state named 'A' in this branch",
        "state 'G': field 'Type'",
        "state 'H': needs exactly one of Next or End",
        "state 'H': field 'ResultPath'",
    ]:
        assert expected in text, expected


def test_unreachable_state_and_bad_json(tmp_path):
    with pytest.raises(DefinitionError, match="state 'Orphan': not reachable"):
        definition.build(
            {"StartAt": "A", "States": {"A": {"Type": "Succeed"}, "Orphan": {"Type": "Succeed"}}}, name="x"
        )
    bad = tmp_path / "broken.json"
    bad.write_text('{"StartAt": "A", "States": {')
    with pytest.raises(DefinitionError, match="not valid JSON: line 1"):
        workflows.validate(bad)


def test_yaml_definition_and_cloud_resources_validate(tmp_path, settings):
    path = tmp_path / "flow.asl.yaml"
    path.write_text(
        "StartAt: Prep\n"
        "States:\n"
        "  Prep:\n"
        "    Type: Task\n"
        "    Resource: arn:aws:states:::databrew:startJobRun.sync\n"
        "    Parameters: {Name: some-job}\n"
        "    Next: Query\n"
        "  Query:\n"
        "    Type: Task\n"
        "    Resource: arn:aws:states:::athena:startQueryExecution.sync\n"
        "    Parameters: {QueryString: SELECT 1}\n"
        "    Next: Tell\n"
        "  Tell:\n"
        "    Type: Task\n"
        "    Resource: arn:aws:states:::sns:publish\n"
        "    Parameters: {TopicArn: 'arn:aws:sns:us-east-1:1:t', Message: hi}\n"
        "    Next: Etl\n"
        "  Etl:\n"
        "    Type: Task\n"
        "    Resource: arn:aws:states:::glue:startJobRun.sync\n"
        "    Parameters: {JobName: etl}\n"
        "    End: true\n"
    )
    m, version = workflows.register(settings, path)
    assert m.name == "flow" and version == 1
    assert workflows.register(settings, path)[1] == 1  # unchanged definition, same version
    assert {w["name"] for w in workflows.Store(settings).list_workflows()} >= {"flow"}
    assert workflows.load_machine(settings, "flow").definition == m.definition


def test_unknown_job_fails_the_task_with_a_clear_error(settings):
    rec = run(
        settings,
        {
            "Prep": {
                "Type": "Task",
                "Resource": "arn:aws:states:::databrew:startJobRun.sync",
                "Parameters": {"Name": "no-such-job"},
                "End": True,
            }
        },
    )
    assert rec.status == "FAILED" and rec.error == "JobError" and "no job named 'no-such-job'" in rec.cause


def test_graph_marks_states(settings, tmp_path):
    from shoal.workflows import graph

    rec = run(
        settings,
        {
            "A": {"Type": "Pass", "Next": "M"},
            "M": {
                "Type": "Map",
                "ItemsPath": "$.xs",
                "ItemProcessor": {"StartAt": "W", "States": {"W": {**py("track", seconds=0.01), "End": True}}},
                "ResultPath": None,
                "Next": "Bad",
            },
            "Bad": {"Type": "Fail", "Error": "E"},
        },
        {"xs": [1, 2]},
    )
    status = graph.state_status(workflows.Store(settings).history(rec.id), rec.definition)
    assert status == {"/A": "succeeded", "/M": "succeeded", "/M[*]/W": "succeeded", "/Bad": "failed"}
    svg = graph.render(rec.definition, title="t", history=workflows.Store(settings).history(rec.id)).decode()
    assert svg.startswith("<?xml") and "<svg" in svg and graph.COLOURS["failed"] in svg
    assert "digraph" in graph.render(rec.definition, title="t", fmt="dot").decode()


def test_definition_path_loads_from_file(tmp_path):
    p = Path(tmp_path / "ok.json")
    p.write_text('{"StartAt": "A", "States": {"A": {"Type": "Succeed"}}}')
    assert workflows.validate(p).name == "ok"
