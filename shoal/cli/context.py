"""What one run of `shoal` shares between its command modules: the --config path and the Output."""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated

import typer

from shoal.cli import output
from shoal.cli.output import JsonOutput, Output, TextOutput
from shoal.config import Settings, load_settings


@dataclass
class Run:
    """Made once per run (by `main`, or the root callback when a test invokes the app directly)."""

    config: Path | None = None
    out: Output = field(default_factory=TextOutput)

    @property
    def quiet(self) -> bool:
        """The root option --quiet (kept on the Output, which is what prints)."""
        return self.out.quiet

    @quiet.setter
    def quiet(self, value: bool) -> None:
        self.out.quiet = value

    def choose(self, json: bool) -> None:
        """Text or JSON for this run: `--json` (or `sql --format json`) chooses JSON."""
        if json != self.out.json:
            self.out = (JsonOutput if json else TextOutput)(quiet=self.quiet)
            output.use(self.out)


# A context variable, not a global: the warm engine runs several commands at once, each in its
# own thread and context.
_active: ContextVar[Run | None] = ContextVar("shoal_cli_run", default=None)


def activate(run: Run) -> None:
    """The root callback's choice for this run (Typer vendors its own click, so commands cannot
    look the context up through `click`; they ask `current()`)."""
    _active.set(run)
    output.use(run.out)


def current() -> Run:
    run = _active.get()
    if run is None:  # a command function called outside a `shoal` run (a test, a script)
        run = Run()
        activate(run)
    return run


def settings() -> Settings:
    return load_settings(current().config)


def split_values(values: list[str]) -> list[str]:
    """Repeatable options that also take commas: `--key a,b --key c` -> [a, b, c]."""
    return [p.strip() for v in values for p in v.split(",") if p.strip()]


def out() -> Output:
    """The running command's Output: commands hand it their results."""
    return current().out


def _json_mode(value: bool) -> bool:
    # The root callback has made this run's `Run` before a subcommand's options are parsed.
    if value:
        current().choose(True)
    return value


# The one `--json` flag of every command: this run prints JSON (the command reads `out()`, not
# the flag's value).
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON.", callback=_json_mode)]
