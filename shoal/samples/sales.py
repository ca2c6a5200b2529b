"""The monthly sales-and-marketing refresh: realistic generated data, two recipe jobs, and a
state machine written the way cloud pipelines write it (data-prep job runs and query
executions with `.sync`, a notification publish), which Shoal runs as is.

`write_pipeline(folder)` writes everything a user would keep in a repository:

    data/sales/opportunities.csv        about 20,000 opportunities
    data/marketing/daily_metrics.csv    one row per day
    recipes/*.json                      recipe steps in the cloud data-prep format
    jobs/*.yaml                         recipe jobs (input + recipe + Parquet/Snappy outputs)
    sales-marketing-refresh.asl.json    the state machine
"""

from __future__ import annotations

import csv
import datetime as dt
import json
import random
from dataclasses import dataclass
from pathlib import Path

import yaml

TOPIC = "sales-refresh"
WORKFLOW = "sales-marketing-refresh"
SALES_JOB = "sales-pipeline-prep"
MARKETING_JOB = "marketing-metrics-prep"

SALESPEOPLE = [
    "Ana Souza",
    "Ben Carter",
    "Chloe Martin",
    "Dev Patel",
    "Emma Larsen",
    "Farid Haddad",
    "Grace Kim",
    "Hugo Moreau",
    "Ines Alvarez",
    "Jon Berg",
]
SEGMENTS = ["SMB", "Mid-Market", "Enterprise"]
REGIONS = ["North America", "EMEA", "APAC", "LATAM"]
STAGES = [
    ("Lead", 0.1),
    ("Qualify", 0.25),
    ("Proposal", 0.5),
    ("Negotiation", 0.75),
    ("Closed Won", 1.0),
    ("Closed Lost", 0.0),
]
LEAD_WORDS = [
    "Apex",
    "Blue",
    "Cedar",
    "Delta",
    "Echo",
    "Forge",
    "Granite",
    "Harbor",
    "Iris",
    "Juniper",
    "Kestrel",
    "Lumen",
    "Meridian",
    "Nova",
    "Orbit",
    "Pioneer",
]
LEAD_KINDS = ["Logistics", "Health", "Foods", "Labs", "Systems", "Retail", "Energy", "Media", "Capital", "Works"]


@dataclass
class PipelineFiles:
    folder: Path
    definition: Path
    sales_job: Path
    marketing_job: Path
    sales_rows: int
    marketing_rows: int
    output_root: Path


def generate_opportunities(n: int, start: dt.date, days: int, seed: int = 7) -> list[dict[str, object]]:
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        day = start + dt.timedelta(days=rng.randrange(days))
        segment = rng.choices(SEGMENTS, weights=[5, 3, 2])[0]
        base = {"SMB": 2_000, "Mid-Market": 9_000, "Enterprise": 40_000}[segment]
        revenue = round(base * rng.lognormvariate(0, 0.45), 2)
        stage, probability = rng.choices(STAGES, weights=[20, 18, 15, 10, 22, 15])[0]
        closed = stage.startswith("Closed")
        rows.append(
            {
                "date": day.strftime("%m/%d/%Y"),
                "salesperson": rng.choice(SALESPEOPLE),
                "lead_name": f"{rng.choice(LEAD_WORDS)} {rng.choice(LEAD_KINDS)} {i % 97}",
                "segment": segment,
                # A few opportunities arrive without a region: the recipe fills them in.
                "region": rng.choice(REGIONS) if rng.random() > 0.01 else "",
                "target_close": (day + dt.timedelta(days=rng.randrange(14, 120))).strftime("%m/%d/%Y"),
                "forecasted_monthly_revenue": revenue,
                "opportunity_stage": stage,
                "weighted_revenue": round(revenue * probability, 2),
                "closed_opportunity": str(closed).upper(),
                "active_opportunity": str(not closed).upper(),
                "latest_status_entry": str(rng.random() < 0.6).upper(),
            }
        )
    rows.sort(key=lambda r: dt.datetime.strptime(str(r["date"]), "%m/%d/%Y"))
    return rows


