"""`shoal demo`: the demo end to end (the demo itself lives in `shoal.samples.demo`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from shoal.cli.context import current


def demo(
    workspace: Annotated[Path, typer.Option("--workspace", help="Workspace folder for the demo lake.")] = Path(
        "demo-workspace"
    ),
) -> None:
    """Run the demo end to end: CDC upserts, then documents through ingest, extraction and the catalog."""
    from shoal.samples.demo import run_demo

    run_demo(workspace, current().out)
