"""`shoal enrich run`: enrichment jobs over extracted data."""

from __future__ import annotations

from typing import Annotated

import typer

from shoal.cli import output
from shoal.cli.context import JsonOpt, out, settings

enrich_app = typer.Typer(
    help="Enrichment jobs: PII-redacted text, normalised entities, classes, model and LLM results.",
    no_args_is_help=True,
)


@enrich_app.command("run")
def run(
    job: Annotated[str, typer.Argument(help="Enrichment job file (YAML or JSON).")],
    force: Annotated[bool, typer.Option("--force", help="Enrich every extracted object again.")] = False,
    _json: JsonOpt = False,
) -> None:
    """Run an enrichment job over objects extracted since its last run."""
    from shoal.enrich import load_job, run_job
    from shoal.spark import get_spark

    s = settings()
    definition = load_job(job)
    with out().progress(f"enrich {definition.name}") as say:
        result = run_job(get_spark(s), s, definition, force=force, say=say)

    def as_text() -> None:
        if not result.objects:
            output.out.print("Nothing to enrich: every extracted object is up to date (use --force to redo).")
            return
        output.print_kv(
            f"Enrichment {result.job}", {"objects": result.objects, "seconds": result.seconds, **result.rows}
        )
        if result.classes:
            output.print_rows(
                "Document classes", ["class", "objects"], [[k, v] for k, v in sorted(result.classes.items())]
            )
        for step, bad in result.invalid.items():
            if bad:
                output.print_warning(
                    f"step {step}: {bad} answer(s) failed validation after retries; see the error column of its table"
                )

    out().show(result.to_dict(), as_text)
