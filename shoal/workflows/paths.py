"""Input and output processing: Paths, Reference Paths, payload templates, intrinsic functions.

Reads use jsonpath-ng (any JSONPath; `$$` reads the context object). Writes (ResultPath)
accept only Reference Paths, as the language requires, parsed here into keys and indexes.
Intrinsic functions (`States.Format(...)` and friends) have a small parser of their own:
their grammar is not JSONPath and no library covers it.
"""

from __future__ import annotations

import base64
import copy
import hashlib
import json
import math
import random
import re
import uuid
from functools import lru_cache
from typing import Any

from jsonpath_ng import parse as jsonpath_parse
from jsonpath_ng.exceptions import JsonPathLexerError, JsonPathParserError

from shoal.workflows import errors
from shoal.workflows.errors import StatesError

_INDEFINITE = re.compile(r"\*|\.\.|\[\s*\?|\[[^\]]*[,:][^\]]*\]")
# `$name...` in a JSONPath state reads the workflow variable `name` (then JSONPath on its value).
_VARIABLE = re.compile(r"\$([^\W\d]\w*)(.*)\Z", re.S)
_REF_TOKEN = re.compile(r"\.([A-Za-z_][\w-]*)|\['((?:[^'\\]|\\.)*)'\]|\[(\d+)\]")


@lru_cache(maxsize=4096)
def _compiled(path: str) -> Any:
    try:
        return jsonpath_parse(path)
    except (JsonPathLexerError, JsonPathParserError, Exception) as exc:  # noqa: BLE001 - the parser raises plain Exception too
        raise ValueError(f"not a valid JSONPath: {path!r} ({exc})") from None


def check_path(path: Any) -> None:
    """Raise ValueError unless `path` is a Path ($, $$ or $variable followed by JSONPath)."""
    if not isinstance(path, str) or not path.startswith("$"):
        raise ValueError(f"a path must start with '$', got {path!r}")
    var = _VARIABLE.match(path)
    if var:
        if var.group(1) == "states":
            raise ValueError(f"{path!r}: $states is reserved (JSONata states only)")
        _compiled("$" + var.group(2))
        return
    _compiled(path[1:] if path.startswith("$$") else path)


def check_reference_path(path: str) -> None:
    """Raise ValueError unless `path` is a Reference Path (names and indexes only)."""
    _reference_tokens(path)


@lru_cache(maxsize=4096)
def _reference_tokens(path: str) -> tuple[str | int, ...]:
    if not isinstance(path, str) or not path.startswith("$") or path.startswith("$$"):
        raise ValueError(f"a reference path must start with '$', got {path!r}")
    rest, tokens, pos = path[1:], [], 0
    while pos < len(rest):
        m = _REF_TOKEN.match(rest, pos)
        if not m:
            raise ValueError(f"{path!r} is not a reference path (only .name, ['name'] and [index] are allowed)")
        name, quoted, index = m.groups()
        tokens.append(int(index) if index is not None else (name if name is not None else quoted.replace("\\'", "'")))
        pos = m.end()
    return tuple(tokens)


def read(
    path: str | None,
    data: Any,
    context: dict[str, Any],
    *,
    error: str = errors.RUNTIME,
    variables: dict[str, Any] | None = None,
) -> Any:
    """Value at `path` ($ = data, $$ = context, $name = a variable); `None` path means an empty object."""
    if path is None:
        return {}
    if path == "$":
        return data
    if path == "$$":
        return context
    var = _VARIABLE.match(path)
    if var:
        name, rest = var.groups()
        if variables is None or name not in variables:
            raise StatesError(error, f"the path {path!r} reads the variable ${name}, which has no value here")
        source, expr = variables[name], "$" + rest
        if expr == "$":
            return source
    else:
        source, expr = (context, path[1:]) if path.startswith("$$") else (data, path)
    matches = [m.value for m in _compiled(expr).find(source)]
    if _INDEFINITE.search(expr):
        return matches
    if not matches:
        raise StatesError(error, f"the path {path!r} matched nothing in {_preview(source)}")
    return matches[0]


