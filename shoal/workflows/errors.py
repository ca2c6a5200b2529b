"""Errors of the Amazon States Language, raised and matched by the interpreter.

A `StatesError` carries the language's two fields, `Error` (a name that Retry and Catch
match) and `Cause` (a human-readable reason). Exceptions from tasks become a StatesError
named after their class, so `"ErrorEquals": ["SqlError"]` catches Shoal's SQL errors.
"""

from __future__ import annotations

from shoal.exceptions import ShoalError

ALL = "States.ALL"
TIMEOUT = "States.Timeout"
HEARTBEAT_TIMEOUT = "States.HeartbeatTimeout"
TASK_FAILED = "States.TaskFailed"
PERMISSIONS = "States.Permissions"
RESULT_PATH_MATCH_FAILURE = "States.ResultPathMatchFailure"
PARAMETER_PATH_FAILURE = "States.ParameterPathFailure"
BRANCH_FAILED = "States.BranchFailed"
NO_CHOICE_MATCHED = "States.NoChoiceMatched"
INTRINSIC_FAILURE = "States.IntrinsicFailure"
EXCEED_TOLERATED_FAILURE = "States.ExceedToleratedFailureThreshold"
RUNTIME = "States.Runtime"
DATA_LIMIT_EXCEEDED = "States.DataLimitExceeded"

STANDARD = {
    ALL,
    TIMEOUT,
    HEARTBEAT_TIMEOUT,
    TASK_FAILED,
    PERMISSIONS,
    RESULT_PATH_MATCH_FAILURE,
    PARAMETER_PATH_FAILURE,
    BRANCH_FAILED,
    NO_CHOICE_MATCHED,
    INTRINSIC_FAILURE,
    EXCEED_TOLERATED_FAILURE,
    RUNTIME,
    DATA_LIMIT_EXCEEDED,
    "States.ItemReaderFailed",
    "States.ResultWriterFailed",
    "States.QueryEvaluationError",
}

# The language: States.ALL matches any error except these terminal ones.
_NOT_MATCHED_BY_ALL = {RUNTIME, DATA_LIMIT_EXCEEDED}


class StatesError(Exception):
    def __init__(self, error: str, cause: str = "") -> None:
        super().__init__(f"{error}: {cause}" if cause else error)
        self.error = error
        self.cause = cause

    def to_dict(self) -> dict[str, str]:
        return {"Error": self.error, "Cause": self.cause}


def from_exception(exc: BaseException) -> StatesError:
    """A task's exception as the error the state machine sees."""
    if isinstance(exc, StatesError):
        return exc
    cause = str(exc).strip() or type(exc).__name__
    return StatesError(type(exc).__name__, cause)


def matches(error: StatesError, error_equals: list[str], *, from_task: bool) -> bool:
    for name in error_equals:
        if name == error.error:
            return True
        if name == ALL and error.error not in _NOT_MATCHED_BY_ALL:
            return True
        # A task's own failures (anything but a timeout) also answer to States.TaskFailed.
        if name == TASK_FAILED and from_task and error.error not in {TIMEOUT, HEARTBEAT_TIMEOUT, *_NOT_MATCHED_BY_ALL}:
            return True
    return False


class DefinitionError(ShoalError):
    """A state machine definition breaks the language; lists every problem found."""

    def __init__(self, problems: list[str], *, source: str = "definition") -> None:
        self.problems = problems
        lines = "\n".join(f"  - {p}" for p in problems)
        super().__init__(
            f"invalid state machine {source} ({len(problems)} problem(s)):\n{lines}",
            hint="fix the named state and field; see the Amazon States Language specification",
        )


class WorkflowError(ShoalError):
    """A workflow, execution or job cannot be found or acted on."""
