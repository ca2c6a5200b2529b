"""Job: init/commit around a run; commit persists the job bookmarks (shoal/glue/bookmarks.py)."""

from __future__ import annotations

from typing import Any

from shoal.glue import runtime


class Job:
    @classmethod
    def continuation_options(cls) -> list[str]:
        return ["--continuation-option", "continuation-enabled", "continuation-readonly", "continuation-ignore"]

    @classmethod
    def job_bookmark_options(cls) -> list[str]:
        return ["--job-bookmark-option", "job-bookmark-enable", "job-bookmark-pause", "job-bookmark-disable"]

    @classmethod
    def job_bookmark_range_options(cls) -> list[str]:
        return ["--job-bookmark-from", "--job-bookmark-to"]

    @classmethod
    def id_params(cls) -> list[str]:
        return ["--JOB_NAME", "--JOB_ID", "--JOB_RUN_ID", "--SECURITY_CONFIGURATION"]

    @classmethod
    def encryption_type_options(cls) -> list[str]:
        return ["--encryption-type", "sse-s3"]

    def __init__(self, glue_context_or_spark_session: Any) -> None:
        from pyspark.sql import SparkSession

        from .context import GlueContext

        if isinstance(glue_context_or_spark_session, GlueContext):
            self._glue_context = glue_context_or_spark_session
            self._spark_session = glue_context_or_spark_session.spark_session
        elif isinstance(glue_context_or_spark_session, SparkSession):
            self._glue_context = None
            self._spark_session = glue_context_or_spark_session
        else:
            raise TypeError(f"cannot init Job given {type(glue_context_or_spark_session).__name__}")
        self._run = runtime.current()

    def init(self, job_name: str, args: dict[str, Any] | None = None) -> None:
        self._run.init(job_name)

    def isInitialized(self) -> bool:
        return self._run.initialized

    def commit(self) -> None:
        self._run.commit()
