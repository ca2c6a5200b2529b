"""JSONata states and workflow variables (Amazon States Language, 2024-11 additions):
QueryLanguage, Arguments, Output, Assign, Condition, Items, $states, the added functions,
variable scopes, validation of mixed fields, and variables surviving resume (no Spark needed)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from shoal import workflows
from shoal.workflows import definition, tasks
from shoal.workflows.errors import DefinitionError


def machine(states: dict[str, Any], **top: Any) -> workflows.StateMachine:
    d = {"StartAt": next(iter(states)), "States": states, **top}
    return definition.build(d, name=f"j{uuid.uuid4().hex[:8]}", resource_check=tasks.unsupported)


def run(settings, states: dict[str, Any], input_: Any = None, **top: Any) -> workflows.ExecutionRecord:
    return workflows.run(settings, machine(states, **top), input_ if input_ is not None else {})


def jrun(settings, states: dict[str, Any], input_: Any = None) -> workflows.ExecutionRecord:
    return run(settings, states, input_, QueryLanguage="JSONata")


def task(fn: str, **arguments: Any) -> dict[str, Any]:
    return {
        "Type": "Task",
        "Resource": "shoal:python",
        "Arguments": {"EntryPoint": f"tests.support.wftasks:{fn}", **arguments},
    }


def problems(d: dict[str, Any]) -> str:
    with pytest.raises(DefinitionError) as info:
        definition.build(d, name="bad", resource_check=tasks.unsupported)
    return str(info.value)


# ---- data flow -----------------------------------------------------------------------------------


def test_arguments_output_and_assign_follow_the_spec_example(settings):
    # The documentation's conversion example: Arguments replaces Parameters, no `.$` keys,
    # strings that are not {% %} stay literal.
    rec = jrun(
        settings,
        {
            "Init": {"Type": "Pass", "Assign": {"customerName": "{% $states.input.customer %}"}, "Next": "Call"},
            "Call": {
                **task(
                    "echo",
                    static="Hello",
                    title="{% $states.input.title %}",
                    name="{% $customerName %}",
                    **{"not-evaluated": "$customerName"},
                ),
                "Assign": {"called": "{% $states.result.name %}", "total": "{% $sum($states.input.prices) %}"},
                "Output": {"echoed": "{% $states.result %}", "ctx": "{% $states.context.State.Name %}"},
                "Next": "Done",
            },
            "Done": {
                "Type": "Succeed",
                "Output": "{% $merge([$states.input, {'who': $called, 'total': $total}]) %}",
            },
        },
        {"customer": "Ada", "title": "Dr", "prices": [1.5, 2.5]},
    )
    assert rec.status == "SUCCEEDED", rec.cause
    assert rec.output == {
        "echoed": {"static": "Hello", "title": "Dr", "name": "Ada", "not-evaluated": "$customerName"},
        "ctx": "Call",
        "who": "Ada",
        "total": 4,
    }
    events = workflows.Store(settings).history(rec.id)
    assert next(e for e in events if e["type"] == "TaskStateExited")["assigned"] == {"called": "Ada", "total": 4}


def test_output_and_assign_see_the_variables_from_state_entry(settings):
    rec = jrun(
        settings,
        {
            "A": {"Type": "Pass", "Assign": {"x": 1}, "Next": "B"},
            "B": {
                "Type": "Pass",
                # Assign and Output are evaluated together: neither sees this state's new x.
                "Assign": {"x": "{% $x + 1 %}", "y": "{% $x %}"},
                "Output": {"x_in_output": "{% $x %}"},
                "Next": "C",
            },
            "C": {
                "Type": "Pass",
                "Output": {"x": "{% $x %}", "y": "{% $y %}", "in": "{% $states.input %}"},
                "End": True,
            },
        },
    )
    assert rec.output == {"x": 2, "y": 1, "in": {"x_in_output": 1}}


def test_state_level_query_language_in_a_jsonpath_machine_and_dollar_var_paths(settings):
    rec = run(
        settings,
        {
            "Path": {
                "Type": "Task",
                "Resource": "shoal:python",
                "Parameters": {"EntryPoint": "tests.support.wftasks:echo", "order.$": "$.order"},
                "ResultSelector": {"id.$": "$.order.id", "lines.$": "$.order.lines"},
                # JSONPath Assign: `.$` values read the result (after ResultSelector) and variables.
                "Assign": {"orderId.$": "$.id", "count.$": "States.ArrayLength($.lines)", "fixed": {"a": 1}},
                "ResultPath": "$.shaped",
                "Next": "Ata",
            },
            "Ata": {
                "Type": "Pass",
                "QueryLanguage": "JSONata",
                "Assign": {"label": "{% $orderId & '#' & $string($count) %}"},
                "Output": "{% $states.input.shaped %}",
                "Next": "Back",
            },
            "Back": {
                "Type": "Pass",
                "Parameters": {
                    "label.$": "$label",
                    "a.$": "$fixed.a",
                    "fmt.$": "States.Format('{} has {} lines', $orderId, $count)",
                    "id.$": "$.id",
                },
                "End": True,
            },
        },
        {"order": {"id": "A-7", "lines": [1, 2, 3]}},
    )
    assert rec.status == "SUCCEEDED", rec.cause
    assert rec.output == {"label": "A-7#3", "a": 1, "fmt": "A-7 has 3 lines", "id": "A-7"}


def test_jsonpath_choice_on_a_variable_and_rule_assign(settings):
    states = {
        "Set": {"Type": "Pass", "Assign": {"limit": 10}, "Next": "Check"},
        "Check": {
            "Type": "Choice",
            "Choices": [
                {"Variable": "$.n", "NumericGreaterThanPath": "$limit", "Assign": {"verdict": "big"}, "Next": "Out"}
            ],
            "Default": "Out",
            "Assign": {"verdict": "small"},
        },
        "Out": {"Type": "Pass", "Parameters": {"v.$": "$verdict"}, "End": True},
    }
    assert run(settings, states, {"n": 11}).output == {"v": "big"}
    assert run(settings, states, {"n": 3}).output == {"v": "small"}


def test_choice_condition_with_rule_output_and_default(settings):
    states = {
        "Route": {
            "Type": "Choice",
            "Choices": [
                {
                    "Condition": "{% $states.input.score >= 90 %}",
                    "Next": "Done",
                    "Output": {"grade": "A"},
                    "Assign": {"via": "rule"},
                },
                {"Condition": "{% $states.input.score >= 50 and $exists($states.input.name) %}", "Next": "Done"},
            ],
            "Default": "Done",
            "Output": {"grade": "F"},
            "Assign": {"via": "default"},
        },
        "Done": {
            "Type": "Pass",
            "Output": "{% $merge([$states.input, {'via': $exists($via) ? $via : 'none'}]) %}",
            "End": True,
        },
    }
    assert jrun(settings, states, {"score": 95}).output == {"grade": "A", "via": "rule"}
    assert jrun(settings, states, {"score": 60, "name": "x"}).output == {"score": 60, "name": "x", "via": "none"}
    assert jrun(settings, states, {"score": 10}).output == {"grade": "F", "via": "default"}
    bad = jrun(
        settings,
        {"C": {"Type": "Choice", "Choices": [{"Condition": "{% 'yes' %}", "Next": "D"}]}, "D": {"Type": "Succeed"}},
    )
    assert (bad.status, bad.error) == ("FAILED", "States.QueryEvaluationError")


def test_map_items_item_selector_and_limits_as_expressions(settings):
    rec = jrun(
        settings,
        {
            "Setup": {"Type": "Pass", "Assign": {"factor": 10}, "Next": "Each"},
            "Each": {
                "Type": "Map",
                "Items": "{% $partition($range(1, 5, 1), 2) %}",
                "ItemSelector": {
                    "chunk": "{% $states.context.Map.Item.Value %}",
                    "index": "{% $states.context.Map.Item.Index %}",
                    "tag": "{% $states.input.tag %}",
                },
                "MaxConcurrency": "{% 2 %}",
                "ItemProcessor": {
                    "StartAt": "Sum",
                    "States": {
                        "Sum": {
                            "Type": "Pass",
                            # Inner scopes read outer variables.
                            "Output": "{% $states.input.tag & $states.input.index & ':' & $string($sum($states.input.chunk) * $factor) %}",
                            "End": True,
                        }
                    },
                },
                "Output": {"sums": "{% $states.result %}", "n": "{% $count($states.result) %}"},
                "End": True,
            },
        },
        {"tag": "t"},
    )
    assert rec.status == "SUCCEEDED", rec.cause
    assert rec.output == {"sums": ["t0:30", "t1:70", "t2:50"], "n": 3}
    bad = jrun(
        settings,
        {
            "M": {
                "Type": "Map",
                "Items": "{% 'abc' %}",
                "ItemProcessor": {"StartAt": "P", "States": {"P": {"Type": "Succeed"}}},
                "End": True,
            }
        },
    )
    assert (bad.status, bad.error) == ("FAILED", "States.QueryEvaluationError")


def test_catch_output_uses_error_output_and_assigns(settings):
    rec = jrun(
        settings,
        {
            "Work": {
                **task("boom"),
                "Catch": [
                    {
                        "ErrorEquals": ["States.ALL"],
                        "Output": {"failed": "{% $states.errorOutput.Error %}", "input": "{% $states.input %}"},
                        "Assign": {"cause": "{% $states.errorOutput.Cause %}"},
                        "Next": "Report",
                    }
                ],
                "End": True,
            },
            "Report": {"Type": "Pass", "Output": "{% $merge([$states.input, {'cause': $cause}]) %}", "End": True},
        },
        {"k": 1},
    )
    assert rec.output == {"failed": "RuntimeError", "input": {"k": 1}, "cause": "boom: the task broke"}
    # Without Output, a Catch passes the error output on; JSONPath catchers assign from `$` = error output.
    plain = jrun(
        settings,
        {
            "W": {**task("boom"), "Catch": [{"ErrorEquals": ["States.ALL"], "Next": "E"}], "End": True},
            "E": {"Type": "Succeed"},
        },
    )
    assert plain.output == {"Error": "RuntimeError", "Cause": "boom: the task broke"}
    jp = run(
        settings,
        {
            "W": {
                "Type": "Task",
                "Resource": "shoal:python",
                "Parameters": {"EntryPoint": "tests.support.wftasks:boom"},
                "Catch": [
                    {"ErrorEquals": ["States.ALL"], "Assign": {"err.$": "$.Error"}, "ResultPath": "$.e", "Next": "E"}
                ],
                "End": True,
            },
            "E": {"Type": "Pass", "Parameters": {"err.$": "$err", "k.$": "$.k"}, "End": True},
        },
        {"k": 2},
    )
    assert jp.output == {"err": "RuntimeError", "k": 2}


def test_task_timeout_fail_and_wait_take_expressions(settings):
    rec = jrun(
        settings,
        {
            "Nap": {"Type": "Wait", "Seconds": "{% $states.input.wait %}", "Next": "Slow"},
            "Slow": {
                **task("sleep", seconds=2),
                "TimeoutSeconds": "{% $states.input.limit %}",
                "Catch": [{"ErrorEquals": ["States.Timeout"], "Next": "Fail"}],
                "End": True,
            },
            "Fail": {
                "Type": "Fail",
                "Error": "{% 'Late.' & $states.input.Error %}",
                "Cause": "{% $states.input.Cause %}",
            },
        },
        {"wait": 0, "limit": 0.2},
    )
    assert (rec.status, rec.error) == ("FAILED", "Late.States.Timeout")
    assert "ran longer than 0.2 s" in rec.cause


def test_asl_functions(settings):
    rec = jrun(
        settings,
        {
            "F": {
                "Type": "Pass",
                "Output": {
                    "partition": "{% $partition([1,2,3,4,5], 2) %}",
                    "range": "{% $range(0, 10, 5) %}",
                    "hash": "{% $hash('hello', 'SHA-256') %}",
                    "random": "{% $random() >= 0 and $random() < 1 %}",
                    "seeded": "{% $random(7) = $random(7) %}",
                    "uuid": "{% $length($uuid()) %}",
                    "parse": "{% $parse($states.input.json).a %}",
                    "null": "{% $states.input.n %}",
                },
                "End": True,
            }
        },
        {"json": '{"a": [1, null]}', "n": None},
    )
    assert rec.status == "SUCCEEDED", rec.cause
    assert rec.output == {
        "partition": [[1, 2], [3, 4], [5]],
        "range": [0, 5, 10],
        "hash": "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824",
        "random": True,
        "seeded": True,
        "uuid": 36,
        "parse": [1, None],
        "null": None,
    }
    for expr in ("{% $states.input.missing %}", "{% $eval('1') %}", "{% $partition([1], 0) %}", "{% 1 / 'x' %}"):
        bad = jrun(settings, {"F": {"Type": "Pass", "Output": expr, "End": True}})
        assert (bad.status, bad.error) == ("FAILED", "States.QueryEvaluationError"), expr


# ---- scopes --------------------------------------------------------------------------------------


def test_parallel_branches_read_outer_variables_and_keep_their_own(settings):
    rec = jrun(
        settings,
        {
            "Init": {"Type": "Pass", "Assign": {"base": 100}, "Next": "Fan"},
            "Fan": {
                "Type": "Parallel",
                "Arguments": {"n": "{% $states.input.n %}"},
                "Branches": [
                    {
                        "StartAt": "B1",
                        "States": {
                            "B1": {"Type": "Pass", "Assign": {"local": "{% $base + $states.input.n %}"}, "Next": "B2"},
                            "B2": {"Type": "Pass", "Output": "{% $local %}", "End": True},
                        },
                    },
                    {
                        "StartAt": "C1",
                        "States": {
                            # A sibling branch's variables are not visible here.
                            "C1": {"Type": "Pass", "Output": "{% $exists($local) %}", "End": True}
                        },
                    },
                ],
                "Assign": {"fromBranch": "{% $states.result[0] %}"},
                "Next": "After",
            },
            "After": {
                "Type": "Pass",
                "Output": {"base": "{% $base %}", "fromBranch": "{% $fromBranch %}", "local": "{% $exists($local) %}"},
                "End": True,
            },
        },
        {"n": 5},
    )
    assert rec.status == "SUCCEEDED", rec.cause
    # The branch's variable died with the branch: results come back through Output only.
    assert rec.output == {"base": 100, "fromBranch": 105, "local": False}


def test_inner_scopes_cannot_assign_outer_variables():
    text = problems(
        {
            "QueryLanguage": "JSONata",
            "StartAt": "Init",
            "States": {
                "Init": {"Type": "Pass", "Assign": {"total": 0}, "Next": "Each"},
                "Each": {
                    "Type": "Map",
                    "ItemProcessor": {
                        "StartAt": "Add",
                        "States": {"Add": {"Type": "Pass", "Assign": {"total": "{% $total + 1 %}"}, "End": True}},
                    },
                    "End": True,
                },
            },
        }
    )
    assert "state 'Add': field 'Assign.total': $total is assigned in an enclosing scope" in text


# ---- validation ----------------------------------------------------------------------------------


def test_fields_of_the_other_query_language_are_rejected():
    text = problems(
        {
            "QueryLanguage": "JSONata",
            "StartAt": "A",
            "States": {
                "A": {"Type": "Pass", "InputPath": "$.x", "Parameters": {"a.$": "$.a"}, "Result": 1, "Next": "B"},
                "B": {"Type": "Task", "Resource": "shoal:python", "ResultPath": "$.r", "OutputPath": "$", "Next": "C"},
                "C": {
                    "Type": "Choice",
                    "Choices": [
                        {"Variable": "$.x", "NumericEquals": 1, "Next": "D"},
                        {"Condition": "{% 1 + %}", "Next": "D"},
                    ],
                },
                "D": {
                    "Type": "Map",
                    "ItemsPath": "$.items",
                    "ItemProcessor": {
                        "StartAt": "P",
                        "States": {"P": {"Type": "Succeed", "QueryLanguage": "JSONPath"}},
                    },
                    "Catch": [{"ErrorEquals": ["States.ALL"], "ResultPath": "$.e", "Next": "E"}],
                    "Next": "E",
                },
                "E": {"Type": "Pass", "Assign": {"states": 1, "bad-name": 2}, "End": True},
            },
        }
    )
    for expected in [
        "state 'A': field 'InputPath': is a JSONPath field, not allowed in a JSONata state",
        "state 'A': field 'Parameters': is a JSONPath field",
        "state 'A': field 'Result': is a JSONPath field",
        "state 'B': field 'ResultPath': is a JSONPath field",
        "state 'B': field 'OutputPath': is a JSONPath field",
        "state 'C': field 'Choices[0]': field 'Variable' is not allowed in a JSONata choice rule",
        "state 'C': field 'Choices[0]': a JSONata choice rule needs Condition",
        "state 'C': field 'Choices[1]': '{% 1 + %}' is not a valid JSONata expression",
        "state 'D': field 'ItemsPath': is a JSONPath field",
        "state 'D': field 'Catch[0].ResultPath': not allowed in a Catch rule (a JSONata Catch uses Output)",
        "state 'P': field 'QueryLanguage': a state cannot use JSONPath when the state machine's QueryLanguage is JSONata",
        "state 'E': field 'Assign.states': 'states' is reserved",
        "state 'E': field 'Assign.bad-name': 'bad-name' is not a valid variable name",
    ]:
        assert expected in text, expected
    text = problems(
        {
            "StartAt": "A",
            "States": {
                "A": {"Type": "Task", "Resource": "shoal:python", "Arguments": {}, "Output": "{% 1 %}", "Next": "B"},
                "B": {
                    "Type": "Choice",
                    "Choices": [{"Condition": "{% true %}", "Next": "C"}],
                    "QueryLanguage": "SQL",
                },
                "C": {
                    "Type": "Pass",
                    "Parameters": {"x.$": "$nope[?(@"},
                    "Catch": [],
                    "End": True,
                },
            },
        }
    )
    for expected in [
        "state 'A': field 'Arguments': is a JSONata field: set QueryLanguage to JSONata",
        "state 'A': field 'Output': is a JSONata field",
        "state 'B': field 'QueryLanguage': must be JSONPath or JSONata, got 'SQL'",
        "state 'C': field 'Catch': not allowed in a Pass state",
        "state 'C': field 'Parameters': 'x.$'",
    ]:
        assert expected in text, expected
    assert "QueryLanguage must be JSONPath or JSONata" in problems(
        {"QueryLanguage": "XPath", "StartAt": "A", "States": {"A": {"Type": "Succeed"}}}
    )


# ---- resume --------------------------------------------------------------------------------------


def test_variables_survive_an_interrupted_run_and_resume(settings, tmp_path):
    counter = tmp_path / "calls"
    log = tmp_path / "log"
    states = {
        "Init": {
            "Type": "Pass",
            "Assign": {"run": "{% $states.input.run %}", "seen": []},
            "Next": "Fan",
        },
        "Fan": {
            "Type": "Parallel",
            "Branches": [
                {
                    "StartAt": "Mine",
                    "States": {
                        "Mine": {"Type": "Pass", "Assign": {"mine": "{% $run & '-branch' %}"}, "Next": "Log"},
                        "Log": {
                            **task("mark", log=str(log), label="{% $mine %}"),
                            "Output": "{% $mine %}",
                            "End": True,
                        },
                    },
                },
                {
                    "StartAt": "Wait",
                    "States": {
                        "Wait": {"Type": "Pass", "Assign": {"other": 2}, "Next": "Stop"},
                        # Interrupted (as a crash would leave it) the first time.
                        "Stop": {
                            **task("interrupt_first", counter=str(counter), seen="{% $run & ':' & $string($other) %}"),
                            "End": True,
                        },
                    },
                },
            ],
            "Assign": {"branches": "{% $states.result %}"},
            "Next": "Last",
        },
        "Last": {
            "Type": "Pass",
            "Output": {"run": "{% $run %}", "branches": "{% $branches %}", "seen": "{% $seen %}"},
            "End": True,
        },
    }
    m = machine(states, QueryLanguage="JSONata")
    with pytest.raises(KeyboardInterrupt):
        workflows.run(settings, m, {"run": "r1"})
    record = workflows.Store(settings).list_executions(m.name)[0]
    assert record.status == "ABORTED"
    resumed = workflows.resume(settings, record.id)
    assert resumed.status == "SUCCEEDED", resumed.cause
    # $run came back from the top scope's checkpoint, $other from the unfinished branch's;
    # the finished branch was not run again.
    assert resumed.output == {
        "run": "r1",
        "branches": ["r1-branch", {"calls": 2, "seen": "r1:2"}],
        "seen": [],
    }
    assert log.read_text().split() == ["r1-branch"]


def test_jsonpath_variables_survive_a_failed_run_and_resume(settings, tmp_path):
    counter = tmp_path / "calls"
    states = {
        "Init": {"Type": "Pass", "Assign": {"who.$": "$.who"}, "Next": "Flaky"},
        "Flaky": {
            "Type": "Task",
            "Resource": "shoal:python",
            "Parameters": {"EntryPoint": "tests.support.wftasks:fail_until", "counter": str(counter), "succeed_on": 2},
            "Assign": {"calls.$": "$.calls"},
            "Next": "Last",
        },
        "Last": {"Type": "Pass", "Parameters": {"who.$": "$who", "calls.$": "$calls"}, "End": True},
    }
    first = run(settings, states, {"who": "me"})
    assert (first.status, first.error) == ("FAILED", "ValueError")
    resumed = workflows.resume(settings, first.id)
    assert resumed.status == "SUCCEEDED", resumed.cause
    assert resumed.output == {"who": "me", "calls": 2}
