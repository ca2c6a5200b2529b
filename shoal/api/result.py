"""A query's result as Python users take it: rows and columns, or an Arrow table, a pandas
DataFrame or a Spark DataFrame with the column types Spark reported.

One mapping for every form (docs/python-api.md): DECIMAL -> Decimal, DATE -> date, TIMESTAMP ->
an aware datetime in UTC (TIMESTAMP_NTZ stays naive), NULL -> None; Arrow and pandas keep the
same types (pandas through Arrow-backed dtypes). JSON is the caller's edge: `shoal sql --json`
and the HTTP API serialise these values themselves (shoal.sql.to_json_value).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from functools import cached_property
from typing import TYPE_CHECKING, Any

from shoal.sql import QueryResult

if TYPE_CHECKING:
    import pandas
    import pyarrow
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import DataType, StructType


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

    @cached_property
    def _rows(self) -> list[tuple[Any, ...]]:
        kinds = [f.dataType for f in self.schema().fields]
        return [tuple(_python(v, k) for v, k in zip(row, kinds, strict=True)) for row in self._query.rows]

    @property
    def rows(self) -> list[tuple[Any, ...]]:
        return list(self._rows)

    def records(self) -> list[dict[str, Any]]:
        """Rows as dicts by column name, with the same values as `rows` (Decimal, date, datetime)."""
        return [dict(zip(self.columns, row, strict=True)) for row in self._rows]

    def __len__(self) -> int:
        return len(self._query.rows)

    def __iter__(self) -> Iterator[tuple[Any, ...]]:
        return iter(self._rows)

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
            pa.array([row[i] for row in self._rows], type=to_arrow_type(f.dataType))
            for i, f in enumerate(schema.fields)
        ]
        # Arrays by position, not dicts by name: `SELECT a, a` has two columns of one name.
        return pa.Table.from_arrays(arrays, names=self.columns)

    def to_pandas(self) -> pandas.DataFrame:
        """A DataFrame with Arrow-backed dtypes: an integer column with NULLs stays integer, decimals
        stay decimal128, dates date32 and timestamps UTC (NumPy dtypes made them float64 and objects)."""
        import pandas as pd

        return self.to_arrow().to_pandas(types_mapper=pd.ArrowDtype)

    def to_spark(self) -> DataFrame:
        """A Spark DataFrame of these rows (for further Spark work in this session)."""
        return self._spark.createDataFrame(self._rows, schema=self.schema())


def _python(value: Any, kind: DataType) -> Any:
    """A collected value in the API's mapping. PySpark hands TIMESTAMP values back naive, in this
    process's local time zone (not the session's UTC): made aware, they name the same instant."""
    from pyspark.sql.types import ArrayType, MapType, Row, StructType, TimestampType

    if value is None:
        return None
    if isinstance(kind, TimestampType):
        return value.astimezone(dt.UTC)
    if isinstance(kind, ArrayType):
        return [_python(v, kind.elementType) for v in value]
    if isinstance(kind, MapType):
        return {_python(k, kind.keyType): _python(v, kind.valueType) for k, v in value.items()}
    if isinstance(kind, StructType):
        return Row(**{f.name: _python(v, f.dataType) for f, v in zip(kind.fields, value, strict=True)})
    return value
