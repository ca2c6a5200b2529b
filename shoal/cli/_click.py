"""Click's exceptions, wherever this Typer keeps them: recent Typer vendors Click as
`typer._click`, earlier releases use Click itself. The root catches them to shape usage errors
as JSON."""

from __future__ import annotations

import importlib

try:
    _exceptions = importlib.import_module("typer._click.exceptions")
except ImportError:  # a Typer that depends on Click
    _exceptions = importlib.import_module("click.exceptions")

ClickException: type[Exception] = _exceptions.ClickException
Abort: type[Exception] = _exceptions.Abort
# Click < 8.2 prints the help of a bare group itself, without an exception.
NoArgsIsHelpError: type[Exception] | None = getattr(_exceptions, "NoArgsIsHelpError", None)
