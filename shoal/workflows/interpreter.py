"""The state machine interpreter.

One execution runs in one process. Parallel branches and Map iterations run on threads
that share the process's SparkSession; each thread submits its Spark jobs to a FAIR
scheduler pool of its own and under a job group, so a branch that must stop (a sibling
failed, a timeout fired) has its running Spark jobs cancelled.

Every transition is written to the store before the next state starts, which is what
makes `resume` exact: finished states never run again.
"""

from __future__ import annotations

import contextlib
import json
import random
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from shoal.config import Settings
from shoal.workflows import choice, errors, query
from shoal.workflows.definition import StateMachine, build, language_of
from shoal.workflows.dialects import MAX_PAYLOAD_BYTES, Dialect, dialect
from shoal.workflows.errors import StatesError, WorkflowError
from shoal.workflows.store import ABORTED, FAILED, SUCCEEDED, TIMED_OUT, ExecutionRecord, Store, now, owner_alive

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# The language's limit on the variables one scope can see (256 KiB per Assign is MAX_PAYLOAD_BYTES).
MAX_VARIABLES_BYTES = 10 * 1024 * 1024


def new_execution_id(workflow: str) -> str:
    return f"{workflow}-{now().strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:8]}"


class Cancelled(Exception):
    """Raised inside a branch that must stop because a sibling failed or time ran out."""


class CancelToken:
    """A stop signal for one scope; setting a parent sets every child."""

    def __init__(self, parent: CancelToken | None = None) -> None:
        self._event = threading.Event()
        self._callbacks: list[Callable[[], None]] = []
        self._lock = threading.Lock()
        self.reason: StatesError | None = None
        if parent is not None:
            parent.on_cancel(self.set)

    def on_cancel(self, callback: Callable[[], None]) -> None:
        with self._lock:
            fire = self._event.is_set()
            if not fire:
                self._callbacks.append(callback)
        if fire:
            callback()

    def set(self, reason: StatesError | None = None) -> None:
        with self._lock:
            if self._event.is_set():
                return
            self.reason = reason
            self._event.set()
            callbacks, self._callbacks = self._callbacks, []
        for cb in callbacks:
            # A failed Spark cancel must not mask the stop itself.
            with contextlib.suppress(Exception):
                cb()

    def is_set(self) -> bool:
        return self._event.is_set()

    def sleep(self, seconds: float) -> None:
        if self._event.wait(max(0.0, seconds)):
            raise Cancelled()

    def check(self) -> None:
        if self._event.is_set():
            raise Cancelled()


@dataclass
class TaskContext:
    """What a task resource gets besides its parameters."""

    settings: Settings
    execution_id: str
    state: str
    scope: str
    cancel: CancelToken
    say: Callable[[str], None]
    # Runs another workflow, as `shoal.workflows.run` (child executions): handed in by whoever made
    # the interpreter, so that task resources need not import the package that imports them.
    run_workflow: Callable[..., ExecutionRecord] | None = None
    _spark_pool: str = ""
    _job_group: str = field(default_factory=lambda: uuid.uuid4().hex)

    def spark(self) -> SparkSession:
        """The shared SparkSession, with this thread's jobs in the branch's FAIR pool."""
        from shoal.spark import get_spark

        spark = get_spark(self.settings)
        sc = spark.sparkContext
        sc.setLocalProperty("spark.scheduler.pool", self._spark_pool or "default")
        sc.setJobGroup(self._job_group, f"{self.execution_id} {self.scope}/{self.state}", interruptOnCancel=True)
        self.cancel.on_cancel(lambda: sc.cancelJobGroup(self._job_group))
        return spark


Resolver = Callable[[str], Callable[[TaskContext, Any], Any]]


