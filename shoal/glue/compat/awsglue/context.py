"""GlueContext: Shoal's SparkSession plus Glue's readers and writers of DynamicFrames."""

from __future__ import annotations

import logging
from typing import Any, NoReturn

from pyspark.sql import DataFrame, SparkSession, SQLContext

from shoal.glue import io, runtime

from .dynamicframe import DynamicFrame, DynamicFrameReader, DynamicFrameWriter


def _database(database: str | None, kwargs: dict[str, Any]) -> str:
    if database is not None and "name_space" in kwargs:
        raise ValueError("Parameter name_space and database are both specified, choose one.")
    db = kwargs.pop("name_space", database)
    if db is None:
        raise ValueError("Parameter name_space or database is missing.")
    return db


class DataFrameReader:
    def __init__(self, glue_context: GlueContext) -> None:
        self._glue_context = glue_context

    def from_catalog(
        self,
        database: str | None = None,
        table_name: str | None = None,
        redshift_tmp_dir: str = "",
        transformation_ctx: str = "",
        **kw: Any,
    ) -> DataFrame:
        return self._glue_context.create_data_frame_from_catalog(
            database, table_name, redshift_tmp_dir, transformation_ctx, **kw
        )

    def from_options(
        self,
        connection_type: str,
        connection_options: dict[str, Any] | None = None,
        format: str | None = None,
        format_options: dict[str, Any] | None = None,
        **kw: Any,
    ) -> DataFrame:
        return self._glue_context.create_data_frame_from_options(
            connection_type, connection_options or {}, format, format_options or {}, **kw
        )


class GlueLogger:
    """Glue's logger methods (info, warn, error) on Python logging."""

    def __init__(self) -> None:
        self._log = logging.getLogger("awsglue")

    def info(self, message: str) -> None:
        self._log.info(message)

    def warn(self, message: str) -> None:
        self._log.warning(message)

    def error(self, message: str) -> None:
        self._log.error(message)


