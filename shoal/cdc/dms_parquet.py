"""Database-migration output with `DataFormat: parquet`: `LOAD00000001.parquet` full loads
(no `Op` column) and time-named change files with `Op` first and the timestamp column.

Read with pyarrow; column types come from the Parquet schema (decimals keep precision and
scale, timestamps with a zone stay instants, those without one stay wall-clock times).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from shoal import storage
from shoal.cdc.source import (
    _BATCH_ROWS,
    _UNKNOWN_OP,
    MISSING_OP,
    VALID_OPS,
    ChangeFile,
    CsvLayout,
    FileColumns,
    RowBuffer,
    is_full_load,
    output_schema,
)


def spark_type(t: pa.DataType) -> str:
    """The Spark SQL type that holds an Arrow type's values without loss."""
    if pa.types.is_int8(t) or pa.types.is_int16(t) or pa.types.is_int32(t) or pa.types.is_uint8(t):
        return "int"
    if pa.types.is_uint16(t):
        return "int"
    if pa.types.is_int64(t) or pa.types.is_uint32(t):
        return "bigint"
    if pa.types.is_uint64(t):
        return "decimal(20,0)"
    if pa.types.is_float32(t):
        return "float"
    if pa.types.is_floating(t):
        return "double"
    if pa.types.is_decimal(t):
        return f"decimal({t.precision},{t.scale})"
    if pa.types.is_boolean(t):
        return "boolean"
    if pa.types.is_date(t):
        return "date"
    if pa.types.is_timestamp(t):
        # A zone (UTC-adjusted) is an instant; none is a wall-clock time: keep the difference.
        return "timestamp" if t.tz else "timestamp_ntz"
    return "string"


def _as_text(col: pa.ChunkedArray) -> pa.Array:
    """Values as the text the checked casts read (decimals exact, timestamps ISO)."""
    arr: Any = col.combine_chunks()  # Any: the stubs type strftime's input as temporal arrays only
    t = arr.type
    if pa.types.is_timestamp(t):
        if t.tz:  # as UTC with an explicit zone, so the instant survives the text form
            arr = pc.cast(arr, pa.timestamp("us", tz="UTC"))
            return pc.binary_join_element_wise(pc.strftime(arr, "%Y-%m-%dT%H:%M:%S"), "Z", "")
        return pc.strftime(pc.cast(arr, pa.timestamp("us")), "%Y-%m-%d %H:%M:%S")
    if pa.types.is_nested(t) or pa.types.is_binary(t) or pa.types.is_large_binary(t):
        return pa.array([None if v is None else json.dumps(v, default=str) for v in arr.to_pylist()], pa.string())
    try:
        return pc.cast(arr, pa.string())
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return pa.array([None if v is None else str(v) for v in arr.to_pylist()], pa.string())


class DmsParquet:
    suffixes: tuple[str, ...] = (".parquet",)
    sequence_column: str | None = None

    def read_columns(self, file: ChangeFile, layout: CsvLayout) -> FileColumns:
        try:
            fs, path = storage.filesystem(file.uri)
            with fs.open_input_file(path) as f:
                schema = pq.read_schema(f)
        except (OSError, pa.ArrowException) as exc:
            # Unreadable: the parser reports it as the file's one bad row (quarantined).
            return FileColumns([], [], error=f"cannot read Parquet file: {exc}")
        op = layout.op_column.lower()
        cols = [f for f in schema if f.name.lower() != op]
        return FileColumns(schema.names, [f.name for f in cols], {f.name: spark_type(f.type) for f in cols})

    def parse(
        self, uri: str, name: str, order: int, header: list[str], layout: CsvLayout, columns: list[str], raw: bool
    ) -> Iterator[pa.RecordBatch]:
        try:
            fs, path = storage.filesystem(uri)
            with fs.open_input_file(path) as f:
                table = pq.read_table(f)
        except Exception as exc:  # noqa: BLE001 - any read failure is the file's bad row
            buf = RowBuffer(name, order, columns)
            buf.add(0, "", f"cannot read Parquet file: {exc}", None, {})
            yield buf.flush()
            return
        n = table.num_rows
        by_lower = {c.lower(): c for c in table.column_names}
        op_name = by_lower.get(layout.op_column.lower())
        # Any: pyarrow-stubs' compute overloads reject mixing string arrays with str scalars.
        raw_op: Any
        op: Any
        if op_name is None:
            raw_op = pa.nulls(n, pa.string())
        else:
            raw_op = pc.utf8_trim_whitespace(pc.cast(table[op_name].combine_chunks(), pa.string()))
            raw_op = pc.if_else(pc.equal(raw_op, pa.scalar("")), pa.scalar(None, pa.string()), raw_op)
        op = pc.utf8_upper(raw_op)
        if is_full_load(name):
            op = pc.fill_null(op, "I")
        valid = pc.fill_null(pc.is_in(op, value_set=pa.array(VALID_OPS)), False)
        unknown = pc.binary_join_element_wise(_UNKNOWN_OP[0], raw_op, _UNKNOWN_OP[1], "")
        error = pc.if_else(
            valid, pa.scalar(None, pa.string()), pc.if_else(pc.is_null(op), pa.scalar(MISSING_OP), unknown)
        )
        raw_text = (
            pa.array([json.dumps(r, default=str) for r in table.to_pylist()], pa.string())
            if raw
            else pa.nulls(n, pa.string())
        )
        arrays = [
            pa.array([name] * n, pa.string()),
            pa.array(np.full(n, order, dtype=np.int32)),
            pa.array(np.arange(1, n + 1, dtype=np.int64)),  # the row's number in the file
            raw_text,
            error,
            pc.if_else(valid, op, pa.scalar(None, pa.string())),
        ]
        for c in columns:
            src = by_lower.get(c.lower())
            arrays.append(_as_text(table[src]) if src and src != op_name else pa.nulls(n, pa.string()))
        out = pa.RecordBatch.from_arrays(arrays, schema=output_schema(columns))
        for start in range(0, max(n, 1), _BATCH_ROWS):
            yield out.slice(start, _BATCH_ROWS)
