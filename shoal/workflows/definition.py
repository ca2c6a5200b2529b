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

from shoal.workflows import choice, paths, query
from shoal.workflows.errors import ALL, DefinitionError

_IO = {"InputPath", "OutputPath"}
_RESULT = {"ResultPath", "Parameters", "ResultSelector"}
_FLOW = {"Next", "End"}
_ERRORS = {"Retry", "Catch"}
_MAP = {
    "Iterator",
    "ItemProcessor",
    "ItemSelector",
    "MaxConcurrency",
    "ToleratedFailurePercentage",
    "ToleratedFailureCount",
    "Label",
}
_TASK = {"Resource", "TimeoutSeconds", "HeartbeatSeconds", "Credentials"}
# The fields of each state type, by query language (Type, Comment and QueryLanguage go everywhere).
FIELDS: dict[str, set[str]] = {
    "Pass": _IO | _FLOW | {"ResultPath", "Parameters", "Result", "Assign"},
    "Task": _IO | _FLOW | _RESULT | _ERRORS | _TASK | {"TimeoutSecondsPath", "HeartbeatSecondsPath", "Assign"},
    "Choice": _IO | {"Choices", "Default", "Assign"},
    "Wait": _IO | _FLOW | {"Seconds", "SecondsPath", "Timestamp", "TimestampPath", "Assign"},
    "Succeed": _IO,
    "Fail": {"Error", "Cause", "ErrorPath", "CausePath"},
    "Parallel": _IO | _FLOW | _RESULT | _ERRORS | {"Branches", "Assign"},
    "Map": _IO | _FLOW | _RESULT | _ERRORS | _MAP | {"ItemsPath", "MaxConcurrencyPath", "Assign"},
}
_OUT = {"Output", "Assign"}
JSONATA_FIELDS: dict[str, set[str]] = {
    "Pass": _FLOW | _OUT,
    "Task": _FLOW | _ERRORS | _TASK | _OUT | {"Arguments"},
    "Choice": {"Choices", "Default"} | _OUT,
    "Wait": _FLOW | {"Seconds", "Timestamp"} | _OUT,
    "Succeed": {"Output"},
    "Fail": {"Error", "Cause"},
    "Parallel": _FLOW | _ERRORS | {"Branches", "Arguments"} | _OUT,
    "Map": _FLOW | _ERRORS | _MAP | {"Items"} | _OUT,
}
_JSONPATH_ONLY = {f for fields in FIELDS.values() for f in fields} - {
    f for fields in JSONATA_FIELDS.values() for f in fields
}
_JSONATA_ONLY = {"Arguments", "Output", "Items"}
_UNSUPPORTED = {
    "ItemReader": "distributed Map (ItemReader) is not supported: pass the items in the input",
    "ItemBatcher": "ItemBatcher is not supported",
    "ResultWriter": "ResultWriter is not supported: results return in the state output",
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
    language = definition.get("QueryLanguage", query.JSONPATH)
    checker = _Checker(problems, resources, resource_check, language if language in query.LANGUAGES else query.JSONPATH)
    checker.machine(definition, "", frozenset())
    if problems:
        raise DefinitionError(problems, source=source or name)
    return StateMachine(name=name, definition=definition, source=source, resources=resources)


def _check_top(d: dict[str, Any], where: str, problems: list[str]) -> None:
    for key in d:
        if key not in _TOP:
            problems.append(f"{where}field {key!r} is not allowed at the top of a state machine")
    if d.get("QueryLanguage", query.JSONPATH) not in query.LANGUAGES:
        problems.append(f"{where}QueryLanguage must be JSONPath or JSONata, got {d['QueryLanguage']!r}")
    t = d.get("TimeoutSeconds")
    if t is not None and (isinstance(t, bool) or not isinstance(t, int | float) or t <= 0):
        problems.append(f"{where}TimeoutSeconds must be a positive number")


def language_of(state: dict[str, Any], default: str) -> str:
    """The query language a state uses: its own QueryLanguage, else the state machine's."""
    return state.get("QueryLanguage", default)


def assigned_names(state: Any, language: str) -> set[str]:
    """The variable names a state's Assign fields (its own, its choice rules', its catchers') set."""
    if not isinstance(state, dict):
        return set()
    blocks = [state.get("Assign")]
    blocks += [r.get("Assign") for r in state.get("Choices") or [] if isinstance(r, dict)]
    blocks += [c.get("Assign") for c in state.get("Catch") or [] if isinstance(c, dict)]
    names: set[str] = set()
    for block in blocks:
        if isinstance(block, dict):
            for key in block:
                names.add(key[:-2] if language == query.JSONPATH and key.endswith(".$") else key)
    return names


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


def _positive(v: Any) -> bool:
    return not isinstance(v, bool) and isinstance(v, int | float) and v > 0


class _Checker:
    """Validation of one definition: every problem, each naming its state and field."""

    def __init__(
        self,
        problems: list[str],
        resources: set[str],
        resource_check: Callable[[str], str | None] | None,
        language: str,
    ) -> None:
        self.problems = problems
        self.resources = resources
        self.resource_check = resource_check
        # Branches and Map processors inherit the top-level QueryLanguage, not their state's.
        self.language = language

    def machine(self, d: dict[str, Any], where: str, outer: frozenset[str]) -> None:
        """`outer`: variables assigned in enclosing scopes, which this scope may read but not assign."""
        problems = self.problems
        states = d.get("States")
        if not isinstance(states, dict) or not states:
            problems.append(f"{where}States must be a non-empty object")
            return
        start = d.get("StartAt")
        if not isinstance(start, str):
            problems.append(f"{where}StartAt is required")
        elif start not in states:
            problems.append(f"{where}StartAt: no state named {start!r}")
        own: set[str] = set()
        for state in states.values():
            if isinstance(state, dict):
                own |= assigned_names(state, language_of(state, self.language))
        inner = outer | own
        for name, state in states.items():
            self.state(name, state, states, where, outer, inner)
        if isinstance(start, str) and start in states:
            for name in states:
                if name not in _reachable(start, states):
                    problems.append(f"{where}state {name!r}: not reachable from StartAt {start!r}")

    def state(  # noqa: C901 - a case per state type and field, as the language lists them
        self,
        name: str,
        state: Any,
        states: dict[str, Any],
        where: str,
        outer: frozenset[str],
        inner: frozenset[str],
    ) -> None:
        at = f"{where}state {name!r}"
        problems = self.problems

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
        lang = language_of(state, self.language)
        if lang not in query.LANGUAGES:
            bad("QueryLanguage", f"must be JSONPath or JSONata, got {lang!r}")
            lang = self.language
        elif lang == query.JSONPATH and self.language == query.JSONATA:
            bad("QueryLanguage", "a state cannot use JSONPath when the state machine's QueryLanguage is JSONata")
        jsonata = lang == query.JSONATA
        allowed = JSONATA_FIELDS[kind] if jsonata else FIELDS[kind]
        for key in state:
            if key in ("Type", "Comment", "QueryLanguage"):
                continue
            if key in _UNSUPPORTED:
                bad(key, _UNSUPPORTED[key])
            elif key not in allowed:
                if jsonata and key in _JSONPATH_ONLY:
                    bad(key, "is a JSONPath field, not allowed in a JSONata state (use Arguments, Output, Assign)")
                elif not jsonata and key in _JSONATA_ONLY:
                    bad(key, "is a JSONata field: set QueryLanguage to JSONata on the state or the state machine")
                else:
                    bad(key, f"not allowed in a {'JSONata ' if jsonata else ''}{kind} state")
        if "Next" in allowed:
            has_next, end = "Next" in state, state.get("End")
            if has_next == bool(end):
                problems.append(f"{at}: needs exactly one of Next or End: true")
            if "End" in state and end is not True:
                bad("End", "must be true when present")
        for fieldname in ("Next", "Default"):
            target = state.get(fieldname)
            if target is not None and target not in states:
                bad(fieldname, f"no state named {target!r}" + (" in this branch" if where else ""))
        if "Assign" in state and "Assign" in allowed:
            self.assign(state["Assign"], lang, "Assign", bad, outer)
        if jsonata:
            self.jsonata_fields(kind, state, bad)
        else:
            self.jsonpath_fields(state, bad)
        self.retry_catch(state, states, lang, bad, outer)

        if kind == "Task":
            resource = state.get("Resource")
            if not isinstance(resource, str):
                bad("Resource", "is required")
            else:
                self.resources.add(resource)
                reason = self.resource_check(resource) if self.resource_check else None
                if reason:
                    bad("Resource", reason)
            for fieldname in ("TimeoutSeconds", "HeartbeatSeconds"):
                v = state.get(fieldname)
                if v is not None and not _positive(v) and not (jsonata and query.is_expression(v)):
                    bad(fieldname, "must be a positive number" + (" or a JSONata expression" if jsonata else ""))
            if "TimeoutSeconds" in state and "TimeoutSecondsPath" in state:
                bad("TimeoutSecondsPath", "cannot be used together with TimeoutSeconds")
        elif kind == "Choice":
            rules = state.get("Choices")
            if not isinstance(rules, list) or not rules:
                bad("Choices", "must be a non-empty list of rules")
            else:
                for i, rule in enumerate(rules):
                    found = choice.check_jsonata_rule(rule) if jsonata else choice.check_rule(rule, top=True)
                    for p in found:
                        bad(f"Choices[{i}]", p)
                    if not isinstance(rule, dict):
                        continue
                    if isinstance(rule.get("Next"), str) and rule["Next"] not in states:
                        bad(f"Choices[{i}].Next", f"no state named {rule['Next']!r}")
                    if "Assign" in rule:
                        self.assign(rule["Assign"], lang, f"Choices[{i}].Assign", bad, outer)
                    if jsonata and "Output" in rule:
                        for p in query.check(rule["Output"]):
                            bad(f"Choices[{i}].Output", p)
        elif kind == "Wait":
            given = [k for k in ("Seconds", "SecondsPath", "Timestamp", "TimestampPath") if k in state]
            if len(given) != 1:
                problems.append(
                    f"{at}: needs exactly one of "
                    + ("Seconds, Timestamp" if jsonata else "Seconds, SecondsPath, Timestamp, TimestampPath")
                )
            seconds = state.get("Seconds")
            if (
                seconds is not None
                and not (jsonata and query.is_expression(seconds))
                and (isinstance(seconds, bool) or not isinstance(seconds, int | float) or seconds < 0)
            ):
                bad("Seconds", "must be a non-negative number")
            stamp = state.get("Timestamp")
            if (
                "Timestamp" in state
                and not (jsonata and query.is_expression(stamp))
                and choice._timestamp(stamp) is None
            ):
                bad("Timestamp", f"must be an RFC 3339 timestamp, got {stamp!r}")
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
                    where_inner = f"{at} Branches[{i}]: "
                    if not isinstance(branch, dict):
                        problems.append(f"{where_inner}must be an object with StartAt and States")
                        continue
                    self.machine(branch, where_inner, inner)
        elif kind == "Map":
            processor = state.get("ItemProcessor", state.get("Iterator"))
            if "ItemProcessor" in state and "Iterator" in state:
                bad("Iterator", "cannot be used together with ItemProcessor")
            if not isinstance(processor, dict):
                bad("ItemProcessor", "is required (a state machine run for each item)")
            else:
                body = {k: v for k, v in processor.items() if k != "ProcessorConfig"}
                self.machine(body, f"{at} ItemProcessor: ", inner)
            if "ItemSelector" in state and "Parameters" in state:
                bad("Parameters", "cannot be used together with ItemSelector")
            mc = state.get("MaxConcurrency")
            if (
                mc is not None
                and not (jsonata and query.is_expression(mc))
                and (isinstance(mc, bool) or not isinstance(mc, int) or mc < 0)
            ):
                bad("MaxConcurrency", "must be a non-negative integer")
            if "ItemsPath" in state:
                try:
                    paths.check_reference_path(state["ItemsPath"])
                except ValueError as exc:
                    bad("ItemsPath", str(exc))
            pct = state.get("ToleratedFailurePercentage")
            if (
                pct is not None
                and not (jsonata and query.is_expression(pct))
                and (not isinstance(pct, int | float) or not 0 <= pct <= 100)
            ):
                bad("ToleratedFailurePercentage", "must be between 0 and 100")
            if jsonata and "Items" in state:
                items = state["Items"]
                if not isinstance(items, list) and not query.is_expression(items):
                    bad("Items", "must be a JSON array or a JSONata expression '{% ... %}'")

    def jsonpath_fields(self, state: dict[str, Any], bad: Callable[[str, str], None]) -> None:
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

    def jsonata_fields(self, kind: str, state: dict[str, Any], bad: Callable[[str, str], None]) -> None:
        for fieldname in JSONATA_FIELDS[kind] - {"Next", "End", "Retry", "Catch", "Choices", "Default", "Assign"}:
            if fieldname in state and fieldname not in ("Iterator", "ItemProcessor", "Resource", "Label"):
                for p in query.check(state[fieldname]):
                    bad(fieldname, p)
        selector = state.get("ItemSelector")
        if "ItemSelector" in state and not isinstance(selector, dict | list) and not query.is_expression(selector):
            bad("ItemSelector", "must be an object or a JSONata expression")

    def assign(
        self, block: Any, lang: str, fieldname: str, bad: Callable[[str, str], None], outer: frozenset[str]
    ) -> None:
        if not isinstance(block, dict):
            bad(fieldname, "must be an object of variable names and values")
            return
        for key in block:
            var = key[:-2] if lang == query.JSONPATH and key.endswith(".$") else key
            reason = query.check_name(var)
            if reason:
                bad(f"{fieldname}.{key}", reason)
            elif var in outer:
                bad(
                    f"{fieldname}.{key}",
                    f"${var} is assigned in an enclosing scope: a Parallel branch or Map iteration can read "
                    "it but not assign it (return values through Output instead)",
                )
        found = query.check(block) if lang == query.JSONATA else paths.check_template(block)
        for p in found:
            bad(fieldname, p)

    def retry_catch(  # noqa: C901 - a check per Retry/Catch field, as the language lists them
        self,
        state: dict[str, Any],
        states: dict[str, Any],
        lang: str,
        bad: Callable[[str, str], None],
        outer: frozenset[str],
    ) -> None:
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
                if fieldname == "Retry":
                    allowed = {
                        "ErrorEquals",
                        "IntervalSeconds",
                        "MaxAttempts",
                        "BackoffRate",
                        "MaxDelaySeconds",
                        "JitterStrategy",
                        "Comment",
                    }
                else:
                    allowed = {"ErrorEquals", "Next", "Assign", "Comment"}
                    allowed.add("Output" if lang == query.JSONATA else "ResultPath")
                for key in rule:
                    if key not in allowed:
                        hint = ""
                        if key == "ResultPath" and lang == query.JSONATA:
                            hint = " (a JSONata Catch uses Output)"
                        elif key == "Output" and lang == query.JSONPATH:
                            hint = " (Output is a JSONata field: a JSONPath Catch uses ResultPath)"
                        bad(f"{f}.{key}", f"not allowed in a {fieldname} rule{hint}")
                if fieldname == "Retry":
                    _number(rule, "IntervalSeconds", f, bad, minimum=0, exclusive=True)
                    _number(rule, "MaxDelaySeconds", f, bad, minimum=0, exclusive=True)
                    _number(rule, "BackoffRate", f, bad, minimum=1)
                    ma = rule.get("MaxAttempts")
                    if ma is not None and (isinstance(ma, bool) or not isinstance(ma, int) or ma < 0):
                        bad(f"{f}.MaxAttempts", "must be a non-negative integer")
                    if rule.get("JitterStrategy", "NONE") not in ("FULL", "NONE"):
                        bad(f"{f}.JitterStrategy", "must be FULL or NONE")
                    continue
                target = rule.get("Next")
                if not isinstance(target, str):
                    bad(f"{f}.Next", "is required")
                elif target not in states:
                    bad(f"{f}.Next", f"no state named {target!r}")
                if rule.get("ResultPath") is not None and lang == query.JSONPATH:
                    try:
                        paths.check_reference_path(rule["ResultPath"])
                    except ValueError as exc:
                        bad(f"{f}.ResultPath", str(exc))
                if "Output" in rule and lang == query.JSONATA:
                    for p in query.check(rule["Output"]):
                        bad(f"{f}.Output", p)
                if "Assign" in rule:
                    self.assign(rule["Assign"], lang, f"{f}.Assign", bad, outer)


def _number(
    rule: dict, key: str, f: str, bad: Callable[[str, str], None], *, minimum: float, exclusive: bool = False
) -> None:
    v = rule.get(key)
    if v is None:
        return
    if isinstance(v, bool) or not isinstance(v, int | float) or v < minimum or (exclusive and v == minimum):
        bad(f"{f}.{key}", f"must be a number {'>' if exclusive else '>='} {minimum}")
