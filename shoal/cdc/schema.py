"""Column types for change rows: inference for new tables and columns, checked casts.

Parsed values arrive as strings. A value that does not fit its column's type makes the
row bad (with the column and value named) instead of silently becoming NULL.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# Candidate types in order of preference for an inferred column.
_INT_RE = r"^\s*[+-]?[0-9]{1,18}\s*$"
_DATE_RE = r"^\s*[0-9]{4}-[0-9]{2}-[0-9]{2}\s*$"
_BOOL_VALUES = ("true", "false")


def quote(name: str) -> str:
    """Spark SQL identifier quoting; names come from files, so never trust them."""
    return "`" + name.replace("`", "``") + "`"


def _from_base64(col: Column) -> Column:
    """Binary values travel as base64 text (Debezium's JSON `bytes`): NULL when not base64
    (unbase64 would throw inside the cast of a row already marked bad)."""
    return F.try_to_binary(F.trim(col), F.lit("base64"))


def _fits(col: Column, type_name: str) -> Column:
    """True when a non-null string value parses as `type_name`."""
    if type_name == "bigint":
        return col.rlike(_INT_RE)
    if type_name == "int":
        return col.rlike(_INT_RE) & col.cast("bigint").between(-(2**31), 2**31 - 1)
    if type_name == "boolean":
        return F.lower(F.trim(col)).isin(*_BOOL_VALUES)
    if type_name == "date":
        return col.rlike(_DATE_RE) & F.to_date(col).isNotNull()
    if type_name in ("timestamp", "timestamp_ntz"):
        return F.trim(col).cast(type_name).isNotNull()
    if type_name == "string":
        return F.lit(True)
    if type_name == "binary":
        return _from_base64(col).isNotNull()
    return F.trim(col).cast(type_name).isNotNull()


def infer_types(df: DataFrame, columns: list[str], *, sequence: str, keys: list[str]) -> dict[str, str]:
    """Pick a Spark SQL type per column from all its values in the batch (one pass)."""
    candidates = {c: _candidates(c, sequence=sequence, keys=keys) for c in columns}
    aggs = []
    for c, types in candidates.items():
        col = F.col(quote(c))
        for t in types:
            aggs.append(F.min(F.when(col.isNull(), True).otherwise(_fits(col, t))).alias(f"{c}\u0000{t}"))
        aggs.append(F.count(col).alias(f"{c}\u0000#nonnull"))
    row = df.agg(*aggs).collect()[0].asDict()
    chosen: dict[str, str] = {}
    for c, types in candidates.items():
        if not row[f"{c}\u0000#nonnull"]:
            chosen[c] = "string"  # no values seen: string is the safe widening base
            continue
        chosen[c] = next((t for t in types if row[f"{c}\u0000{t}"]), "string")
    return chosen


def _candidates(column: str, *, sequence: str, keys: list[str]) -> list[str]:
    if column == sequence:
        return ["timestamp", "bigint"]
    if column in keys:
        return ["bigint"]
    return ["bigint", "double", "boolean", "date", "timestamp"]


def typed_value(col: Column, type_name: str) -> Column:
    if type_name == "boolean":
        return F.lower(F.trim(col)) == F.lit("true")
    if type_name == "string":
        return col
    if type_name == "binary":
        return _from_base64(col)
    return F.trim(col).cast(type_name)


def cast_checked(df: DataFrame, types: dict[str, str], error_col: str) -> DataFrame:
    """Cast every column in `types`; rows with a value that does not fit get an error."""
    problems = []
    for c, t in types.items():
        col = F.col(quote(c))
        problems.append(
            F.when(
                col.isNotNull() & ~_fits(col, t),
                F.concat(F.lit(f"column {c!r}: value "), F.to_json(F.array(col)), F.lit(f" is not a valid {t}")),
            )
        )
    first_problem = F.coalesce(*problems) if problems else F.lit(None).cast("string")
    out = df.withColumn(error_col, F.coalesce(F.col(error_col), first_problem))
    return out.select(
        *[typed_value(F.col(quote(c)), types[c]).alias(c) if c in types else F.col(quote(c)) for c in df.columns]
    )


def declared_types(spark: SparkSession, schema: str | dict[str, str]) -> dict[str, str]:
    """Column -> Spark SQL type from a `--schema` value: a mapping, a JSON file
    (`{"price": "decimal(10,2)"}`), a DDL file (`price decimal(10,2), sold_at timestamp`),
    or an existing table whose column types to use. Types are checked by Spark's parser."""
    from pathlib import Path

    from shoal.exceptions import ShoalError, literal

    if isinstance(schema, dict):
        mapping = schema
    elif Path(schema).is_file():
        text = Path(schema).read_text()
        try:
            loaded = json.loads(text)
        except json.JSONDecodeError:
            loaded = None
        if isinstance(loaded, dict):
            mapping = {str(k): str(v) for k, v in loaded.items()}
        else:
            ddl = ", ".join(line.strip().rstrip(",") for line in text.splitlines() if line.strip())
            return _parse_ddl(spark, ddl, schema)
    else:
        try:
            fields = spark.table(schema).schema.fields
        except Exception as exc:  # Spark raises AnalysisException and others
            raise ShoalError(
                literal(f"{schema}: is neither a schema file nor a table"),
                hint="give {schema} FILE or NS.TABLE",
                options=True,
            ) from exc
        return {f.name: f.dataType.simpleString() for f in fields}
    ddl = ", ".join(f"{quote(c)} {t}" for c, t in mapping.items())
    return _parse_ddl(spark, ddl, "the declared schema")


def _parse_ddl(spark: SparkSession, ddl: str, where: str) -> dict[str, str]:
    from shoal.exceptions import ShoalError, literal

    try:
        fields = spark.createDataFrame([], ddl).schema.fields
    except Exception as exc:  # a parse error from Spark
        raise ShoalError(literal(f"{where}: not a valid column list ({ddl}): {exc}".splitlines()[0])) from exc
    return {f.name: f.dataType.simpleString() for f in fields}
