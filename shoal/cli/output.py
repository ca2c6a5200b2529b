"""Rendering for the CLI: tables, JSON, CSV, progress and errors, and the `Output` of one run."""

from __future__ import annotations

import csv
import io
import json
import os
import sys
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager, nullcontext, redirect_stdout
from contextvars import ContextVar
from typing import Any, ClassVar

from rich.console import Console
from rich.progress import (
    BarColumn,
    Progress,
    ProgressColumn,
    SpinnerColumn,
    Task,
    TaskID,
    TaskProgressColumn,
    TextColumn,
    TimeRemainingColumn,
)
from rich.table import Table
from rich.text import Text

from shoal.exceptions import ShoalError
from shoal.progress import Meter
from shoal.sql import QueryResult, to_json_value

# Not a terminal (a log, a pipe, CI): rich would wrap tables at 80 columns and split words
# ("quantity_avail able"). $COLUMNS wins when set; otherwise a wide page.
WIDE_DEFAULT = 200


def _width(stream: Any, environ: Mapping[str, str]) -> int | None:
    if environ.get("COLUMNS", "").isdigit():
        return int(environ["COLUMNS"])
    try:
        if stream.isatty():
            return None  # rich asks the terminal
    except (AttributeError, ValueError):
        pass
    return WIDE_DEFAULT


def make_console(
    stream: Any, *, stderr: bool = False, file: Any = None, environ: Mapping[str, str] | None = None
) -> Console:
    """The console for `stream` (the warm engine builds one per command for its caller's streams)."""
    env = os.environ if environ is None else environ
    return Console(file=file, stderr=stderr, highlight=False, soft_wrap=True, width=_width(stream, env), _environ=env)


out = make_console(sys.stdout)
err = make_console(sys.stderr, stderr=True)


def print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(to_json_value(data), indent=2, default=str) + "\n")


def print_warning(message: str) -> None:
    # Messages carry names and values from data and settings ("[spark]", "report[final].pdf"):
    # only the label is markup.
    err.print(f"[bold yellow]warning:[/] {escape(message)}", markup=True, highlight=False)


def print_error(message: str) -> None:
    err.print(f"[bold red]error:[/] {escape(message)}", markup=True, highlight=False)


def _real(console: Console) -> Console:
    """The console itself: in the warm engine `err` is a per-command router, and rich's live
    display needs the object (it enters it as a context manager)."""
    routed = getattr(console, "routed_console", None)
    return routed() if callable(routed) else console


def _quiet() -> bool:
    """The root option --quiet of the running command (its Output; per command in the warm engine)."""
    active = _active.get()
    return active is not None and active.quiet


@contextmanager
def progress(enabled: bool, title: str) -> Iterator[Meter]:
    """Progress of long work on stderr; yields the `say` callback (a `shoal.progress.Meter`).

    On a terminal: a spinner with the current step and, for counted phases, a bar with
    done/total, percentage, rate and ETA. Off a terminal (a log, CI, a pipe): timestamped
    lines, counted phases at most every `LOG_EVERY_S`. Nothing with `--quiet` or `--json`
    (JSON stays the only thing on stdout, and nothing is added on stderr either).
    """
    enabled = enabled and not _quiet()
    if not enabled:
        yield _SilentMeter()
    elif not err.is_terminal:
        yield _LogMeter(title)
    else:
        with _BarMeter(title) as meter:
            yield meter


# Off a terminal, a counted phase prints its first count, its last, and one line per this many
# seconds in between.
LOG_EVERY_S = 10.0


def _stamp() -> str:
    return time.strftime("%H:%M:%S")


class _SilentMeter:
    def __call__(self, message: str) -> None:
        pass

    def count(self, phase: str, done: int, total: int | None, unit: str, item: str | None = None) -> None:
        pass


def _duration(seconds: float) -> str:
    seconds = int(round(seconds))
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


