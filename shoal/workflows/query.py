"""JSONata expressions (`{% ... %}`), the functions the language adds, and variable names.

Evaluation uses jsonata-python, a pure-Python port of the JSONata reference. Each
evaluation parses a fresh evaluator: the library keeps per-call state on the instance,
and Parallel branches and Map iterations evaluate on threads of their own. An expression
sees `$states` (input, result, errorOutput, context, as the state provides them) and
every workflow variable in scope as `$name`.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import uuid
from functools import lru_cache
from typing import Any

from jsonata import Jsonata
from jsonata.utils import Utils

from shoal.workflows.errors import StatesError

QUERY_EVALUATION = "States.QueryEvaluationError"
JSONPATH, JSONATA = "JSONPath", "JSONata"
LANGUAGES = (JSONPATH, JSONATA)
RESERVED = "states"
MAX_NAME = 80

_EXPR = re.compile(r"\A\{%(.*)%\}\Z", re.S)


def is_expression(value: Any) -> bool:
    return isinstance(value, str) and _EXPR.match(value) is not None


def _body(value: str) -> str:
    m = _EXPR.match(value)
    assert m is not None
    return m.group(1).strip()


@lru_cache(maxsize=4096)
def _syntax(text: str) -> str | None:
    try:
        Jsonata(text)
    except Exception as exc:  # noqa: BLE001 - the parser's errors are its own exception types
        return str(exc) or type(exc).__name__
    return None


def check(value: Any) -> list[str]:
    """Syntax problems of every `{% %}` string inside `value` (for definition validation)."""
    if is_expression(value):
        body = _body(value)
        if not body:
            return [f"{value!r} is an empty JSONata expression"]
        problem = _syntax(body)
        return [f"{value!r} is not a valid JSONata expression: {problem}"] if problem else []
    if isinstance(value, dict):
        return [p for v in value.values() for p in check(v)]
    if isinstance(value, list):
        return [p for v in value for p in check(v)]
    return []


def check_name(name: Any) -> str | None:
    """Why `name` cannot be a variable name, or None."""
    if not isinstance(name, str) or not name.isidentifier():
        return f"{name!r} is not a valid variable name (a letter or _ followed by letters, digits or _)"
    if name == RESERVED:
        return "'states' is reserved ($states holds the state's input, result and context)"
    if len(name) > MAX_NAME:
        return f"variable names are at most {MAX_NAME} characters"
    return None


def evaluate(text: str, states: dict[str, Any], variables: dict[str, Any]) -> Any:
    """The value of one `{% expr %}` string; failures are States.QueryEvaluationError."""
    body = _body(text)
    try:
        expr = Jsonata(body)
        expr.set_output_convert_nulls(False)
        for fname, fn in _FUNCTIONS.items():
            expr.register_lambda(fname, fn)
        bindings = {k: _to_jsonata(v) for k, v in variables.items()}
        bindings[RESERVED] = _to_jsonata(states)
        result = expr.evaluate(None, bindings)
    except StatesError:
        raise
    except Exception as exc:  # JSONata errors, and errors of the added functions
        raise StatesError(QUERY_EVALUATION, f"{text}: {exc}") from exc
    if result is None:
        raise StatesError(QUERY_EVALUATION, f"{text} evaluated to undefined (no value)")
    if callable(result) or not _is_json(result):
        raise StatesError(QUERY_EVALUATION, f"{text} did not evaluate to a JSON value")
    return _from_jsonata(result)


def render(value: Any, states: dict[str, Any], variables: dict[str, Any]) -> Any:
    """`value` with every `{% %}` string in it (at any depth) replaced by its value."""
    if is_expression(value):
        return evaluate(value, states, variables)
    if isinstance(value, dict):
        return {k: render(v, states, variables) for k, v in value.items()}
    if isinstance(value, list):
        return [render(v, states, variables) for v in value]
    return value


# ---- values in and out ---------------------------------------------------------------------
# The library reads Python None as JSONata's `undefined`; JSON null is Utils.NULL_VALUE.


def _to_jsonata(value: Any) -> Any:
    if value is None:
        return Utils.NULL_VALUE
    if isinstance(value, dict):
        return {k: _to_jsonata(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_to_jsonata(v) for v in value]
    return value


def _from_jsonata(value: Any) -> Any:
    if value is Utils.NULL_VALUE or value is None:
        return None
    if isinstance(value, dict):
        return {k: _from_jsonata(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_from_jsonata(v) for v in value if v is not None]
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return int(value)
    return value


def _is_json(value: Any) -> bool:
    if value is Utils.NULL_VALUE or value is None or isinstance(value, str | bool | int | float):
        return True
    if isinstance(value, dict):
        return all(isinstance(k, str) and _is_json(v) for k, v in value.items())
    if isinstance(value, list):
        return all(_is_json(v) for v in value)
    return False


# ---- the functions the Amazon States Language adds to JSONata --------------------------------


def _int(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float) or int(value) != value:
        raise ValueError(f"{what} must be an integer, got {value!r}")
    return int(value)


def _partition(items: Any, size: Any) -> list:
    items = list(items) if isinstance(items, list) else [items]
    n = _int(size, "$partition: the chunk size")
    if n <= 0:
        raise ValueError("$partition: the chunk size must be positive")
    return [items[i : i + n] for i in range(0, len(items), n)]


def _range(start: Any, end: Any, step: Any) -> list:
    a, b, s = _int(start, "$range: start"), _int(end, "$range: end"), _int(step, "$range: step")
    if s == 0:
        raise ValueError("$range: the step must not be 0")
    out = list(range(a, b + (1 if s > 0 else -1), s))
    if len(out) > 1000:
        raise ValueError("$range: at most 1000 items")
    return out


_HASHES = {"MD5": "md5", "SHA-1": "sha1", "SHA-256": "sha256", "SHA-384": "sha384", "SHA-512": "sha512"}


def _hash(data: Any, algorithm: Any) -> str:
    if algorithm not in _HASHES:
        raise ValueError(f"$hash: unknown algorithm {algorithm!r} (known: {', '.join(_HASHES)})")
    text = data if isinstance(data, str) else json.dumps(_from_jsonata(data), separators=(",", ":"))
    return hashlib.new(_HASHES[algorithm], text.encode()).hexdigest()


def _random(*seed: Any) -> float:
    if len(seed) > 1:
        raise ValueError("$random takes at most one argument (a seed)")
    return random.Random(_int(seed[0], "$random: the seed")).random() if seed else random.random()


def _parse(text: Any) -> Any:
    if not isinstance(text, str):
        raise ValueError(f"$parse needs a JSON string, got {type(text).__name__}")
    return _to_jsonata(json.loads(text))


def _no_eval(*_args: Any) -> Any:
    raise ValueError("$eval is not available in the Amazon States Language: use $parse")


_FUNCTIONS = {
    "partition": _partition,
    "range": _range,
    "hash": _hash,
    "random": _random,
    "uuid": lambda: str(uuid.uuid4()),
    "parse": _parse,
    "eval": _no_eval,
}
