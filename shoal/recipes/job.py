"""Jobs: a recipe job (input dataset + recipe + outputs) or a Python job (an entry point).

A job file is YAML or JSON. Keys are read case- and underscore-insensitively so a job
exported from a cloud data-prep service (`Outputs`, `Format`, `CompressionFormat`,
`PartitionColumns`, `Overwrite`) reads as well as Shoal's own spelling. Relative paths
resolve against the job file's folder. A job as the cloud's `describe-job` exports it names
its dataset and recipe (`DatasetName`, `RecipeReference`); their exports are read from
DATASETNAME.json and RECIPENAME.json beside it (or files given explicitly), and S3
locations (`{"Bucket", "Key"}`) become s3:// URIs. Registered jobs live in the catalog database
(`shoal_jobs`), which is how a state machine's job names find them.
"""

from __future__ import annotations

import json
import shutil
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml
from sqlalchemy import Column, DateTime, MetaData, String, Table, Text, delete, select

from shoal import storage
from shoal.config import Settings
from shoal.exceptions import ShoalError, first_line
from shoal.lake import database
from shoal.progress import spark_tasks

if TYPE_CHECKING:
    from collections.abc import Callable

    from pyspark.sql import DataFrame, DataFrameReader, SparkSession

state_tables = MetaData()
jobs_table = Table(
    "shoal_jobs",
    state_tables,
    Column("name", String(200), primary_key=True),
    Column("kind", String(16), nullable=False),
    Column("definition", Text, nullable=False),
    Column("source", Text),
    Column("updated_at", DateTime, nullable=False),
)

INPUT_FORMATS = ("csv", "json", "parquet", "iceberg", "orc", "text")
OUTPUT_FORMATS = ("parquet", "csv", "json", "iceberg", "orc")
COMPRESSION = {
    "none": "none",
    "snappy": "snappy",
    "gzip": "gzip",
    "zstd": "zstd",
    "lz4": "lz4",
    "bzip2": "bzip2",
    "deflate": "deflate",
    "brotli": "brotli",
}


class JobError(ShoalError):
    """A job definition is invalid or cannot run."""


def _norm(d: dict[str, Any]) -> dict[str, Any]:
    return {str(k).replace("_", "").replace("-", "").lower(): v for k, v in d.items()}


@dataclass
class Dataset:
    format: str
    path: str | None = None
    table: str | None = None
    options: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def parse(cls, raw: Any, base: Path, where: str) -> Dataset:
        if isinstance(raw, str):
            raw = (
                {"table": raw}
                if "/" not in raw and "." in raw and not Path(raw).suffix.lstrip(".").isalpha()
                else {"path": raw}
            )
        if not isinstance(raw, dict):
            raise JobError(f"{where}: a dataset is an object with path or table")
        d = _norm(raw)
        location = d.get("location")
        if isinstance(location, dict):
            loc = _norm(location)
            d.setdefault("path", loc.get("path") or _bucket_key(loc))
        elif isinstance(location, str):
            d.setdefault("path", location)
        table = d.get("table") or d.get("tablename")
        path = d.get("path")
        fmt = str(d.get("format") or ("iceberg" if table else _guess_format(path))).lower()
        if fmt not in INPUT_FORMATS + OUTPUT_FORMATS:
            raise JobError(
                f"{where}: unknown format {fmt!r} (known: {', '.join(sorted(set(INPUT_FORMATS + OUTPUT_FORMATS)))})"
            )
        if fmt == "iceberg" and not table:
            raise JobError(f"{where}: an iceberg dataset needs table: NS.TABLE")
        if fmt != "iceberg" and not path:
            raise JobError(f"{where}: needs path")
        if path and "://" not in path and not Path(path).is_absolute():
            path = str((base / path).resolve())
        options = {str(k): v for k, v in (d.get("options") or d.get("formatoptions") or {}).items()}
        return cls(format=fmt, path=path, table=table, options=options)

    def describe(self) -> str:
        return str(self.table) if self.format == "iceberg" else f"{self.format}:{self.path}"


def _bucket_key(loc: dict[str, Any]) -> str | None:
    """`{"Bucket", "Key"}` as the cloud exports an S3 location: s3://BUCKET/KEY."""
    bucket, key = loc.get("bucket"), str(loc.get("key") or "")
    if not bucket:
        return key or None
    return f"s3://{bucket}/{key}"


