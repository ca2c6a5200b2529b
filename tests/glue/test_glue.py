"""AWS Glue PySpark scripts run unchanged through Shoal's awsglue (real Spark + Iceberg, no mocks)."""

from __future__ import annotations

import importlib.util
import json
import sys
import uuid
from pathlib import Path

import pytest

from shoal.cdc import ApplyOptions, apply_changes
from shoal.glue import GlueError, bookmarks, run_script, split_conf
from tests.support.helpers import rows, run_cli, write_csv

# The CDC job of the AWS sample "Transactional data lake using Apache Iceberg on AWS Glue",
# written as that job is (docs/examples/glue/iceberg_cdc.py, the documented example).
CDC_SCRIPT = (Path(__file__).resolve().parents[2] / "docs" / "examples" / "glue" / "iceberg_cdc.py").read_text()

CDC_HEADER = ["op", "product_id", "category", "product_name", "quantity_available", "last_update_time"]
T1, T2, T3, T4 = "2022-03-01 10:00:00", "2022-03-02 11:34:01", "2022-03-03 09:00:00", "2022-03-03 09:05:00"
COLUMNS = "product_id, category, product_name, quantity_available, last_update_time"


def _glue_run(capsys, monkeypatch, *args: str) -> dict:
    code, out, err = run_cli(["glue", "run", *args, "--json"], capsys, monkeypatch)
    assert code == 0, err
    return json.loads(out)


def _snapshots(spark, table: str) -> int:
    return spark.sql(f"SELECT count(*) FROM {table}.snapshots").first()[0]


def test_cdc_reference_script_twice_matches_cdc_apply(spark, settings, cli_env, tmp_path, capsys, monkeypatch):
    from shoal.catalog.crawl import crawl

    db = f"iceberg_demo_{uuid.uuid4().hex[:6]}"
    raw = tmp_path / "raw_csv_input"
    raw.mkdir()
    load = [
        ["I", 101, "tools", "hammer", 10, T1],
        ["I", 102, "tools", "saw", 5, T1],
        ["I", 103, "garden", "rake", 7, T1],
        ["I", 104, "garden", "hoe", 3, T1],
    ]
    write_csv(raw, "LOAD00000001.csv", load, CDC_HEADER)
    write_csv(
        raw,
        "20220302-1134010000.csv",
        [["U", 102, "tools", "saw", 4, T2], ["I", 105, "kitchen", "pan", 8, T2]],
        CDC_HEADER,
    )
    # The crawler makes raw_csv_input a catalog table, as a Glue crawler does in the sample.
    crawl(spark, settings, str(raw), f"{db}.raw_csv_input")
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {db}")
    spark.sql(
        f"CREATE TABLE {db}.iceberg_output (product_id bigint, category string, product_name string, "
        "quantity_available bigint, last_update_time timestamp) USING iceberg"
    )
    script = tmp_path / "iceberg_cdc.py"
    script.write_text(CDC_SCRIPT)
    job_args = [
        str(script),
        "--JOB_NAME",
        f"cdc-{db}",
        "--job-bookmark-option",
        "job-bookmark-enable",
        "--iceberg_job_catalog_warehouse",
        "s3://not-used/warehouse",
        "--database_name",
        db,
    ]
    reference = f"{db}.by_cdc_apply"
    opts = ApplyOptions(table=reference, keys=["product_id"], sequence="last_update_time")

    first = _glue_run(capsys, monkeypatch, *job_args)
    assert first["status"] == "SUCCEEDED" and first["bookmark_committed"] is True
    assert "job_catalog" in first["catalogs"]
    assert first["reads"] == [
        {
            "transformation_ctx": "IncrementalInputDyF",
            "source": f"{db}.raw_csv_input",
            "bookmark": "used",
            "files_listed": 2,
            "files_read": 2,
        }
    ]
    apply_changes(spark, settings, str(raw), opts)
    got = rows(spark, f"SELECT {COLUMNS} FROM {db}.iceberg_output ORDER BY product_id")
    assert got == rows(spark, f"SELECT {COLUMNS} FROM {reference} ORDER BY product_id")
    assert [r[:4] for r in got] == [
        (101, "tools", "hammer", 10),
        (102, "tools", "saw", 4),
        (103, "garden", "rake", 7),
        (104, "garden", "hoe", 3),
        (105, "kitchen", "pan", 8),
    ]

    write_csv(
        raw,
        "20220303-0900000000.csv",
        [
            ["U", 102, "tools", "saw", 3, T3],
            ["U", 102, "tools", "saw", 2, T4],
            ["D", 103, "garden", "rake", 7, T3],
            ["U", 105, "kitchen", "pan", 6, T3],
        ],
        CDC_HEADER,
    )
    second = _glue_run(capsys, monkeypatch, *job_args)
    assert (second["reads"][0]["files_listed"], second["reads"][0]["files_read"]) == (3, 1)
    apply_changes(spark, settings, str(raw), opts)
    got = rows(spark, f"SELECT {COLUMNS} FROM {db}.iceberg_output ORDER BY product_id")
    assert got == rows(spark, f"SELECT {COLUMNS} FROM {reference} ORDER BY product_id")
    assert [r[:4] for r in got] == [
        (101, "tools", "hammer", 10),
        (102, "tools", "saw", 2),
        (104, "garden", "hoe", 3),
        (105, "kitchen", "pan", 6),
    ]

    # Nothing new: the job reads no file and commits nothing to the table.
    before = _snapshots(spark, f"{db}.iceberg_output")
    third = _glue_run(capsys, monkeypatch, *job_args)
    assert third["reads"][0]["files_read"] == 0
    assert _snapshots(spark, f"{db}.iceberg_output") == before
    # The catalog name existed for the run only.
    assert "job_catalog" not in [r[0] for r in spark.sql("SHOW CATALOGS").collect()]

    code, out, _err = run_cli(["glue", "runs", f"cdc-{db}", "--json"], capsys, monkeypatch)
    assert code == 0 and [r["status"] for r in json.loads(out)] == ["SUCCEEDED"] * 3
    code, out, _err = run_cli(["glue", "bookmarks", f"cdc-{db}", "--json"], capsys, monkeypatch)
    assert code == 0 and [(b["transformation_ctx"], b["files"]) for b in json.loads(out)] == [
        ("IncrementalInputDyF", 3)
    ]


