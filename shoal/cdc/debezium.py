"""Debezium change events as the Kafka Connect S3 and file sinks write them.

JSON: one record value per line, with the schema envelope (`{"schema": ..., "payload":
...}`, `schemas.enable=true`) or without it. Avro: object container files, which carry
their writer schema (no registry needed), read with fastavro. Each event's `op` becomes
the batch's operation (c and r insert, u updates, d deletes), its row comes from `after`
(from `before` for a delete), and its order is `source.lsn` when the connector records one,
else `source.ts_ms`, in the column `_cdc_sequence` (ties: file order, then line). Tombstone
records (null values, written after a delete for log compaction) are skipped and counted.

Column types come from the Connect schema where the events carry one: decimals
(`decimal.handling.mode=precise`: base64 unscaled bytes, scale in the schema) keep their
precision and scale, `io.debezium.time.*` values become dates, wall-clock timestamps
(`timestamp_ntz`) or, for `ZonedTimestamp`, instants.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import pyarrow as pa

from shoal import storage
from shoal.cdc.source import ChangeFile, CsvLayout, FileColumns, RowBuffer
from shoal.exceptions import SourceError

SEQUENCE_COLUMN = "_cdc_sequence"
OPS = {"c": "I", "r": "I", "u": "U", "d": "D"}

DECIMAL = "org.apache.kafka.connect.data.Decimal"
VARIABLE_DECIMAL = "io.debezium.data.VariableScaleDecimal"
MILLI_TS = ("io.debezium.time.Timestamp", "org.apache.kafka.connect.data.Timestamp")
MICRO_TS = "io.debezium.time.MicroTimestamp"
NANO_TS = "io.debezium.time.NanoTimestamp"
ZONED_TS = "io.debezium.time.ZonedTimestamp"
DATES = ("io.debezium.time.Date", "org.apache.kafka.connect.data.Date")
TIMES = {
    "io.debezium.time.Time": 1_000,
    "org.apache.kafka.connect.data.Time": 1_000,
    "io.debezium.time.MicroTime": 1,
    "io.debezium.time.NanoTime": 0.001,
}
_EPOCH = dt.datetime(1970, 1, 1)
# Connect schema types. The JSON envelope (JsonConverter) spells FLOAT32/FLOAT64 "float" and
# "double"; the Avro path names them float32/float64. Bytes arrive as base64 text (JSON) or are
# rendered so (Avro): the checked cast decodes them.
_BASIC = {
    "int8": "int",
    "int16": "int",
    "int32": "int",
    "int64": "bigint",
    "float": "float",
    "float32": "float",
    "double": "double",
    "float64": "double",
    "boolean": "boolean",
    "string": "string",
    "bytes": "binary",
}


def spark_type(field: dict[str, Any]) -> str:
    """Spark SQL type for a Connect schema field (as the JSON envelope or Avro carry it)."""
    name = field.get("name")
    if name == DECIMAL:
        params = field.get("parameters") or {}
        scale = int(params.get("scale", 0))
        precision = int(params.get("connect.decimal.precision", 38))
        return f"decimal({max(precision, scale)},{scale})"
    if name in MILLI_TS or name in (MICRO_TS, NANO_TS):
        return "timestamp_ntz"  # Debezium's epoch values for columns without a time zone
    if name == ZONED_TS:
        return "timestamp"  # an instant: ISO text with its offset
    if name in DATES:
        return "date"
    if name in TIMES or name == VARIABLE_DECIMAL:
        return "string"  # Spark has no time type; a variable-scale decimal has no fixed type
    return _BASIC.get(str(field.get("type")), "string")


def _wall(value: Any, per_second: float) -> str:
    if isinstance(value, dt.datetime):  # decoded by fastavro (an aware UTC datetime)
        value = value.astimezone(dt.UTC).replace(tzinfo=None) if value.tzinfo else value
    else:
        value = _EPOCH + dt.timedelta(microseconds=int(value) * 1_000_000 // per_second)
    return value.strftime("%Y-%m-%d %H:%M:%S.%f")


def _decimal(raw: Any, scale: int) -> str:
    if isinstance(raw, Decimal):
        return format(raw, "f")
    data = raw if isinstance(raw, bytes | bytearray) else base64.b64decode(raw, validate=True)
    return format(Decimal(int.from_bytes(data, "big", signed=True)).scaleb(-scale), "f")


def render(value: Any, field: dict[str, Any] | None) -> str | None:
    """One value as the text the checked casts read (exact for decimals)."""
    if value is None:
        return None
    name = field.get("name") if field else None
    if name == DECIMAL and not isinstance(value, int | float):  # precise mode (string/double modes: as is)
        return _decimal(value, int((field or {}).get("parameters", {}).get("scale", 0)))
    if name == VARIABLE_DECIMAL and isinstance(value, dict):
        return _decimal(value["value"], int(value["scale"]))
    if name in MILLI_TS:
        return _wall(value, 1_000)
    if name == MICRO_TS:
        return _wall(value, 1_000_000)
    if name == NANO_TS:
        return _wall(value, 1_000_000_000)
    if name in DATES:
        return (
            value.isoformat()
            if isinstance(value, dt.date)
            else (_EPOCH + dt.timedelta(days=int(value))).date().isoformat()
        )
    if name in TIMES:
        if isinstance(value, dt.time):
            return value.isoformat()
        micros = int(int(value) * TIMES[name])
        return (_EPOCH + dt.timedelta(microseconds=micros)).time().isoformat()
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Decimal):
        return format(value, "f")
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, dict | list):
        return json.dumps(value, default=str)
    return str(value)


def _envelope_fields(schema: dict[str, Any] | None) -> dict[str, dict[str, Any]] | None:
    """The row fields of a JSON envelope's schema (from `after`, else `before`)."""
    if not schema:
        return None
    out: dict[str, dict[str, Any]] = {}
    for part in schema.get("fields", []):
        if part.get("field") in ("after", "before"):
            for f in part.get("fields", []):
                out.setdefault(f["field"], f)
    return out