def _guess_format(path: str | None) -> str:
    suffix = Path(str(path or "")).suffix.lower().lstrip(".")
    return {
        "csv": "csv",
        "tsv": "csv",
        "json": "json",
        "ndjson": "json",
        "jsonl": "json",
        "parquet": "parquet",
        "orc": "orc",
    }.get(suffix, "csv")


@dataclass
class Output:
    format: str
    path: str | None = None
    table: str | None = None
    compression: str | None = None
    partition_columns: list[str] = field(default_factory=list)
    mode: str = "replace"
    options: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def parse(cls, raw: Any, base: Path, where: str) -> Output:
        ds = Dataset.parse(raw, base, where)
        if ds.format not in OUTPUT_FORMATS:
            raise JobError(f"{where}: cannot write format {ds.format!r} (known: {', '.join(OUTPUT_FORMATS)})")
        d = _norm(raw)
        mode = str(
            d.get("mode") or ("replace" if d.get("overwrite", True) in (True, "true", "True") else "append")
        ).lower()
        mode = {"overwrite": "replace"}.get(mode, mode)
        if mode not in ("replace", "append"):
            raise JobError(f"{where}: mode must be replace or append, got {mode!r}")
        comp = d.get("compression") or d.get("compressionformat")
        if comp is not None:
            comp = str(comp).lower()
            if comp not in COMPRESSION:
                raise JobError(f"{where}: unknown compression {comp!r} (known: {', '.join(COMPRESSION)})")
        parts = d.get("partitioncolumns") or d.get("partitionby") or []
        if isinstance(parts, str):
            parts = [p.strip() for p in parts.split(",") if p.strip()]
        return cls(
            format=ds.format,
            path=ds.path,
            table=ds.table,
            compression=comp,
            partition_columns=list(parts),
            mode=mode,
            options=ds.options,
        )

    def describe(self) -> str:
        return str(self.table) if self.format == "iceberg" else f"{self.format}:{self.path}"


@dataclass
class Job:
    name: str
    kind: str  # "recipe", "python" or "glue" (a Glue ETL script)
    input: Dataset | None = None
    steps: list[dict[str, Any]] = field(default_factory=list)
    outputs: list[Output] = field(default_factory=list)
    datasets: dict[str, Dataset] = field(default_factory=dict)
    entry_point: str | None = None
    arguments: dict[str, Any] = field(default_factory=dict)
    source: str | None = None
    script: str | None = None  # a glue job's script (a path or an s3:// URI)

    def to_json(self) -> str:
        return json.dumps(asdict(self), default=str)

    @property
    def callable_ref(self) -> str:
        """A python job's `module:function` (its file is refused without one)."""
        if self.entry_point is None:
            raise JobError(f"job {self.name!r} is a {self.kind} job: it has no entry_point")
        return self.entry_point

    @classmethod
    def from_json(cls, text: str) -> Job:
        d = json.loads(text)
        return cls(
            name=d["name"],
            kind=d["kind"],
            input=Dataset(**d["input"]) if d.get("input") else None,
            steps=d.get("steps") or [],
            outputs=[Output(**o) for o in d.get("outputs") or []],
            datasets={k: Dataset(**v) for k, v in (d.get("datasets") or {}).items()},
            entry_point=d.get("entry_point"),
            arguments=d.get("arguments") or {},
            source=d.get("source"),
            script=d.get("script"),
        )


def read_recipe(raw: Any, base: Path, where: str) -> list[dict[str, Any]]:
    """Recipe steps from a list, a file path, or an object holding `Steps`."""
    if isinstance(raw, str):
        path = Path(raw) if Path(raw).is_absolute() else base / raw
        try:
            raw = _load_file(path)
        except OSError as exc:
            raise JobError(f"{where}: cannot read recipe {path}: {exc.strerror}") from exc
    if isinstance(raw, dict):
        raw = raw.get("Steps") or raw.get("steps")
    if not isinstance(raw, list):
        raise JobError(
            f"{where}: a recipe is a list of steps {{'Action': {{'Operation': ..., 'Parameters': {{...}}}}}}"
        )
    from shoal.recipes.apply import condition_mode, step_parts
    from shoal.recipes.registry import OPERATIONS

    for i, step in enumerate(raw, 1):
        parts = step_parts(step)
        if parts is None:
            raise JobError(f"{where}: step {i}: expected {{'Action': {{'Operation': ..., 'Parameters': {{...}}}}}}")
        op = str(parts[0]).upper()
        if op not in OPERATIONS:
            raise JobError(
                f"{where}: step {i}: unknown operation {parts[0]!r}",
                hint=f"supported operations: {', '.join(sorted(OPERATIONS))}",
            )
        # Refused here so a job fails when it is loaded, not halfway through a run.
        if parts[2] and condition_mode(op) is None:
            raise JobError(
                f"{where}: step {i} ({op}): ConditionExpressions are not supported for this operation",
                hint="remove the conditions, or filter rows with KEEP_VALUES / REMOVE_VALUES in a step of their own",
            )
    return raw


