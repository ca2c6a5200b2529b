"""Run AWS Glue PySpark scripts unchanged: `shoal glue run SCRIPT.py --JOB_NAME NAME`.

The implementation is in `shoal.glue.launch`; this package re-exports its public names."""

from shoal.glue.launch import (
    COMPAT_DIR,
    GlueError,
    GlueRun,
    run_defined_job,
    run_script,
    split_conf,
)

__all__ = [
    "COMPAT_DIR",
    "GlueError",
    "GlueRun",
    "run_defined_job",
    "run_script",
    "split_conf",
]
