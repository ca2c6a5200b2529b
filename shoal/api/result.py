"""A query's result as Python users take it: rows and columns, or an Arrow table, a pandas
DataFrame or a Spark DataFrame with the column types Spark reported."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from shoal.sql import QueryResult

if TYPE_CHECKING:
    import pandas
    import pyarrow
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType


class Result:
    """The rows of the last statement run (collected on the driver, governed when a principal ran it)."""

    def __init__(self, query: QueryResult, spark: SparkSession) -> None:
        self._query = query
        self._spark = spark

    @property
    def columns(self) -> list[str]:
        return list(self._query.columns)

    @property
    def types(self) -> list[str]:
        """Spark SQL type of each column ("bigint", "decimal(10,2)", "array<string>")."""
        return list(self._query.types)

    @property
    def rows(self) -> list[tuple[Any, ...]]:
        return list(self._query.rows)

    def records(self) -> list[dict[str, Any]]:
        """Rows as JSON-ready dicts (what `shoal sql --json` prints)."""
        return self._query.records()

    def __len__(self) -> int:
        return len(self._query.rows)

    def __iter__(self) -> Iterator[tuple[Any, ...]]:
        return iter(self._query.rows)

    def __repr__(self) -> str:
        return f"<shoal.Result {len(self)} row(s): {', '.join(self.columns)}>"

    def schema(self) -> StructType:
        """The Spark schema of the result."""
        from pyspark.sql.types import StructField, StructType, _parse_datatype_string

        return StructType(
            [StructField(c, _parse_datatype_string(t), True) for c, t in zip(self.columns, self.types, strict=True)]
        )

    def to_arrow(self) -> pyarrow.Table:
        """An Arrow table typed from the Spark schema (decimals stay decimals, timestamps are UTC)."""
        import pyarrow as pa
        from pyspark.sql.pandas.types import to_arrow_type

        schema = self.schema()
        arrays = [
            pa.array([row[i] for row in self._query.rows], type=to_arrow_type(f.dataType))
            for i, f in enumerate(schema.fields)
        ]
        # Arrays by position, not dicts by name: `SELECT a, a` has two columns of one name.
        return pa.Table.from_arrays(arrays, names=self.columns)

    def to_pandas(self) -> pandas.DataFrame:
        return self.to_arrow().to_pandas()

    def to_spark(self) -> DataFrame:
        """A Spark DataFrame of these rows (for further Spark work in this session)."""
        return self._spark.createDataFrame(self._query.rows, schema=self.schema())
