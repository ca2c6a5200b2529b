"""Data quality: rulesets over any table, results per run, column profiles next to them.

The implementation is in `shoal.quality.rules`; this package re-exports its public names."""

from shoal.quality.rules import (
    PROFILES_SCHEMA,
    RESULTS_SCHEMA,
    QualityError,
    QualityRun,
    Reference,
    Rule,
    RuleResult,
    Ruleset,
    latest_results,
    load_ruleset,
    run_ruleset,
)

__all__ = [
    "PROFILES_SCHEMA",
    "QualityError",
    "QualityRun",
    "RESULTS_SCHEMA",
    "Reference",
    "Rule",
    "RuleResult",
    "Ruleset",
    "latest_results",
    "load_ruleset",
    "run_ruleset",
]