def _load_file(path: Path) -> Any:
    text = path.read_text(encoding="utf-8")
    try:
        return json.loads(text) if text.lstrip()[:1] in "[{" else yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError) as exc:
        raise JobError(f"{path}: not valid JSON or YAML: {exc}") from exc


def _exported(kind: str, name: str, base: Path, given: str | Path | None, where: str) -> tuple[Any, Path]:
    """A file exported from the cloud's data-prep service: `given`, else NAME.json beside the job."""
    path = Path(given) if given else base / f"{name}.json"
    try:
        return _load_file(path), path
    except OSError as exc:
        raise JobError(
            f"{where}: cannot read {kind} {name!r} from {path}: {exc.strerror}",
            hint=f"export the {kind} as {name}.json beside the job file, or name its file with --{kind}",
        ) from exc


def _databrew_dataset(name: str, base: Path, given: str | Path | None, where: str) -> dict[str, Any]:
    """A dataset as `describe-dataset` exports it, as a job input."""
    raw, path = _exported("dataset", name, base, given, where)
    d = _norm(raw) if isinstance(raw, dict) else {}
    source = _norm(d.get("input") or {})
    s3, table = _norm(source.get("s3inputdefinition") or {}), _norm(source.get("datacataloginputdefinition") or {})
    fmt = str(d.get("format") or "").lower()
    if table.get("tablename"):
        return {"table": f"{table.get('databasename') or 'default'}.{table['tablename']}", "format": "iceberg"}
    if not s3.get("bucket"):
        raise JobError(f"{where}: dataset {path} has no Input.S3InputDefinition or Input.DataCatalogInputDefinition")
    options: dict[str, Any] = {}
    csv = _norm((d.get("formatoptions") or {}).get("Csv") or {})
    if "delimiter" in csv:
        options["sep"] = csv["delimiter"]
    if "headerrow" in csv:
        options["header"] = bool(csv["headerrow"])
    if fmt == "json" and _norm((d.get("formatoptions") or {}).get("Json") or {}).get("multiline"):
        options["multiLine"] = True
    out: dict[str, Any] = {"path": _bucket_key(s3), "options": options}
    if fmt:
        out["format"] = {"excel": "csv"}.get(fmt, fmt)
    return out


def _databrew_recipe(ref: dict[str, Any], base: Path, given: str | Path | None, where: str) -> Any:
    """The steps of the recipe a job names (`RecipeReference`), from its exported JSON."""
    name = str(ref.get("name") or "")
    if not name and not given:
        raise JobError(f"{where}: RecipeReference has no Name")
    raw, _ = _exported("recipe", name, base, given, where)
    return raw


def parse_job(
    raw: dict[str, Any],
    *,
    base: Path,
    source: str | None = None,
    default_name: str | None = None,
    dataset_file: str | Path | None = None,
    recipe_file: str | Path | None = None,
) -> Job:
    if not isinstance(raw, dict):
        raise JobError(f"{source or 'job'}: a job is an object")
    if set(raw) == {"Job"} and isinstance(raw["Job"], dict):
        raw = raw["Job"]  # `aws glue get-job` wraps the definition
    d = _norm(raw)
    if isinstance(d.get("command"), dict):
        return _glue_job(d, base, source, default_name)
    name = d.get("name") or default_name
    if not name:
        raise JobError(f"{source or 'job'}: a job needs a name")
    where = f"job {name!r}"
    kind = str(d.get("type") or ("python" if d.get("entrypoint") else "recipe")).lower()
    if kind == "python":
        if not d.get("entrypoint"):
            raise JobError(f"{where}: a python job needs entry_point: 'module:function'")
        return Job(
            name=name, kind="python", entry_point=d["entrypoint"], arguments=d.get("arguments") or {}, source=source
        )
    if kind != "recipe":
        raise JobError(f"{where}: type must be recipe or python, got {kind!r}")
    if "input" not in d and d.get("datasetname"):
        d["input"] = _databrew_dataset(str(d["datasetname"]), base, dataset_file, where)
    if not (d.get("recipe") or d.get("steps")) and isinstance(d.get("recipereference"), dict):
        d["recipe"] = _databrew_recipe(_norm(d["recipereference"]), base, recipe_file, where)
    if "input" not in d:
        raise JobError(f"{where}: needs input (a dataset)")
    outputs = d.get("outputs") or []
    if not isinstance(outputs, list) or not outputs:
        raise JobError(f"{where}: needs at least one output")
    return Job(
        name=name,
        kind="recipe",
        input=Dataset.parse(d["input"], base, f"{where} input"),
        steps=read_recipe(d.get("recipe") or d.get("steps") or [], base, where),
        outputs=[Output.parse(o, base, f"{where} output {i + 1}") for i, o in enumerate(outputs)],
        datasets={k: Dataset.parse(v, base, f"{where} dataset {k!r}") for k, v in (d.get("datasets") or {}).items()},
        source=source,
    )