class Interpreter:
    def __init__(
        self,
        settings: Settings,
        resolve: Resolver,
        *,
        store: Store | None = None,
        say: Callable[[str], None] = lambda _m: None,
        run_workflow: Callable[..., ExecutionRecord] | None = None,
    ) -> None:
        self.settings = settings
        self.resolve = resolve
        self.store = store or Store(settings)
        self.say = say
        self.run_workflow = run_workflow

    def start(
        self,
        machine: StateMachine,
        input_: Any,
        *,
        name: str | None = None,
        trigger: Any = None,
        execution_id: str | None = None,
    ) -> ExecutionRecord:
        execution_id = execution_id or new_execution_id(machine.name)
        self.store.create_execution(execution_id, machine.name, name, machine.definition, input_, trigger)
        self.store.event(execution_id, "ExecutionStarted", input=input_, trigger=trigger)
        return self._drive(_Run(self, execution_id, machine, input_), resume=False)

    def resume(self, execution_id: str) -> ExecutionRecord:
        record = self.store.execution(execution_id)
        if record.status == SUCCEEDED:
            raise WorkflowError(f"execution {record.id} already succeeded; there is nothing to resume")
        if record.status == "RUNNING" and owner_alive(record):
            raise WorkflowError(
                f"execution {record.id} is still running (process {record.pid} on {record.host})",
                hint="wait for it, or stop that process first",
            )
        machine = build(record.definition, name=record.workflow)
        self.store.claim(record.id)
        self.store.event(record.id, "ExecutionResumed", previous_status=record.status)
        return self._drive(
            _Run(self, record.id, machine, record.input, started=record.started_at.isoformat() + "Z"), resume=True
        )

    def _drive(self, run: _Run, *, resume: bool) -> ExecutionRecord:
        timer = None
        if run.machine.timeout_s:
            timer = threading.Timer(
                run.machine.timeout_s,
                lambda: run.root.set(
                    StatesError(errors.TIMEOUT, f"the execution ran longer than {run.machine.timeout_s} s")
                ),
            )
            timer.daemon = True
            timer.start()
        stopped = _StopWatch(self.store, run)
        stopped.start()
        try:
            output = run.machine_scope(run.machine.definition, run.input, "", resume=resume, cancel=run.root)
        except (StatesError, Cancelled) as exc:
            err = exc if isinstance(exc, StatesError) else (run.root.reason or StatesError("States.Aborted", "stopped"))
            if stopped.reason is not None and run.root.reason is stopped.reason:
                # StopExecution: whatever the states raised while being cancelled, the run was stopped.
                err = stopped.reason
                self.store.event(run.id, "ExecutionAborted", error=err.error, cause=err.cause)
                self.store.finish(run.id, ABORTED, error=err.error, cause=err.cause)
            else:
                status = TIMED_OUT if err.error == errors.TIMEOUT and run.root.reason is err else FAILED
                kind = "TimedOut" if status == TIMED_OUT else "Failed"
                self.store.event(run.id, f"Execution{kind}", error=err.error, cause=err.cause)
                self.store.finish(run.id, status, error=err.error, cause=err.cause)
        except KeyboardInterrupt:
            self.store.event(run.id, "ExecutionAborted", cause="interrupted")
            self.store.finish(
                run.id, ABORTED, error="States.Aborted", cause="interrupted (resume it with shoal workflow resume)"
            )
            raise
        else:
            self.store.event(run.id, "ExecutionSucceeded", output=output)
            self.store.finish(run.id, SUCCEEDED, output=output)
        finally:
            stopped.close()
            if timer:
                timer.cancel()
        return self.store.execution(run.id)


class _StopWatch(threading.Thread):
    """Polls the store for a stop request (`shoal workflow stop`, the API, the console: any
    process) and cancels the run's states when one arrives."""

    POLL_S = 1.0

    def __init__(self, store: Store, run: _Run) -> None:
        super().__init__(daemon=True, name=f"stop-watch-{run.id}")
        self.store = store
        self.run_ = run
        self.reason: StatesError | None = None
        self._done = threading.Event()

    def run(self) -> None:
        while not self._done.wait(self.POLL_S):
            try:
                request = self.store.stop_request(self.run_.id)
            except Exception:  # noqa: BLE001 - a busy database: look again at the next tick
                continue
            if request:
                self.reason = StatesError(request.get("error") or "States.Aborted", request.get("cause") or "stopped")
                self.run_.root.set(self.reason)
                return

    def close(self) -> None:
        self._done.set()


