"""Data-prep recipes: steps in the common cloud recipe format applied on Spark, recipe
jobs (input dataset + recipe + outputs), Python jobs, and column profiles.

Public API: `load_job_file`, `JobRegistry`, `run_job`, `read_dataset`, `apply_recipe`,
`profile`, `OPERATIONS`.
"""

from shoal.recipes.apply import apply_recipe
from shoal.recipes.job import Dataset, Job, JobError, JobRegistry, JobResult, load_job_file, read_dataset, run_job
from shoal.recipes.operations import RecipeError
from shoal.recipes.profile import profile
from shoal.recipes.registry import OPERATIONS

__all__ = [
    "OPERATIONS",
    "Dataset",
    "Job",
    "JobError",
    "JobRegistry",
    "JobResult",
    "RecipeError",
    "apply_recipe",
    "load_job_file",
    "profile",
    "read_dataset",
    "run_job",
]