GLUE_COMMANDS = ("glueetl", "pythonshell")


def _glue_job(d: dict[str, Any], base: Path, source: str | None, default_name: str | None) -> Job:
    """A Glue job as `aws glue get-job` prints it (or `create-job` takes it): the script it runs
    (`Command.ScriptLocation`) and its `DefaultArguments`, which a run's `Arguments` override."""
    name = d.get("name") or default_name
    where = f"Glue job {name!r}" if name else (source or "Glue job")
    if not name:
        raise JobError(f"{where}: a job needs a Name")
    command = _norm(d["command"])
    kind = str(command.get("name") or "glueetl").lower()
    if kind not in GLUE_COMMANDS:
        raise JobError(
            f"{where}: Command.Name {kind!r} is not supported",
            hint="Shoal runs glueetl and pythonshell scripts; streaming jobs are not supported",
        )
    script = str(command.get("scriptlocation") or "")
    if not script:
        raise JobError(f"{where}: Command.ScriptLocation is missing", hint="name the job's .py script")
    if "://" not in script and not Path(script).is_absolute():
        script = str((base / script).resolve())
    arguments = d.get("defaultarguments") or {}
    if not isinstance(arguments, dict) or not all(isinstance(v, str) for v in arguments.values()):
        raise JobError(f"{where}: DefaultArguments must map --name to a string value")
    return Job(name=str(name), kind="glue", script=script, arguments=dict(arguments), source=source)


def load_job_file(path: str | Path, *, dataset: str | Path | None = None, recipe: str | Path | None = None) -> Job:
    """A job file. A job exported from the cloud (`describe-job`) names its dataset and recipe:
    they are read from `dataset`/`recipe`, or from DATASETNAME.json/RECIPENAME.json beside it."""
    p = Path(path).resolve()
    try:
        raw = _load_file(p)
    except OSError as exc:
        raise JobError(f"cannot read job file {p}: {exc.strerror}") from exc
    return parse_job(
        raw,
        base=p.parent,
        source=str(p),
        default_name=p.name.split(".")[0],
        dataset_file=dataset,
        recipe_file=recipe,
    )


class JobRegistry:
    def __init__(self, settings: Settings) -> None:
        self.engine = database.engine(settings, state_tables)

    def register(self, job: Job) -> None:
        values = {
            "kind": job.kind,
            "definition": job.to_json(),
            "source": job.source,
            "updated_at": database.utcnow(),
        }
        with self.engine.begin() as conn:
            database.upsert(conn, jobs_table, {"name": job.name}, values)

    def get(self, name: str) -> Job | None:
        with self.engine.connect() as conn:
            row = conn.execute(select(jobs_table.c.definition).where(jobs_table.c.name == name)).first()
        return Job.from_json(row.definition) if row else None

    def list(self) -> list[dict[str, Any]]:
        with self.engine.connect() as conn:
            rows = conn.execute(select(jobs_table).order_by(jobs_table.c.name)).all()
        return [
            {"name": r.name, "kind": r.kind, "source": r.source, "updated_at": r.updated_at.isoformat() + "Z"}
            for r in rows
        ]

    def delete(self, name: str) -> None:
        """Forget a registered job (its recipe file and the tables it wrote stay)."""
        with self.engine.begin() as conn:
            gone = conn.execute(delete(jobs_table).where(jobs_table.c.name == name)).rowcount
        if not gone:
            raise JobError(f"no job named {name!r}", hint="list jobs with `shoal job list`")

    def resolve(self, ref: str) -> Job:
        """A job file (registered on the way) or a registered name."""
        if Path(ref).is_file():
            job = load_job_file(ref)
            self.register(job)
            return job
        found = self.get(ref)
        if found is None:
            raise JobError(f"no job named {ref!r} and no such file", hint="register it with `shoal job register FILE`")
        return found


