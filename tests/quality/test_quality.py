"""Data-quality rulesets: every rule type, thresholds and severities, stored results, workflows."""

from __future__ import annotations

import json
import uuid

import pytest
import yaml

from shoal.quality import QualityError, load_ruleset, run_ruleset
from shoal.workflows import run as run_workflow


@pytest.fixture(scope="module")
def tables(spark):
    ns = f"dq_{uuid.uuid4().hex[:6]}"
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {ns}")
    spark.sql(
        f"CREATE TABLE {ns}.orders (id INT, customer_id INT, amount DOUBLE, region STRING, email STRING, "
        "updated_at TIMESTAMP) USING iceberg"
    )
    spark.sql(
        f"""INSERT INTO {ns}.orders VALUES
        (1, 10, 25.0, 'north', 'a@x.org', current_timestamp()),
        (2, 11, 40.0, 'south', 'b@x.org', current_timestamp()),
        (3, 99, -5.0, 'west', 'not-an-email', current_timestamp()),
        (3, 10, 12.0, 'north', NULL, current_timestamp())"""
    )
    spark.sql(f"CREATE TABLE {ns}.customers (id INT, name STRING) USING iceberg")
    spark.sql(f"INSERT INTO {ns}.customers VALUES (10, 'Ada'), (11, 'Bo')")
    return ns


def ruleset_file(tmp_path, body: dict) -> str:
    path = tmp_path / f"{body['name']}.yaml"
    path.write_text(yaml.safe_dump(body))
    return str(path)


def test_every_rule_type_measures_its_share(spark, settings, tables, tmp_path):
    ns = tables
    rules = [
        {"type": "completeness", "column": "email", "threshold": 0.75},
        {"type": "uniqueness", "column": "id"},
        {"type": "range", "column": "amount", "min": 0, "max": 100},
        {"type": "allowed_values", "column": "region", "values": ["north", "south"], "severity": "warn"},
        {"type": "regex", "column": "email", "pattern": "^[^@]+@[^@]+$", "threshold": 0.5},
        {"type": "referential", "column": "customer_id", "reference": {"table": f"{ns}.customers", "column": "id"}},
        {"type": "row_count", "min": 1, "max": 10},
        {"type": "freshness", "column": "updated_at", "max_age_hours": 1},
        {"name": "no refunds below zero", "type": "sql", "expression": "amount >= 0 OR region = 'west'"},
    ]
    rs = load_ruleset(ruleset_file(tmp_path, {"name": "orders", "table": f"{ns}.orders", "rules": rules}))
    run = run_ruleset(spark, settings, rs)
    by = {r.rule_type: r for r in run.results}
    assert run.rows == 4
    assert by["completeness"].passed and by["completeness"].pass_share == 0.75
    assert not by["uniqueness"].passed and by["uniqueness"].failing_rows == 1
    assert not by["range"].passed and by["range"].failing_rows == 1
    assert not by["allowed_values"].passed and by["allowed_values"].severity == "warn"
    assert by["regex"].passed and by["regex"].pass_share == 0.5  # NULL never matches
    assert not by["referential"].passed and "1 of 4 values have no match" in by["referential"].observed
    assert by["row_count"].passed and by["freshness"].passed and by["sql"].passed
    assert run.status == "FAILED" and {r.rule_type for r in run.failed} == {"uniqueness", "range", "referential"}
    stored = spark.sql(
        "SELECT rule_type, passed FROM shoal.quality_results WHERE run_id = :r", args={"r": run.run_id}
    ).collect()
    assert len(stored) == len(rules) and dict((s.rule_type, s.passed) for s in stored)["range"] is False
    prof = {
        p.column_name: p
        for p in spark.sql("SELECT * FROM shoal.quality_profiles WHERE run_id = :r", args={"r": run.run_id}).collect()
    }
    assert prof["email"].missing == 1 and prof["amount"].min == "-5.0" and prof["id"].rows == 4


def test_bad_rulesets_are_clear_errors(spark, settings, tables, tmp_path):
    ns = tables
    with pytest.raises(QualityError, match="needs column"):
        load_ruleset(ruleset_file(tmp_path, {"name": "a", "table": f"{ns}.orders", "rules": [{"type": "regex"}]}))
    bad_col = load_ruleset(
        ruleset_file(
            tmp_path, {"name": "b", "table": f"{ns}.orders", "rules": [{"type": "completeness", "column": "nope"}]}
        )
    )
    with pytest.raises(QualityError, match="has no column 'nope'"):
        run_ruleset(spark, settings, bad_col)
    sneaky = load_ruleset(
        ruleset_file(
            tmp_path,
            {"name": "c", "table": f"{ns}.orders", "rules": [{"type": "sql", "expression": "1=1) OR (SELECT 1"}]},
        )
    )
    with pytest.raises(QualityError, match="does not parse|one SQL condition"):
        run_ruleset(spark, settings, sneaky)
    sub = load_ruleset(
        ruleset_file(
            tmp_path,
            {
                "name": "d",
                "table": f"{ns}.orders",
                "rules": [{"type": "sql", "expression": "id IN (SELECT id FROM x)"}],
            },
        )
    )
    with pytest.raises(QualityError, match="one SQL condition"):
        run_ruleset(spark, settings, sub)
    missing = load_ruleset(
        ruleset_file(tmp_path, {"name": "e", "table": f"{ns}.nothing", "rules": [{"type": "row_count", "min": 1}]})
    )
    with pytest.raises(QualityError, match="does not exist"):
        run_ruleset(spark, settings, missing)


def test_a_failing_rule_stops_a_workflow_and_warn_lets_it_go_on(spark, settings, tables, tmp_path):
    ns = tables
    path = ruleset_file(
        tmp_path, {"name": "ids", "table": f"{ns}.orders", "rules": [{"type": "uniqueness", "column": "id"}]}
    )

    def machine(on_failure: str) -> str:
        definition = {
            "StartAt": "Check",
            "States": {
                "Check": {
                    "Type": "Task",
                    "Resource": "shoal:quality",
                    "Parameters": {"Ruleset": path, "OnFailure": on_failure},
                    "ResultSelector": {"status.$": "$.status"},
                    "Next": "Publish",
                },
                "Publish": {"Type": "Pass", "Result": "published", "End": True},
            },
        }
        f = tmp_path / f"wf-{on_failure}.json"
        f.write_text(json.dumps(definition))
        return str(f)

    stopped = run_workflow(settings, machine("fail"))
    assert stopped.status == "FAILED" and stopped.error == "Quality.RulesFailed"
    assert "ids on" in stopped.cause and "distinct" in stopped.cause
    went_on = run_workflow(settings, machine("warn"))
    assert went_on.status == "SUCCEEDED" and went_on.output == "published"