TRANSFORM_SCRIPT = """
import sys
from awsglue.transforms import *
from awsglue.utils import getResolvedOptions
from pyspark.context import SparkContext
from pyspark.sql import SparkSession
from awsglue.context import GlueContext
from awsglue.job import Job
from awsglue.dynamicframe import DynamicFrame

args = getResolvedOptions(sys.argv, ['JOB_NAME', 'input_path', 'output_path', 'target_db'])
spark = (
    SparkSession.builder.config("spark.sql.catalog.my_catalog", "org.apache.iceberg.spark.SparkCatalog")
    .config("spark.sql.catalog.my_catalog.catalog-impl", "org.apache.iceberg.aws.glue.GlueCatalog")
    .getOrCreate()
)
sc = SparkContext.getOrCreate()
glueContext = GlueContext(sc)
job = Job(glueContext)
job.init(args['JOB_NAME'], args)

people = glueContext.create_dynamic_frame.from_options(
    connection_type="s3",
    connection_options={"paths": [args['input_path']], "recurse": True},
    format="csv",
    format_options={"withHeader": True, "separator": ";"},
    transformation_ctx="people_src",
)
mapped = ApplyMapping.apply(frame=people, mappings=[
    ("id", "int", "person_id", "long"),
    ("name", "string", "name", "string"),
    ("age", "int", "age", "string"),
    ("city", "string", "city", "string"),
], transformation_ctx="mapped")
typed = mapped.resolveChoice(specs=[("age", "cast:int")])
adults = Filter.apply(frame=typed, f=lambda r: r["age"] >= 18)
slim = DropFields.apply(frame=SelectFields.apply(frame=adults, paths=["person_id", "name", "age", "city"]),
                        paths=["city"])
print("ADULTS", slim.count())
glueContext.write_dynamic_frame.from_options(
    frame=slim, connection_type="s3", connection_options={"path": args['output_path']}, format="parquet")
glueContext.write_dynamic_frame.from_catalog(
    frame=slim, database=args['target_db'], table_name="adults", transformation_ctx="adults_sink")
back = glueContext.create_dynamic_frame.from_catalog(
    database=args['target_db'], table_name="adults", transformation_ctx="adults_back")
older = DynamicFrame.fromDF(back.toDF().where("age > 40"), glueContext, "older")
print("OLDER", older.count())
total = spark.sql(f"SELECT count(*) FROM my_catalog.{args['target_db']}.adults").first()[0]
print("TOTAL", total)
if '--fail' in sys.argv:
    raise ValueError("the job fails after reading")
job.commit()
"""