def write(data: Any, path: str | None, value: Any) -> Any:
    """Apply ResultPath: `value` placed into a copy of `data` at `path` (None keeps data)."""
    if path is None:
        return data
    tokens = _reference_tokens(path)
    if not tokens:
        return value
    root = copy.deepcopy(data)
    node = root
    for i, token in enumerate(tokens):
        last = i == len(tokens) - 1
        if isinstance(token, int):
            if not isinstance(node, list) or token >= len(node):
                raise StatesError(
                    errors.RESULT_PATH_MATCH_FAILURE, f"cannot apply ResultPath {path!r}: no index {token}"
                )
            if last:
                node[token] = value
            else:
                node = node[token]
            continue
        if not isinstance(node, dict):
            raise StatesError(
                errors.RESULT_PATH_MATCH_FAILURE,
                f"cannot apply ResultPath {path!r}: {_preview(node)} is not an object",
            )
        if last:
            node[token] = value
        else:
            node = node.setdefault(token, {})
    return root


def render(
    template: Any,
    data: Any,
    context: dict[str, Any],
    *,
    error: str = errors.PARAMETER_PATH_FAILURE,
    variables: dict[str, Any] | None = None,
) -> Any:
    """A payload template (Parameters, ItemSelector, ResultSelector, Assign) filled from data."""
    if isinstance(template, dict):
        out: dict[str, Any] = {}
        for key, value in template.items():
            if key.endswith(".$") and isinstance(value, str):
                out[key[:-2]] = evaluate(value, data, context, error=error, variables=variables)
            else:
                out[key] = render(value, data, context, error=error, variables=variables)
        return out
    if isinstance(template, list):
        return [render(v, data, context, error=error, variables=variables) for v in template]
    return template


def evaluate(
    expr: str,
    data: Any,
    context: dict[str, Any],
    *,
    error: str = errors.PARAMETER_PATH_FAILURE,
    variables: dict[str, Any] | None = None,
) -> Any:
    """The value of a `.$` field: a path or an intrinsic function call."""
    if expr.startswith("States."):
        return Intrinsic(expr).call(data, context, variables)
    return read(expr, data, context, error=error, variables=variables)


def check_template(template: Any) -> list[str]:
    """Problems in a payload template's `.$` fields (for definition validation)."""
    problems: list[str] = []
    if isinstance(template, dict):
        for key, value in template.items():
            if key.endswith(".$"):
                if not isinstance(value, str):
                    problems.append(f"{key!r} must hold a path or intrinsic function string")
                    continue
                try:
                    Intrinsic(value) if value.startswith("States.") else check_path(value)
                except ValueError as exc:
                    problems.append(f"{key!r}: {exc}")
            else:
                problems.extend(check_template(value))
    elif isinstance(template, list):
        for v in template:
            problems.extend(check_template(v))
    return problems


def _preview(value: Any, limit: int = 200) -> str:
    text = json.dumps(value, default=str)
    return text if len(text) <= limit else text[:limit] + "..."


# ---- intrinsic functions ------------------------------------------------------------------

_TOKEN = re.compile(
    r"\s*(?:(?P<str>'(?:[^'\\]|\\.)*')|(?P<num>-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)"
    r"|(?P<func>States\.[A-Za-z0-9]+)\s*\(|(?P<path>\$\$?[^,()\s]*)|(?P<lit>true|false|null)"
    r"|(?P<comma>,)|(?P<close>\)))"
)


