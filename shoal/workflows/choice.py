"""Choice rules: comparison operators, And/Or/Not, and their validation."""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

from shoal.workflows import paths, query
from shoal.workflows.errors import StatesError

_KINDS = ("String", "Numeric", "Boolean", "Timestamp")
_OPS = ("Equals", "LessThan", "GreaterThan", "LessThanEquals", "GreaterThanEquals")
COMPARATORS = {f"{k}{op}" for k in _KINDS for op in _OPS if not (k == "Boolean" and op != "Equals")}
COMPARATORS |= {f"{c}Path" for c in COMPARATORS} | {"StringMatches"}
TESTS = {"IsNull", "IsPresent", "IsNumeric", "IsString", "IsBoolean", "IsTimestamp"}
COMBINATORS = {"And", "Or", "Not"}


def check_rule(rule: Any, *, top: bool) -> list[str]:  # noqa: C901 - a case per Choice rule operator, as the language lists them
    if not isinstance(rule, dict):
        return ["a choice rule must be an object"]
    problems: list[str] = []
    allowed = {"Comment", "Variable", *COMPARATORS, *TESTS, *COMBINATORS} | ({"Next", "Assign"} if top else set())
    for key in rule:
        if key not in allowed:
            problems.append(
                f"field {key!r} is not allowed in a choice rule"
                + (" (only top-level rules have Next and Assign)" if key in ("Next", "Assign") else "")
                + (" (Condition and Output are JSONata fields)" if key in ("Condition", "Output") else "")
            )
    if top and not isinstance(rule.get("Next"), str):
        problems.append("a top-level choice rule needs Next")
    ops = [k for k in rule if k in COMPARATORS | TESTS | COMBINATORS]
    if len(ops) != 1:
        problems.append(f"a choice rule needs exactly one operator, found {ops or 'none'}")
        return problems
    op = ops[0]
    if op in COMBINATORS:
        if "Variable" in rule:
            problems.append(f"{op} does not take Variable")
        inner = rule[op]
        if op == "Not":
            problems.extend(check_rule(inner, top=False))
        elif not isinstance(inner, list) or not inner:
            problems.append(f"{op} needs a non-empty list of rules")
        else:
            for r in inner:
                problems.extend(check_rule(r, top=False))
        return problems
    try:
        paths.check_path(rule.get("Variable"))
    except ValueError as exc:
        problems.append(f"Variable: {exc}")
    value = rule[op]
    if op.endswith("Path"):
        try:
            paths.check_path(value)
        except ValueError as exc:
            problems.append(f"{op}: {exc}")
    elif op in TESTS or op.startswith("Boolean"):
        if not isinstance(value, bool):
            problems.append(f"{op} needs true or false")
    elif op.startswith("Numeric"):
        if isinstance(value, bool) or not isinstance(value, int | float):
            problems.append(f"{op} needs a number")
    elif op.startswith("Timestamp"):
        if _timestamp(value) is None:
            problems.append(f"{op} needs an RFC 3339 timestamp, got {value!r}")
    elif not isinstance(value, str):
        problems.append(f"{op} needs a string")
    return problems


def check_jsonata_rule(rule: Any) -> list[str]:
    """Problems of a JSONata choice rule: a Condition expression, Next, optional Assign and Output."""
    if not isinstance(rule, dict):
        return ["a choice rule must be an object"]
    problems = [
        f"field {key!r} is not allowed in a JSONata choice rule"
        + (
            " (use Condition with a JSONata expression)"
            if key in COMPARATORS | TESTS | COMBINATORS | {"Variable"}
            else ""
        )
        for key in rule
        if key not in {"Condition", "Next", "Assign", "Output", "Comment"}
    ]
    if not isinstance(rule.get("Next"), str):
        problems.append("a top-level choice rule needs Next")
    condition = rule.get("Condition")
    if "Condition" not in rule:
        problems.append("a JSONata choice rule needs Condition")
    elif not isinstance(condition, bool) and not query.is_expression(condition):
        problems.append("Condition must be a JSONata expression '{% ... %}' (or true/false)")
    else:
        problems.extend(query.check(condition))
    return problems


def matches(rule: dict[str, Any], data: Any, context: dict[str, Any], variables: dict[str, Any] | None = None) -> bool:
    for op in COMBINATORS:
        if op in rule:
            if op == "Not":
                return not matches(rule["Not"], data, context, variables)
            results = (matches(r, data, context, variables) for r in rule[op])
            return all(results) if op == "And" else any(results)
    variable = rule["Variable"]
    present = True
    try:
        value = paths.read(variable, data, context, variables=variables)
    except StatesError:
        present, value = False, None
    if "IsPresent" in rule:
        return present == rule["IsPresent"]
    if not present:
        # Comparing a missing variable is a runtime error in the language.
        raise StatesError("States.Runtime", f"Invalid path {variable!r}: the choice state's input has no such field")
    for test, check in _TESTS.items():
        if test in rule:
            return check(value) == rule[test]
    op = next(k for k in rule if k in COMPARATORS)
    expected = rule[op]
    if op.endswith("Path"):
        expected = paths.read(expected, data, context, variables=variables)
        op = op[:-4]
    if op == "StringMatches":
        return isinstance(value, str) and _wildcard(expected).fullmatch(value) is not None
    kind = next(k for k in _KINDS if op.startswith(k))
    relation = op[len(kind) :]
    left, right = _coerce(kind, value), _coerce(kind, expected)
    if left is None or right is None:
        return False
    return {
        "Equals": left == right,
        "LessThan": left < right,
        "GreaterThan": left > right,
        "LessThanEquals": left <= right,
        "GreaterThanEquals": left >= right,
    }[relation]


def _coerce(kind: str, value: Any) -> Any:
    if kind == "String":
        return value if isinstance(value, str) else None
    if kind == "Numeric":
        return value if isinstance(value, int | float) and not isinstance(value, bool) else None
    if kind == "Boolean":
        return value if isinstance(value, bool) else None
    return _timestamp(value)


def _timestamp(value: Any) -> dt.datetime | None:
    if not isinstance(value, str):
        return None
    try:
        ts = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return ts if ts.tzinfo else None


def _wildcard(pattern: str) -> re.Pattern[str]:
    # `*` matches anything; `\*` is a literal star.
    parts = re.split(r"(?<!\\)\*", pattern)
    return re.compile(".*".join(re.escape(p.replace("\\*", "*")) for p in parts), re.S)


_TESTS = {
    "IsNull": lambda v: v is None,
    "IsNumeric": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
    "IsString": lambda v: isinstance(v, str),
    "IsBoolean": lambda v: isinstance(v, bool),
    "IsTimestamp": lambda v: _timestamp(v) is not None,
}