def _sequence(event: dict[str, Any]) -> int | None:
    source = event.get("source") or {}
    for value in (source.get("lsn"), source.get("ts_ms"), event.get("ts_ms")):
        if value is not None:
            try:
                return int(value)
            except (TypeError, ValueError):
                continue
    return None


def normalize(
    event: Any, fields: dict[str, dict[str, Any]] | None
) -> tuple[str | None, dict[str, str | None], str | None]:
    """(operation I/U/D, row values as text incl. the sequence, error) for one event."""
    if not isinstance(event, dict):
        return None, {}, "not a Debezium change event (expected a JSON object)"
    code = event.get("op")
    if code is None:
        return None, {}, "missing operation 'op' (not a Debezium change event?)"
    op = OPS.get(str(code))
    row = event.get("before") if op == "D" else event.get("after")
    values: dict[str, str | None] = {}
    if isinstance(row, dict):
        try:
            values = {k: render(v, (fields or {}).get(k)) for k, v in row.items()}
        except (ValueError, TypeError, KeyError, OverflowError) as exc:
            return None, {}, f"cannot read a value: {exc}"
    seq = _sequence(event)
    values[SEQUENCE_COLUMN] = None if seq is None else str(seq)
    if op is None:
        what = "a truncate" if code == "t" else f"unknown operation '{code}'"
        return None, values, f"{what} (expected c, r, u or d)"
    if not isinstance(row, dict):
        return None, values, f"operation '{code}' without its '{'before' if op == 'D' else 'after'}' row"
    if seq is None:
        return None, values, "no source.lsn or source.ts_ms to order the event by"
    return op, values, None


