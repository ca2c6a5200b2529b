"""Every error Shoal raises on purpose derives from ShoalError.

The CLI turns a ShoalError into a one-line message and a non-zero exit code; anything
else is a bug and keeps its traceback.
"""

from __future__ import annotations

import re


class ShoalError(Exception):
    """Base class: an error with a message meant for the person at the terminal.

    A message about the caller's options names each option as `{name}` (the library's own
    name, e.g. ApplyOptions' `keys`); `in_terms_of` re-words it for a face: the CLI's flags
    (`--key`), a workflow task's parameters (`Key`). Literal braces are written `{{ }}`;
    `literal()` escapes values put into such a message.
    """

    exit_code = 1

    def __init__(self, message: str, *, hint: str | None = None, options: bool = False) -> None:
        self.template = (message, hint) if options else None
        if options:
            message, hint = _named(message, {}), _named(hint, {}) if hint else hint
        super().__init__(message)
        self.hint = hint

    def in_terms_of(self, names: dict[str, str]) -> ShoalError:
        """This error with its options named as a face names them (unchanged if it names none)."""
        if self.template is None:
            return self
        message, hint = self.template
        # Same class and attributes (workflows catch errors by class name), new words.
        worded = type(self).__new__(type(self))
        worded.__dict__.update(self.__dict__)
        Exception.__init__(worded, _named(message, names))
        worded.hint = _named(hint, names) if hint else hint
        return worded

    def __str__(self) -> str:
        base = super().__str__()
        return f"{base}\n  hint: {self.hint}" if self.hint else base


def literal(value: object) -> str:
    """A value (a column name, a path) put into a message that names options: braces kept as they are."""
    return str(value).replace("{", "{{").replace("}", "}}")


class _Names(dict):
    def __missing__(self, key: str) -> str:
        return key


def _named(template: str, names: dict[str, str]) -> str:
    return template.format_map(_Names(names))


def first_line(exc: BaseException) -> str:
    """The reason in an exception's text (for Py4J errors, the JVM's own message)."""
    java = getattr(exc, "java_exception", None)
    text = (str(java.getMessage()) if java is not None else str(exc)).strip()
    if "exception was thrown from the Python worker" in text:
        # A Python function's error (e.g. Athena's functions in the session): its own message,
        # the last `SomeError: ...` line of the worker's traceback.
        raised = re.findall(r"^\w*(?:Error|Exception): (.+)$", text, re.M)
        if raised:
            return raised[-1].strip()
    return text.splitlines()[0] if text else type(exc).__name__


class ConfigError(ShoalError):
    """shoal.toml or the environment holds an invalid or missing setting."""


class DependencyError(ShoalError):
    """A jar, driver or model Shoal needs is not installed."""


class TableNotFoundError(ShoalError):
    """A table name does not exist in the lake catalog."""


class SourceError(ShoalError):
    """A change-file source (folder or file) cannot be read."""


class BadChangeRowError(ShoalError):
    """A change row failed validation; carries the file and line it came from."""

    def __init__(self, file: str, line: int, reason: str) -> None:
        super().__init__(
            literal(f"{file}:{line}: {reason}"),
            hint="fix the row, or re-run with {on_error} quarantine to divert bad rows to the __rejects table",
            options=True,
        )
        self.file = file
        self.line = line
        self.reason = reason


class SqlError(ShoalError):
    """A SQL statement could not be parsed, translated or executed."""
