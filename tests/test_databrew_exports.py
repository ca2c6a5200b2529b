"""DataBrew exports read as they are: describe-job + describe-dataset + the recipe JSON."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from shoal.recipes import load_job_file
from shoal.recipes.job import JobError

REFERENCE = Path(__file__).parent / "data" / "aws_reference"


def test_describe_job_export_finds_its_dataset_and_recipe_beside_it():
    job = load_job_file(REFERENCE / "sales-pipeline-job.json")
    assert job.name == "sales-pipeline-job" and job.kind == "recipe"
    assert job.input is not None
    assert (job.input.format, job.input.path) == ("csv", "s3://shoal-reference/raw/sales/")
    assert job.input.options == {"sep": ",", "header": True}
    recipe = json.loads((REFERENCE / "sales-pipeline-recipe.json").read_text())
    assert job.steps == recipe
    [out] = job.outputs
    assert (out.format, out.path, out.compression, out.mode) == (
        "parquet",
        "s3://shoal-reference/prepared/sales/",
        "snappy",
        "replace",
    )
    assert out.partition_columns == ["year", "month", "day"]


def test_explicit_files_and_missing_exports(tmp_path):
    job_file = tmp_path / "jobs" / "marketing-data-job.json"
    job_file.parent.mkdir()
    shutil.copy(REFERENCE / "marketing-data-job.json", job_file)
    with pytest.raises(JobError, match=r"cannot read dataset 'marketing-data' from .*marketing-data\.json") as info:
        load_job_file(job_file)
    assert "--dataset" in (info.value.hint or "")
    job = load_job_file(
        job_file, dataset=REFERENCE / "marketing-data.json", recipe=REFERENCE / "marketing-data-recipe.json"
    )
    assert job.input is not None and job.input.path == "s3://shoal-reference/raw/marketing/"
    assert [s["Action"]["Operation"] for s in job.steps] == ["YEAR", "MONTH", "DAY", "FILL_WITH_CUSTOM"]
    # A dataset read from the Data Catalog becomes a lake table input.
    catalog = tmp_path / "jobs" / "marketing-data.json"
    catalog.write_text(
        json.dumps(
            {
                "Name": "marketing-data",
                "Input": {"DataCatalogInputDefinition": {"DatabaseName": "marketing", "TableName": "daily"}},
            }
        )
    )
    job = load_job_file(job_file, recipe=REFERENCE / "marketing-data-recipe.json")
    assert job.input is not None and (job.input.format, job.input.table) == ("iceberg", "marketing.daily")