class GlueContext(SQLContext):
    def __init__(self, sparkContext: Any = None, **options: Any) -> None:
        run = runtime.current()
        # SparkContext() in a script is Shoal's context already; a session may be passed instead.
        spark = sparkContext if isinstance(sparkContext, SparkSession) else run.spark
        # Catalogs the script configured through SparkSession.builder or spark.conf.
        run.adopt_conf(runtime.session_catalog_conf(spark))
        super().__init__(spark.sparkContext, spark)
        self._run = run
        self.spark_session = spark
        self.create_dynamic_frame = DynamicFrameReader(self)
        self.create_data_frame = DataFrameReader(self)
        self.write_dynamic_frame = DynamicFrameWriter(self)
        self._glue_logger = GlueLogger()

    # ---- reading -------------------------------------------------------------------------
    def create_dynamic_frame_from_catalog(
        self,
        database: str | None = None,
        table_name: str | None = None,
        redshift_tmp_dir: str = "",
        transformation_ctx: str = "",
        push_down_predicate: str = "",
        additional_options: dict[str, Any] | None = None,
        catalog_id: str | None = None,
        **kwargs: Any,
    ) -> DynamicFrame:
        df = self.create_data_frame_from_catalog(
            database,
            table_name,
            redshift_tmp_dir,
            transformation_ctx,
            push_down_predicate,
            additional_options,
            **kwargs,
        )
        return DynamicFrame(df, self, table_name or "")

    def create_data_frame_from_catalog(
        self,
        database: str | None = None,
        table_name: str | None = None,
        redshift_tmp_dir: str = "",
        transformation_ctx: str = "",
        push_down_predicate: str = "",
        additional_options: dict[str, Any] | None = None,
        catalog_id: str | None = None,
        **kwargs: Any,
    ) -> DataFrame:
        db = _database(database, kwargs)
        if table_name is None:
            raise ValueError("Parameter table_name is missing.")
        return io.read_catalog(self._run, db, table_name, transformation_ctx, push_down_predicate, additional_options)

    def create_dynamic_frame_from_options(
        self,
        connection_type: str,
        connection_options: dict[str, Any] | None = None,
        format: str | None = None,
        format_options: dict[str, Any] | None = None,
        transformation_ctx: str = "",
        push_down_predicate: str = "",
        **kwargs: Any,
    ) -> DynamicFrame:
        df = self.create_data_frame_from_options(
            connection_type, connection_options, format, format_options, transformation_ctx, push_down_predicate
        )
        return DynamicFrame(df, self, transformation_ctx)

    def create_data_frame_from_options(
        self,
        connection_type: str,
        connection_options: dict[str, Any] | None = None,
        format: str | None = None,
        format_options: dict[str, Any] | None = None,
        transformation_ctx: str = "",
        push_down_predicate: str = "",
        **kwargs: Any,
    ) -> DataFrame:
        df = io.read_options(
            self._run, connection_type, connection_options or {}, format, format_options or {}, transformation_ctx
        )
        return df.filter(push_down_predicate) if push_down_predicate else df

    def create_dynamic_frame_from_rdd(
        self,
        data: Any,
        name: str,
        schema: Any = None,
        sample_ratio: float | None = None,
        transformation_ctx: str = "",
    ) -> DynamicFrame:
        return DynamicFrame(self.spark_session.createDataFrame(data, schema, sample_ratio), self, name)

    # ---- writing -------------------------------------------------------------------------
    def write_dynamic_frame_from_options(
        self,
        frame: DynamicFrame | DataFrame,
        connection_type: str,
        connection_options: dict[str, Any] | None = None,
        format: str | None = None,
        format_options: dict[str, Any] | None = None,
        transformation_ctx: str = "",
        **kwargs: Any,
    ) -> DynamicFrame | DataFrame:
        io.write_options(
            self._run,
            _frame_df(frame),
            connection_type,
            connection_options or {},
            format,
            format_options or {},
            transformation_ctx,
        )
        return frame

    def write_dynamic_frame_from_catalog(
        self,
        frame: DynamicFrame | DataFrame,
        database: str | None = None,
        table_name: str | None = None,
        redshift_tmp_dir: str = "",
        transformation_ctx: str = "",
        additional_options: dict[str, Any] | None = None,
        catalog_id: str | None = None,
        **kwargs: Any,
    ) -> DynamicFrame | DataFrame:
        db = _database(database, kwargs)
        if table_name is None:
            raise ValueError("Parameter table_name is missing.")
        io.write_catalog(self._run, _frame_df(frame), db, table_name, transformation_ctx)
        return frame

    def write_data_frame_from_catalog(
        self,
        frame: DynamicFrame | DataFrame,
        database: str | None = None,
        table_name: str | None = None,
        *args: Any,
        **kwargs: Any,
    ) -> DynamicFrame | DataFrame:
        return self.write_dynamic_frame_from_catalog(frame, database, table_name, *args, **kwargs)

    # ---- the rest of Glue's API ------------------------------------------------------------
    def get_logger(self) -> GlueLogger:
        return self._glue_logger

    def getSource(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise runtime.GlueError(
            "GlueContext.getSource is not supported by Shoal's awsglue",
            hint="use create_dynamic_frame.from_catalog or .from_options",
        )

    def getSink(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise runtime.GlueError(
            "GlueContext.getSink is not supported by Shoal's awsglue",
            hint="use write_dynamic_frame.from_catalog or .from_options",
        )

    def purge_s3_path(self, *args: Any, **kwargs: Any) -> None:
        raise runtime.GlueError("GlueContext.purge_s3_path is not supported by Shoal's awsglue")

    def purge_table(self, *args: Any, **kwargs: Any) -> None:
        raise runtime.GlueError("GlueContext.purge_table is not supported by Shoal's awsglue")


def _frame_df(frame: DynamicFrame | DataFrame) -> DataFrame:
    if isinstance(frame, DynamicFrame):
        return frame.toDF()
    if hasattr(frame, "write") and hasattr(frame, "schema"):
        return frame  # a DataFrame (write_data_frame)
    raise TypeError(f"expected a DynamicFrame, got {type(frame).__name__}")
