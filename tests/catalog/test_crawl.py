"""Crawlers: schema inference over nested partitioned folders, schema changes between runs."""

from __future__ import annotations

import json
import uuid

import pytest

from shoal.catalog.crawl import CrawlError, crawl, csv_options, versions, widen
from shoal.sql.external import SqlRunner
from shoal.workflows import run as run_workflow


def write(path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_type_widening_and_csv_sniffing():
    assert widen("int", "bigint") == "bigint" and widen("double", "int") == "double"
    assert widen("date", "timestamp") == "timestamp" and widen("int", "string") == "string"
    assert widen("boolean", "int") == "string" and widen("string", "string") == "string"
    assert csv_options(b"id;name\n1;a\n2;b\n") == {"sep": ";", "header": "true"}
    assert csv_options(b"1,2.5,x\n2,3.5,y\n3,4.5,z\n")["header"] == "false"


def test_crawl_nested_partitions_then_a_schema_change(spark, settings, tmp_path):
    root = tmp_path / "sales"
    write(root / "year=2024" / "month=01" / "a.csv", "id,amount,region\n1,10,north\n2,20,south\n")
    write(root / "year=2024" / "month=02" / "b.csv", "id,amount,region\n3,30,north\n")
    table = f"raw_{uuid.uuid4().hex[:6]}.sales"
    first = crawl(spark, settings, str(root), table)
    assert first.created and first.version == 1 and first.format == "csv" and first.files == 2
    assert first.columns == [("id", "int"), ("amount", "int"), ("region", "string")]
    assert first.partition_columns == [("year", "int"), ("month", "int")] and first.partitions == 2
    runner = SqlRunner(spark, settings, dialect="athena")
    rows = runner.execute(f"SELECT year, month, sum(amount) FROM {table} GROUP BY year, month ORDER BY month")[0].rows
    assert rows == [(2024, 1, 30), (2024, 2, 30)]

    # Run 2: a new partition whose files add a column and carry decimals in `amount`.
    write(root / "year=2025" / "month=01" / "c.csv", "id,amount,region,channel\n4,12.5,east,web\n")
    again = crawl(spark, settings, str(root), table)
    assert again.changed and again.version == 2 and not again.created and again.partitions == 3
    assert {"change": "widened", "column": "amount", "from": "int", "to": "double"} in again.changes
    assert {"change": "added", "column": "channel", "type": "string"} in again.changes
    assert again.columns == [("id", "int"), ("amount", "double"), ("region", "string"), ("channel", "string")]
    rows = runner.execute(f"SELECT id, amount, channel FROM {table} WHERE year = 2025")[0].rows
    assert rows == [(4, 12.5, "web")]
    assert runner.execute(f"SELECT count(*) FROM {table}")[0].rows == [(4,)]

    # Run 3: nothing new in the schema -> same version, partitions refreshed.
    write(root / "year=2025" / "month=02" / "d.csv", "id,amount,region,channel\n5,1.0,west,shop\n")
    third = crawl(spark, settings, str(root), table)
    assert not third.changed and third.version == 2 and third.partitions == 4 and third.changes == []
    history = versions(settings, table)
    assert [v["version"] for v in history] == [1, 2] and history[1]["changes"] == again.changes


def test_crawl_json_and_bad_folders(spark, settings, tmp_path):
    folder = tmp_path / "events"
    write(folder / "day=1" / "e.jsonl", '{"user": "ana", "clicks": 3}\n{"user": "bo", "clicks": 5}\n')
    table = f"raw_{uuid.uuid4().hex[:6]}.events"
    result = crawl(spark, settings, str(folder), table)
    assert result.format == "json" and dict(result.columns) == {"clicks": "bigint", "user": "string"}
    assert SqlRunner(spark, settings).execute(f"SELECT sum(clicks) FROM {table}")[0].rows == [(8,)]
    mixed = tmp_path / "mixed"
    write(mixed / "a.csv", "x\n1\n")
    write(mixed / "b.json", '{"x": 1}\n')
    with pytest.raises(CrawlError, match="mixed formats"):
        crawl(spark, settings, str(mixed), "raw.mixed")
    uneven = tmp_path / "uneven"
    write(uneven / "k=1" / "a.csv", "x\n1\n")
    write(uneven / "b.csv", "x\n2\n")
    with pytest.raises(CrawlError, match="disagree on partition folders"):
        crawl(spark, settings, str(uneven), "raw.uneven")
    with pytest.raises(Exception, match="does not exist"):
        crawl(spark, settings, str(tmp_path / "nowhere"), "raw.nowhere")
    with pytest.raises(CrawlError, match="invalid table name"):
        crawl(spark, settings, str(folder), "no_namespace")


def test_crawl_as_a_workflow_task(spark, settings, tmp_path):
    folder = tmp_path / "drops"
    write(folder / "part.csv", "sku,qty\nA,1\nB,2\n")
    table = f"raw_{uuid.uuid4().hex[:6]}.drops"
    definition = {
        "StartAt": "Crawl",
        "States": {
            "Crawl": {
                "Type": "Task",
                "Resource": "shoal:crawl",
                "Parameters": {"Path": str(folder), "Table": table},
                "ResultSelector": {"version.$": "$.version", "columns.$": "$.columns"},
                "End": True,
            }
        },
    }
    path = tmp_path / "crawl.json"
    path.write_text(json.dumps(definition))
    record = run_workflow(settings, str(path))
    assert record.status == "SUCCEEDED", record.to_dict(full=True)
    assert record.output == {"version": 1, "columns": [["sku", "string"], ["qty", "int"]]}
