"""`shoal config`: the effective configuration."""

from __future__ import annotations

import typer

from shoal.cli import output
from shoal.cli.context import JsonOpt, out, settings

app = typer.Typer(help="Show the effective configuration.", no_args_is_help=True)


@app.command("show")
def config_show(_json: JsonOpt = False) -> None:
    """Print the effective settings (secrets masked)."""
    s = settings()
    data = s.model_dump(mode="json")
    data["derived"] = {"warehouse": s.warehouse_uri, "catalog_uri": s.catalog_jdbc_uri}

    def as_text() -> None:
        output.out.print_json(data=data)

    out().show(data, as_text)
