"""Change files as database-migration replication writes them, and their parsing.

A source folder holds full-load files (`LOAD00000001.csv`, ...) and change files named by
time (`20220302-1134010000.csv`). Parsing runs on Spark executors (one task per file, via
`mapInArrow`) so it scales out and keeps exact physical line numbers for error messages.
"""

from __future__ import annotations

import codecs
import csv
import io
import json
import posixpath
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from shoal import storage
from shoal.exceptions import SourceError, literal

CHANGE_FILE_SUFFIXES = (".csv",)
_LOAD_FILE = re.compile(r"^LOAD\d+\.(csv|parquet)$", re.IGNORECASE)

# Columns the parser adds next to the data columns (all data columns are strings here;
# typing happens in Spark so every bad value can be reported with its file and line).
FILE_COL, ORDER_COL, LINE_COL, RAW_COL, ERROR_COL, OP_COL = (
    "_file",
    "_file_order",
    "_line",
    "_raw",
    "_error",
    "_op",
)
META_FIELDS: list[pa.Field] = [
    pa.field(FILE_COL, pa.string()),
    pa.field(ORDER_COL, pa.int32()),
    pa.field(LINE_COL, pa.int64()),
    pa.field(RAW_COL, pa.string()),
    pa.field(ERROR_COL, pa.string()),
    pa.field(OP_COL, pa.string()),
]
VALID_OPS = ("I", "U", "D")
MISSING_OP = "missing operation (expected I, U or D)"
_UNKNOWN_OP = ("unknown operation '", "' (expected I, U or D)")  # around the op as written
_BATCH_ROWS = 50_000


def is_full_load(name: str) -> bool:
    """Full-load files are LOAD00000001.csv (or .parquet), ...: their rows may omit the operation."""
    return bool(_LOAD_FILE.match(posixpath.basename(name)))


@dataclass(frozen=True)
class ChangeFile:
    uri: str
    name: str  # path relative to the source folder: the identity recorded in the ledger
    size: int
    mtime: float | None = None  # as the store reports it; with size, tells a rewritten file

    @property
    def sort_key(self) -> tuple[int, str]:
        # Full-load files come before change files whatever their names sort as
        # ("LOAD..." > "2022..." as text), then by name, which is by time.
        return (0 if is_full_load(self.name) else 1, self.name)


@dataclass(frozen=True)
class CsvLayout:
    """How to read the rows of one batch's files."""

    op_column: str = "op"
    header: bool = True
    columns: tuple[str, ...] | None = None  # required when header is False
    delimiter: str = ","


def discover(source: str, suffixes: tuple[str, ...] = CHANGE_FILE_SUFFIXES) -> list[ChangeFile]:
    """All change files under `source` (names ending in one of `suffixes`), in application order."""
    files = [ChangeFile(e.uri, e.relative, e.size, e.mtime) for e in storage.list_files(source, suffixes)]
    return sorted(files, key=lambda f: f.sort_key)


def read_header(file: ChangeFile, layout: CsvLayout) -> list[str]:
    """The column names of one file (its header row, or the layout's columns)."""
    if not layout.header:
        assert layout.columns is not None
        return list(layout.columns)
    try:
        fs, path = storage.filesystem(file.uri)
        with fs.open_input_stream(path) as raw:
            # Decode the header line only: a bad byte further down is a row error, reported
            # with its line by the parser, not a reason to refuse the whole file here.
            line = io.BufferedReader(_RawAdapter(raw)).readline().decode("utf-8-sig")
        first = next(csv.reader([line], delimiter=layout.delimiter), None)
    except (OSError, UnicodeDecodeError) as exc:
        raise SourceError(f"{file.name}:1: cannot read header: {exc}") from exc
    if not first or not any(c.strip() for c in first):
        return []
    names = [c.strip() for c in first]
    dupes = {n for n in names if names.count(n) > 1}
    if dupes or any(not n for n in names):
        raise SourceError(
            literal(f"{file.name}:1: header has empty or repeated column names {sorted(dupes) or ''}"),
            hint="if the files have no header row, give {no_header} and {columns} a,b,c",
            options=True,
        )
    return names


