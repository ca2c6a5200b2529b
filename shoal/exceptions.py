"""Every error Shoal raises on purpose derives from ShoalError.

The CLI turns a ShoalError into a one-line message and a non-zero exit code; anything
else is a bug and keeps its traceback.
"""

from __future__ import annotations


class ShoalError(Exception):
    """Base class: an error with a message meant for the person at the terminal."""

    exit_code = 1

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.hint = hint

    def __str__(self) -> str:
        base = super().__str__()
        return f"{base}\n  hint: {self.hint}" if self.hint else base


def first_line(exc: BaseException) -> str:
    """The reason in an exception's text (for Py4J errors, the JVM's own message)."""
    java = getattr(exc, "java_exception", None)
    text = (str(java.getMessage()) if java is not None else str(exc)).strip()
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
            f"{file}:{line}: {reason}",
            hint="fix the row, or re-run with --on-error quarantine to divert bad rows to the __rejects table",
        )
        self.file = file
        self.line = line
        self.reason = reason


class SqlError(ShoalError):
    """A SQL statement could not be parsed, translated or executed."""