class _LogMeter:
    """Timestamped lines: every step; counted phases now and then, with rate and ETA."""

    def __init__(self, title: str) -> None:
        self.title = title
        self.lock = threading.Lock()
        # phase -> (monotonic start, done at start, monotonic time of the last line)
        self.phases: dict[str, tuple[float, int, float]] = {}

    def _line(self, text: str) -> None:
        err.print(f"[dim]{_stamp()} {escape(self.title)}:[/] {escape(text)}", markup=True)

    def __call__(self, message: str) -> None:
        self._line(message)

    def count(self, phase: str, done: int, total: int | None, unit: str, item: str | None = None) -> None:
        now = time.monotonic()
        with self.lock:
            first = phase not in self.phases
            start, done0, last = self.phases.setdefault(phase, (now, done, now))
            finished = total is not None and done >= total
            if not (first or finished or now - last >= LOG_EVERY_S):
                return
            if finished:
                self.phases.pop(phase)  # a phase counted again later starts afresh
            else:
                self.phases[phase] = (start, done0, now)
        text = f"{phase}: {done}/{total if total is not None else '?'} {unit}"
        elapsed = now - start
        rate = (done - done0) / elapsed if elapsed > 0 and done > done0 else None
        if finished:
            text += f" in {_duration(elapsed)}" + (f" ({rate:.1f} {unit}/s)" if rate else "")
        elif rate:
            eta = f", ETA {_duration((total - done) / rate)}" if total is not None else ""
            text += f" ({rate:.1f} {unit}/s{eta})"
        if item and not finished:
            text += f": {item}"
        self._line(text)


class _RateColumn(ProgressColumn):
    def render(self, task: Task) -> Text:
        speed = task.finished_speed or task.speed
        if not speed and task.completed and task.elapsed:
            # Counts reported only at a phase's ends (work done inside Spark tasks) give rich
            # too few samples for its moving rate: show the average instead.
            speed = task.completed / task.elapsed
        unit = task.fields.get("unit", "")
        return Text(f"{speed:.1f} {unit}/s" if speed and unit else "", style="progress.data.speed")


class _CountColumn(ProgressColumn):
    def render(self, task: Task) -> Text:
        if task.total is None:
            return Text("")
        return Text(f"{int(task.completed)}/{int(task.total)} {task.fields.get('unit', '')}", style="progress.download")


class _BarColumn(BarColumn):
    def render(self, task: Task) -> Any:
        return Text("") if task.total is None else super().render(task)  # a step: the spinner says enough


class _EtaColumn(TimeRemainingColumn):
    def render(self, task: Task) -> Text:
        return Text("") if task.total is None else super().render(task)


class _BarMeter:
    """rich.progress on stderr: a spinner row with the latest step, and a bar per counted phase."""

    def __init__(self, title: str) -> None:
        self.title = title
        self.lock = threading.Lock()
        # Never redirect stdout/stderr: in the warm engine those are shared by every command.
        self.bars = Progress(
            SpinnerColumn(),
            TextColumn("{task.description}"),
            _BarColumn(),
            TaskProgressColumn(),
            _CountColumn(),
            _RateColumn(),
            _EtaColumn(),
            console=_real(err),
            transient=True,
            redirect_stdout=False,
            redirect_stderr=False,
        )
        self.step = self.bars.add_task(escape(title), total=None)
        self.counted: dict[str, TaskID] = {}

    def __enter__(self) -> _BarMeter:
        self.bars.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.bars.stop()

    def __call__(self, message: str) -> None:
        self.bars.update(self.step, description=escape(f"{self.title}: {message}"))

    def count(self, phase: str, done: int, total: int | None, unit: str, item: str | None = None) -> None:
        with self.lock:
            task = self.counted.get(phase)
            first = task is None
            if task is None:
                task = self.counted[phase] = self.bars.add_task(escape(phase), total=total, completed=done, unit=unit)
        label = escape(f"{phase}: {item}" if item else phase)
        # Drawn at once when a phase starts and ends (a short phase would otherwise end between
        # two of the display's refreshes, ten a second, and never show its count).
        finished = total is not None and done >= total
        self.bars.update(task, total=total, completed=done, description=label, refresh=first or finished)


