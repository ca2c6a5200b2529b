"""`shoal quality run|results`: data-quality rulesets over lake tables."""

from __future__ import annotations

from typing import Annotated

import typer

from shoal.cli.context import JsonOpt, out, settings

quality_app = typer.Typer(help="Data-quality rulesets: run them, see their results.", no_args_is_help=True)


@quality_app.command("run")
def run(
    ruleset: Annotated[str, typer.Argument(help="Ruleset file (YAML or JSON).")],
    _json: JsonOpt = False,
) -> None:
    """Evaluate a ruleset; results and a column profile are stored. Exit 1 when a `fail` rule fails."""
    from shoal.quality import load_ruleset, run_ruleset
    from shoal.spark import get_spark

    s = settings()
    rules = load_ruleset(ruleset)
    with out().progress(f"quality {rules.name}") as say:
        result = run_ruleset(get_spark(s), s, rules, say=say)
    out().table(
        f"{rules.name} on {rules.table}: {result.status} ({result.rows} rows, run {result.run_id})",
        ["rule", "severity", "passed", "share", "threshold", "observed"],
        [
            [r.rule, r.severity, "yes" if r.passed else "NO", r.pass_share, r.threshold, r.observed]
            for r in result.results
        ],
        result.to_dict(),
    )
    if result.failed:
        raise typer.Exit(1)


@quality_app.command("results")
def results(
    ruleset: Annotated[str | None, typer.Option("--ruleset", help="Only this ruleset.")] = None,
    limit: Annotated[int, typer.Option("--limit", help="At most this many rule results.")] = 200,
    _json: JsonOpt = False,
) -> None:
    """Stored rule results, newest first."""
    from shoal.quality import latest_results
    from shoal.spark import get_spark

    rows = latest_results(get_spark(settings()), ruleset=ruleset, limit=limit)
    out().table(
        "shoal.quality_results",
        ["evaluated_at", "ruleset", "rule", "passed", "pass_share", "observed"],
        [[r["evaluated_at"], r["ruleset"], r["rule"], r["passed"], r["pass_share"], r["observed"]] for r in rows],
        rows,
    )
