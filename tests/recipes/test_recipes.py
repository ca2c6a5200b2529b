"""Recipe operations (cloud data-prep format) on Spark, recipe jobs, outputs and profiles."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml

from shoal.recipes import JobError, JobRegistry, RecipeError, apply_recipe, load_job_file, profile, run_job


def step(op: str, conditions: list | None = None, **params) -> dict:
    s = {
        "Action": {
            "Operation": op,
            "Parameters": {k: v if isinstance(v, str) else json.dumps(v) for k, v in params.items()},
        }
    }
    if conditions:
        s["ConditionExpressions"] = conditions
    return s


@pytest.fixture
def people(spark):
    rows = [
        (1, " ada lovelace ", "03/15/2024", "EU", 120.0, "a;b,c"),
        (2, "GRACE HOPPER", "2024-07-04", None, 80.5, "x"),
        (3, "alan turing", "12/01/2023", "EU", None, None),
        (3, "alan turing", "12/01/2023", "EU", None, None),
        (4, "edsger dijkstra", "2024-02-29", "NA", 42.0, "p,q"),
    ]
    return spark.createDataFrame(rows, "id int, name string, joined string, region string, score double, tags string")


def apply(df, *steps, load=None):
    return apply_recipe(df, list(steps), load or (lambda ref: (_ for _ in ()).throw(AssertionError(ref))))


def collect(df, *cols):
    return [tuple(r) for r in df.select(*cols).collect()] if cols else [tuple(r) for r in df.collect()]


def test_column_operations(people):
    df = apply(
        people,
        step("RENAME", sourceColumn="score", targetColumn="points"),
        step("DUPLICATE", sourceColumn="id", targetColumn="id_copy"),
        step("DELETE", sourceColumns=["tags"]),
        step("CHANGE_DATA_TYPE", sourceColumn="id", columnDataType="string"),
    )
    assert df.columns == ["id", "name", "joined", "region", "points", "id_copy"]
    assert dict(df.dtypes)["id"] == "string" and dict(df.dtypes)["id_copy"] == "int"


def test_date_operations(people):
    df = apply(
        people,
        step("YEAR", sourceColumn="joined", targetColumn="year"),
        step("MONTH", sourceColumn="joined", targetColumn="month"),
        step("DAY", sourceColumn="joined", targetColumn="day"),
        step("WEEK_DAY", sourceColumn="joined", targetColumn="weekday"),
        step("QUARTER", sourceColumn="joined", targetColumn="q"),
        step("DATE_FORMAT", sourceColumn="joined", dateTimeFormat="yyyy-mm-dd", targetColumn="iso"),
        step("DATE_FORMAT", sourceColumn="joined", dateTimeFormat="month*dd*yyyy", targetColumn="long"),
    )
    got = collect(df.where("id in (1, 2, 4)").orderBy("id"), "year", "month", "day", "weekday", "q", "iso", "long")
    assert got == [
        (2024, 3, 15, "Friday", 1, "2024-03-15", "March 15 2024"),
        (2024, 7, 4, "Thursday", 3, "2024-07-04", "July 04 2024"),
        (2024, 2, 29, "Thursday", 1, "2024-02-29", "February 29 2024"),
    ]


def test_text_operations(people):
    df = apply(
        people.where("id in (1, 2)"),
        step("TRIM", sourceColumn="name"),
        step("UPPER_CASE", sourceColumn="name", targetColumn="upper"),
        step("LOWER_CASE", sourceColumn="name", targetColumn="lower"),
        step("CAPITAL_CASE", sourceColumn="name", targetColumn="title"),
        step("REPLACE_TEXT", sourceColumn="lower", pattern="grace", value="admiral grace"),
        step("REPLACE_PATTERN", sourceColumn="title", pattern=r"\s+", value="_"),
        step(
            "SPLIT_COLUMN_MULTIPLE_DELIMITER",
            sourceColumn="tags",
            patternOptions=[{"pattern": ";"}, {"pattern": ","}],
            limit=2,
        ),
    ).orderBy("id")
    assert collect(df, "name", "upper", "lower", "title") == [
        ("ada lovelace", "ADA LOVELACE", "ada lovelace", "Ada_Lovelace"),
        ("GRACE HOPPER", "GRACE HOPPER", "admiral grace hopper", "Grace_Hopper"),
    ]
    assert collect(df, "tags_1", "tags_2", "tags_3") == [("a", "b", "c"), ("x", None, None)]
    assert "tags" not in df.columns


def test_missing_values_and_duplicates(people):
    filled = apply(
        people,
        step("FILL_WITH_CUSTOM", sourceColumn="region", value="Unknown"),
        step("FILL_WITH_AVERAGE", sourceColumn="score"),
        step("DELETE_DUPLICATE_ROWS"),
    ).orderBy("id")
    got = [(i, region, round(score, 6)) for i, region, score in collect(filled, "id", "region", "score")]
    assert got == [(1, "EU", 120.0), (2, "Unknown", 80.5), (3, "EU", 80.833333), (4, "NA", 42.0)]
    removed = apply(
        people, step("REMOVE_MISSING", sourceColumn="score"), step("REMOVE_DUPLICATES", sourceColumn="region")
    )
    assert sorted(collect(removed, "id")) == [(1,), (2,), (4,)]  # null is a value of its own


def test_filters(people):
    gt = apply(
        people, step("KEEP_VALUES", conditions=[{"Condition": "GREATER_THAN", "Value": "50", "TargetColumn": "score"}])
    )
    assert sorted(collect(gt, "id")) == [(1,), (2,)]
    not_eu = apply(
        people, step("REMOVE_VALUES", conditions=[{"Condition": "IS", "Value": '["EU"]', "TargetColumn": "region"}])
    )
    assert sorted(collect(not_eu, "id")) == [(2,), (4,)]
    matches = apply(
        people,
        step(
            "KEEP_VALUES",
            conditions=[
                {"Condition": "MATCHES", "Value": "^(ada|alan)", "TargetColumn": "name"},
                {"Condition": "IS_NOT_MISSING", "TargetColumn": "score"},
            ],
        ),
    )
    assert collect(matches, "id") == []
    expr = apply(people, step("FILTER", expression="score BETWEEN 40 AND 100 AND region IS NOT NULL"))
    assert collect(expr, "id") == [(4,)]


def test_derived_columns(people):
    df = apply(
        people.where("id = 1"),
        step("MULTIPLY", sourceColumn1="score", value2="1.5", targetColumn="weighted"),
        step("DIVIDE", sourceColumn1="score", value2="0", targetColumn="bad"),
        step("DERIVE_COLUMN", targetColumn="label", expression="concat(region, '-', cast(id AS string))"),
    )
    assert collect(df, "weighted", "bad", "label") == [(180.0, None, "EU-1")]
    with pytest.raises(RecipeError, match="names unknown column"):
        apply(people, step("DERIVE_COLUMN", targetColumn="x", expression="nope + 1"))
    with pytest.raises(RecipeError, match="must not contain a query"):
        apply(people, step("FILTER", expression="id IN (SELECT 1)"))


def test_group_pivot_unpivot_sort(people, spark):
    grouped = apply(
        people.dropDuplicates(),
        step("FILL_WITH_CUSTOM", sourceColumn="region", value="??"),
        step(
            "GROUP_BY",
            sourceColumns=["region"],
            groupByAggFunctionOptions=[
                {"sourceColumnName": "id", "targetColumnName": "n", "functionName": "COUNT"},
                {"sourceColumnName": "score", "targetColumnName": "total", "functionName": "SUM"},
            ],
            useNewDataFrame="true",
        ),
        step(
            "SORT",
            expressions=[
                {"sourceColumn": "n", "ordering": "DESCENDING"},
                {"sourceColumn": "region", "ordering": "ASCENDING"},
            ],
        ),
    )
    assert collect(grouped) == [("EU", 2, 120.0), ("??", 1, 80.5), ("NA", 1, 42.0)]
    sales = spark.createDataFrame(
        [("2024", "EU", 10.0), ("2024", "NA", 5.0), ("2025", "EU", 7.0), ("2025", "EU", 1.0)],
        "year string, region string, amount double",
    )
    wide = apply(sales, step("PIVOT", sourceColumn="region", valueColumn="amount", aggregateFunction="SUM")).orderBy(
        "year"
    )
    assert collect(wide, "year", "EU", "NA") == [("2024", 10.0, 5.0), ("2025", 8.0, None)]
    long = apply(
        wide, step("UNPIVOT", sourceColumns=["EU", "NA"], unpivotColumn="region", valueColumn="amount")
    ).orderBy("year", "region")
    assert collect(long) == [("2024", "EU", 10.0), ("2024", "NA", 5.0), ("2025", "EU", 8.0), ("2025", "NA", None)]


def test_join_and_union(people, spark):
    regions = spark.createDataFrame(
        [("EU", "Europe"), ("NA", "North America"), ("AP", "Asia")], "code string, region_name string"
    )
    extra = spark.createDataFrame([(9, "new person")], "id int, name string")
    datasets = {"regions": regions, "extra": extra}
    load = datasets.__getitem__
    joined = apply(
        people.dropDuplicates(),
        step(
            "JOIN",
            secondaryDatasetName="regions",
            joinKeys=[{"key": "region", "value": "code"}],
            joinType="LEFT_JOIN",
            leftColumns=["id", "region"],
            rightColumns=["region_name"],
        ),
        load=load,
    )
    assert sorted(collect(joined), key=lambda r: r[0]) == [
        (1, "EU", "Europe"),
        (2, None, None),
        (3, "EU", "Europe"),
        (4, "NA", "North America"),
    ]
    unmatched = apply(
        people,
        step(
            "JOIN",
            secondaryDatasetName="regions",
            joinKeys=[{"key": "region", "value": "code"}],
            joinType="RIGHT_EXCLUDING_JOIN",
        ),
        load=load,
    )
    assert collect(unmatched) == [("AP", "Asia")]
    unioned = apply(people.select("id", "name"), step("UNION", secondaryDatasetNames=["extra"]), load=load)
    assert unioned.count() == 6 and (9, "new person") in collect(unioned)


def test_unknown_operation_and_missing_column(people):
    with pytest.raises(RecipeError, match="step 1: unknown operation 'EXPLODE_EVERYTHING'"):
        apply(people, step("EXPLODE_EVERYTHING"))
    with pytest.raises(RecipeError, match="step 2 \\(RENAME\\): no column 'nope'"):
        apply(people, step("TRIM", sourceColumn="name"), step("RENAME", sourceColumn="nope", targetColumn="x"))
    with pytest.raises(RecipeError, match="parameter 'targetColumn' is required"):
        apply(people, step("RENAME", sourceColumn="id"))


# ---- jobs -------------------------------------------------------------------------------------------


def write_job(tmp_path: Path, **overrides) -> Path:
    data = tmp_path / "in" / "orders.csv"
    data.parent.mkdir(parents=True, exist_ok=True)
    data.write_text("order_id,ordered,amount\n1,2024-01-05,10.5\n2,2024-01-20,4\n3,2024-02-01,7.25\n")
    (tmp_path / "recipe.json").write_text(
        json.dumps(
            [
                step("YEAR", sourceColumn="ordered", targetColumn="year"),
                step("MONTH", sourceColumn="ordered", targetColumn="month"),
            ]
        )
    )
    job = {
        "Name": "orders-prep",
        "Input": {"Path": "in/orders.csv", "Format": "csv"},
        "Recipe": "recipe.json",
        "Outputs": [
            {
                "Location": {"Path": "out/orders"},
                "Format": "PARQUET",
                "CompressionFormat": "SNAPPY",
                "PartitionColumns": ["year", "month"],
                "Overwrite": True,
            },
            {"path": "out/orders-csv", "format": "csv", "mode": "replace"},
        ],
        **overrides,
    }
    path = tmp_path / "orders.job.yaml"
    path.write_text(yaml.safe_dump(job))
    return path


def test_recipe_job_writes_partitioned_snappy_parquet_and_replaces(spark, settings, tmp_path):
    job = load_job_file(write_job(tmp_path))
    result = run_job(spark, settings, job)
    assert (result.rows_in, result.rows_out) == (3, 3)
    out = tmp_path / "out" / "orders"
    assert sorted(p.name for p in out.iterdir() if p.is_dir()) == ["year=2024"]
    assert sorted(p.name for p in (out / "year=2024").iterdir()) == ["month=1", "month=2"]
    files = list(out.rglob("*.parquet"))
    assert files and all(".snappy." in f.name for f in files)
    assert pq.ParquetFile(files[0]).metadata.row_group(0).column(0).compression == "SNAPPY"
    assert spark.read.parquet(str(out)).count() == 3
    # Replace, not append: a second run leaves the same rows.
    run_job(spark, settings, job)
    assert spark.read.parquet(str(out)).count() == 3
    assert not [p for p in out.parent.iterdir() if p.name.startswith(".")]


def test_failed_job_leaves_previous_output_whole(spark, settings, tmp_path):
    good = load_job_file(write_job(tmp_path))
    run_job(spark, settings, good)
    (tmp_path / "in" / "orders.csv").write_text(
        "order_id,ordered,amount\n1,2024-01-05,10.5\n2,2024-01-20,not-a-number,extra\n"
    )
    with pytest.raises(JobError, match="job 'orders-prep' failed while reading csv:.*orders.csv: .*(?i:malformed)"):
        run_job(spark, settings, load_job_file(tmp_path / "orders.job.yaml"))
    assert spark.read.parquet(str(tmp_path / "out" / "orders")).count() == 3


def test_job_definition_errors(tmp_path, settings):
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        yaml.safe_dump({"name": "bad", "input": {"path": "x.csv"}, "outputs": [{"path": "o", "format": "xlsx"}]})
    )
    with pytest.raises(JobError, match="cannot write format 'xlsx'|unknown format 'xlsx'"):
        load_job_file(bad)
    bad.write_text(
        yaml.safe_dump(
            {"name": "bad", "input": {"path": "x.csv"}, "recipe": [step("NOPE")], "outputs": [{"path": "o"}]}
        )
    )
    with pytest.raises(JobError, match="step 1: unknown operation 'NOPE'"):
        load_job_file(bad)
    registry = JobRegistry(settings)
    with pytest.raises(JobError, match="no job named 'ghost'"):
        registry.resolve("ghost")


def test_job_registry_and_iceberg_output(spark, settings, tmp_path):
    path = write_job(
        tmp_path,
        Outputs=[{"table": "prep.orders_by_month", "format": "iceberg", "partition_columns": ["year"]}],
        Name="orders-to-lake",
    )
    registry = JobRegistry(settings)
    job = registry.resolve(str(path))
    assert registry.get("orders-to-lake").outputs[0].table == "prep.orders_by_month"
    run_job(spark, settings, registry.resolve("orders-to-lake"))
    run_job(spark, settings, job)
    assert spark.sql("SELECT count(*) FROM prep.orders_by_month").first()[0] == 3


def test_profile(people):
    result = profile(people)
    assert result["rows"] == 5
    cols = {c["column"]: c for c in result["columns"]}
    assert cols["score"]["missing"] == 2 and cols["score"]["min"] == 42.0 and cols["score"]["max"] == 120.0
    assert cols["region"]["missing"] == 1 and cols["region"]["top_values"][0] == {"value": "EU", "count": 3}
    assert cols["name"]["max_length"] == len("edsger dijkstra") and cols["name"]["min_length"] == len("alan turing")
    assert cols["id"]["distinct"] == 4


def test_csv_input_keeps_dates_as_text_like_the_data_prep_service(spark, settings, tmp_path):
    """Numbers and booleans are inferred; ISO dates and timestamps stay strings until a step
    changes them, so Parquet outputs match table definitions that declare them `string`."""
    data = tmp_path / "in" / "events.csv"
    data.parent.mkdir(parents=True)
    data.write_text(
        "id,day,at,amount,big,paid,note\n"
        "1,2024-01-05,2024-01-05 10:00:00,10.5,9000000000,true,a\n"
        "2,2024-02-29,2024-02-29T23:59:59,4,1,false,\n"
    )
    job = {
        "Name": "events-prep",
        "Input": {"Path": "in/events.csv", "Format": "csv"},
        "Recipe": [step("YEAR", sourceColumn="day", targetColumn="year")],
        "Outputs": [{"Location": {"Path": "out/events"}, "Format": "PARQUET", "CompressionFormat": "SNAPPY"}],
    }
    path = tmp_path / "events.job.yaml"
    path.write_text(yaml.safe_dump(job))
    run_job(spark, settings, load_job_file(path))
    schema = pq.read_schema(next((tmp_path / "out" / "events").rglob("*.parquet")))
    types = {name: str(schema.field(name).type) for name in schema.names}
    assert types == {
        "id": "int32",
        "day": "string",
        "at": "string",
        "amount": "double",
        "big": "int64",
        "paid": "bool",
        "note": "string",
        "year": "int32",
    }
    # What a table declaring the columns as strings reads back: the text as written.
    rows = spark.read.parquet(str(tmp_path / "out" / "events")).orderBy("id").collect()
    assert [(r.day, r.at, r.year) for r in rows] == [
        ("2024-01-05", "2024-01-05 10:00:00", 2024),
        ("2024-02-29", "2024-02-29T23:59:59", 2024),
    ]
    # An input that asks for Spark's date inference keeps it.
    job["Input"]["Options"] = {"preferDate": True}
    path.write_text(yaml.safe_dump(job))
    run_job(spark, settings, load_job_file(path))
    schema = pq.read_schema(next((tmp_path / "out" / "events").rglob("*.parquet")))
    assert str(schema.field("day").type) == "date32[day]"


def test_replace_on_a_store_uri_keeps_the_old_output_when_the_write_fails(spark, settings, tmp_path):
    # Store URIs (s3://, file://) have no folder rename: the output is staged beside the
    # target and swapped in only once complete, so a failing write loses nothing.
    from pyspark.sql import functions as F

    from shoal.recipes.job import Output, write_output

    target = f"file://{tmp_path}/out/summary"
    out = Output(format="parquet", path=target, mode="replace")
    first = write_output(spark, settings, spark.range(5).withColumn("v", F.col("id") * 2), out)
    assert (first.rows, spark.read.parquet(target).count()) == (5, 5) and first.files >= 1
    failing = spark.range(7).withColumn("v", F.when(F.col("id") < 6, F.col("id")).otherwise(F.raise_error("boom")))
    with pytest.raises(Exception, match="boom"):
        write_output(spark, settings, failing, out)
    assert sorted(r.v for r in spark.read.parquet(target).collect()) == [0, 2, 4, 6, 8]
    assert not [p.name for p in (tmp_path / "out").iterdir() if p.name != "summary"]  # no staging left
    write_output(spark, settings, spark.range(3).withColumn("v", F.lit(1)), out)
    assert spark.read.parquet(target).count() == 3  # replaced, not appended
