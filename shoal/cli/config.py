"""`shoal config`: the effective configuration."""

from __future__ import annotations

import typer

from shoal.cli import output
from shoal.cli.context import settings
from shoal.cli.output import JsonOpt

app = typer.Typer(help="Show the effective configuration.", no_args_is_help=True)


@app.command("show")
def config_show(json_out: JsonOpt = False) -> None:
    """Print the effective settings (secrets masked)."""
    s = settings()
    data = s.model_dump(mode="json")
    data["derived"] = {"warehouse": s.warehouse_uri, "catalog_uri": s.catalog_jdbc_uri}
    if json_out:
        output.print_json(data)
    else:
        output.out.print_json(data=data)
