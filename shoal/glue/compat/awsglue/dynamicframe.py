"""DynamicFrame over a Spark DataFrame, with the readers and writers GlueContext exposes.

Spark columns have one type each, so a frame never holds Glue's "choice" types: resolveChoice
casts (cast:/project:) and has nothing to split (make_cols, make_struct).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from shoal.glue import io, runtime
from shoal.glue.records import record_filter

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from pyspark.sql import Column, DataFrame
    from pyspark.sql.types import DataType, StructType

# Glue type names Spark's cast does not know by that name.
_TYPES = {"long": "bigint", "integer": "int", "short": "smallint", "byte": "tinyint"}


def _spark_type(glue_type: str) -> str:
    t = glue_type.strip()
    return _TYPES.get(t.lower(), t)


def _path_parts(path: str) -> list[str]:
    """'a.b' -> ['a', 'b']; '`a.b`.c' -> ['a.b', 'c'] (backticks keep dots in a name)."""
    parts, buf, quoted = [], "", False
    for ch in path:
        if ch == "`":
            quoted = not quoted
        elif ch == "." and not quoted:
            parts.append(buf)
            buf = ""
        else:
            buf += ch
    parts.append(buf)
    return parts


def _col(path: str) -> Column:
    from pyspark.sql import functions as F

    return F.col(".".join("`" + p.replace("`", "``") + "`" for p in _path_parts(path)))


def _has_path(df: DataFrame, path: str, case_sensitive: bool) -> bool:
    from pyspark.sql.types import StructType

    fields: DataType = df.schema
    for part in _path_parts(path):
        if not isinstance(fields, StructType):
            return False
        match = [f for f in fields.fields if (f.name == part if case_sensitive else f.name.lower() == part.lower())]
        if not match:
            return False
        fields = match[0].dataType
    return True


class DynamicFrame:
    def __init__(self, jdf: Any, glue_ctx: Any = None, name: str = "") -> None:
        # Glue passes a JVM frame; here it is the Spark DataFrame itself.
        self._df = jdf
        self.glue_ctx = glue_ctx
        self.name = name

    @classmethod
    def fromDF(cls, dataframe: DataFrame, glue_ctx: Any, name: str = "") -> DynamicFrame:
        return cls(dataframe, glue_ctx, name)

    def _wrap(self, df: DataFrame) -> DynamicFrame:
        return DynamicFrame(df, self.glue_ctx, self.name)

    def toDF(self, options: Any = None) -> DataFrame:
        return self._df

    def count(self) -> int:
        return self._df.count()

    def schema(self) -> StructType:
        return self._df.schema

    def printSchema(self) -> None:
        self._df.printSchema()

    def show(self, num_rows: int = 20) -> None:
        self._df.show(num_rows, truncate=False)

    def getNumPartitions(self) -> int:
        return self._df.rdd.getNumPartitions()

    def repartition(self, num_partitions: int, transformation_ctx: str = "", **_kw: Any) -> DynamicFrame:
        return self._wrap(self._df.repartition(num_partitions))

    def coalesce(
        self, num_partitions: int, shuffle: bool = False, transformation_ctx: str = "", **_kw: Any
    ) -> DynamicFrame:
        return self._wrap(self._df.coalesce(num_partitions))

    def errorsCount(self) -> int:
        return 0  # Spark raises on bad records instead of collecting them

    def stageErrorsCount(self) -> int:
        return 0

    def apply_mapping(
        self,
        mappings: Sequence[Sequence[str]],
        case_sensitive: bool = False,
        transformation_ctx: str = "",
        **_kw: Any,
    ) -> DynamicFrame:
        """Keep, rename and cast fields: [(source, source_type, target, target_type), ...]."""
        if not self._df.columns:
            return self._wrap(self._df)  # an empty source frame has no fields to map
        cols = []
        for m in mappings:
            if len(m) != 4:
                raise runtime.GlueError(f"apply_mapping entry {m!r} is not (source, source_type, target, target_type)")
            source, _source_type, target, target_type = m
            if len(_path_parts(target)) > 1:
                raise runtime.GlueError(
                    f"apply_mapping target {target!r} is a nested path",
                    hint="Shoal's awsglue maps onto top-level fields only",
                )
            if not _has_path(self._df, source, case_sensitive):
                # Glue leaves a field out when no record has it; say so instead of staying silent.
                runtime.current().warn(f"apply_mapping: field {source!r} not found; left out, as Glue does")
                continue
            cols.append(_col(source).cast(_spark_type(target_type)).alias(_path_parts(target)[0]))
        return self._wrap(self._df.select(*cols))

    def resolveChoice(
        self,
        specs: Sequence[tuple[str, str]] | None = None,
        choice: str = "",
        database: str | None = None,
        table_name: str | None = None,
        transformation_ctx: str = "",
        **_kw: Any,
    ) -> DynamicFrame:
        if specs and choice:
            raise runtime.GlueError("resolveChoice takes specs or choice, not both")
        actions = list(specs or [])
        if choice:
            actions = [(c, choice) for c in self._df.columns]
        df = self._df
        for path, action in actions:
            act = action.lower()
            if not _has_path(df, path, False):
                continue  # Glue resolves choices of fields the frame has; others are no-ops
            if act.startswith(("cast:", "project:")):
                name = _path_parts(path)[0]
                if len(_path_parts(path)) > 1:
                    raise runtime.GlueError(f"resolveChoice on nested path {path!r} is not supported")
                df = df.withColumn(name, _col(path).cast(_spark_type(action.split(":", 1)[1])))
            elif act == "match_catalog":
                if not database or not table_name:
                    raise runtime.GlueError("resolveChoice match_catalog needs database and table_name")
                target = io.read_catalog(runtime.current(), database, table_name, "").schema
                types = {f.name.lower(): f.dataType for f in target.fields}
                name = _path_parts(path)[0]
                if name.lower() in types:
                    df = df.withColumn(name, _col(name).cast(types[name.lower()]))
            elif act in ("make_cols", "make_struct"):
                continue  # a Spark column never holds a choice: nothing to split
            else:
                raise runtime.GlueError(
                    f"resolveChoice action {action!r} is not supported",
                    hint="use cast:TYPE, project:TYPE, make_cols, make_struct or match_catalog",
                )
        return self._wrap(df)

    def filter(self, f: Callable[[Any], bool], transformation_ctx: str = "", **_kw: Any) -> DynamicFrame:
        """Records for which f(record) is true; f sees fields by name (record['age'])."""
        spark = self._df.sparkSession
        return self._wrap(spark.createDataFrame(self._df.rdd.filter(record_filter(f)), self._df.schema))

    def select_fields(self, paths: list[str], transformation_ctx: str = "", **_kw: Any) -> DynamicFrame:
        return self._wrap(self._df.select(*[_col(p) for p in paths if _has_path(self._df, p, False)]))

    def drop_fields(self, paths: list[str], transformation_ctx: str = "", **_kw: Any) -> DynamicFrame:
        top = [_path_parts(p)[0] for p in paths if len(_path_parts(p)) == 1]
        if len(top) != len(paths):
            raise runtime.GlueError("drop_fields on nested paths is not supported")
        return self._wrap(self._df.drop(*top))

    def rename_field(self, oldName: str, newName: str, transformation_ctx: str = "", **_kw: Any) -> DynamicFrame:
        if len(_path_parts(oldName)) > 1 or len(_path_parts(newName)) > 1:
            raise runtime.GlueError("rename_field on nested paths is not supported")
        return self._wrap(self._df.withColumnRenamed(_path_parts(oldName)[0], _path_parts(newName)[0]))

    def drop_null_fields(self, transformation_ctx: str = "", **_kw: Any) -> DynamicFrame:
        from pyspark.sql import functions as F

        counts = self._df.select([F.count(_col(c)).alias(c) for c in self._df.columns]).first()
        empty = [c for c in self._df.columns if counts is None or counts[c] == 0]
        return self._wrap(self._df.drop(*empty))


class DynamicFrameReader:
    def __init__(self, glue_context: Any) -> None:  # a GlueContext (context.py imports this module)
        self._glue_context = glue_context

    def from_catalog(
        self,
        database: str | None = None,
        table_name: str | None = None,
        redshift_tmp_dir: str = "",
        transformation_ctx: str = "",
        **kw: Any,
    ) -> DynamicFrame:
        return self._glue_context.create_dynamic_frame_from_catalog(
            database, table_name, redshift_tmp_dir, transformation_ctx, **kw
        )

    def from_options(
        self,
        connection_type: str,
        connection_options: dict[str, Any] | None = None,
        format: str | None = None,
        format_options: dict[str, Any] | None = None,
        **kw: Any,
    ) -> DynamicFrame:
        return self._glue_context.create_dynamic_frame_from_options(
            connection_type, connection_options or {}, format, format_options or {}, **kw
        )


class DynamicFrameWriter:
    def __init__(self, glue_context: Any) -> None:  # a GlueContext (context.py imports this module)
        self._glue_context = glue_context

    def from_options(
        self,
        frame: DynamicFrame | DataFrame,
        connection_type: str,
        connection_options: dict[str, Any] | None = None,
        format: str | None = None,
        format_options: dict[str, Any] | None = None,
        **kw: Any,
    ) -> DynamicFrame | DataFrame:
        return self._glue_context.write_dynamic_frame_from_options(
            frame, connection_type, connection_options or {}, format, format_options or {}, **kw
        )

    def from_catalog(
        self,
        frame: DynamicFrame | DataFrame,
        database: str | None = None,
        table_name: str | None = None,
        redshift_tmp_dir: str = "",
        transformation_ctx: str = "",
        **kw: Any,
    ) -> DynamicFrame | DataFrame:
        return self._glue_context.write_dynamic_frame_from_catalog(
            frame, database, table_name, redshift_tmp_dir, transformation_ctx, **kw
        )