def _people(folder: Path, name: str, lines: list[str]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text("id;name;age;city\n" + "\n".join(lines) + "\n")


def test_from_options_transforms_writes_and_bookmark_modes(spark, settings, tmp_path, capsys):
    db = f"g{uuid.uuid4().hex[:6]}"
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {db}")
    spark.sql(f"CREATE TABLE {db}.adults (person_id bigint, name string, age int) USING iceberg")
    src, out = tmp_path / "people", tmp_path / "out"
    _people(src, "a.csv", ["1;ann;34;oslo", "2;bob;12;rome"])
    _people(src / "sub", "b.csv", ["3;cid;51;lima"])
    (src / "_SUCCESS").write_text("")
    script = tmp_path / "transform.py"
    script.write_text(TRANSFORM_SCRIPT)
    job = f"people-{db}"
    argv = ["--input_path", str(src), "--output_path", str(out), "--target_db", db]

    def run(option: str, *extra: str, conf: list[tuple[str, str]] | None = None) -> dict:
        return run_script(settings, str(script), job, [*argv, *extra], bookmark_option=option, conf=conf)

    first = run(bookmarks.PAUSE, conf=[("spark.sql.catalog.cli_catalog", "org.apache.iceberg.spark.SparkCatalog")])
    printed = capsys.readouterr().out
    assert "ADULTS 2" in printed and "OLDER 1" in printed
    assert first["reads"][0]["files_read"] == 2 and first["bookmark_committed"] is False
    assert first["reads"][1] == {
        "transformation_ctx": "adults_back",
        "source": f"{db}.adults",
        "bookmark": "not used (lake table: read in full)",
    }
    assert {"my_catalog", "cli_catalog", "glue_catalog", "job_catalog"} <= set(first["catalogs"])
    assert rows(spark, f"SELECT person_id, name, age FROM {db}.adults ORDER BY 1") == [(1, "ann", 34), (3, "cid", 51)]
    assert sorted(r[0] for r in rows(spark, f"SELECT person_id FROM parquet.`{out}`")) == [1, 3]
    types = {f.name: f.dataType.simpleString() for f in spark.table(f"{db}.adults").schema.fields}
    assert types == {"person_id": "bigint", "name": "string", "age": "int"}

    # Pause read the new files but kept the bookmark: enable reads them again, then commits.
    second = run(bookmarks.ENABLE)
    assert second["reads"][0]["files_read"] == 2 and second["bookmark_committed"] is True
    _people(src, "c.csv", ["4;dee;40;nice", "5;eve;17;bern"])

    # A run that fails after reading leaves the bookmark where it was.
    with pytest.raises(GlueError, match=r"transform\.py line \d+: ValueError: the job fails after reading"):
        run(bookmarks.ENABLE, "--fail", "yes")
    third = run(bookmarks.ENABLE)
    assert (third["reads"][0]["files_listed"], third["reads"][0]["files_read"]) == (3, 1)
    # Each successful or failed run appended its adults before failing or committing (no rollback of
    # writes: as in Glue); the bookmark decides what is read.
    ids = sorted(r[0] for r in rows(spark, f"SELECT person_id FROM {db}.adults"))
    assert ids == [1, 1, 3, 3, 4, 4]
    # Nothing new: the frame has no fields (as in Glue) and the writers write nothing.
    idle = run(bookmarks.ENABLE)
    assert idle["reads"][0]["files_read"] == 0
    assert [w["target"].endswith("(empty frame: nothing written)") for w in idle["writes"]] == [True, True]
    assert sorted(r[0] for r in rows(spark, f"SELECT person_id FROM {db}.adults")) == ids
    disabled = run(bookmarks.DISABLE)
    assert disabled["reads"][0]["files_read"] == 3 and disabled["reads"][0]["bookmark"] == "not used"
    assert importlib.util.find_spec("awsglue") is None  # only importable while a script runs


def test_get_resolved_options_follows_glue():
    from shoal.glue.compat.awsglue.utils import GlueArgumentError, getResolvedOptions

    argv = ["job.py", "--JOB_NAME", "j", "--day", "2024-01-01", "--extra", "x", "--TempDir", "/tmp/t"]
    got = getResolvedOptions(argv, ["JOB_NAME", "day"])
    assert got["JOB_NAME"] == "j" and got["day"] == "2024-01-01" and "extra" not in got
    assert got["job_bookmark_option"] == "job-bookmark-disable" and got["RedshiftTempDir"] == "/tmp/t"
    with pytest.raises(GlueArgumentError, match="--missing"):
        getResolvedOptions(argv, ["JOB_NAME", "missing"])
    with pytest.raises(RuntimeError, match="reserved"):
        getResolvedOptions(argv, ["JOB_RUN_ID"])
    legacy = getResolvedOptions(["job.py", "--continuation-option", "continuation-enabled"], [])
    assert legacy["job_bookmark_option"] == "job-bookmark-enable"


def test_split_conf_reads_glue_chained_values():
    assert split_conf(["spark.a=1 --conf spark.b=x=y", "spark.c=3"]) == [
        ("spark.a", "1"),
        ("spark.b", "x=y"),
        ("spark.c", "3"),
    ]
    with pytest.raises(GlueError, match="KEY=VALUE"):
        split_conf(["novalue"])


def test_cli_errors_name_what_and_where(spark, settings, cli_env, tmp_path, capsys, monkeypatch):
    code, out, _err = run_cli(
        ["glue", "run", str(tmp_path / "nope.py"), "--JOB_NAME", "j", "--json"], capsys, monkeypatch
    )
    assert code == 1 and "nope.py does not exist" in json.loads(out)["error"]
    script = tmp_path / "missing_table.py"
    script.write_text(
        "from awsglue.context import GlueContext\n"
        "from pyspark.context import SparkContext\n"
        "gc = GlueContext(SparkContext())\n"
        "gc.create_dynamic_frame.from_catalog(database='nodb', table_name='nothing')\n"
    )
    job = f"missing-{uuid.uuid4().hex[:6]}"
    code, out, _err = run_cli(["glue", "run", str(script), "--JOB_NAME", job, "--json"], capsys, monkeypatch)
    err = json.loads(out)
    assert code == 1 and "missing_table.py line 4" in err["error"] and "nodb.nothing" in err["error"]
    assert "shoal catalog crawl" in err["hint"]
    assert "awsglue" not in sys.modules
    # The failed run is on record, with its reason.
    code, out, _err = run_cli(["glue", "runs", job, "--json"], capsys, monkeypatch)
    history = json.loads(out)
    assert code == 0 and [(r["status"], r["job_name"]) for r in history] == [("FAILED", job)]
    assert "nodb.nothing" in history[0]["error"]


S3_SCRIPT = """
import sys
from awsglue.utils import getResolvedOptions
from awsglue.context import GlueContext
from awsglue.job import Job
from pyspark.context import SparkContext

args = getResolvedOptions(sys.argv, ["JOB_NAME", "source"])
glueContext = GlueContext(SparkContext.getOrCreate())
spark = glueContext.spark_session
job = Job(glueContext)
job.init(args["JOB_NAME"], args)
spark.sql("CREATE NAMESPACE IF NOT EXISTS glue_catalog.shop")
spark.sql("CREATE TABLE IF NOT EXISTS glue_catalog.shop.orders (order_id bigint, amount double) USING iceberg")
orders = glueContext.create_dynamic_frame.from_options(
    connection_type="s3", connection_options={"paths": [args["source"]], "recurse": True},
    format="json", transformation_ctx="orders")
mapped = orders.apply_mapping([("id", "long", "order_id", "long"), ("amount", "double", "amount", "double")])
glueContext.write_dynamic_frame.from_catalog(frame=mapped, database="shop", table_name="orders",
                                             transformation_ctx="sink")
print("TOTAL", spark.sql("SELECT count(*), sum(amount) FROM glue_catalog.shop.orders").first())
job.commit()
"""


@pytest.mark.slow
def test_cli_process_reads_s3_with_bookmarks(tmp_path):
    """A fresh `shoal glue run` process per run, files on S3 (SeaweedFS) and the lake there too."""
    import os
    import subprocess

    from tests.support.servers import seaweedfs

    (tmp_path / "s3").mkdir()
    with seaweedfs(tmp_path / "s3") as s3:
        env = {k: v for k, v in os.environ.items() if not k.startswith("SHOAL_")}
        env.update(
            SHOAL_WORKSPACE=str(tmp_path / "ws"),
            SHOAL_SPARK__SHUFFLE_PARTITIONS="2",
            SHOAL_WAREHOUSE=f"s3://{s3.bucket}/warehouse",
            SHOAL_STORAGE__ENDPOINT=s3.endpoint,
            SHOAL_STORAGE__ACCESS_KEY=s3.access_key,
            SHOAL_STORAGE__SECRET_KEY=s3.secret_key,
        )
        client = s3.client()

        def put(key: str, text: str) -> None:
            with client.open_output_stream(f"{s3.bucket}/{key}") as f:
                f.write(text.encode())

        script = tmp_path / "orders.py"
        script.write_text(S3_SCRIPT)

        def glue() -> tuple[dict, str]:
            cmd = [sys.executable, "-m", "shoal.cli.console", "glue", "run", str(script), "--JOB_NAME", "orders"]
            cmd += ["--source", f"s3://{s3.bucket}/raw/orders/", "--job-bookmark-option", "job-bookmark-enable"]
            done = subprocess.run([*cmd, "--json"], env=env, capture_output=True, text=True, timeout=500)
            assert done.returncode == 0, done.stderr[-3000:]
            # stdout is the one JSON document; what the script prints is its log, on stderr.
            return json.loads(done.stdout), done.stderr

        put("raw/orders/day=1/a.json", '{"id": 1, "amount": 2.5}\n{"id": 2, "amount": 4.0}\n')
        first, printed = glue()
        assert (first["reads"][0]["files_listed"], first["reads"][0]["files_read"]) == (1, 1)
        assert "TOTAL Row(count(1)=2, sum(amount)=6.5)" in printed
        put("raw/orders/day=2/b.json", '{"id": 3, "amount": 1.0}\n')
        second, printed = glue()
        assert (second["reads"][0]["files_listed"], second["reads"][0]["files_read"]) == (2, 1)
        assert "TOTAL Row(count(1)=3, sum(amount)=7.5)" in printed


EXTERNAL_SCRIPT = """
import sys
from awsglue.utils import getResolvedOptions
from awsglue.context import GlueContext
from awsglue.job import Job
from pyspark.context import SparkContext

args = getResolvedOptions(sys.argv, ["JOB_NAME", "db"])
glueContext = GlueContext(SparkContext())
job = Job(glueContext)
job.init(args["JOB_NAME"], args)
events = glueContext.create_dynamic_frame.from_catalog(
    database=args["db"], table_name="events", transformation_ctx="events", push_down_predicate="kind <> 'noise'")
glueContext.write_dynamic_frame.from_catalog(frame=events, database=args["db"], table_name="events_copy")
job.commit()
"""


def test_partitioned_external_tables_read_by_bookmark_and_appended(spark, settings, tmp_path):
    from shoal.catalog.crawl import crawl
    from shoal.sql.external import SqlRunner

    db = f"ext{uuid.uuid4().hex[:6]}"
    src, copy = tmp_path / "events", tmp_path / "events_copy"
    for day, name, lines in [("1", "a.csv", ["1,click", "2,noise"]), ("2", "b.csv", ["3,view"])]:
        (src / f"day={day}").mkdir(parents=True)
        (src / f"day={day}" / name).write_text("id,kind\n" + "\n".join(lines) + "\n")
    crawl(spark, settings, str(src), f"{db}.events")
    runner = SqlRunner(spark, settings, dialect="athena", database_name=db)
    runner.execute(
        f"CREATE EXTERNAL TABLE {db}.events_copy (id bigint, kind string) PARTITIONED BY (day int) "
        f"STORED AS PARQUET LOCATION '{copy}'"
    )
    script = tmp_path / "external.py"
    script.write_text(EXTERNAL_SCRIPT)

    def copied() -> list[tuple]:
        return [tuple(r) for r in runner.execute(f"SELECT day, id, kind FROM {db}.events_copy ORDER BY id")[0].rows]

    first = run_script(settings, str(script), f"ext-{db}", ["--db", db], bookmark_option=bookmarks.ENABLE)
    assert first["reads"][0]["files_read"] == 2
    assert copied() == [(1, 1, "click"), (2, 3, "view")]
    (src / "day=3").mkdir()
    (src / "day=3" / "c.csv").write_text("id,kind\n4,click\n")
    second = run_script(settings, str(script), f"ext-{db}", ["--db", db], bookmark_option=bookmarks.ENABLE)
    assert (second["reads"][0]["files_listed"], second["reads"][0]["files_read"]) == (3, 1)
    assert copied() == [(1, 1, "click"), (2, 3, "view"), (3, 4, "click")]


def test_registered_glue_job_runs_from_a_state_machine_and_by_name(
    spark, settings, cli_env, tmp_path, capsys, monkeypatch
):
    # A job exactly as `aws glue get-job` prints it, its ScriptLocation pointed at a local folder.
    from shoal.workflows import definition, run, tasks

    db = f"g{uuid.uuid4().hex[:6]}"
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {db}")
    spark.sql(f"CREATE TABLE {db}.adults (person_id bigint, name string, age int) USING iceberg")
    src, out = tmp_path / "people", tmp_path / "out"
    _people(src, "a.csv", ["1;ann;34;oslo", "2;bob;12;rome"])
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "people.py").write_text(TRANSFORM_SCRIPT)
    name = f"people-{db}"
    export = {
        "Job": {
            "Name": name,
            "JobMode": "SCRIPT",
            "Role": "arn:aws:iam::123456789012:role/GlueJobRole",
            "CreatedOn": "2024-03-01T10:00:00.000000+00:00",
            "ExecutionProperty": {"MaxConcurrentRuns": 1},
            "Command": {"Name": "glueetl", "ScriptLocation": "scripts/people.py", "PythonVersion": "3"},
            "DefaultArguments": {
                "--enable-glue-datacatalog": "true",
                "--job-bookmark-option": "job-bookmark-enable",
                "--TempDir": "s3://aws-glue-assets-123456789012-eu-west-1/temporary/",
                "--job-language": "python",
                "--input_path": str(src),
                "--output_path": str(out),
                "--target_db": "not-this-one",
            },
            "MaxRetries": 0,
            "Timeout": 2880,
            "GlueVersion": "4.0",
            "NumberOfWorkers": 2,
            "WorkerType": "G.1X",
        }
    }
    job_file = tmp_path / "get-job.json"
    job_file.write_text(json.dumps(export))
    code, printed, err = run_cli(["job", "register", str(job_file), "--json"], capsys, monkeypatch)
    assert code == 0, err
    assert json.loads(printed)["kind"] == "glue"

    machine = definition.build(
        {
            "StartAt": "Etl",
            "States": {
                "Etl": {
                    "Type": "Task",
                    "Resource": "arn:aws:states:::glue:startJobRun.sync",
                    "Parameters": {"JobName": name, "Arguments": {"--target_db": db}},
                    "End": True,
                }
            },
        },
        name=f"glue{uuid.uuid4().hex[:6]}",
        resource_check=tasks.unsupported,
    )
    first = run(settings, machine)
    assert first.status == "SUCCEEDED", (first.error, first.cause)
    job_run = first.output
    assert job_run["JobName"] == name and job_run["JobRunState"] == "SUCCEEDED"
    assert job_run["Arguments"] == {"--target_db": db}
    assert rows(spark, f"SELECT person_id FROM {db}.adults") == [(1,)]  # the run's argument won
    committed = bookmarks.show(settings, name)
    assert [b["run_id"] for b in committed] == [job_run["Id"]] * len(committed) and committed
    # The default bookmark option is the job's: a second run reads nothing new.
    _people(src, "b.csv", ["3;cid;51;lima"])
    assert "ADULTS 1" in capsys.readouterr().out  # the script's own print, from the state machine's run
    again = _glue_run(capsys, monkeypatch, name, "--target_db", db)
    assert again["job_name"] == name and again["bookmark_committed"] is True
    assert again["reads"][0]["files_read"] == 1
    assert sorted(r[0] for r in rows(spark, f"SELECT person_id FROM {db}.adults")) == [1, 3]

    bad = dict(export["Job"], Command={"Name": "gluestreaming", "ScriptLocation": "scripts/people.py"})
    job_file.write_text(json.dumps({"Job": bad}))
    code, printed, err = run_cli(["job", "register", str(job_file), "--json"], capsys, monkeypatch)
    assert code != 0 and "gluestreaming" in printed + err