def print_query(result: QueryResult, fmt: str) -> None:
    # Printed text: timestamps in ISO 8601 with their zone, decimals exact, bytes in base64.
    records = [{c: to_json_value(v) for c, v in rec.items()} for rec in result.records()]
    if fmt == "json":
        print_json(records)
    elif fmt == "csv":
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(result.columns)
        for rec in records:
            w.writerow(["" if v is None else json.dumps(v) if isinstance(v, dict | list) else v for v in rec.values()])
        sys.stdout.write(buf.getvalue())
    else:
        table = Table(show_lines=False)
        for c, t in zip(result.columns, result.types, strict=True):
            table.add_column(f"{c}\n[dim]{t}[/]", overflow="fold")
        for rec in records:
            table.add_row(*["[dim]NULL[/]" if v is None else _escape(v) for v in rec.values()])
        out.print(table)
        out.print(f"[dim]{len(result.rows)} row(s)[/]")


def escape(text: str) -> str:
    """Extracted content is untrusted: never let it act as rich markup."""
    from rich.markup import escape as rich_escape

    return rich_escape(text)


def _escape(value: Any) -> str:
    return escape(json.dumps(value) if isinstance(value, dict | list) else str(value))


def _float(value: float) -> str:
    """What people read: 9.628, not 9.62823146700066 (--json keeps every digit)."""
    if value != value or value in (float("inf"), float("-inf")) or value == 0:
        return str(value)
    text = f"{value:.3f}" if abs(value) >= 1 else f"{value:.4g}"
    return text.rstrip("0").rstrip(".") if "." in text and "e" not in text else text


def print_kv(title: str, items: dict[str, Any]) -> None:
    table = Table(title=title, show_header=False, title_justify="left")
    table.add_column(style="bold")
    table.add_column()
    for k, v in items.items():
        # A summary's floats are measurements; query results (print_rows) keep every digit.
        table.add_row(k.replace("_", " "), escape(_float(v)) if isinstance(v, float) else _escape(v))
    out.print(table)


def print_rows(title: str, columns: list[str], rows: list[list[Any]]) -> None:
    table = Table(title=title, title_justify="left")
    for c in columns:
        table.add_column(c, overflow="fold")
    for r in rows:
        table.add_row(*[_escape(v) for v in r])
    out.print(table)


class Output(ABC):
    """How one run of `shoal` prints its results: `TextOutput` (rich tables, a spinner on stderr)
    or `JsonOutput` (one JSON document on stdout), chosen once per run from `--json`.

    Commands compute their data and hand it to one of these methods; they never ask which mode
    is on. Each method takes what both modes need: the data (what JSON prints) and, where the
    text differs from a plain rendering of it, the title, columns or line that text prints.
    """

    json: ClassVar[bool] = False

    def __init__(self, quiet: bool = False) -> None:
        self.quiet = quiet  # the root option --quiet

    def progress(self, title: str) -> AbstractContextManager[Meter]:
        """Progress of long work on stderr (nothing in JSON mode); yields the `Say` callback."""
        return progress(not self.json, title)

    @abstractmethod
    def done(self, message: str, **data: Any) -> None:
        """The result of a command that changes something: one line, or `{"ok": true, "message", ...}`."""

    @abstractmethod
    def record(self, title: str, data: Mapping[str, Any]) -> None:
        """One thing: a two-column table under `title`, or the mapping."""

    @abstractmethod
    def table(self, title: str, columns: list[str], rows: list[list[Any]], data: Any) -> None:
        """Many things: a table of `rows` (what people read), or `data` (what programs read)."""

    @abstractmethod
    def line(self, text: str, data: Any) -> None:
        """A result whose text is one line (`text`, printed as it is, never as markup), or `data`."""

    @abstractmethod
    def show(self, data: Any, text: Callable[[], None]) -> None:
        """A result with its own text layout: `text()` prints it, or `data` is printed."""

    @abstractmethod
    def note(self, text: str, label: str | None = None) -> None:
        """A remark for people on stderr, after a dim `label:` when given (nothing in JSON mode)."""

    def script_stdout(self) -> AbstractContextManager[object]:
        """Where a user's script prints (its log): stdout, or stderr in JSON mode, so that
        stdout stays one JSON document."""
        return nullcontext()

    def failure(self, exc: ShoalError) -> None:
        """An error, on stderr (and as one JSON object on stdout in JSON mode)."""
        print_error(str(exc))

    # The demo and other callers that are handed an Output print through these.
    def print(self, *objects: Any, **kwargs: Any) -> None:
        out.print(*objects, **kwargs)

    escape = staticmethod(escape)
    print_json = staticmethod(print_json)
    print_kv = staticmethod(print_kv)
    print_rows = staticmethod(print_rows)
    print_query = staticmethod(print_query)
    print_warning = staticmethod(print_warning)
    print_error = staticmethod(print_error)


