"""Change-file formats: one interface, one module per source, picked by `--format`.

Every format turns its files into the same rows (see `shoal.cdc.source.output_schema`):
file, order, line, raw text, error, operation (I/U/D) and the data columns as text. The
ledger, late-file protection, deduplication, quarantine and the merge then run unchanged.
Values travel as text so that typing stays in one place (checked casts in Spark, each bad
value reported with its file and row); the types a format knows from its own schema
(Parquet, Avro, the Debezium envelope) come with the columns, so decimals stay decimals.
"""

from __future__ import annotations

import json
import posixpath
from collections.abc import Iterator
from typing import Protocol

import pyarrow as pa

from shoal.cdc import source as csv_source
from shoal.cdc.source import ChangeFile, CsvLayout, FileColumns
from shoal.exceptions import ShoalError, literal


class Format(Protocol):
    suffixes: tuple[str, ...]
    # The column holding the event order when the files carry it themselves (Debezium).
    sequence_column: str | None

    def read_columns(self, file: ChangeFile, layout: CsvLayout) -> FileColumns: ...

    def parse(
        self, uri: str, name: str, order: int, header: list[str], layout: CsvLayout, columns: list[str], raw: bool
    ) -> Iterator[pa.RecordBatch]: ...


class _DmsCsv:
    suffixes: tuple[str, ...] = (".csv",)
    sequence_column: str | None = None

    def read_columns(self, file: ChangeFile, layout: CsvLayout) -> FileColumns:
        header = csv_source.read_header(file, layout)
        return FileColumns(header, csv_source.data_columns(header, layout))

    def parse(
        self, uri: str, name: str, order: int, header: list[str], layout: CsvLayout, columns: list[str], raw: bool
    ) -> Iterator[pa.RecordBatch]:
        schema = csv_source.output_schema(columns)
        fast = csv_source._parse_fast(uri, name, order, header, layout, columns, schema, raw)
        if fast is not None:
            for start in range(0, max(fast.num_rows, 1), csv_source._BATCH_ROWS):
                yield fast.slice(start, csv_source._BATCH_ROWS)
        else:
            yield from csv_source._parse_one(uri, name, order, header, layout, columns, schema)


def _formats() -> dict[str, Format]:
    from shoal.cdc import debezium, dms_parquet

    return {
        "dms-csv": _DmsCsv(),
        "dms-parquet": dms_parquet.DmsParquet(),
        "debezium-json": debezium.DebeziumJson(),
        "debezium-avro": debezium.DebeziumAvro(),
    }


FORMAT_NAMES = ("dms-csv", "dms-parquet", "debezium-json", "debezium-avro")


def get(name: str) -> Format:
    formats = _formats()
    if name not in formats:
        raise ShoalError(
            f"{{format}} must be one of {', '.join(FORMAT_NAMES)}, not {literal(repr(name))}", options=True
        )
    return formats[name]


def suffixes(name: str | None) -> tuple[str, ...]:
    """File name endings a batch picks up: the format's, or every format's when auto."""
    if name:
        return get(name).suffixes
    return tuple(s for f in _formats().values() for s in f.suffixes)


def format_of(file_name: str, chosen: str | None) -> str:
    """The format of one file: the one given, else by its name's ending."""
    if chosen:
        return chosen
    lower = posixpath.basename(file_name).lower()
    for fname, fmt in _formats().items():
        if lower.endswith(fmt.suffixes):
            return fname
    raise ShoalError(literal(f"{file_name}: no change-file format reads this file name"), hint="give {format}")


def parse_files(
    batches: Iterator[pa.RecordBatch], layout_json: str, columns: list[str], raw: bool = True
) -> Iterator[pa.RecordBatch]:
    """mapInArrow body: rows of (uri, name, file_order, header_json) in, parsed rows out.

    `header_json` is a CSV file's header (a list), or {"format": ..., "header": [...]}."""
    layout = CsvLayout(**json.loads(layout_json))
    small: list[pa.RecordBatch] = []  # small files' rows, handed on together
    held = 0
    for batch in batches:
        for uri, name, order, header_json in zip(*(batch.column(i).to_pylist() for i in range(4)), strict=True):
            spec = json.loads(header_json)
            fmt, header = ("dms-csv", spec) if isinstance(spec, list) else (spec["format"], spec["header"])
            for part in get(fmt).parse(uri, name, order, header, layout, columns, raw):
                if part.num_rows >= _SMALL_BATCH_ROWS:
                    yield part  # already a good size: passed on as it is, no copy
                    continue
                small.append(part)
                held += part.num_rows
                if held >= csv_source._BATCH_ROWS:
                    yield from _joined(small)
                    small, held = [], 0
    if small:
        yield from _joined(small)


# A batch per small file cost the JVM more than parsing the file did: a backlog of 300 files of
# 5 rows took 68 s with a task and a batch per file, 21 s with tasks grouped, 8 s with both.
_SMALL_BATCH_ROWS = 4096


def _joined(parts: list[pa.RecordBatch]) -> list[pa.RecordBatch]:
    """One batch of the parts' rows (none when they hold no row)."""
    return pa.Table.from_batches(parts).combine_chunks().to_batches()