@dataclass
class OutputResult:
    target: str
    rows: int
    files: int


@dataclass
class JobResult:
    job: str
    run_id: str
    rows_in: int
    rows_out: int
    outputs: list[OutputResult]
    seconds: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "job": self.job,
            "run_id": self.run_id,
            "state": "SUCCEEDED",
            "rows_in": self.rows_in,
            "rows_out": self.rows_out,
            "outputs": [asdict(o) for o in self.outputs],
            "seconds": round(self.seconds, 3),
        }


def read_dataset(spark: SparkSession, ds: Dataset) -> DataFrame:
    from shoal.lake.tables import TableName

    if ds.format == "iceberg":
        assert ds.table is not None  # Dataset.parse requires a table for iceberg
        return spark.table(TableName.parse(ds.table).sql)
    options = {"header": "true", "inferSchema": "true"} if ds.format == "csv" else {}
    options.update({k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in ds.options.items()})
    if ds.format == "json" and "multiLine" not in options and Path(str(ds.path)).suffix.lower() == ".json":
        options.setdefault("multiLine", "false")
    path = ds.path
    if "://" not in str(path) and not any(ch in str(path) for ch in "*?[") and not Path(str(path)).exists():
        raise JobError(f"input {path} does not exist")
    reader = spark.read.options(**options)
    # A bad row never kills a read silently: FAILFAST names the record in its error.
    if ds.format in ("csv", "json"):
        reader = reader.option("mode", options.get("mode", "FAILFAST"))
    df = reader.format(ds.format).load(path)
    if ds.format == "csv" and options.get("inferSchema") == "true" and not _DATE_OPTIONS & set(ds.options):
        df = _dates_as_strings(reader, df, path)
    return df


# Options that ask for Spark's own date and timestamp inference on a CSV input.
_DATE_OPTIONS = {"preferDate", "dateFormat", "timestampFormat", "timestampNTZFormat"}


def _dates_as_strings(reader: DataFrameReader, df: DataFrame, path: Any) -> DataFrame:
    """Read a CSV again with its inferred date and timestamp columns as strings.

    The cloud's data-prep service infers numbers and booleans from a CSV but keeps dates and
    timestamps as the text they are until a recipe step changes the type; its Parquet outputs
    then hold strings, which is what table definitions written for them declare (`day string`).
    Spark's inference would make such columns DATE or TIMESTAMP instead. An input that sets
    one of _DATE_OPTIONS keeps Spark's inference.
    """
    from pyspark.sql.types import DateType, StringType, StructField, StructType, TimestampNTZType, TimestampType

    temporal = (DateType, TimestampType, TimestampNTZType)
    if not any(isinstance(f.dataType, temporal) for f in df.schema.fields):
        return df
    schema = StructType(
        [
            StructField(f.name, StringType(), f.nullable, f.metadata) if isinstance(f.dataType, temporal) else f
            for f in df.schema.fields
        ]
    )
    return reader.schema(schema).format("csv").load(path)


def run_job(
    spark: SparkSession, settings: Settings, job: Job, *, say: Callable[[str], None] = lambda _m: None
) -> JobResult:
    if job.kind != "recipe":
        hint = f"run it with `shoal glue run {job.name}`" if job.kind == "glue" else None
        raise JobError(f"job {job.name!r} is a {job.kind} job, not a recipe job", hint=hint)
    started = time.monotonic()
    run_id = f"{job.name}-{uuid.uuid4().hex[:12]}"
    assert job.input is not None  # a recipe job's file requires an input
    stage = f"reading {job.input.describe()}"
    try:
        with spark_tasks(spark, say, "running"):  # a bar over the job's Spark tasks
            return _run(spark, settings, job, run_id, started, say, stage)
    except ShoalError:
        raise
    except Exception as exc:  # Spark/JVM errors: name the job and what it was doing
        raise JobError(
            f"job {job.name!r} failed: {first_line(exc)}",
            hint="fix the input or the recipe and run it again; outputs were left as they were",
        ) from exc


