"""Data quality: rulesets over any table, results per run, column profiles next to them.

A ruleset (YAML or JSON) names a table and its rules. Each rule measures the share of rows
that pass (or a table-level fact), compares it with its threshold and has a severity: a
failing `fail` rule fails the run (exit 1, or the workflow step), a failing `warn` rule is
reported only. Column names are checked against the table's schema and quoted; values go
to Spark as bound parameters; custom expressions must parse as one SQL expression (no
statements, no subqueries). Results land in `shoal.quality_results`, profiles in
`shoal.quality_profiles` (both Iceberg, one row per rule / column and run).

    name: orders
    table: sales.orders
    rules:
      - {type: completeness, column: id}
      - {type: uniqueness, column: id}
      - {type: range, column: amount, min: 0, max: 10000, threshold: 0.99}
      - {type: allowed_values, column: region, values: [north, south]}
      - {type: regex, column: email, pattern: "^[^@]+@[^@]+$", threshold: 0.95, severity: warn}
      - {type: referential, column: customer_id, reference: {table: crm.customers, column: id}}
      - {type: row_count, min: 1}
      - {type: freshness, column: updated_at, max_age_hours: 24}
      - {type: sql, expression: "amount >= 0 OR status = 'refund'"}
"""

from __future__ import annotations

import uuid
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import sqlglot
from pydantic import BaseModel, Field, model_validator
from sqlglot import exp

from shoal import definitions
from shoal.exceptions import ShoalError

if TYPE_CHECKING:
    from collections.abc import Callable

    from pyspark.sql import SparkSession

    from shoal.config import Settings

RESULTS_SCHEMA = (
    "run_id STRING, ruleset STRING, table_name STRING, rule STRING, rule_type STRING, severity STRING, "
    "passed BOOLEAN, pass_share DOUBLE, threshold DOUBLE, observed STRING, failing_rows BIGINT, "
    "total_rows BIGINT, evaluated_at TIMESTAMP"
)
PROFILES_SCHEMA = (
    "run_id STRING, ruleset STRING, table_name STRING, column_name STRING, data_type STRING, rows BIGINT, "
    "missing BIGINT, distinct_values BIGINT, min STRING, max STRING, mean DOUBLE, evaluated_at TIMESTAMP"
)


class QualityError(ShoalError):
    """A ruleset is invalid or names what the table does not have."""


class Reference(BaseModel):
    table: str
    column: str


class Rule(BaseModel):
    model_config = {"extra": "forbid"}

    type: Literal[
        "completeness", "uniqueness", "range", "allowed_values", "regex", "referential", "row_count", "freshness", "sql"
    ]
    name: str | None = None
    column: str | None = None
    threshold: float = Field(default=1.0, ge=0, le=1)
    severity: Literal["fail", "warn"] = "fail"
    min: float | None = None
    max: float | None = None
    values: list[Any] | None = None
    pattern: str | None = None
    reference: Reference | None = None
    max_age_hours: float | None = None
    expression: str | None = None

    @property
    def column_name(self) -> str:
        """The column of a rule whose type needs one (checked when the ruleset is loaded)."""
        if self.column is None:
            raise QualityError(f"rule {self.type}: needs a column")
        return self.column

    @model_validator(mode="after")
    def _needs(self) -> Rule:
        need = {
            "completeness": ["column"],
            "uniqueness": ["column"],
            "range": ["column"],
            "allowed_values": ["column", "values"],
            "regex": ["column", "pattern"],
            "referential": ["column", "reference"],
            "row_count": [],
            "freshness": ["column", "max_age_hours"],
            "sql": ["expression"],
        }[self.type]
        missing = [k for k in need if getattr(self, k) is None]
        if missing:
            raise ValueError(f"rule type {self.type} needs {', '.join(missing)}")
        if self.type in ("range", "row_count") and self.min is None and self.max is None:
            raise ValueError(f"rule type {self.type} needs min or max")
        return self

    @property
    def label(self) -> str:
        return self.name or f"{self.type}" + (f" {self.column}" if self.column else "")


class Ruleset(BaseModel):
    model_config = {"extra": "forbid"}

    name: str
    table: str
    rules: list[Rule] = Field(min_length=1)
    profile: bool = True


def latest_results(spark: SparkSession, *, ruleset: str | None = None, limit: int = 200) -> list[dict[str, Any]]:
    """Rule results, newest run first (optionally of one ruleset)."""
    from shoal.lake.metadata import NAMESPACE
    from shoal.sql import to_json_value

    name = f"`{NAMESPACE}`.`quality_results`"
    if not spark.catalog.tableExists(f"{NAMESPACE}.quality_results"):
        return []
    where = " WHERE ruleset = :r" if ruleset else ""
    rows = spark.sql(
        f"SELECT * FROM {name}{where} ORDER BY evaluated_at DESC, rule LIMIT {int(limit)}",
        args={"r": ruleset} if ruleset else {},
    ).collect()
    return [{k: to_json_value(v) for k, v in r.asDict().items()} for r in rows]


