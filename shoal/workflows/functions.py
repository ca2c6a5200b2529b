"""Registered functions: what a cloud function ARN names.

A state machine written for the cloud calls functions by name
(`arn:aws:lambda:REGION:ACCOUNT:function:NAME[:ALIAS]`, or `FunctionName` in
`arn:aws:states:::lambda:invoke`). Shoal maps such a name to a Python callable registered
here (`shoal function register NAME module:function`), or else to an entry point of that
name in the `shoal.tasks` group. Aliases and versions are accepted and ignored: a name has
one registered callable.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable
from importlib.metadata import entry_points
from typing import Any

from sqlalchemy import Column, DateTime, MetaData, String, Table, Text, delete, select

from shoal.config import Settings
from shoal.exceptions import ShoalError
from shoal.lake import database
from shoal.workflows.errors import StatesError

# Python callables a task may name instead of `module:function` (also searched by function name).
ENTRY_POINT_GROUP = "shoal.tasks"

state_tables = MetaData()
functions_table = Table(
    "shoal_functions",
    state_tables,
    Column("name", String(200), primary_key=True),
    Column("target", Text, nullable=False),
    Column("description", Text),
    Column("updated_at", DateTime, nullable=False),
)

_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
# Full ARN, partial ARN (ACCOUNT:function:NAME) or NAME, each with an optional :ALIAS or :VERSION.
_FUNCTION_ARN = re.compile(
    r"^(?:arn:aws[\w-]*:lambda:[^:]*:[^:]*:function:|\d{12}:function:)(?P<name>[\w.-]+)(?::[\w$-]+)?$"
)


class FunctionError(ShoalError):
    """A function name cannot be registered or resolved."""


class FunctionRegistry:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.engine = database.engine(settings, state_tables)

    def register(self, name: str, target: str, *, description: str | None = None) -> dict[str, Any]:
        if not _NAME.match(name):
            raise FunctionError(f"function name {name!r} must be 1-64 letters, digits, '-' or '_'")
        if ":" not in target:
            raise FunctionError(f"target {target!r} must be module:function")
        load_callable(target)  # importable and callable now, or a clear error
        with self.engine.begin() as conn:
            database.upsert(
                conn,
                functions_table,
                {"name": name},
                {"target": target, "description": description, "updated_at": database.utcnow()},
            )
        return {"name": name, "target": target, "description": description}

    def get(self, name: str) -> str | None:
        with self.engine.connect() as conn:
            return conn.execute(select(functions_table.c.target).where(functions_table.c.name == name)).scalar()

    def list(self) -> list[dict[str, Any]]:
        with self.engine.connect() as conn:
            rows = conn.execute(select(functions_table).order_by(functions_table.c.name)).all()
        return [
            {
                "name": r.name,
                "target": r.target,
                "description": r.description,
                "updated_at": r.updated_at.isoformat() + "Z",
            }
            for r in rows
        ]

    def remove(self, name: str) -> bool:
        with self.engine.begin() as conn:
            return bool(conn.execute(delete(functions_table).where(functions_table.c.name == name)).rowcount)


def function_name(ref: str) -> str | None:
    """The function name in a full or partial function ARN, or None when `ref` is not one."""
    m = _FUNCTION_ARN.match(ref)
    return m.group("name") if m else None


def resolve_function(settings: Settings, ref: str) -> Callable[[Any], Any]:
    """The callable a function reference names.

    `ref` is a function ARN (full or partial), a registered NAME (optionally NAME:ALIAS), an
    entry point in the `shoal.tasks` group, or `module:function`.
    """
    name = function_name(ref)
    if name is None:
        head = ref.split(":", 1)[0]
        registry = FunctionRegistry(settings)
        target = registry.get(ref) or (registry.get(head) if ":" in ref else None)
        if target is not None:
            return load_callable(target)
        return load_callable(ref)
    target = FunctionRegistry(settings).get(name)
    if target is not None:
        return load_callable(target)
    if not any(ep.name == name for ep in entry_points(group=ENTRY_POINT_GROUP)):
        # What the cloud answers for a function that does not exist.
        raise StatesError(
            "Lambda.ResourceNotFoundException",
            f"Function not found: {ref} (register it with `shoal function register {name} module:function`, "
            f"or install an entry point {name!r} in group {ENTRY_POINT_GROUP!r})",
        )
    return load_callable(name)


def load_callable(ref: str) -> Callable[[Any], Any]:
    """`module:attr` or the name of an entry point in the `shoal.tasks` group."""
    if ":" in ref:
        module_name, _, attr = ref.partition(":")
        try:
            target: Any = importlib.import_module(module_name)
        except ImportError as exc:
            raise StatesError("States.Runtime", f"cannot import {module_name!r} for {ref!r}: {exc}") from exc
        for part in attr.split("."):
            target = getattr(target, part, None)
            if target is None:
                raise StatesError("States.Runtime", f"{module_name!r} has no attribute {attr!r}")
    else:
        found = [ep for ep in entry_points(group=ENTRY_POINT_GROUP) if ep.name == ref]
        if not found:
            raise StatesError(
                "States.Runtime",
                f"no entry point {ref!r} in group {ENTRY_POINT_GROUP!r} (and no module:function given)",
            )
        target = found[0].load()
    if not callable(target):
        raise StatesError("States.Runtime", f"{ref!r} is not callable")
    return target