def data_columns(header: list[str], layout: CsvLayout) -> list[str]:
    return [c for c in header if c.lower() != layout.op_column.lower()]


def output_schema(columns: list[str]) -> pa.Schema:
    return pa.schema(META_FIELDS + [pa.field(c, pa.string()) for c in columns])


# What every change-file format reads first (`shoal.cdc.formats.Format.read_columns`): here, below
# the format modules, which all return it.
@dataclass
class FileColumns:
    """What one file holds, read on the driver before the batch is parsed."""

    header: list[str]  # passed to the parser as is (a CSV file's header row)
    columns: list[str]  # data columns (without the operation column)
    types: dict[str, str] = field(default_factory=dict)  # Spark SQL types the file's schema declares
    tombstones: int = 0  # Kafka tombstone records (null values): skipped
    error: str | None = None  # the file cannot be read: the parser reports it as a bad row


class _RawAdapter(io.RawIOBase):
    """Lets io.BufferedReader wrap a pyarrow input stream."""

    def __init__(self, stream: Any) -> None:  # a pyarrow input stream
        self._s = stream

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:  # a writable buffer
        data = self._s.read(len(b))
        n = len(data)
        b[:n] = data
        return n


def _decoded_lines(buffered: io.BufferedReader) -> Iterator[str]:
    """Decode line by line; invalid bytes survive as surrogates, flagged per record."""
    encoding = "utf-8-sig"  # only the first line may carry a byte-order mark
    for raw in buffered:
        yield raw.decode(encoding, errors="surrogateescape")
        encoding = "utf-8"


def _valid_utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


class _LineCounter:
    """Iterates lines for csv.reader while keeping the raw text and line numbers."""

    def __init__(self, text: Iterator[str]) -> None:
        self._it = iter(text)
        self.lines_read = 0
        self.consumed: list[str] = []

    def __iter__(self) -> _LineCounter:
        return self

    def __next__(self) -> str:
        line = next(self._it)
        self.lines_read += 1
        self.consumed.append(line)
        return line


def parse_files(
    batches: Iterator[pa.RecordBatch], layout_json: str, columns: list[str], raw: bool = True
) -> Iterator[pa.RecordBatch]:
    """mapInArrow body: rows of (uri, name, file_order, header_json) in, parsed rows out.

    Without `raw`, well-formed files leave RAW_COL null: only rejected rows need their raw
    text, and carrying every line once more through Spark cost a good part of the parse."""
    layout = CsvLayout(**json.loads(layout_json))
    schema = output_schema(columns)
    for batch in batches:
        for uri, name, order, header_json in zip(*(batch.column(i).to_pylist() for i in range(4)), strict=True):
            header = json.loads(header_json)
            fast = _parse_fast(uri, name, order, header, layout, columns, schema, raw)
            if fast is not None:
                for start in range(0, max(fast.num_rows, 1), _BATCH_ROWS):
                    yield fast.slice(start, _BATCH_ROWS)
            else:
                yield from _parse_one(uri, name, order, header, layout, columns, schema)


_FAST_MAX_BYTES = 1 << 30
_OP_INTERNAL = "__shoal_op__"


