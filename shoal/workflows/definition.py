"""State machine definitions: Amazon States Language read from JSON or YAML and validated.

Validation collects every problem, each naming the state and the field, before anything
runs. Task resources are checked by a callback so the definition module knows nothing
about what a resource does.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from shoal.workflows import choice, paths
from shoal.workflows.errors import ALL, DefinitionError

_IO = {"InputPath", "OutputPath"}
_RESULT = {"ResultPath", "Parameters", "ResultSelector"}
_FLOW = {"Next", "End"}
_ERRORS = {"Retry", "Catch"}
FIELDS: dict[str, set[str]] = {
    "Pass": _IO | _FLOW | {"ResultPath", "Parameters", "Result"},
    "Task": _IO
    | _FLOW
    | _RESULT
    | _ERRORS
    | {"Resource", "TimeoutSeconds", "TimeoutSecondsPath", "HeartbeatSeconds", "HeartbeatSecondsPath", "Credentials"},
    "Choice": _IO | {"Choices", "Default"},
    "Wait": _IO | _FLOW | {"Seconds", "SecondsPath", "Timestamp", "TimestampPath"},
    "Succeed": _IO,
    "Fail": {"Error", "Cause", "ErrorPath", "CausePath"},
    "Parallel": _IO | _FLOW | _RESULT | _ERRORS | {"Branches"},
    "Map": _IO
    | _FLOW
    | _RESULT
    | _ERRORS
    | {
        "Iterator",
        "ItemProcessor",
        "ItemsPath",
        "ItemSelector",
        "MaxConcurrency",
        "MaxConcurrencyPath",
        "ToleratedFailurePercentage",
        "ToleratedFailureCount",
        "Label",
    },
}
_UNSUPPORTED = {
    "ItemReader": "distributed Map (ItemReader) is not supported: pass the items in the input",
    "ItemBatcher": "ItemBatcher is not supported",
    "ResultWriter": "ResultWriter is not supported: results return in the state output",
    "Arguments": "JSONata (Arguments) is not supported: use Parameters",
    "Output": "JSONata (Output) is not supported: use OutputPath/ResultSelector",
    "Assign": "variables (Assign) are not supported",
}
_TOP = {"StartAt", "States", "Comment", "Version", "TimeoutSeconds", "QueryLanguage"}


@dataclass
class StateMachine:
    name: str
    definition: dict[str, Any]
    source: str | None = None
    resources: set[str] = field(default_factory=set)

    @property
    def states(self) -> dict[str, dict[str, Any]]:
        return self.definition["States"]

    @property
    def start_at(self) -> str:
        return self.definition["StartAt"]

    @property
    def timeout_s(self) -> float | None:
        return self.definition.get("TimeoutSeconds")


def parse_text(text: str, *, source: str = "definition") -> dict[str, Any]:
    """JSON or YAML text -> definition object (YAML is a superset, JSON errors read better)."""
    stripped = text.lstrip()
    try:
        data = json.loads(text) if stripped.startswith("{") else yaml.safe_load(text)
    except json.JSONDecodeError as exc:
        raise DefinitionError(
            [f"not valid JSON: line {exc.lineno} column {exc.colno}: {exc.msg}"], source=source
        ) from exc
    except yaml.YAMLError as exc:
        raise DefinitionError([f"not valid YAML: {exc}"], source=source) from exc
    if not isinstance(data, dict):
        raise DefinitionError(["the definition must be an object with StartAt and States"], source=source)
    return data


def load(
    path: str | Path, *, name: str | None = None, resource_check: Callable[[str], str | None] | None = None
) -> StateMachine:
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise DefinitionError([f"cannot read {p}: {exc.strerror}"], source=str(p)) from exc
    definition = parse_text(text, source=str(p))
    stem = p.name.split(".")[0]
    return build(definition, name=name or stem, source=str(p), resource_check=resource_check)


def build(
    definition: dict[str, Any],
    *,
    name: str,
    source: str | None = None,
    resource_check: Callable[[str], str | None] | None = None,
) -> StateMachine:
    problems: list[str] = []
    resources: set[str] = set()
    _check_top(definition, "", problems)
    _check_machine(definition, "", problems, resources, resource_check)
    if problems:
        raise DefinitionError(problems, source=source or name)
    return StateMachine(name=name, definition=definition, source=source, resources=resources)


def _check_top(d: dict[str, Any], where: str, problems: list[str]) -> None:
    for key in d:
        if key not in _TOP:
            problems.append(f"{where}field {key!r} is not allowed at the top of a state machine")
    if d.get("QueryLanguage", "JSONPath") != "JSONPath":
        problems.append(f"{where}QueryLanguage {d['QueryLanguage']!r} is not supported (only JSONPath)")
    t = d.get("TimeoutSeconds")
    if t is not None and (isinstance(t, bool) or not isinstance(t, int | float) or t <= 0):
        problems.append(f"{where}TimeoutSeconds must be a positive number")


def _check_machine(
    d: dict[str, Any],
    where: str,
    problems: list[str],
    resources: set[str],
    resource_check: Callable[[str], str | None] | None,
) -> None:
    states = d.get("States")
    if not isinstance(states, dict) or not states:
        problems.append(f"{where}States must be a non-empty object")
        return
    start = d.get("StartAt")
    if not isinstance(start, str):
        problems.append(f"{where}StartAt is required")
    elif start not in states:
        problems.append(f"{where}StartAt: no state named {start!r}")
    for name, state in states.items():
        _check_state(name, state, states, where, problems, resources, resource_check)
    if isinstance(start, str) and start in states:
        for name in states:
            if name not in _reachable(start, states):
                problems.append(f"{where}state {name!r}: not reachable from StartAt {start!r}")


def _reachable(start: str, states: dict[str, Any]) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        name = todo.pop()
        if name in seen or name not in states:
            continue
        seen.add(name)
        state = states[name] if isinstance(states[name], dict) else {}
        todo.extend(t for t in _targets(state) if isinstance(t, str))
    return seen


def _targets(state: dict[str, Any]) -> list[Any]:
    out = [state.get("Next"), state.get("Default")]
    out += [r.get("Next") for r in state.get("Choices") or [] if isinstance(r, dict)]
    out += [c.get("Next") for c in state.get("Catch") or [] if isinstance(c, dict)]
    return [t for t in out if t is not None]


def _check_state(
    name: str,
    state: Any,
    states: dict[str, Any],
    where: str,
    problems: list[str],
    resources: set[str],
    resource_check: Callable[[str], str | None] | None,
) -> None:
    at = f"{where}state {name!r}"

    def bad(fieldname: str, message: str) -> None:
        problems.append(f"{at}: field {fieldname!r}: {message}")

    if len(name) > 80:
        problems.append(f"{at}: state names are at most 80 characters")
    if not isinstance(state, dict):
        problems.append(f"{at}: a state must be an object")
        return
    kind = state.get("Type")
    if kind not in FIELDS:
        bad("Type", f"must be one of {', '.join(FIELDS)}, got {kind!r}")
        return
    for key in state:
        if key in ("Type", "Comment"):
            continue
        if key in _UNSUPPORTED:
            bad(key, _UNSUPPORTED[key])
        elif key not in FIELDS[kind]:
            bad(key, f"not allowed in a {kind} state")
    if "Next" in FIELDS[kind]:
        has_next, end = "Next" in state, state.get("End")
        if has_next == bool(end):
            problems.append(f"{at}: needs exactly one of Next or End: true")
        if "End" in state and end is not True:
            bad("End", "must be true when present")
    for fieldname in ("Next", "Default"):
        target = state.get(fieldname)
        if target is not None and target not in states:
            bad(fieldname, f"no state named {target!r}" + (" in this branch" if where else ""))
    for fieldname in ("InputPath", "OutputPath"):
        if state.get(fieldname) is not None:
            try:
                paths.check_path(state[fieldname])
            except ValueError as exc:
                bad(fieldname, str(exc))
    if state.get("ResultPath") is not None:
        try:
            paths.check_reference_path(state["ResultPath"])
        except ValueError as exc:
            bad("ResultPath", str(exc))
    for fieldname in ("Parameters", "ResultSelector", "ItemSelector"):
        if fieldname in state:
            if not isinstance(state[fieldname], dict):
                bad(fieldname, "must be an object")
            for p in paths.check_template(state[fieldname]):
                bad(fieldname, p)
    _check_retry_catch(state, states, bad)

    if kind == "Task":
        resource = state.get("Resource")
        if not isinstance(resource, str):
            bad("Resource", "is required")
        else:
            resources.add(resource)
            reason = resource_check(resource) if resource_check else None
            if reason:
                bad("Resource", reason)
        for fieldname in ("TimeoutSeconds", "HeartbeatSeconds"):
            v = state.get(fieldname)
            if v is not None and (isinstance(v, bool) or not isinstance(v, int | float) or v <= 0):
                bad(fieldname, "must be a positive number")
        if "TimeoutSeconds" in state and "TimeoutSecondsPath" in state:
            bad("TimeoutSecondsPath", "cannot be used together with TimeoutSeconds")
    elif kind == "Choice":
        rules = state.get("Choices")
        if not isinstance(rules, list) or not rules:
            bad("Choices", "must be a non-empty list of rules")
        else:
            for i, rule in enumerate(rules):
                for p in choice.check_rule(rule, top=True):
                    bad(f"Choices[{i}]", p)
                if isinstance(rule, dict) and isinstance(rule.get("Next"), str) and rule["Next"] not in states:
                    bad(f"Choices[{i}].Next", f"no state named {rule['Next']!r}")
    elif kind == "Wait":
        given = [k for k in ("Seconds", "SecondsPath", "Timestamp", "TimestampPath") if k in state]
        if len(given) != 1:
            problems.append(f"{at}: needs exactly one of Seconds, SecondsPath, Timestamp, TimestampPath")
        seconds = state.get("Seconds")
        if seconds is not None and (isinstance(seconds, bool) or not isinstance(seconds, int | float) or seconds < 0):
            bad("Seconds", "must be a non-negative number")
        if "Timestamp" in state and choice._timestamp(state["Timestamp"]) is None:
            bad("Timestamp", f"must be an RFC 3339 timestamp, got {state['Timestamp']!r}")
    elif kind == "Fail":
        for a, b in (("Error", "ErrorPath"), ("Cause", "CausePath")):
            if a in state and b in state:
                bad(b, f"cannot be used together with {a}")
    elif kind == "Parallel":
        branches = state.get("Branches")
        if not isinstance(branches, list) or not branches:
            bad("Branches", "must be a non-empty list of state machines")
        else:
            for i, branch in enumerate(branches):
                inner = f"{at} Branches[{i}]: "
                if not isinstance(branch, dict):
                    problems.append(f"{inner}must be an object with StartAt and States")
                    continue
                _check_machine(branch, inner, problems, resources, resource_check)
    elif kind == "Map":
        processor = state.get("ItemProcessor", state.get("Iterator"))
        if "ItemProcessor" in state and "Iterator" in state:
            bad("Iterator", "cannot be used together with ItemProcessor")
        if not isinstance(processor, dict):
            bad("ItemProcessor", "is required (a state machine run for each item)")
        else:
            body = {k: v for k, v in processor.items() if k != "ProcessorConfig"}
            _check_machine(body, f"{at} ItemProcessor: ", problems, resources, resource_check)
        if "ItemSelector" in state and "Parameters" in state:
            bad("Parameters", "cannot be used together with ItemSelector")
        mc = state.get("MaxConcurrency")
        if mc is not None and (isinstance(mc, bool) or not isinstance(mc, int) or mc < 0):
            bad("MaxConcurrency", "must be a non-negative integer")
        if "ItemsPath" in state:
            try:
                paths.check_reference_path(state["ItemsPath"])
            except ValueError as exc:
                bad("ItemsPath", str(exc))
        pct = state.get("ToleratedFailurePercentage")
        if pct is not None and (not isinstance(pct, int | float) or not 0 <= pct <= 100):
            bad("ToleratedFailurePercentage", "must be between 0 and 100")


def _check_retry_catch(state: dict[str, Any], states: dict[str, Any], bad: Callable[[str, str], None]) -> None:
    for fieldname in ("Retry", "Catch"):
        rules = state.get(fieldname)
        if rules is None:
            continue
        if not isinstance(rules, list):
            bad(fieldname, "must be a list")
            continue
        for i, rule in enumerate(rules):
            f = f"{fieldname}[{i}]"
            if not isinstance(rule, dict):
                bad(f, "must be an object")
                continue
            names = rule.get("ErrorEquals")
            if not isinstance(names, list) or not names or not all(isinstance(n, str) for n in names):
                bad(f"{f}.ErrorEquals", "must be a non-empty list of error names")
            elif ALL in names:
                if len(names) != 1:
                    bad(f"{f}.ErrorEquals", "States.ALL must appear alone")
                if i != len(rules) - 1:
                    bad(f"{f}.ErrorEquals", f"States.ALL must be in the last {fieldname} rule")
            allowed = (
                {
                    "ErrorEquals",
                    "IntervalSeconds",
                    "MaxAttempts",
                    "BackoffRate",
                    "MaxDelaySeconds",
                    "JitterStrategy",
                    "Comment",
                }
                if fieldname == "Retry"
                else {"ErrorEquals", "Next", "ResultPath", "Comment"}
            )
            for key in rule:
                if key not in allowed:
                    bad(f"{f}.{key}", f"not allowed in a {fieldname} rule")
            if fieldname == "Retry":
                _number(rule, "IntervalSeconds", f, bad, minimum=0, exclusive=True)
                _number(rule, "MaxDelaySeconds", f, bad, minimum=0, exclusive=True)
                _number(rule, "BackoffRate", f, bad, minimum=1)
                ma = rule.get("MaxAttempts")
                if ma is not None and (isinstance(ma, bool) or not isinstance(ma, int) or ma < 0):
                    bad(f"{f}.MaxAttempts", "must be a non-negative integer")
                if rule.get("JitterStrategy", "NONE") not in ("FULL", "NONE"):
                    bad(f"{f}.JitterStrategy", "must be FULL or NONE")
            else:
                target = rule.get("Next")
                if not isinstance(target, str):
                    bad(f"{f}.Next", "is required")
                elif target not in states:
                    bad(f"{f}.Next", f"no state named {target!r}")
                if rule.get("ResultPath") is not None:
                    try:
                        paths.check_reference_path(rule["ResultPath"])
                    except ValueError as exc:
                        bad(f"{f}.ResultPath", str(exc))


def _number(
    rule: dict, key: str, f: str, bad: Callable[[str, str], None], *, minimum: float, exclusive: bool = False
) -> None:
    v = rule.get(key)
    if v is None:
        return
    if isinstance(v, bool) or not isinstance(v, int | float) or v < minimum or (exclusive and v == minimum):
        bad(f"{f}.{key}", f"must be a number {'>' if exclusive else '>='} {minimum}")