def generate_marketing(start: dt.date, days: int, seed: int = 11) -> list[dict[str, object]]:
    rng = random.Random(seed)
    rows, followers, mailing = [], 12_000, 8_000
    for d in range(days):
        day = start + dt.timedelta(days=d)
        weekday = day.weekday() < 5
        seo, cpc, social = (int(rng.gauss(m * (1.2 if weekday else 0.7), m * 0.15)) for m in (900, 400, 300))
        returning = int(rng.gauss(700, 90))
        follower_adds, mailing_adds = max(0, int(rng.gauss(25, 8))), max(0, int(rng.gauss(18, 6)))
        followers += follower_adds
        mailing += mailing_adds
        uniques = seo + cpc + social + returning
        mobile = int(uniques * rng.uniform(0.45, 0.55))
        tablet = int(uniques * rng.uniform(0.05, 0.1))
        signups = max(0, int(uniques * rng.uniform(0.015, 0.03)))
        rows.append(
            {
                "date": day.isoformat(),
                "new_visitors_seo": seo,
                "new_visitors_cpc": cpc,
                "new_visitors_social_media": social,
                "return_visitors": returning,
                "social_mentions": max(0, int(rng.gauss(40, 12))),
                "social_follower_adds": follower_adds,
                "social_followers_cumulative": followers,
                "mailing_list_adds": mailing_adds,
                "mailing_list_cumulative": mailing,
                "website_pageviews": int(uniques * rng.uniform(2.5, 4.0)),
                "website_visits": int(uniques * rng.uniform(1.1, 1.4)),
                "website_unique_visits": uniques,
                "mobile_uniques": mobile,
                "tablet_uniques": tablet,
                "desktop_uniques": uniques - mobile - tablet,
                "free_sign_up": signups,
                "paid_conversion": max(0, int(signups * rng.uniform(0.08, 0.2))),
                "events": rng.choice(["", "", "", "", "webinar", "product launch", "trade show"]),
            }
        )
    return rows