def _parse_fast(
    uri: str,
    name: str,
    order: int,
    header: list[str],
    layout: CsvLayout,
    columns: list[str],
    schema: pa.Schema,
    raw: bool = True,
) -> pa.RecordBatch | None:
    """Vectorised parse with pyarrow's CSV reader, for the common well-formed file.

    Applies when every record is exactly one physical line (so line numbers are the row
    index) and every row has the expected width. Anything else returns None and the file
    goes through the line-by-line parser, which reports each problem exactly.
    """
    try:
        fs, path = storage.filesystem(uri)
        info = fs.get_file_info(path)
        if info.size is None or info.size > _FAST_MAX_BYTES:
            return None
        with fs.open_input_stream(path) as f:
            data = f.read()
        if data.startswith(codecs.BOM_UTF8):
            data = data[len(codecs.BOM_UTF8) :]
        text = data.decode("utf-8")
    except (OSError, UnicodeDecodeError, pa.ArrowException):
        return None
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    lines = [ln[:-1] if ln.endswith("\r") else ln for ln in lines]
    if any(not ln.strip() for ln in lines):
        return None
    skip = 1 if layout.header else 0
    is_load = is_full_load(name)
    op_lower = layout.op_column.lower()
    names = list(header)
    if not any(c.lower() == op_lower for c in names) and not (layout.header or is_load):
        names = [_OP_INTERNAL, *names]  # headerless change rows: the operation comes first
    import pyarrow.csv as pacsv

    try:
        table = pacsv.read_csv(
            pa.BufferReader(data),  # type: ignore[arg-type]  # a NativeFile reads like a binary file
            read_options=pacsv.ReadOptions(column_names=names, skip_rows=skip, use_threads=False),
            parse_options=pacsv.ParseOptions(delimiter=layout.delimiter, newlines_in_values=False),
            convert_options=pacsv.ConvertOptions(
                column_types={c: pa.string() for c in names}, null_values=[""], strings_can_be_null=True
            ),
        )
    except pa.ArrowInvalid:
        return None
    n = table.num_rows
    if n != len(lines) - skip:
        return None
    import pyarrow.compute as pc

    by_lower = {c.lower(): c for c in names}
    op_name = _OP_INTERNAL if _OP_INTERNAL in names else by_lower.get(op_lower)
    # Any: pyarrow-stubs' compute overloads reject mixing string arrays with str scalars.
    raw_op: Any
    op: Any
    if op_name is None:
        raw_op = pa.nulls(n, pa.string())
    else:
        raw_op = pc.utf8_trim_whitespace(table[op_name].combine_chunks())
        raw_op = pc.if_else(pc.equal(raw_op, pa.scalar("")), pa.scalar(None, pa.string()), raw_op)
    op = pc.utf8_upper(raw_op)
    if is_load:
        op = pc.fill_null(op, "I")
    valid = pc.fill_null(pc.is_in(op, value_set=pa.array(VALID_OPS)), False)
    unknown = pc.binary_join_element_wise(_UNKNOWN_OP[0], raw_op, _UNKNOWN_OP[1], "")
    error = pc.if_else(
        valid,
        pa.scalar(None, pa.string()),
        pc.if_else(pc.is_null(op), pa.scalar(MISSING_OP), unknown),
    )
    arrays = [
        pa.array([name] * n, pa.string()),
        pa.array(np.full(n, order, dtype=np.int32)),
        pa.array(np.arange(skip + 1, skip + 1 + n, dtype=np.int64)),
        pa.array(lines[skip:], pa.string()) if raw else pa.nulls(n, pa.string()),
        error,
        pc.if_else(valid, op, pa.scalar(None, pa.string())),
    ]
    for c in columns:
        src = by_lower.get(c.lower())
        arrays.append(table[src].combine_chunks() if src and src != op_name else pa.nulls(n, pa.string()))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _parse_one(
    uri: str, name: str, order: int, header: list[str], layout: CsvLayout, columns: list[str], schema: pa.Schema
) -> Iterator[pa.RecordBatch]:
    is_load = is_full_load(name)
    index = {c.lower(): i for i, c in enumerate(columns)}
    op_lower = layout.op_column.lower()
    names = header
    op_pos = next((i for i, c in enumerate(names) if c.lower() == op_lower), None)
    col_pos = [(index[c.lower()], i) for i, c in enumerate(names) if c.lower() != op_lower]
    width = len(names)
    cols: list[list] = [[] for _ in schema]
    n_meta = len(META_FIELDS)

    def emit(line: int, raw: str, error: str | None, op: str | None, values: Sequence[str | None]) -> None:
        cols[0].append(name)
        cols[1].append(order)
        cols[2].append(line)
        cols[3].append(raw)
        cols[4].append(error)
        cols[5].append(op)
        for j, v in enumerate(values):
            cols[n_meta + j].append(v)

    def flush() -> pa.RecordBatch:
        out = pa.RecordBatch.from_arrays(
            [pa.array(c, type=f.type) for c, f in zip(cols, schema, strict=True)], schema=schema
        )
        for c in cols:
            c.clear()
        return out

    empty = [None] * len(columns)
    try:
        fs, path = storage.filesystem(uri)
        stream = fs.open_input_stream(path)
    except Exception as exc:  # noqa: BLE001 - any I/O failure is reported as a bad file
        emit(0, "", f"cannot open file: {exc}", None, empty)
        yield flush()
        return
    with stream:
        counter = _LineCounter(_decoded_lines(io.BufferedReader(_RawAdapter(stream))))
        reader = csv.reader(counter, delimiter=layout.delimiter, strict=True)
        first_data_line = 2 if layout.header else 1
        try:
            if layout.header:
                next(reader, None)
            while True:
                start = counter.lines_read + 1
                counter.consumed.clear()
                try:
                    fields = next(reader)
                except StopIteration:
                    break
                except csv.Error as exc:
                    emit(start, "".join(counter.consumed).rstrip("\r\n"), f"malformed CSV: {exc}", None, empty)
                    continue
                raw = "".join(counter.consumed).rstrip("\r\n")
                if not _valid_utf8(raw):
                    shown = raw.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
                    emit(start, shown, "file is not valid UTF-8 on this line", None, empty)
                    continue
                if not fields or (len(fields) == 1 and not fields[0].strip()):
                    continue  # blank line
                if start < first_data_line:
                    continue
                error, op, values = _row(fields, width, op_pos, col_pos, is_load, len(columns))
                emit(start, raw, error, op, values)
                if len(cols[0]) >= _BATCH_ROWS:
                    yield flush()
        except UnicodeDecodeError as exc:
            emit(counter.lines_read + 1, "", f"file is not valid UTF-8: {exc.reason}", None, empty)
        except OSError as exc:
            emit(counter.lines_read + 1, "", f"read failed: {exc}", None, empty)
    if cols[0]:
        yield flush()