def _json_events(data: bytes) -> Iterator[tuple[int, str, Any, str | None]]:
    """(line, raw text, decoded value or None for a tombstone, error) per non-blank line."""
    for i, line in enumerate(data.split(b"\n"), start=1):
        try:
            text = line.decode("utf-8").strip()
        except UnicodeDecodeError as exc:
            yield i, line.decode("utf-8", "replace").strip(), None, f"line is not valid UTF-8: {exc.reason}"
            continue
        if not text:
            continue
        try:
            yield i, text, json.loads(text), None
        except json.JSONDecodeError as exc:
            yield i, text, None, f"malformed JSON: {exc}"


def _split_envelope(value: Any) -> tuple[Any, dict[str, Any] | None]:
    if isinstance(value, dict) and "payload" in value and "schema" in value:
        return value["payload"], value["schema"]
    return value, None


def _read(uri: str) -> bytes:
    fs, path = storage.filesystem(uri)
    with fs.open_input_stream(path) as f:
        return f.read()


class DebeziumJson:
    suffixes: tuple[str, ...] = (".json", ".jsonl")
    sequence_column: str | None = SEQUENCE_COLUMN

    def read_columns(self, file: ChangeFile, layout: CsvLayout) -> FileColumns:
        try:
            data = _read(file.uri)
        except OSError as exc:
            return FileColumns([], [], error=f"cannot read file: {exc}")
        columns: dict[str, None] = {}
        types: dict[str, str] = {}
        tombstones = 0
        for _line, _raw, value, error in _json_events(data):
            if error:
                continue  # reported with its line by the parser
            payload, schema = _split_envelope(value)
            if payload is None:
                tombstones += 1
                continue
            fields = _envelope_fields(schema) or {}
            for name, f in fields.items():
                columns.setdefault(name)
                types[name] = spark_type(f)  # a later event's schema (a schema change) wins
            if isinstance(payload, dict):
                for part in ("after", "before"):
                    if isinstance(payload.get(part), dict):
                        for name in payload[part]:
                            columns.setdefault(name)
        if not columns and not tombstones and not data.strip():
            return FileColumns([], [])
        names = [*columns, SEQUENCE_COLUMN]
        types[SEQUENCE_COLUMN] = "bigint"
        return FileColumns(names, names, types, tombstones)

    def parse(
        self, uri: str, name: str, order: int, header: list[str], layout: CsvLayout, columns: list[str], raw: bool
    ) -> Iterator[pa.RecordBatch]:
        buf = RowBuffer(name, order, columns)
        try:
            data = _read(uri)
        except Exception as exc:  # noqa: BLE001 - any read failure is the file's bad row
            buf.add(0, "", f"cannot read file: {exc}", None, {})
            yield buf.flush()
            return
        for line, text, value, error in _json_events(data):
            if error:
                buf.add(line, text, error, None, {})
            else:
                payload, schema = _split_envelope(value)
                if payload is None:
                    continue  # tombstone
                op, values, error = normalize(payload, _envelope_fields(schema))
                buf.add(line, text if raw else None, error, op, values)
            if buf.full():
                yield buf.flush()
        yield buf.flush()


def _non_null(t: Any) -> Any:
    if isinstance(t, list):
        rest = [x for x in t if x != "null"]
        return rest[0] if len(rest) == 1 else t
    return t


def _avro_named(schema: Any, found: dict[str, Any]) -> None:
    """Every named record in an Avro schema, by name and full name (unions refer by name)."""
    if isinstance(schema, list):
        for s in schema:
            _avro_named(s, found)
    elif isinstance(schema, dict):
        if schema.get("type") == "record":
            found[schema["name"]] = schema
            if schema.get("namespace"):
                found[f"{schema['namespace']}.{schema['name']}"] = schema
            for f in schema.get("fields", []):
                _avro_named(f["type"], found)
        elif isinstance(schema.get("type"), dict | list):
            _avro_named(schema["type"], found)


