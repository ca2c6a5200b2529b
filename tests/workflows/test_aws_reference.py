"""The AWS reference pipeline, unchanged, against a real S3-compatible server (SeaweedFS).

tests/data/aws_reference/ holds the artifacts as AWS emits them: the Step Functions state
machine (Parallel: DataBrew job -> Athena DROP / CREATE EXTERNAL TABLE / MSCK REPAIR per
branch, then DROP TABLE + CTAS of a summary joined from both, then an SNS publish with a
Message object), the DataBrew recipes (YEAR/MONTH/DAY on a date column), datasets and jobs
(Parquet, Snappy, partitioned by year/month/day, replace output). Commands run as separate
processes with only SHOAL_* variables set; the summary is checked against sums computed
from the CSVs in plain Python.
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
import os
import random
import subprocess
import sys
import time
import uuid
from decimal import Decimal
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from pyarrow import fs as pafs

from shoal import storage
from shoal.config import load_settings
from shoal.workflows import register
from shoal.workflows import run as run_workflow
from shoal.workflows.schedule import Scheduler, Schedules
from tests.support.servers import seaweedfs

pytestmark = pytest.mark.slow

REFERENCE = Path(__file__).resolve().parents[1] / "support" / "data" / "aws_reference"
BUCKET = "shoal-reference"  # the bucket the exported artifacts name
TOPIC = "sales-marketing-refresh"


def run(args: list[str], env: dict[str, str], cwd: Path, timeout: float = 500) -> subprocess.CompletedProcess:
    done = subprocess.run(
        [sys.executable, "-m", "shoal.cli.console", *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode == 0, f"shoal {' '.join(args)} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    root = tmp_path_factory.mktemp("s3")
    with seaweedfs(root, bucket=BUCKET) as server:
        yield server


def put(s3, key: str, data: bytes) -> None:
    with s3.client().open_output_stream(f"{BUCKET}/{key}") as f:
        f.write(data)


def s3_env(s3, workspace: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SHOAL_")}
    env.update(
        {
            "SHOAL_WORKSPACE": str(workspace),
            "SHOAL_SPARK__SHUFFLE_PARTITIONS": "2",
            "SHOAL_WAREHOUSE": f"s3://{BUCKET}/warehouse",
            "SHOAL_STORAGE__ENDPOINT": s3.endpoint,
            "SHOAL_STORAGE__ACCESS_KEY": s3.access_key,
            "SHOAL_STORAGE__SECRET_KEY": s3.secret_key,
        }
    )
    return env


# ---- the data: our own, generated; the oracle reads the CSV text back ----------------------


def sales_csv(rng: random.Random, n: int, days: list[dt.date]) -> str:
    out = io.StringIO()
    w = csv.writer(out)
    w.writerow(
        [
            "date",
            "salesperson",
            "lead_name",
            "segment",
            "region",
            "target_close",
            "forecasted_monthly_revenue",
            "opportunity_stage",
            "weighted_revenue",
            "closed_opportunity",
            "active_opportunity",
            "latest_status_entry",
        ]
    )
    stages = [("Lead", 0.1), ("Qualify", 0.3), ("Proposal", 0.5), ("Closed Won", 1.0), ("Closed Lost", 0.0)]
    for i in range(n):
        day = rng.choice(days)
        revenue = round(rng.uniform(500, 60_000), 2)
        stage, p = rng.choice(stages)
        closed = stage.startswith("Closed")
        w.writerow(
            [
                day.strftime("%m/%d/%Y"),
                rng.choice(["Ana", "Ben", "Chloe", "Dev"]),
                f"Lead {i}",
                rng.choice(["SMB", "Mid-Market", "Enterprise"]),
                "" if i % 50 == 0 else rng.choice(["EMEA", "APAC", "NA"]),
                (day + dt.timedelta(days=rng.randrange(10, 90))).strftime("%m/%d/%Y"),
                revenue,
                stage,
                round(revenue * p, 2),
                str(closed).upper(),
                str(not closed).upper(),
                str(rng.random() < 0.5).upper(),
            ]
        )
    return out.getvalue()


def marketing_csv(rng: random.Random, days: list[dt.date]) -> str:
    out = io.StringIO()
    w = csv.writer(out)
    w.writerow(
        [
            "date",
            "new_visitors_seo",
            "new_visitors_cpc",
            "new_visitors_social_media",
            "return_visitors",
            "website_pageviews",
            "website_unique_visits",
            "free_sign_up",
            "paid_conversion",
            "events",
        ]
    )
    for day in days:
        seo, cpc, social, ret = (rng.randrange(100, 1000) for _ in range(4))
        signups = rng.randrange(5, 60)
        w.writerow(
            [
                day.isoformat(),
                seo,
                cpc,
                social,
                ret,
                (seo + cpc + social + ret) * 3,
                seo + cpc + social + ret,
                signups,
                rng.randrange(0, signups),
                rng.choice(["", "", "webinar", "launch"]),
            ]
        )
    return out.getvalue()


def oracle(sales: str, marketing: str) -> dict[tuple[int, int], tuple[int, Decimal, int]]:
    """(year, month) -> (paid conversions, exact weighted revenue, opportunities), months in both."""
    revenue: dict[tuple[int, int], Decimal] = {}
    count: dict[tuple[int, int], int] = {}
    for row in csv.DictReader(io.StringIO(sales)):
        d = dt.datetime.strptime(row["date"], "%m/%d/%Y")
        key = (d.year, d.month)
        revenue[key] = revenue.get(key, Decimal(0)) + Decimal(row["weighted_revenue"])
        count[key] = count.get(key, 0) + 1
    paid: dict[tuple[int, int], int] = {}
    for row in csv.DictReader(io.StringIO(marketing)):
        d = dt.date.fromisoformat(row["date"])
        paid[(d.year, d.month)] = paid.get((d.year, d.month), 0) + int(row["paid_conversion"])
    return {k: (paid[k], revenue[k], count[k]) for k in sorted(revenue) if k in paid}


def check_summary(rows: list[dict], expected: dict[tuple[int, int], tuple[int, Decimal, int]]) -> None:
    got = {(int(r["year"]), int(r["month"])): r for r in rows}
    assert sorted(got) == sorted(expected)
    for key, (paid, revenue, opportunities) in expected.items():
        row = got[key]
        assert int(row["total_paid_conversion"]) == paid, key
        assert int(row["opportunities"]) == opportunities, key
        # ROUND(SUM(double), 2) against the exact decimal sum of the CSV's text.
        assert abs(Decimal(str(row["total_weighted_revenue"])) - revenue) <= Decimal("0.01"), key


# ---- the tests -------------------------------------------------------------------------------


def test_reference_pipeline_runs_unchanged_twice(s3, tmp_path):
    rng = random.Random(19)
    # Two days a month: each day is a partition folder, and each folder costs S3 round trips (both
    # runs write and crawl them all). Months that only one side covers (October: sales only) are
    # left out by the summary's JOIN.
    sales_days = [dt.date(2024, 10, 7) + dt.timedelta(days=18 * i) for i in range(8)]
    weeks = [dt.date(2024, 11, 1) + dt.timedelta(days=14 * i) for i in range(9)]
    sales = sales_csv(rng, 1500, sales_days)
    marketing = marketing_csv(rng, weeks)
    put(s3, "raw/sales/sales-pipeline.csv", sales.encode())
    put(s3, "raw/marketing/marketing-data.csv", marketing.encode())
    expected = oracle(sales, marketing)
    assert len(expected) == 4  # Nov-Feb: both sides

    env = s3_env(s3, tmp_path / "ws")
    for job in ("sales-pipeline-job.json", "marketing-data-job.json"):
        registered = json.loads(run(["job", "register", str(REFERENCE / job), "--json"], env, tmp_path).stdout)
        assert registered["outputs"] == [f"parquet:s3://{BUCKET}/prepared/{job.split('-')[0]}/"]
    notes = tmp_path / "notes.jsonl"
    run(["topic", "create", TOPIC], env, tmp_path)
    run(["topic", "subscribe", TOPIC, "--file", str(notes)], env, tmp_path)

    definition = REFERENCE / "sales-marketing-pipeline.asl.json"
    for attempt in (1, 2):  # a second run replaces every output, never duplicates
        record = json.loads(run(["workflow", "run", str(definition), "--json"], env, tmp_path).stdout)
        assert record["status"] == "SUCCEEDED", (record["error"], record["cause"])
        # The last state's result is the publish response, as in the cloud.
        assert set(record["output"]) == {"MessageId", "SdkHttpMetadata", "SdkResponseMetadata"}
        note = json.loads(notes.read_text().splitlines()[-1])
        assert note["message_id"] == record["output"]["MessageId"]
        message = note["message"]
        ctas_id = message.pop("QueryExecutionId")  # from the CTAS state's result
        assert uuid.UUID(ctas_id)
        assert message == {
            "Status": "The sales and marketing revenue summary was rebuilt",
            "Table": "sales_marketing_revenue",
            "State": "SUCCEEDED",
        }
        assert len(notes.read_text().splitlines()) == attempt
        # Each Athena state wrote its result file at its OutputLocation, as in the cloud (a CTAS:
        # DML, an empty .csv); nothing staged is left beside them.
        results = [i.path for i in s3.client().get_file_info(pafs.FileSelector(f"{BUCKET}/athena-results"))]
        assert f"{BUCKET}/athena-results/{ctas_id}.csv" in results
        assert len(results) == 8 * attempt and all(p.endswith((".csv", ".txt")) for p in results), results

    # The summary, and a CTAS of it to an s3:// external_location read back from S3.
    export = f"s3://{BUCKET}/exports/revenue/"
    query = (
        "CREATE TABLE revenue_export WITH (format = 'PARQUET', write_compression = 'SNAPPY', "
        f"external_location = '{export}') AS SELECT * FROM sales_marketing_revenue; "
        "SELECT year, month, total_paid_conversion, total_weighted_revenue, opportunities FROM revenue_export"
    )
    rows = json.loads(run(["sql", "--dialect", "athena", query, "-f", "json"], env, tmp_path).stdout)
    check_summary(rows, expected)
    fs = s3.client()
    exported = [
        f.path for f in fs.get_file_info(pafs.FileSelector(f"{BUCKET}/exports/revenue", recursive=True)) if f.is_file
    ]
    assert any(p.endswith(".parquet") for p in exported), exported
    assert not any("_temporary" in p for p in exported)
    assert not (tmp_path / "s3:").exists()  # nothing staged through a local path
    # DROP TABLE forgets an external table and keeps its files, so a CTAS to the same
    # location is refused, as Athena refuses it.
    again = subprocess.run(
        [
            sys.executable,
            "-m",
            "shoal.cli.console",
            "sql",
            "--dialect",
            "athena",
            "DROP TABLE revenue_export; " + query.split(";")[0],
        ],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=500,
    )
    said = again.stdout + again.stderr
    assert again.returncode != 0 and f"statement 2 of 2: external_location {export} is not empty" in said
    assert said.count("hint:") == 1

    # DataBrew outputs: Parquet + Snappy, year/month/day partitions, replaced (not appended).
    sales_files = [
        f for f in fs.get_file_info(pafs.FileSelector(f"{BUCKET}/prepared/sales", recursive=True)) if f.is_file
    ]
    parquet = [f.path for f in sales_files if f.path.endswith(".parquet")]
    assert parquet and all("/year=" in p and "/month=" in p and "/day=" in p for p in parquet)
    rows_out = 0
    for path in parquet:
        meta = pq.ParquetFile(fs.open_input_file(path)).metadata
        rows_out += meta.num_rows
        assert meta.row_group(0).column(0).compression == "SNAPPY"
    assert rows_out == 1500


def test_new_files_under_an_s3_prefix_start_one_execution(s3, settings, tmp_path, monkeypatch):
    # storage.configure() exports SHOAL_STORAGE__*: keep them from leaking into other tests.
    for name in storage.S3_ENV.values():
        monkeypatch.setenv(name, "")  # recorded, so whatever is set later is undone
        monkeypatch.delenv(name)
    s = load_settings(
        workspace=settings.workspace_dir,
        workflows={"settle_s": 0.5},
        storage={"endpoint": s3.endpoint, "access_key": s3.access_key, "secret_key": s3.secret_key},
    )
    path = tmp_path / f"arrivals{uuid.uuid4().hex[:6]}.json"
    path.write_text(json.dumps({"StartAt": "Echo", "States": {"Echo": {"Type": "Pass", "End": True}}}))
    flow = register(s, path)[0].name
    name = f"s3{uuid.uuid4().hex[:6]}"
    prefix = f"landing-{name}"
    Schedules(s).add(name, flow, on_new_files=f"s3://{BUCKET}/{prefix}/", input_={"team": "sales"})
    results: list = []

    def start(workflow, input_, execution_id, topic, schedule):
        results.append(run_workflow(s, workflow, input_, execution_id=execution_id, trigger={"schedule": schedule}))

    try:
        # Nothing there yet: the prefix does not exist, which is no error.
        quiet = Scheduler(s, start, say=lambda m: results.append(m))
        assert [f for f in quiet.tick() if f.schedule == name] == []
        quiet.wait()
        assert not [m for m in results if isinstance(m, str) and m.startswith(name)]
        put(s3, f"{prefix}/2024/part-0.csv", b"id\n0\n")
        put(s3, f"{prefix}/part-1.csv", b"id\n1\n")
        put(s3, f"{prefix}-other/part-9.csv", b"id\n9\n")  # beside the prefix, not under it
        put(s3, f"{prefix}/.uploading", b"")  # hidden: an upload in progress
        time.sleep(1.0)  # settle
        said: list[str] = []
        scheduler = Scheduler(s, start, say=said.append)
        fired = [f for f in scheduler.tick() if f.schedule == name]
        scheduler.wait()
        assert not [m for m in said if m.startswith(f"{name}: ") and "starting" not in m], said
        assert len(fired) == 1
        mine = [r for r in results if not isinstance(r, str) and r.id == fired[0].execution_id]
        assert mine[0].status == "SUCCEEDED"
        files = sorted(f["path"] for f in mine[0].input["files"])
        assert files == [f"s3://{BUCKET}/{prefix}/2024/part-0.csv", f"s3://{BUCKET}/{prefix}/part-1.csv"]
        assert all(f["size"] == 5 for f in mine[0].input["files"]) and mine[0].input["team"] == "sales"
        # Seen files do not fire again; a new one does, alone.
        again = Scheduler(s, start)
        assert [f for f in again.tick() if f.schedule == name] == []
        again.wait()
        put(s3, f"{prefix}/part-2.csv", b"id\n2\n")
        time.sleep(1.0)
        third = Scheduler(s, start)
        fired3 = [f for f in third.tick() if f.schedule == name]
        third.wait()
        assert [[x.split("|")[0] for x in f.slots] for f in fired3] == [[f"s3://{BUCKET}/{prefix}/part-2.csv"]]
    finally:
        Schedules(s).remove(name)