class _Run:
    """One execution's interpreter state."""

    def __init__(
        self,
        interpreter: Interpreter,
        execution_id: str,
        machine: StateMachine,
        input_: Any,
        started: str | None = None,
    ) -> None:
        self.interpreter = interpreter
        self.store = interpreter.store
        self.id = execution_id
        self.machine = machine
        self.input = input_
        self.root = CancelToken()
        self.started = started or now().isoformat() + "Z"
        self.limit = interpreter.settings.workflows.max_concurrency

    # ---- scopes -----------------------------------------------------------------------------
    def machine_scope(
        self,
        definition: dict[str, Any],
        data: Any,
        scope: str,
        *,
        resume: bool,
        cancel: CancelToken,
        extra: dict | None = None,
        outer: dict[str, Any] | None = None,
    ) -> Any:
        """Run one scope. `outer`: the variables of the enclosing scopes, readable here, never
        assigned; what this scope assigns (`own`) is checkpointed with it and dies with it."""
        states = definition["States"]
        current = definition["StartAt"]
        outer = outer or {}
        own: dict[str, Any] = {}
        if resume:
            cp = self.store.checkpoint_of(self.id, scope)
            if cp is not None and cp["done"]:
                return cp["output"]
            if cp is not None:
                current, data, own = cp["next_state"], cp["input"], cp["variables"]
            else:
                resume = False
        if not resume:
            self.store.checkpoint(self.id, scope, next_state=current, input_=data)
        while True:
            cancel.check()
            next_name, data, assigned = self.run_state(
                current, states[current], data, scope, resume=resume, cancel=cancel, extra=extra, variables=outer | own
            )
            resume = False
            if assigned:
                own = {**own, **assigned}
                self._check_variables_size(outer | own, current)
            if next_name is None:
                self.store.checkpoint(self.id, scope, next_state=None, done=True, output=data)
                return data
            self.store.checkpoint(self.id, scope, next_state=next_name, input_=data, variables=own)
            current = next_name

    def context(self, state: str, extra: dict | None, retry_count: int = 0) -> dict[str, Any]:
        ctx = {
            "Execution": {"Id": self.id, "Input": self.input, "Name": self.id, "StartTime": self.started},
            "StateMachine": {"Id": self.machine.name, "Name": self.machine.name},
            "State": {"Name": state, "EnteredTime": now().isoformat() + "Z", "RetryCount": retry_count},
        }
        if extra:
            ctx.update(extra)
        return ctx

    def language(self, state: dict[str, Any]) -> str:
        return language_of(state, self.machine.definition.get("QueryLanguage", query.JSONPATH))

    # ---- one state --------------------------------------------------------------------------
    def run_state(
        self,
        name: str,
        state: dict[str, Any],
        raw: Any,
        scope: str,
        *,
        resume: bool,
        cancel: CancelToken,
        extra: dict | None,
        variables: dict[str, Any],
    ) -> tuple[str | None, Any, dict[str, Any]]:
        """Run a state to its end: (next state or None, output, variables it assigns)."""
        kind = state["Type"]
        language = dialect(self.language(state))
        self.interpreter.say(f"{scope}/{name}" if scope else name)
        self.store.event(self.id, f"{kind}StateEntered", state=name, scope=scope, input=raw)
        retriers = state.get("Retry") or []
        attempts = [0] * len(retriers)
        retry_count = 0
        while True:
            lang = language(name, state, raw, self.context(name, extra, retry_count), variables)
            try:
                next_name, output, assigned = self._execute(
                    kind, name, state, lang, scope, resume=resume, cancel=cancel
                )
                self._check_size(output, name)
                break
            except Cancelled:
                raise
            except StatesError as err:
                from_task = kind == "Task"
                if kind == "Fail":
                    self.store.event(
                        self.id, "FailStateExited", state=name, scope=scope, error=err.error, cause=err.cause
                    )
                    raise
                i = next(
                    (i for i, r in enumerate(retriers) if errors.matches(err, r["ErrorEquals"], from_task=from_task)),
                    None,
                )
                if i is not None and attempts[i] < retriers[i].get("MaxAttempts", 3):
                    rule = retriers[i]
                    delay = rule.get("IntervalSeconds", 1) * rule.get("BackoffRate", 2.0) ** attempts[i]
                    if "MaxDelaySeconds" in rule:
                        delay = min(delay, rule["MaxDelaySeconds"])
                    if rule.get("JitterStrategy") == "FULL":
                        delay = random.uniform(0, delay)
                    attempts[i] += 1
                    retry_count += 1
                    self.store.event(
                        self.id,
                        "RetryScheduled",
                        state=name,
                        scope=scope,
                        error=err.error,
                        cause=err.cause,
                        attempt=attempts[i],
                        delay_s=round(delay, 3),
                    )
                    cancel.sleep(delay)
                    resume = False
                    continue
                catcher = next(
                    (c for c in state.get("Catch") or [] if errors.matches(err, c["ErrorEquals"], from_task=from_task)),
                    None,
                )
                if catcher is not None:
                    output, assigned = lang.caught(catcher, err.to_dict())
                    self.store.event(
                        self.id,
                        "CaughtError",
                        state=name,
                        scope=scope,
                        error=err.error,
                        cause=err.cause,
                        next=catcher["Next"],
                    )
                    self._exited(kind, name, scope, output, assigned)
                    return catcher["Next"], output, assigned
                self.store.event(
                    self.id, f"{kind}StateFailed", state=name, scope=scope, error=err.error, cause=err.cause
                )
                raise
        self._exited(kind, name, scope, output, assigned)
        return next_name, output, assigned

    def _exited(self, kind: str, name: str, scope: str, output: Any, assigned: dict[str, Any]) -> None:
        detail: dict[str, Any] = {"output": output}
        if assigned:
            detail["assigned"] = assigned
        self.store.event(self.id, f"{kind}StateExited", state=name, scope=scope, **detail)

    def _check_size(self, output: Any, name: str) -> None:
        size = len(json.dumps(output, default=str))
        if size > MAX_PAYLOAD_BYTES:
            raise StatesError(
                errors.DATA_LIMIT_EXCEEDED, f"state {name!r} produced {size} bytes (the limit is {MAX_PAYLOAD_BYTES})"
            )

    def _check_variables_size(self, variables: dict[str, Any], name: str) -> None:
        size = len(json.dumps(variables, default=str))
        if size > MAX_VARIABLES_BYTES:
            raise StatesError(
                errors.DATA_LIMIT_EXCEEDED,
                f"after state {name!r} the variables in scope hold {size} bytes (the limit is {MAX_VARIABLES_BYTES})",
            )

    # ---- the state kinds, in either query language ------------------------------------------
    def _execute(
        self,
        kind: str,
        name: str,
        state: dict[str, Any],
        lang: Dialect,
        scope: str,
        *,
        resume: bool,
        cancel: CancelToken,
    ) -> tuple[str | None, Any, dict[str, Any]]:
        """One attempt at a state: (next state or None, output, variables it assigns). What the
        query language decides (`lang`: JSONPath or JSONata) is asked of it; the rest is here once."""
        nxt = None if state.get("End") else state.get("Next")
        if kind == "Fail":
            raise StatesError(*lang.failure())
        if kind == "Succeed":
            return None, lang.output(state), {}
        if kind == "Choice":
            for i, rule in enumerate(state["Choices"]):
                if lang.matches(i, rule):
                    return rule["Next"], *lang.settle(rule)
            if "Default" in state:
                return state["Default"], *lang.settle(state)
            raise StatesError(
                errors.NO_CHOICE_MATCHED, f"no choice rule of state {name!r} matched and it has no Default"
            )
        if kind == "Wait":
            seconds, stamp = lang.wait()
            if stamp is None:
                self._sleep_seconds(seconds, cancel)
            else:
                self._sleep_until(stamp, cancel)
            return nxt, *lang.settle(state)
        if kind == "Pass" and not lang.pass_has_result:
            return nxt, *lang.settle(state)

        arguments = lang.arguments(kind)
        if kind == "Pass":
            result = state.get("Result", arguments)
        elif kind == "Task":
            result = self._task(name, state["Resource"], arguments, lang.timeout(arguments), scope, cancel)
        elif kind == "Parallel":
            result = self._parallel(name, state, arguments, scope, lang.variables, resume=resume, cancel=cancel)
        else:
            result = self._map(
                name,
                state,
                lang.items(arguments),
                lang.item_input(arguments),
                *lang.map_limits(),
                scope,
                lang.variables,
                resume=resume,
                cancel=cancel,
            )
        return nxt, *lang.finish(result)

    def _sleep_seconds(self, seconds: Any, cancel: CancelToken) -> None:
        if isinstance(seconds, bool) or not isinstance(seconds, int | float) or seconds < 0:
            raise StatesError(errors.RUNTIME, f"the Wait state's seconds are {seconds!r}, not a non-negative number")
        cancel.sleep(float(seconds))

    def _sleep_until(self, stamp: Any, cancel: CancelToken) -> None:
        when = choice._timestamp(stamp)
        if when is None:
            raise StatesError(errors.RUNTIME, f"{stamp!r} is not an RFC 3339 timestamp")
        cancel.sleep(when.timestamp() - time.time())

    # ---- task ---------------------------------------------------------------------------------
    def _task(self, name: str, resource: str, params: Any, timeout: Any, scope: str, cancel: CancelToken) -> Any:
        handler = self.interpreter.resolve(resource)
        task_cancel = CancelToken(cancel)
        tctx = TaskContext(
            self.interpreter.settings,
            self.id,
            name,
            scope,
            task_cancel,
            self.interpreter.say,
            run_workflow=self.interpreter.run_workflow,
            _spark_pool=f"shoal-{scope or 'main'}",
        )
        self.store.event(self.id, "TaskScheduled", state=name, scope=scope, resource=resource, parameters=params)
        started = time.monotonic()
        try:
            if timeout:
                result = self._with_timeout(handler, tctx, params, float(timeout), name)
            else:
                result = handler(tctx, params)
        except Cancelled:
            raise
        except StatesError as err:
            self.store.event(
                self.id,
                "TaskTimedOut" if err.error == errors.TIMEOUT else "TaskFailed",
                state=name,
                scope=scope,
                error=err.error,
                cause=err.cause,
            )
            raise
        except Exception as exc:  # any task failure becomes a States error the definition can catch
            failure = errors.from_exception(exc)
            self.store.event(self.id, "TaskFailed", state=name, scope=scope, error=failure.error, cause=failure.cause)
            raise failure from exc
        result = json.loads(json.dumps(result, default=str)) if result is not None else None
        self.store.event(
            self.id,
            "TaskSucceeded",
            state=name,
            scope=scope,
            output=result,
            duration_s=round(time.monotonic() - started, 3),
        )
        return result

    def _with_timeout(
        self, handler: Callable[[TaskContext, Any], Any], tctx: TaskContext, params: Any, timeout: float, name: str
    ) -> Any:
        box: dict[str, Any] = {}

        def target() -> None:
            try:
                box["result"] = handler(tctx, params)
            except BaseException as exc:  # noqa: BLE001 - handed to the waiting thread
                box["error"] = exc

        worker = threading.Thread(target=target, name=f"task-{name}", daemon=True)
        worker.start()
        worker.join(timeout)
        if worker.is_alive():
            err = StatesError(errors.TIMEOUT, f"task {name!r} ran longer than {timeout:g} s")
            # Stops its Spark jobs; Python code in the thread is abandoned (threads cannot be killed).
            tctx.cancel.set(err)
            raise err
        if "error" in box:
            raise box["error"]
        return box.get("result")

    # ---- parallel and map ---------------------------------------------------------------------
    def _parallel(
        self,
        name: str,
        state: dict[str, Any],
        data: Any,
        scope: str,
        variables: dict[str, Any],
        *,
        resume: bool,
        cancel: CancelToken,
    ) -> list[Any]:
        branches = state["Branches"]
        prefix = f"{scope}/{name}["
        if not resume:
            self.store.clear_checkpoints(self.id, prefix)
        jobs = [(f"{prefix}{i}]", branch, data, None) for i, branch in enumerate(branches)]
        results, failures = self._fan_out(jobs, len(branches), variables, resume=resume, cancel=cancel, tolerated=0)
        if failures:
            raise failures[0][1]
        return results

    def _map(
        self,
        name: str,
        state: dict[str, Any],
        items: Any,
        item_input: Callable[[int, Any, dict], Any],
        max_concurrency: Any,
        tolerated_count: Any,
        tolerated_percentage: Any,
        scope: str,
        variables: dict[str, Any],
        *,
        resume: bool,
        cancel: CancelToken,
    ) -> list[Any]:
        if not isinstance(items, list):
            source = "Items" if "Items" in state else "ItemsPath"
            raise StatesError(
                errors.RUNTIME if source == "ItemsPath" else query.QUERY_EVALUATION,
                f"{source} of Map state {name!r} must select a list, got {type(items).__name__}",
            )
        for what, value in (
            ("MaxConcurrency", max_concurrency),
            ("ToleratedFailureCount", tolerated_count),
            ("ToleratedFailurePercentage", tolerated_percentage),
        ):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int | float) or value < 0):
                raise StatesError(errors.RUNTIME, f"{what} of Map state {name!r} is {value!r}, not a number >= 0")
        processor = state.get("ItemProcessor", state.get("Iterator"))
        assert processor is not None  # the definition check requires one on every Map state
        body = {k: v for k, v in processor.items() if k != "ProcessorConfig"}
        prefix = f"{scope}/{name}["
        if not resume:
            self.store.clear_checkpoints(self.id, prefix)
        jobs = []
        for index, value in enumerate(items):
            extra = {"Map": {"Item": {"Index": index, "Value": value}}}
            jobs.append((f"{prefix}{index}]", body, item_input(index, value, extra), extra))
        limit = int(max_concurrency or 0) or self.limit
        # No tolerance given: the first failed iteration fails the Map.
        tolerated = 0
        if tolerated_count is not None or tolerated_percentage is not None:
            tolerated = min(
                int(tolerated_count if tolerated_count is not None else len(items)),
                int(len(items) * (tolerated_percentage if tolerated_percentage is not None else 100) / 100),
            )
        results, failures = self._fan_out(
            jobs, min(limit, self.limit), variables, resume=resume, cancel=cancel, tolerated=tolerated
        )
        if len(failures) > tolerated:
            if tolerated == 0:
                raise failures[0][1]
            raise StatesError(
                errors.EXCEED_TOLERATED_FAILURE,
                f"{len(failures)} of {len(items)} iterations failed (tolerated: {tolerated}); first: {failures[0][1].error}",
            )
        for index, err in failures:
            results[index] = err.to_dict()
        return results

    def _fan_out(
        self,
        jobs: Sequence[tuple[str, dict, Any, dict | None]],
        workers: int,
        variables: dict[str, Any],
        *,
        resume: bool,
        cancel: CancelToken,
        tolerated: int,
    ) -> tuple[list[Any], list[tuple[int, StatesError]]]:
        """Run each (scope, machine, input) concurrently; stop the rest once failures exceed `tolerated`."""
        group = CancelToken(cancel)
        results: list[Any] = [None] * len(jobs)
        failures: list[tuple[int, StatesError]] = []
        # Failures of branches stopped because a sibling failed first (a cancelled Spark job
        # surfaces as the task's own error) are consequences, never the reported cause.
        consequences: set[int] = set()
        lock = threading.Lock()

        def one(index: int) -> None:
            scope, body, item, extra = jobs[index]
            try:
                results[index] = self.machine_scope(
                    body, item, scope, resume=resume, cancel=group, extra=extra, outer=variables
                )
            except StatesError as err:
                with lock:
                    if group.is_set():
                        consequences.add(index)
                    failures.append((index, err))
                    if len(failures) - len(consequences) > tolerated:
                        group.set(err)
                raise

        if not jobs:
            return [], []
        with ThreadPoolExecutor(max_workers=max(1, min(workers, len(jobs))), thread_name_prefix="shoal-branch") as pool:
            futures = [pool.submit(one, i) for i in range(len(jobs))]
            wait(futures, return_when=FIRST_EXCEPTION)
            for f in futures:
                with contextlib.suppress(StatesError, Cancelled):
                    f.result()
        cancel.check()
        failures.sort(key=lambda f: (f[0] in consequences, f[0]))
        return results, failures