def _row(
    fields: list[str], width: int, op_pos: int | None, col_pos: list[tuple[int, int]], is_load: bool, n_columns: int
) -> tuple[str | None, str | None, list[str | None]]:
    """Validate one CSV record: returns (error, op, values aligned to the batch columns)."""
    values: list[str | None] = [None] * n_columns
    n = len(fields)
    shift = 0
    if op_pos is None and n == width + 1:
        # Headerless DMS change rows carry the operation as an extra first field.
        op_pos, shift = 0, 1
    elif n != width:
        expect = str(width) if op_pos is not None else f"{width} (or {width + 1} with the operation first)"
        return f"wrong column count: expected {expect} fields, got {n}", None, values
    for target, src in col_pos:
        v = fields[src + shift]
        values[target] = v if v != "" else None
    op_text = fields[op_pos].strip() if op_pos is not None else ""
    op = op_text.upper()
    if op == "":
        if is_load:
            return None, "I", values
        return MISSING_OP, None, values
    if op not in VALID_OPS:
        return f"{_UNKNOWN_OP[0]}{op_text}{_UNKNOWN_OP[1]}", None, values
    return None, op, values


class RowBuffer:
    """Collects parsed rows of one file into record batches of the parser's output schema
    (for the formats read record by record: Debezium JSON and Avro)."""

    def __init__(self, name: str, order: int, columns: list[str]) -> None:
        self.name, self.order = name, order
        self.schema = output_schema(columns)
        self.index = {c.lower(): i for i, c in enumerate(columns)}
        self.cols: list[list] = [[] for _ in self.schema]

    def add(self, line: int, raw: str | None, error: str | None, op: str | None, values: dict[str, str | None]) -> None:
        n_meta = len(META_FIELDS)
        for i, v in enumerate((self.name, self.order, line, raw, error, op)):
            self.cols[i].append(v)
        row: list[str | None] = [None] * (len(self.cols) - n_meta)
        for c, v in values.items():
            j = self.index.get(c.lower())
            if j is not None:
                row[j] = v
        for j, v in enumerate(row):
            self.cols[n_meta + j].append(v)

    def full(self) -> bool:
        return len(self.cols[0]) >= _BATCH_ROWS

    def flush(self) -> pa.RecordBatch:
        out = pa.RecordBatch.from_arrays(
            [pa.array(c, type=f.type) for c, f in zip(self.cols, self.schema, strict=True)], schema=self.schema
        )
        for c in self.cols:
            c.clear()
        return out