def _csv(path: Path, rows: list[dict[str, object]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


def _step(operation: str, **parameters: object) -> dict[str, object]:
    return {"Action": {"Operation": operation, "Parameters": {k: str(v) for k, v in parameters.items()}}}


SALES_RECIPE = [
    _step("YEAR", sourceColumn="date", targetColumn="year"),
    _step("MONTH", sourceColumn="date", targetColumn="month"),
    _step("DAY", sourceColumn="date", targetColumn="day"),
    _step("DATE_FORMAT", sourceColumn="date", dateTimeFormat="yyyy-mm-dd", targetColumn="opportunity_date"),
    _step("DATE_FORMAT", sourceColumn="target_close", dateTimeFormat="yyyy-mm-dd", targetColumn="target_close_date"),
    _step("DELETE", sourceColumns=json.dumps(["date", "target_close"])),
    _step("FILL_WITH_CUSTOM", sourceColumn="region", value="Unassigned"),
    _step("CHANGE_DATA_TYPE", sourceColumn="weighted_revenue", columnDataType="double"),
    _step("CHANGE_DATA_TYPE", sourceColumn="forecasted_monthly_revenue", columnDataType="double"),
]
MARKETING_RECIPE = [
    _step("YEAR", sourceColumn="date", targetColumn="year"),
    _step("MONTH", sourceColumn="date", targetColumn="month"),
    _step("DAY", sourceColumn="date", targetColumn="day"),
    _step("RENAME", sourceColumn="date", targetColumn="metric_date"),
    _step("FILL_WITH_CUSTOM", sourceColumn="events", value="none"),
    _step("CHANGE_DATA_TYPE", sourceColumn="paid_conversion", columnDataType="integer"),
]

SALES_COLUMNS = (
    "salesperson string, lead_name string, segment string, region string, forecasted_monthly_revenue double, "
    "opportunity_stage string, weighted_revenue double, closed_opportunity boolean, active_opportunity boolean, "
    "latest_status_entry boolean, opportunity_date string, target_close_date string"
)
MARKETING_COLUMNS = (
    "metric_date string, new_visitors_seo int, new_visitors_cpc int, new_visitors_social_media int, return_visitors int, "
    "social_mentions int, social_follower_adds int, social_followers_cumulative int, mailing_list_adds int, "
    "mailing_list_cumulative int, website_pageviews int, website_visits int, website_unique_visits int, "
    "mobile_uniques int, tablet_uniques int, desktop_uniques int, free_sign_up int, paid_conversion bigint, events string"
)


def _query(sql: str) -> dict[str, object]:
    return {
        "QueryString": sql,
        "WorkGroup": "primary",
        "QueryExecutionContext": {"Database": "sales_db"},
    }


def _athena(sql: str, next_state: str | None) -> dict[str, object]:
    state: dict[str, object] = {
        "Type": "Task",
        "Resource": "arn:aws:states:::athena:startQueryExecution.sync",
        "Parameters": _query(sql),
        "ResultPath": None,
    }
    if next_state:
        state["Next"] = next_state
    else:
        state["End"] = True
    return state


def _branch(prefix: str, job: str, table: str, columns: str, location: Path) -> dict[str, object]:
    return {
        "StartAt": f"{prefix} data-prep job",
        "States": {
            f"{prefix} data-prep job": {
                "Type": "Task",
                "Resource": "arn:aws:states:::databrew:startJobRun.sync",
                "Parameters": {"Name": job},
                "Retry": [
                    {"ErrorEquals": ["States.TaskFailed"], "IntervalSeconds": 2, "MaxAttempts": 2, "BackoffRate": 2}
                ],
                "ResultSelector": {"JobName.$": "$.JobName", "RunId.$": "$.RunId", "State.$": "$.State"},
                "ResultPath": "$.job",
                "Next": f"Drop old {prefix.lower()} table",
            },
            f"Drop old {prefix.lower()} table": _athena(
                f"DROP TABLE IF EXISTS sales_db.{table}", f"Create {prefix.lower()} table"
            ),
            f"Create {prefix.lower()} table": _athena(
                f"CREATE EXTERNAL TABLE sales_db.{table} ({columns}) PARTITIONED BY (year string, month string, day string) "
                f"STORED AS PARQUET LOCATION '{location}/' TBLPROPERTIES ('parquet.compression'='SNAPPY')",
                f"Load {prefix.lower()} partitions",
            ),
            f"Load {prefix.lower()} partitions": _athena(f"MSCK REPAIR TABLE sales_db.{table}", None),
        },
    }


SUMMARY_SQL = (
    "CREATE TABLE sales_db.revenue_summary AS "
    "SELECT CAST(s.year AS integer) AS year, CAST(s.month AS integer) AS month, "
    "m.total_paid_conversions, s.total_weighted_revenue, s.opportunities "
    "FROM (SELECT year, month, ROUND(SUM(weighted_revenue), 2) AS total_weighted_revenue, COUNT(*) AS opportunities "
    "FROM sales_db.sales_data GROUP BY year, month) s "
    "JOIN (SELECT year, month, SUM(paid_conversion) AS total_paid_conversions "
    "FROM sales_db.marketing_data GROUP BY year, month) m "
    "ON s.year = m.year AND s.month = m.month"
)


def state_machine(output_root: Path) -> dict[str, object]:
    return {
        "Comment": "Monthly sales and marketing refresh: prepare both datasets in parallel, rebuild their tables, "
        "rebuild the revenue summary, notify the team.",
        "StartAt": "Prepare data",
        "States": {
            "Prepare data": {
                "Type": "Parallel",
                "Branches": [
                    _branch("Sales", SALES_JOB, "sales_data", SALES_COLUMNS, output_root / "sales"),
                    _branch("Marketing", MARKETING_JOB, "marketing_data", MARKETING_COLUMNS, output_root / "marketing"),
                ],
                "ResultSelector": {"sales_job.$": "$[0].job.State", "marketing_job.$": "$[1].job.State"},
                "ResultPath": "$.prepared",
                "Next": "Drop old summary table",
            },
            "Drop old summary table": _athena("DROP TABLE IF EXISTS sales_db.revenue_summary", "Create summary table"),
            "Create summary table": {
                **_athena(SUMMARY_SQL, "Read summary"),
                "Catch": [{"ErrorEquals": ["States.ALL"], "ResultPath": "$.error", "Next": "Notify failure"}],
            },
            "Read summary": {
                "Type": "Task",
                "Resource": "arn:aws:states:::athena:startQueryExecution.sync",
                "Parameters": _query(
                    "SELECT COUNT(*) AS months, ROUND(SUM(total_weighted_revenue), 2) AS weighted_revenue, "
                    "SUM(total_paid_conversions) AS paid_conversions, SUM(opportunities) AS opportunities, "
                    "(SELECT COUNT(*) FROM sales_db.marketing_data) AS marketing_days FROM sales_db.revenue_summary"
                ),
                "ResultSelector": {"QueryExecutionId.$": "$.QueryExecution.QueryExecutionId"},
                "ResultPath": "$.query",
                "Next": "Get summary",
            },
            "Get summary": {
                "Type": "Task",
                "Resource": "arn:aws:states:::athena:getQueryResults",
                "Parameters": {"QueryExecutionId.$": "$.query.QueryExecutionId"},
                # Row 0 holds the column names; every value is text.
                "ResultSelector": {
                    "months.$": "$.ResultSet.Rows[1].Data[0].VarCharValue",
                    "weighted_revenue.$": "$.ResultSet.Rows[1].Data[1].VarCharValue",
                    "paid_conversions.$": "$.ResultSet.Rows[1].Data[2].VarCharValue",
                    "opportunities.$": "$.ResultSet.Rows[1].Data[3].VarCharValue",
                    "marketing_days.$": "$.ResultSet.Rows[1].Data[4].VarCharValue",
                },
                "ResultPath": "$.summary",
                "Next": "Notify team",
            },
            "Notify team": {
                "Type": "Task",
                "Resource": "arn:aws:states:::sns:publish",
                "Parameters": {
                    "TopicArn": f"arn:aws:sns:us-east-1:123456789012:{TOPIC}",
                    "Subject": "Sales and marketing data refreshed",
                    "Message.$": "States.Format('Revenue summary rebuilt: {} months, weighted revenue {}, paid conversions {}. Prepared {} opportunities and {} days of marketing metrics.', $.summary.months, $.summary.weighted_revenue, $.summary.paid_conversions, $.summary.opportunities, $.summary.marketing_days)",
                },
                "ResultSelector": {"MessageId.$": "$.MessageId"},
                "ResultPath": "$.notification",
                "End": True,
            },
            "Notify failure": {
                "Type": "Task",
                "Resource": "arn:aws:states:::sns:publish",
                "Parameters": {
                    "TopicArn": f"arn:aws:sns:us-east-1:123456789012:{TOPIC}",
                    "Subject": "Sales and marketing refresh FAILED",
                    "Message.$": "States.JsonToString($.error)",
                },
                "ResultPath": None,
                "Next": "Refresh failed",
            },
            "Refresh failed": {
                "Type": "Fail",
                "Error": "RefreshFailed",
                "Cause": "the revenue summary could not be rebuilt",
            },
        },
    }


def write_pipeline(
    folder: Path, *, opportunities: int = 20_000, start: dt.date = dt.date(2024, 1, 1), days: int = 731
) -> PipelineFiles:
    folder = folder.resolve()
    sales = generate_opportunities(opportunities, start, days)
    marketing = generate_marketing(start, days)
    _csv(folder / "data" / "sales" / "opportunities.csv", sales)
    _csv(folder / "data" / "marketing" / "daily_metrics.csv", marketing)
    (folder / "recipes").mkdir(parents=True, exist_ok=True)
    (folder / "recipes" / "sales-pipeline-recipe.json").write_text(json.dumps(SALES_RECIPE, indent=2))
    (folder / "recipes" / "marketing-recipe.json").write_text(json.dumps(MARKETING_RECIPE, indent=2))
    output_root = folder / "lake-files"
    jobs = folder / "jobs"
    jobs.mkdir(parents=True, exist_ok=True)
    for name, data, recipe, out in (
        (SALES_JOB, "data/sales/opportunities.csv", "recipes/sales-pipeline-recipe.json", "sales"),
        (MARKETING_JOB, "data/marketing/daily_metrics.csv", "recipes/marketing-recipe.json", "marketing"),
    ):
        job = {
            "name": name,
            "type": "recipe",
            "input": {"path": f"../{data}", "format": "csv", "options": {"header": True}},
            "recipe": f"../{recipe}",
            "outputs": [
                {
                    "path": f"../lake-files/{out}",
                    "format": "parquet",
                    "compression": "snappy",
                    "partition_columns": ["year", "month", "day"],
                    "overwrite": True,
                }
            ],
        }
        (jobs / f"{name}.yaml").write_text(yaml.safe_dump(job, sort_keys=False))
    definition = folder / f"{WORKFLOW}.asl.json"
    definition.write_text(json.dumps(state_machine(output_root), indent=2))
    return PipelineFiles(
        folder,
        definition,
        jobs / f"{SALES_JOB}.yaml",
        jobs / f"{MARKETING_JOB}.yaml",
        len(sales),
        len(marketing),
        output_root,
    )


def expected_summary(folder: Path) -> dict[tuple[int, int], tuple[float, int, int]]:
    """(year, month) -> (weighted revenue, paid conversions, opportunities), straight from the CSVs."""
    out: dict[tuple[int, int], list[float]] = {}
    with open(folder / "data" / "sales" / "opportunities.csv", encoding="utf-8") as fh:
        for r in csv.DictReader(fh):
            d = dt.datetime.strptime(r["date"], "%m/%d/%Y")
            e = out.setdefault((d.year, d.month), [0.0, 0, 0])
            e[0] += float(r["weighted_revenue"])
            e[2] += 1
    with open(folder / "data" / "marketing" / "daily_metrics.csv", encoding="utf-8") as fh:
        for r in csv.DictReader(fh):
            day = dt.date.fromisoformat(r["date"])
            if (day.year, day.month) in out:
                out[(day.year, day.month)][1] += int(r["paid_conversion"])
    return {k: (round(v[0], 2), int(v[1]), int(v[2])) for k, v in out.items()}
