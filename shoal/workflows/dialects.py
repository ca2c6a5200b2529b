"""What differs between a JSONPath state and a JSONata state, behind one small interface.

The interpreter runs every state kind once (`interpreter._Run._execute`); where the two query
languages read a state's fields differently (InputPath/Parameters/ResultPath/OutputPath against
Arguments/Output, `Variable` rules against `Condition`, `SecondsPath` against an expression), it
asks the state's `Dialect`. One dialect object serves one attempt of one state: it holds the
state's raw input, the context object (`$$` / `$states.context`) and the variables as they were
on entry.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from shoal.workflows import choice, errors, paths, query
from shoal.workflows.errors import StatesError

MAX_PAYLOAD_BYTES = 256 * 1024

ItemInput = Callable[[int, Any, dict], Any]


def checked_assign(values: dict[str, Any]) -> dict[str, Any]:
    size = len(json.dumps(values, default=str))
    if size > MAX_PAYLOAD_BYTES:
        raise StatesError(
            errors.DATA_LIMIT_EXCEEDED, f"Assign produced {size} bytes (the limit is {MAX_PAYLOAD_BYTES})"
        )
    return values


class Dialect:
    """One state's evaluation in its query language; `holder` is the state or the Choice rule
    whose Output/Assign (or OutputPath/Assign) applies."""

    # A JSONPath Pass state has a result (Result, or its effective input) written by ResultPath;
    # a JSONata Pass state only has Output.
    pass_has_result = True

    def __init__(self, name: str, state: dict[str, Any], raw: Any, ctx: dict, variables: dict[str, Any]) -> None:
        self.name, self.state, self.raw, self.ctx, self.variables = name, state, raw, ctx, variables

    def failure(self) -> tuple[str, str]:
        """A Fail state's error and cause."""
        raise NotImplementedError

    def output(self, holder: dict[str, Any]) -> Any:
        """The output of a state that passes its input on (Succeed, Choice, Wait)."""
        raise NotImplementedError

    def assign(self, holder: dict[str, Any]) -> dict[str, Any]:
        """The variables `holder` assigns from the state's input."""
        raise NotImplementedError

    def settle(self, holder: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
        return self.output(holder), self.assign(holder)

    def matches(self, index: int, rule: dict[str, Any]) -> bool:
        """Whether a Choice rule holds."""
        raise NotImplementedError

    def wait(self) -> tuple[Any, Any]:
        """A Wait state's (seconds, None) or (None, timestamp)."""
        raise NotImplementedError

    def arguments(self, kind: str) -> Any:
        """What a Pass, Task, Parallel or Map state works on."""
        raise NotImplementedError

    def timeout(self, arguments: Any) -> Any:
        raise NotImplementedError

    def items(self, arguments: Any) -> Any:
        raise NotImplementedError

    def item_input(self, arguments: Any) -> ItemInput:
        raise NotImplementedError

    def map_limits(self) -> tuple[Any, Any, Any]:
        """MaxConcurrency, ToleratedFailureCount, ToleratedFailurePercentage."""
        raise NotImplementedError

    def finish(self, result: Any) -> tuple[Any, dict[str, Any]]:
        """The state's output and assigned variables, given its result."""
        raise NotImplementedError

    def caught(self, catcher: dict[str, Any], error_output: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
        """The output and assigned variables of a Catch that took an error."""
        raise NotImplementedError


class JsonPath(Dialect):
    def __init__(self, name: str, state: dict[str, Any], raw: Any, ctx: dict, variables: dict[str, Any]) -> None:
        super().__init__(name, state, raw, ctx, variables)
        self._effective: Any = None
        self._entered = False

    def _read(self, path: str, data: Any) -> Any:
        return paths.read(path, data, self.ctx, variables=self.variables)

    def _assign(self, template: dict[str, Any] | None, value: Any) -> dict[str, Any]:
        """`name.$` fields read `$` (here `value`), `$$` and the variables as on entry."""
        if not template:
            return {}
        return checked_assign(paths.render(template, value, self.ctx, variables=self.variables))

    @property
    def effective(self) -> Any:
        """The input after InputPath (read once, when first needed: a Fail state never reads it)."""
        if not self._entered:
            self._effective = self._read(self.state.get("InputPath", "$"), self.raw)
            self._entered = True
        return self._effective

    def _out(self, data: Any) -> Any:
        return self._read(self.state.get("OutputPath", "$"), data)

    def failure(self) -> tuple[str, str]:
        s = self.state
        error = self._read(s["ErrorPath"], self.raw) if "ErrorPath" in s else s.get("Error", "States.Fail")
        cause = self._read(s["CausePath"], self.raw) if "CausePath" in s else s.get("Cause", "")
        return str(error), str(cause)

    def output(self, holder: dict[str, Any]) -> Any:
        return self._out(self.effective)

    def assign(self, holder: dict[str, Any]) -> dict[str, Any]:
        return self._assign(holder.get("Assign"), self.effective)

    def matches(self, index: int, rule: dict[str, Any]) -> bool:
        return choice.matches(rule, self.effective, self.ctx, self.variables)

    def wait(self) -> tuple[Any, Any]:
        s = self.state
        if "Seconds" in s or "SecondsPath" in s:
            return (s["Seconds"] if "Seconds" in s else self._read(s["SecondsPath"], self.effective)), None
        return None, (s["Timestamp"] if "Timestamp" in s else self._read(s["TimestampPath"], self.effective))

    def arguments(self, kind: str) -> Any:
        if "Parameters" in self.state and kind != "Map":  # a Map's Parameters select each item
            return paths.render(self.state["Parameters"], self.effective, self.ctx, variables=self.variables)
        return self.effective

    def timeout(self, arguments: Any) -> Any:
        if "TimeoutSecondsPath" in self.state:
            return self._read(self.state["TimeoutSecondsPath"], arguments)
        return self.state.get("TimeoutSeconds")

    def items(self, arguments: Any) -> Any:
        return self._read(self.state.get("ItemsPath", "$"), arguments)

    def item_input(self, arguments: Any) -> ItemInput:
        selector = self.state.get("ItemSelector", self.state.get("Parameters"))

        def one(index: int, value: Any, extra: dict) -> Any:
            if selector is None:
                return value
            return paths.render(selector, arguments, {**self.ctx, **extra}, variables=self.variables)

        return one

    def map_limits(self) -> tuple[Any, Any, Any]:
        s = self.state
        return s.get("MaxConcurrency"), s.get("ToleratedFailureCount"), s.get("ToleratedFailurePercentage")

    def finish(self, result: Any) -> tuple[Any, dict[str, Any]]:
        if "ResultSelector" in self.state:
            result = paths.render(
                self.state["ResultSelector"], result, self.ctx, error=errors.RUNTIME, variables=self.variables
            )
        assigned = self._assign(self.state.get("Assign"), result)
        output = paths.write(self.raw, self.state.get("ResultPath", "$"), result)
        return self._out(output), assigned

    def caught(self, catcher: dict[str, Any], error_output: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
        output = paths.write(self.raw, catcher.get("ResultPath", "$"), error_output)
        return output, self._assign(catcher.get("Assign"), error_output)


class Jsonata(Dialect):
    """Expressions see $states.input/.result/.context and the variables as they were on entry
    (Output and Assign both, so Output never sees this state's Assign)."""

    pass_has_result = False

    def __init__(self, name: str, state: dict[str, Any], raw: Any, ctx: dict, variables: dict[str, Any]) -> None:
        super().__init__(name, state, raw, ctx, variables)
        self.states: dict[str, Any] = {"input": raw, "context": ctx}

    def _q(self, value: Any) -> Any:
        return query.render(value, self.states, self.variables)

    def _assign(self, template: dict[str, Any] | None, states: dict[str, Any]) -> dict[str, Any]:
        if not template:
            return {}
        return checked_assign(query.render(template, states, self.variables))

    def _finish(self, holder: dict[str, Any], default: Any) -> tuple[Any, dict[str, Any]]:
        output = self._q(holder["Output"]) if "Output" in holder else default
        return output, self._assign(holder.get("Assign"), self.states)

    def failure(self) -> tuple[str, str]:
        return str(self._q(self.state.get("Error", "States.Fail"))), str(self._q(self.state.get("Cause", "")))

    def output(self, holder: dict[str, Any]) -> Any:
        return self._q(holder["Output"]) if "Output" in holder else self.raw

    def assign(self, holder: dict[str, Any]) -> dict[str, Any]:
        return self._assign(holder.get("Assign"), self.states)

    def matches(self, index: int, rule: dict[str, Any]) -> bool:
        condition = self._q(rule["Condition"])
        if not isinstance(condition, bool):
            raise StatesError(
                query.QUERY_EVALUATION,
                f"Choices[{index}].Condition of state {self.name!r} gave {condition!r}, not true or false",
            )
        return condition

    def wait(self) -> tuple[Any, Any]:
        if "Seconds" in self.state:
            return self._q(self.state["Seconds"]), None
        return None, self._q(self.state["Timestamp"])

    def arguments(self, kind: str) -> Any:
        return self._q(self.state["Arguments"]) if "Arguments" in self.state else self.raw

    def timeout(self, arguments: Any) -> Any:
        s = self.state
        timeout = self._q(s["TimeoutSeconds"]) if "TimeoutSeconds" in s else None
        if "HeartbeatSeconds" in s:
            self._q(s["HeartbeatSeconds"])  # evaluated for its errors; Shoal's tasks send no heartbeats
        if timeout is not None and not (
            not isinstance(timeout, bool) and isinstance(timeout, int | float) and timeout > 0
        ):
            raise StatesError(query.QUERY_EVALUATION, f"TimeoutSeconds of state {self.name!r} gave {timeout!r}")
        return timeout

    def items(self, arguments: Any) -> Any:
        return self._q(self.state["Items"]) if "Items" in self.state else self.raw

    def item_input(self, arguments: Any) -> ItemInput:
        selector = self.state.get("ItemSelector")

        def one(index: int, value: Any, extra: dict) -> Any:
            if selector is None:
                return value
            return query.render(selector, {"input": self.raw, "context": {**self.ctx, **extra}}, self.variables)

        return one

    def map_limits(self) -> tuple[Any, Any, Any]:
        s = self.state
        return (
            self._q(s.get("MaxConcurrency")),
            self._q(s.get("ToleratedFailureCount")),
            self._q(s.get("ToleratedFailurePercentage")),
        )

    def finish(self, result: Any) -> tuple[Any, dict[str, Any]]:
        self.states["result"] = result
        return self._finish(self.state, result)

    def caught(self, catcher: dict[str, Any], error_output: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
        states = {"input": self.raw, "errorOutput": error_output, "context": self.ctx}
        output = query.render(catcher["Output"], states, self.variables) if "Output" in catcher else error_output
        return output, self._assign(catcher.get("Assign"), states)


def dialect(language: str) -> type[Dialect]:
    return Jsonata if language == query.JSONATA else JsonPath