class Intrinsic:
    """A parsed intrinsic function call; parsing raises ValueError with the reason."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.tree, end = self._parse(text, 0)
        if text[end:].strip():
            raise ValueError(f"unexpected text after the call in {text!r}: {text[end:]!r}")

    @classmethod
    def _parse(cls, text: str, pos: int) -> tuple[Any, int]:
        m = _TOKEN.match(text, pos)
        if not m or not m.group("func"):
            raise ValueError(f"expected an intrinsic function at position {pos} of {text!r}")
        name = m.group("func")
        if name not in FUNCTIONS:
            raise ValueError(f"unknown intrinsic function {name} (known: {', '.join(sorted(FUNCTIONS))})")
        pos, args = m.end(), list[Any]()
        while True:
            m = _TOKEN.match(text, pos)
            if not m:
                raise ValueError(f"cannot read the arguments of {name} in {text!r}")
            if m.group("close"):
                return ("call", name, args), m.end()
            if args:
                if not m.group("comma"):
                    raise ValueError(f"expected ',' between the arguments of {name} in {text!r}")
                pos = m.end()
                m = _TOKEN.match(text, pos)
                if not m:
                    raise ValueError(f"cannot read the arguments of {name} in {text!r}")
            if m.group("func"):
                node, pos = cls._parse(text, m.start())
                args.append(node)
                continue
            if m.group("str") is not None:
                raw = m.group("str")[1:-1]
                args.append(("lit", re.sub(r"\\(.)", r"\1", raw)))
            elif m.group("num") is not None:
                n = m.group("num")
                args.append(("lit", float(n) if any(c in n for c in ".eE") else int(n)))
            elif m.group("path"):
                path = m.group("path")
                check_path(path)
                args.append(("path", path))
            elif m.group("lit"):
                args.append(("lit", {"true": True, "false": False, "null": None}[m.group("lit")]))
            else:
                raise ValueError(f"unexpected {m.group(0).strip()!r} in {text!r}")
            pos = m.end()

    def call(self, data: Any, context: dict[str, Any], variables: dict[str, Any] | None = None) -> Any:
        return self._eval(self.tree, data, context, variables)

    def _eval(self, node: Any, data: Any, context: dict[str, Any], variables: dict[str, Any] | None) -> Any:
        kind = node[0]
        if kind == "lit":
            return node[1]
        if kind == "path":
            return read(node[1], data, context, error=errors.INTRINSIC_FAILURE, variables=variables)
        _, name, args = node
        values = [self._eval(a, data, context, variables) for a in args]
        try:
            return FUNCTIONS[name](*values)
        except StatesError:
            raise
        except Exception as exc:
            raise StatesError(errors.INTRINSIC_FAILURE, f"{name}: {exc}") from exc


def _format(template: str, *args: Any) -> str:
    parts = re.split(r"(?<!\\)\{\}", template)
    if len(parts) - 1 != len(args):
        raise ValueError(f"the template has {len(parts) - 1} '{{}}' but {len(args)} argument(s) were given")
    out = parts[0]
    for arg, part in zip(args, parts[1:], strict=True):
        out += (arg if isinstance(arg, str) else json.dumps(arg)) + part
    return out.replace("\\{", "{").replace("\\}", "}")


def _range(start: int, end: int, step: int) -> list[int]:
    if step == 0:
        raise ValueError("the step must not be 0")
    out = list(range(int(start), int(end) + (1 if step > 0 else -1), int(step)))
    if len(out) > 1000:
        raise ValueError("at most 1000 items")
    return out


def _merge(a: dict, b: dict, deep: bool) -> dict:
    if deep:
        raise ValueError("deep merging is not supported by the language (pass false)")
    return {**a, **b}


def _hash(value: str, algorithm: str) -> str:
    algos = {"MD5": "md5", "SHA-1": "sha1", "SHA-256": "sha256", "SHA-384": "sha384", "SHA-512": "sha512"}
    if algorithm not in algos:
        raise ValueError(f"unknown algorithm {algorithm!r} (known: {', '.join(algos)})")
    return hashlib.new(algos[algorithm], str(value).encode()).hexdigest()


def _partition(items: list, size: int) -> list[list]:
    if size <= 0:
        raise ValueError("the chunk size must be positive")
    return [items[i : i + size] for i in range(0, len(items), size)]


def _unique(items: list) -> list:
    out: list = []
    for item in items:
        if item not in out:
            out.append(item)
    return out


FUNCTIONS: dict[str, Any] = {
    "States.Format": _format,
    "States.StringToJson": lambda s: json.loads(s),
    "States.JsonToString": lambda v: json.dumps(v, separators=(",", ":")),
    "States.Array": lambda *a: list(a),
    "States.ArrayPartition": _partition,
    "States.ArrayContains": lambda items, v: v in items,
    "States.ArrayRange": _range,
    "States.ArrayGetItem": lambda items, i: items[int(i)],
    "States.ArrayLength": lambda items: len(items),
    "States.ArrayUnique": _unique,
    "States.Base64Encode": lambda s: base64.b64encode(str(s).encode()).decode(),
    "States.Base64Decode": lambda s: base64.b64decode(str(s)).decode(),
    "States.Hash": _hash,
    "States.JsonMerge": _merge,
    "States.MathRandom": lambda lo, hi, *seed: random.Random(*seed).randint(int(lo), int(hi) - 1),
    "States.MathAdd": lambda a, b: a + b if not (isinstance(a, float) and math.isnan(a)) else a,
    "States.StringSplit": lambda s, d: [p for p in re.split("|".join(map(re.escape, d)), s) if p] if d else [s],
    "States.UUID": lambda: str(uuid.uuid4()),
}