_AVRO_BASIC = {
    "int": "int32",
    "long": "int64",
    "float": "float32",
    "double": "float64",
    "boolean": "boolean",
    "string": "string",
    "bytes": "bytes",
}


def _avro_to_connect(field: dict[str, Any]) -> dict[str, Any]:
    """An Avro field as the Connect schema field it was converted from."""
    t = _non_null(field["type"])
    t = t if isinstance(t, dict) else {"type": t}
    base = t.get("connect.type") or _AVRO_BASIC.get(str(t.get("type")), "string")
    name = t.get("connect.name")
    params = {str(k): str(v) for k, v in (t.get("connect.parameters") or {}).items()}
    logical = t.get("logicalType")
    if logical == "decimal":
        name = name or DECIMAL
        params.setdefault("scale", str(t.get("scale", 0)))
        params.setdefault("connect.decimal.precision", str(t.get("precision", 38)))
    elif name is None and logical in ("timestamp-millis", "timestamp-micros", "date"):
        name = {"timestamp-millis": MILLI_TS[1], "timestamp-micros": MICRO_TS, "date": DATES[1]}[logical]
    return {"field": field["name"], "type": base, "name": name, "parameters": params}


def avro_fields(schema: dict[str, Any]) -> dict[str, dict[str, Any]]:
    named: dict[str, Any] = {}
    _avro_named(schema, named)
    out: dict[str, dict[str, Any]] = {}
    for part in schema.get("fields", []):
        if part["name"] in ("after", "before"):
            rec = _non_null(part["type"])
            rec = named.get(rec, rec) if isinstance(rec, str) else rec
            if isinstance(rec, dict) and rec.get("type") == "record":
                for f in rec["fields"]:
                    out.setdefault(f["name"], _avro_to_connect(f))
    return out


def _fastavro() -> Any:
    try:
        import fastavro
    except ImportError as exc:  # an optional extra: say how to get it
        raise SourceError("reading Avro change files needs fastavro", hint="pip install 'shoal[avro]'") from exc
    return fastavro


class DebeziumAvro:
    suffixes: tuple[str, ...] = (".avro",)
    sequence_column: str | None = SEQUENCE_COLUMN

    def read_columns(self, file: ChangeFile, layout: CsvLayout) -> FileColumns:
        fastavro = _fastavro()
        try:
            fs, path = storage.filesystem(file.uri)
            with fs.open_input_stream(path) as f:
                schema = fastavro.reader(f).writer_schema
        except Exception as exc:  # noqa: BLE001 - fastavro raises several types for a bad file
            return FileColumns([], [], error=f"cannot read Avro file: {exc}")
        fields = avro_fields(schema if isinstance(schema, dict) else {})
        names = [*fields, SEQUENCE_COLUMN]
        types = {n: spark_type(f) for n, f in fields.items()} | {SEQUENCE_COLUMN: "bigint"}
        return FileColumns(names, names, types)

    def parse(
        self, uri: str, name: str, order: int, header: list[str], layout: CsvLayout, columns: list[str], raw: bool
    ) -> Iterator[pa.RecordBatch]:
        import fastavro

        buf = RowBuffer(name, order, columns)
        record = 0
        try:
            fs, path = storage.filesystem(uri)
            with fs.open_input_stream(path) as f:
                reader = fastavro.reader(f)  # type: ignore[arg-type]  # a NativeFile reads like a binary file
                fields = avro_fields(reader.writer_schema if isinstance(reader.writer_schema, dict) else {})
                for record, event in enumerate(reader, start=1):
                    op, values, error = normalize(event, fields)
                    text = json.dumps(event, default=str) if raw or error else None
                    buf.add(record, text, error, op, values)
                    if buf.full():
                        yield buf.flush()
        except Exception as exc:  # noqa: BLE001 - a corrupt block: the records after it cannot be read
            buf.add(record + 1, "", f"cannot read Avro record {record + 1}: {exc}", None, {})
        yield buf.flush()