def load_ruleset(ref: str | Path) -> Ruleset:
    return definitions.load(Path(ref), Ruleset, QualityError, "ruleset")


@dataclass
class RuleResult:
    rule: str
    rule_type: str
    severity: str
    passed: bool
    pass_share: float | None
    threshold: float
    observed: str
    failing_rows: int | None
    total_rows: int


@dataclass
class QualityRun:
    run_id: str
    ruleset: str
    table: str
    rows: int
    results: list[RuleResult] = field(default_factory=list)
    profile: list[dict[str, Any]] = field(default_factory=list)

    @property
    def failed(self) -> list[RuleResult]:
        return [r for r in self.results if not r.passed and r.severity == "fail"]

    @property
    def warnings(self) -> list[RuleResult]:
        return [r for r in self.results if not r.passed and r.severity == "warn"]

    @property
    def status(self) -> str:
        return "FAILED" if self.failed else ("WARNED" if self.warnings else "PASSED")

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "ruleset": self.ruleset,
            "table": self.table,
            "rows": self.rows,
            "status": self.status,
            "results": [asdict(r) for r in self.results],
            "profile": self.profile,
        }


def _q(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _check_expression(text: str) -> None:
    try:
        tree = sqlglot.parse_one(text, read="spark")
    except sqlglot.errors.ParseError as exc:
        raise QualityError(f"custom rule expression does not parse: {text!r}: {str(exc).splitlines()[0]}") from None
    if isinstance(tree, exp.Query | exp.Command | exp.DDL | exp.DML) or tree.find(exp.Subquery, exp.Select):
        raise QualityError(f"custom rule expression must be one SQL condition, not a statement: {text!r}")


def run_ruleset(  # noqa: C901 - evaluates, records and reports every rule kind in one run
    spark: SparkSession, settings: Settings, ruleset: Ruleset, *, say: Callable[[str], None] = lambda _m: None
) -> QualityRun:
    from pyspark.sql import functions as F

    from shoal.lake.tables import TableName
    from shoal.recipes.profile import profile

    table = TableName.parse(ruleset.table)
    if not spark.catalog.tableExists(table.sql):
        raise QualityError(f"table {ruleset.table} does not exist", hint="check the ruleset's table name")
    df = spark.table(table.sql)
    columns = {f.name.lower(): f.name for f in df.schema.fields}
    for r in ruleset.rules:
        if r.column and r.column.lower() not in columns:
            raise QualityError(f"rule {r.label!r}: table {ruleset.table} has no column {r.column!r}")
        if r.type == "sql":
            _check_expression(r.expression or "")
    run = QualityRun(uuid.uuid4().hex[:16], ruleset.name, ruleset.table, 0)
    # Row-level rules: one aggregation over the table for all of them.
    conditions: dict[int, str] = {}
    args: dict[str, Any] = {}
    for i, r in enumerate(ruleset.rules):
        c = _q(columns[r.column_name.lower()]) if r.column else None
        if r.type == "completeness":
            conditions[i] = f"{c} IS NOT NULL"
        elif r.type == "range":
            parts = []
            if r.min is not None:
                parts.append(f"{c} >= :min{i}")
                args[f"min{i}"] = r.min
            if r.max is not None:
                parts.append(f"{c} <= :max{i}")
                args[f"max{i}"] = r.max
            conditions[i] = f"({' AND '.join(parts)})"
        elif r.type == "allowed_values":
            names = []
            for j, v in enumerate(r.values or []):
                args[f"v{i}_{j}"] = v
                names.append(f":v{i}_{j}")
            conditions[i] = f"{c} IN ({', '.join(names)})"
        elif r.type == "regex":
            conditions[i] = f"{c} RLIKE :re{i}"
            args[f"re{i}"] = r.pattern
        elif r.type == "sql":
            conditions[i] = f"({r.expression})"
    aggs = ["count(*) AS __rows"] + [
        f"sum(CASE WHEN {cond} THEN 1 ELSE 0 END) AS pass_{i}" for i, cond in conditions.items()
    ]
    aggs += [
        f"count({_q(columns[r.column_name.lower()])}) AS nonnull_{i}, count(DISTINCT {_q(columns[r.column_name.lower()])}) AS distinct_{i}"
        for i, r in enumerate(ruleset.rules)
        if r.type == "uniqueness"
    ]
    aggs += [
        f"CAST(max({_q(columns[r.column_name.lower()])}) AS TIMESTAMP) AS newest_{i}"
        for i, r in enumerate(ruleset.rules)
        if r.type == "freshness"
    ]
    say(f"evaluating {len(ruleset.rules)} rule(s) on {ruleset.table}")
    try:
        first = spark.sql(f"SELECT {', '.join(aggs)} FROM {table.sql}", args=args).first()
        assert first is not None  # an aggregate without GROUP BY returns one row
        row = first.asDict()
    except Exception as exc:
        from shoal.exceptions import first_line

        raise QualityError(
            f"ruleset {ruleset.name}: the rules cannot run on {ruleset.table}: {first_line(exc)}"
        ) from exc
    total = int(row["__rows"])
    run.rows = total
    now = datetime.now(UTC)
    for i, r in enumerate(ruleset.rules):
        share: float | None = None
        failing: int | None = None
        if i in conditions:
            passing = int(row[f"pass_{i}"] or 0)
            failing = total - passing
            share = passing / total if total else 1.0
            observed = f"{passing} of {total} rows pass"
            ok = share >= r.threshold
        elif r.type == "uniqueness":
            nonnull, distinct = int(row[f"nonnull_{i}"]), int(row[f"distinct_{i}"])
            failing = nonnull - distinct
            share = distinct / nonnull if nonnull else 1.0
            observed = f"{distinct} distinct of {nonnull} non-null values"
            ok = share >= r.threshold
        elif r.type == "row_count":
            ok = (r.min is None or total >= r.min) and (r.max is None or total <= r.max)
            observed = f"{total} rows"
        elif r.type == "freshness":
            newest = row[f"newest_{i}"]
            if newest is None:
                ok, observed = False, "no values"
            else:
                newest = newest.replace(tzinfo=UTC) if newest.tzinfo is None else newest
                age_h = (now - newest).total_seconds() / 3600
                ok = age_h <= (r.max_age_hours or 0)
                observed = f"newest value {newest.isoformat()} is {age_h:.1f} h old"
        else:  # referential
            ref = r.reference
            assert ref is not None
            ref_table = TableName.parse(ref.table)
            if not spark.catalog.tableExists(ref_table.sql):
                raise QualityError(f"rule {r.label!r}: reference table {ref.table} does not exist")
            ref_df = spark.table(ref_table.sql)
            ref_cols = {f.name.lower(): f.name for f in ref_df.schema.fields}
            if ref.column.lower() not in ref_cols:
                raise QualityError(f"rule {r.label!r}: {ref.table} has no column {ref.column!r}")
            left = df.select(F.col(_q(columns[r.column_name.lower()])).alias("k")).where(F.col("k").isNotNull())
            right = ref_df.select(F.col(_q(ref_cols[ref.column.lower()])).alias("k"))
            orphans = left.join(right, "k", "left_anti").count()
            checked = left.count()
            failing = orphans
            share = (checked - orphans) / checked if checked else 1.0
            observed = f"{orphans} of {checked} values have no match in {ref.table}.{ref.column}"
            ok = share >= r.threshold
        run.results.append(
            RuleResult(
                r.label,
                r.type,
                r.severity,
                ok,
                None if share is None else round(share, 6),
                r.threshold,
                observed,
                failing,
                total,
            )
        )
    if ruleset.profile:
        say("profiling columns")
        stats = profile(df, top=0)
        run.profile = [
            {
                "column": c["column"],
                "type": c["type"],
                "rows": stats["rows"],
                "missing": c["missing"],
                "distinct": c.get("distinct"),
                "min": None if c.get("min") is None else str(c["min"]),
                "max": None if c.get("max") is None else str(c["max"]),
                "mean": c.get("mean"),
            }
            for c in stats["columns"]
        ]
    _store(spark, run, now)
    return run


def _store(spark: SparkSession, run: QualityRun, now: datetime) -> None:
    from shoal.lake.metadata import NAMESPACE

    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS `{NAMESPACE}`")
    for name, schema in (("quality_results", RESULTS_SCHEMA), ("quality_profiles", PROFILES_SCHEMA)):
        spark.sql(f"CREATE TABLE IF NOT EXISTS `{NAMESPACE}`.`{name}` ({schema}) USING iceberg")
    results = [
        (
            run.run_id,
            run.ruleset,
            run.table,
            r.rule,
            r.rule_type,
            r.severity,
            r.passed,
            r.pass_share,
            r.threshold,
            r.observed,
            r.failing_rows,
            r.total_rows,
            now,
        )
        for r in run.results
    ]
    spark.createDataFrame(results, RESULTS_SCHEMA).writeTo(f"`{NAMESPACE}`.`quality_results`").append()
    if run.profile:
        profiles = [
            (
                run.run_id,
                run.ruleset,
                run.table,
                p["column"],
                p["type"],
                p["rows"],
                p["missing"],
                p["distinct"],
                p["min"],
                p["max"],
                None if p["mean"] is None else float(p["mean"]),
                now,
            )
            for p in run.profile
        ]
        spark.createDataFrame(profiles, PROFILES_SCHEMA).writeTo(f"`{NAMESPACE}`.`quality_profiles`").append()
