"""`shoal recipe` and `shoal job`: data-prep recipe jobs, dataset profiles, and jobs workflows run by name."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer

from shoal.cli import output
from shoal.cli.context import JsonOpt, out, settings
from shoal.exceptions import ShoalError

recipe_app = typer.Typer(help="Data-prep recipe jobs and dataset profiles.", no_args_is_help=True)
job_app = typer.Typer(help="Register jobs (recipe or Python) that workflows run by name.", no_args_is_help=True)


# ---- recipes and jobs ------------------------------------------------------------------------------


@recipe_app.command("run")
def recipe_run(
    job: Annotated[str, typer.Argument(metavar="JOB", help="A job file (YAML or JSON) or a registered job name.")],
    _json: JsonOpt = False,
) -> None:
    """Run a recipe job: read the input, apply the recipe's steps, write every output."""
    from shoal.recipes import JobRegistry, run_job
    from shoal.spark import get_spark

    s = settings()
    definition = JobRegistry(s).resolve(job)
    with out().progress(f"recipe {definition.name}") as say:
        result = run_job(get_spark(s), s, definition, say=say).to_dict()

    def as_text() -> None:
        outputs = result.pop("outputs")
        output.print_kv(f"Recipe job {definition.name} succeeded", result)
        output.print_rows(
            "Outputs", ["target", "rows", "files"], [[o["target"], o["rows"], o["files"]] for o in outputs]
        )

    out().show(result, as_text)


class DataFormat(StrEnum):
    auto = "auto"
    csv = "csv"
    json = "json"
    parquet = "parquet"
    orc = "orc"
    iceberg = "iceberg"


@recipe_app.command("profile")
def recipe_profile(
    dataset: Annotated[
        str, typer.Argument(help="A path (file or folder), a table NS.TABLE, or a job (profiles its input).")
    ],
    fmt: Annotated[DataFormat, typer.Option("--format", "-f", help="Format of a path.")] = DataFormat.auto,
    top: Annotated[int, typer.Option("--top", help="Most frequent values per column.")] = 5,
    _json: JsonOpt = False,
) -> None:
    """Per-column statistics: type, missing values, distinct values, min/max/mean, lengths, top values."""
    from shoal.recipes import Dataset, JobRegistry, profile, read_dataset
    from shoal.spark import get_spark

    s = settings()
    if Path(dataset).exists() and (Path(dataset).is_dir() or Path(dataset).suffix.lower() not in (".yaml", ".yml")):
        raw: dict[str, Any] = {"path": dataset}
        if fmt != DataFormat.auto:
            raw["format"] = fmt.value
        ds = Dataset.parse(raw, Path.cwd(), "dataset")
    elif Path(dataset).is_file():
        job_input = JobRegistry(s).resolve(dataset).input
        if job_input is None:
            raise ShoalError(f"{dataset} is a python job: it has no input dataset to profile")
        ds = job_input
    elif fmt in (DataFormat.auto, DataFormat.iceberg) and "." in dataset and "/" not in dataset:
        ds = Dataset(format="iceberg", table=dataset)
    else:
        job = JobRegistry(s).get(dataset)
        if job is None or job.input is None:
            raise ShoalError(f"{dataset!r} is not a path, a table or a recipe job")
        ds = job.input
    with out().progress("profile") as say:
        say(ds.describe())
        result = profile(read_dataset(get_spark(s), ds), top=top)

    def as_text() -> None:
        rows = []
        for c in result["columns"]:
            top_values = ", ".join(f"{t['value']} ({t['count']})" for t in c.get("top_values", [])[:3])
            rng = (
                f"{c.get('min')} .. {c.get('max')}"
                if "min" in c
                else f"len {c.get('min_length')} .. {c.get('max_length')}"
            )
            rows.append(
                [
                    c["column"],
                    c["type"],
                    f"{c['missing']} ({c['missing_pct']}%)",
                    c["distinct"],
                    rng,
                    c.get("mean", ""),
                    top_values,
                ]
            )
        output.print_rows(
            f"Profile of {ds.describe()}: {result['rows']} rows",
            ["column", "type", "missing", "distinct~", "range", "mean", "top values"],
            rows,
        )

    out().show({"dataset": ds.describe(), **result}, as_text)


@recipe_app.command("operations")
def recipe_operations(_json: JsonOpt = False) -> None:
    """The recipe operations Shoal runs."""
    from shoal.recipes import OPERATIONS

    names = sorted(OPERATIONS)
    out().line("\n".join(names), names)


@job_app.command("register")
def job_register(
    file: Annotated[Path, typer.Argument(help="Job file (YAML or JSON, or a DataBrew describe-job export).")],
    dataset: Annotated[
        Path | None,
        typer.Option("--dataset", help="DataBrew describe-dataset export (default: DATASETNAME.json beside FILE)."),
    ] = None,
    recipe: Annotated[
        Path | None,
        typer.Option("--recipe", help="DataBrew recipe JSON (default: RECIPENAME.json beside FILE)."),
    ] = None,
    _json: JsonOpt = False,
) -> None:
    """Validate a job file and store it under its name (workflows refer to it by that name)."""
    from shoal.recipes import JobRegistry, load_job_file

    job = load_job_file(file, dataset=dataset, recipe=recipe)
    JobRegistry(settings()).register(job)
    data: dict[str, Any] = {
        "name": job.name,
        "kind": job.kind,
        "steps": len(job.steps),
        "outputs": [o.describe() for o in job.outputs],
    }
    if job.script:
        data["script"] = job.script
    out().record(f"Registered job {job.name}", data)


@job_app.command("list")
def job_list(_json: JsonOpt = False) -> None:
    """Registered jobs."""
    from shoal.recipes import JobRegistry

    rows = JobRegistry(settings()).list()
    out().table(
        "Jobs",
        ["name", "kind", "source", "updated"],
        [[r["name"], r["kind"], r["source"], r["updated_at"]] for r in rows],
        rows,
    )
