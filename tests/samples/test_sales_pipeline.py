"""The monthly sales-and-marketing refresh, end to end: two recipe jobs in a Parallel state,
external tables dropped/created/repaired, the aggregate rebuilt, a notification sent; the
aggregate is checked against sums computed from the generated CSVs."""

from __future__ import annotations

import datetime as dt
import json

import pyarrow.parquet as pq

from shoal import workflows
from shoal.notify import Notifier
from shoal.recipes import JobRegistry, load_job_file
from shoal.samples import sales


def test_sales_marketing_refresh(spark, settings, tmp_path):
    files = sales.write_pipeline(tmp_path / "pipeline", opportunities=3000, start=dt.date(2024, 11, 1), days=120)
    registry = JobRegistry(settings)
    registry.register(load_job_file(files.sales_job))
    registry.register(load_job_file(files.marketing_job))
    notes = tmp_path / "notes.jsonl"
    notifier = Notifier(settings)
    notifier.create_topic(sales.TOPIC)
    notifier.subscribe(sales.TOPIC, "file", str(notes))
    expected = sales.expected_summary(files.folder)

    for run_number in (1, 2):  # a second monthly run replaces, never duplicates
        record = workflows.run(settings, str(files.definition))
        assert record.status == "SUCCEEDED", (record.error, record.cause)
        assert record.output["prepared"] == {"sales_job": "SUCCEEDED", "marketing_job": "SUCCEEDED"}
        assert record.output["summary"]["opportunities"] == "3000"
        assert record.output["summary"]["marketing_days"] == "120"
        assert record.output["notification"]["MessageId"]
        rows = spark.sql(
            "SELECT year, month, total_weighted_revenue, total_paid_conversions, opportunities FROM sales_db.revenue_summary"
        ).collect()
        got = {
            (r.year, r.month): (round(r.total_weighted_revenue, 2), r.total_paid_conversions, r.opportunities)
            for r in rows
        }
        assert got == expected
        message = json.loads(notes.read_text().splitlines()[-1])
        assert message["subject"] == "Sales and marketing data refreshed"
        assert f"{len(expected)} months" in message["message"] and "Prepared 3000 opportunities" in message["message"]
        assert len(notes.read_text().splitlines()) == run_number

    parts = sorted(
        p.relative_to(files.output_root / "sales").parts[:3] for p in (files.output_root / "sales").rglob("*.parquet")
    )
    assert parts[0] == ("year=2024", "month=11", "day=1")
    sample = next((files.output_root / "marketing").rglob("*.parquet"))
    assert ".snappy." in sample.name and pq.ParquetFile(sample).metadata.row_group(0).column(0).compression == "SNAPPY"
    assert spark.sql("SELECT count(*) FROM spark_catalog.sales_db.sales_data").first()[0] == 3000
    events = workflows.Store(settings).history(record.id)
    branches = {e["scope"] for e in events if e["type"] == "TaskScheduled" and e["scope"]}
    assert branches == {"/Prepare data[0]", "/Prepare data[1]"}