class TextOutput(Output):
    """For people: rich tables and lines on stdout, progress on stderr."""

    def done(self, message: str, **data: Any) -> None:
        out.print(escape(message))

    def record(self, title: str, data: Mapping[str, Any]) -> None:
        print_kv(title, dict(data))

    def table(self, title: str, columns: list[str], rows: list[list[Any]], data: Any) -> None:
        print_rows(title, columns, rows)

    def line(self, text: str, data: Any) -> None:
        out.print(escape(text))

    def show(self, data: Any, text: Callable[[], None]) -> None:
        text()

    def note(self, text: str, label: str | None = None) -> None:
        err.print((f"[dim]{escape(label)}:[/] " if label else "") + escape(text), markup=True)


class JsonOutput(Output):
    """For programs: each result is one JSON document on stdout; errors too (see `failure`)."""

    json: ClassVar[bool] = True

    def done(self, message: str, **data: Any) -> None:
        print_json({"ok": True, "message": message, **data})

    def record(self, title: str, data: Mapping[str, Any]) -> None:
        print_json(data)

    def table(self, title: str, columns: list[str], rows: list[list[Any]], data: Any) -> None:
        print_json(data)

    def line(self, text: str, data: Any) -> None:
        print_json(data)

    def show(self, data: Any, text: Callable[[], None]) -> None:
        print_json(data)

    def note(self, text: str, label: str | None = None) -> None:
        pass  # stderr too stays quiet in JSON mode (as progress does)

    def script_stdout(self) -> AbstractContextManager[object]:
        return redirect_stdout(sys.stderr)

    def failure(self, exc: ShoalError) -> None:
        # One shape for every command's errors: the reason, what to do, and each problem
        # found (a definition's or a configuration's problems; else just the reason).
        lines = str(exc).split("\n  hint: ")[0].splitlines()
        problems = getattr(exc, "problems", None) or [p.strip().removeprefix("- ") for p in lines[1:]] or lines[:1]
        print_json({"error": lines[0], "hint": exc.hint, "problems": problems})
        print_error(str(exc))


# The Output of the running command, set by `shoal.cli.context.activate` (which owns the run): a
# context variable, not a global, because the warm engine runs several commands at once, each in its
# own thread and context. Kept here so that this module needs nothing from the context module.
_active: ContextVar[Output | None] = ContextVar("shoal_cli_output", default=None)


def use(output: Output) -> None:
    """Make `output` the running command's Output (what --quiet reads)."""
    _active.set(output)


def active() -> Output:
    """The running command's Output (a text one outside a `shoal` run: a test, a script)."""
    current = _active.get()
    if current is None:
        current = TextOutput()
        _active.set(current)
    return current