def _run(
    spark: SparkSession,
    settings: Settings,
    job: Job,
    run_id: str,
    started: float,
    say: Callable[[str], None],
    stage: str,
) -> JobResult:
    from shoal.recipes.apply import apply_recipe

    say(f"{job.name}: {stage}")
    assert job.input is not None  # run_job checked: a recipe job has an input
    try:
        source = read_dataset(spark, job.input)
    except ShoalError:
        raise
    except Exception as exc:
        raise JobError(f"job {job.name!r} failed while {stage}: {first_line(exc)}") from exc

    def load(ref: Any) -> DataFrame:
        if isinstance(ref, str) and ref in job.datasets:
            return read_dataset(spark, job.datasets[ref])
        base = Path(job.source).parent if job.source else Path.cwd()
        return read_dataset(spark, Dataset.parse(ref, base, f"job {job.name!r} secondary dataset"))

    df = apply_recipe(source, job.steps, load)
    # One pass computes the output once for every target and the counts.
    df = df.persist()
    try:
        try:
            rows_in = source.count()
            rows_out = df.count()
        except Exception as exc:
            raise JobError(f"job {job.name!r} failed while {stage}: {first_line(exc)}") from exc
        results = []
        for out in job.outputs:
            say(f"{job.name}: writing {out.describe()}")
            results.append(write_output(spark, settings, df, out))
    finally:
        df.unpersist()
    return JobResult(job.name, run_id, rows_in, rows_out, results, time.monotonic() - started)


def write_output(spark: SparkSession, settings: Settings, df: DataFrame, out: Output) -> OutputResult:
    missing = [c for c in out.partition_columns if c not in df.columns]
    if missing:
        raise JobError(
            f"output {out.describe()}: partition column(s) {', '.join(missing)} not in the data ({', '.join(df.columns)})"
        )
    if out.format == "iceberg":
        from shoal.lake.tables import TableName

        assert out.table is not None  # Output.parse requires a table for iceberg
        name = TableName.parse(out.table)
        spark.sql(f"CREATE NAMESPACE IF NOT EXISTS `{name.namespace}`")
        writer = df.writeTo(name.sql)
        if out.partition_columns:
            from pyspark.sql import functions as F

            writer = writer.partitionedBy(*[F.col(c) for c in out.partition_columns])
        if out.mode == "append" and spark.catalog.tableExists(str(name)):
            writer.append()
        else:
            writer.createOrReplace()  # one atomic Iceberg commit
        return OutputResult(out.table, df.count(), 0)
    files_writer = df.write.format(out.format)
    if out.compression:
        files_writer = files_writer.option("compression", COMPRESSION[out.compression])
    if out.partition_columns:
        files_writer = files_writer.partitionBy(*out.partition_columns)
    for k, v in out.options.items():
        files_writer = files_writer.option(k, str(v))
    if out.format == "csv":
        files_writer = files_writer.option("header", out.options.get("header", "true"))
    target = out.path
    assert target is not None  # Output.parse requires a path for file formats
    if "://" in target:
        if out.mode == "append":
            files_writer.mode("append").save(target)
            return OutputResult(target, df.count(), 0)
        # Replace on a store: write the whole output beside the target first, so a failed
        # write leaves the previous output as it was (Spark's overwrite deletes it first).
        staged = storage.staging_sibling(target)
        try:
            files_writer.mode("errorifexists").save(staged)
            files = storage.replace_folder(staged, target)
        except Exception:
            storage.remove_folder(staged)
            raise
        return OutputResult(target, df.count(), files)
    final = Path(target)
    if out.mode == "append":
        files_writer.mode("append").save(str(final))
        return OutputResult(target, df.count(), _count_files(final))
    # Replace: write beside the target, then swap folders, so a failed write leaves the
    # previous output whole and readers never see a half-written folder.
    staging = final.with_name(f".{final.name}.staging-{uuid.uuid4().hex[:8]}")
    files_writer.mode("errorifexists").save(str(staging))
    old = final.with_name(f".{final.name}.old-{uuid.uuid4().hex[:8]}")
    if final.exists():
        final.rename(old)
    staging.rename(final)
    shutil.rmtree(old, ignore_errors=True)
    return OutputResult(
        target,
        spark.read.format(out.format).load(str(final)).count() if out.format != "csv" else df.count(),
        _count_files(final),
    )


def _count_files(path: Path) -> int:
    return sum(1 for p in path.rglob("*") if p.is_file() and not p.name.startswith((".", "_")))
