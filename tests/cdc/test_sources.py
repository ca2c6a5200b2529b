"""The acceptance scenario for every change-file format, on real Spark + Iceberg.

The same change history (a full load; a batch with a delete, a tie between two files, a
partition move and one bad row, interrupted once before its commit; a late file of older
events; a re-run) is written as each tool writes its files, then applied with `--format`.
One Spark session serves all formats; each apply is a handful of small Spark jobs.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path

import fastavro
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from shoal.cdc import apply as apply_module
from shoal.lake import TableName, current_snapshot
from tests.support.helpers import apply, rows

T1, T15, T2, T3, T4 = (
    dt.datetime(2022, 3, 1, 10, 0, 0),
    dt.datetime(2022, 3, 1, 12, 0, 0),
    dt.datetime(2022, 3, 2, 11, 34, 1, 250000),
    dt.datetime(2022, 3, 2, 11, 35, 0),
    dt.datetime(2022, 3, 3, 9, 0, 0),
)
# (op I/U/D, product_id, category, name, quantity, price, changed at); op "X" is a bad row.
Event = tuple[str, int, str, str, int, Decimal, dt.datetime]
FULL_LOAD: list[Event] = [
    ("I", 101, "tools", "hammer", 10, Decimal("9.99"), T1),
    ("I", 102, "tools", "saw", 5, Decimal("19.50"), T1),
    ("I", 103, "garden", "rake", 7, Decimal("4.25"), T1),
]
BATCH_A: list[Event] = [
    ("U", 102, "tools", "saw", 4, Decimal("18.00"), T2),
    ("D", 103, "garden", "rake", 7, Decimal("4.25"), T2),
    ("I", 104, "garden", "hoe", 2, Decimal("7.10"), T2),
    ("X", 106, "tools", "bad", 1, Decimal("1.00"), T2),
]
BATCH_B: list[Event] = [
    ("U", 104, "garden", "hoe-later-file", 3, Decimal("7.10"), T2),  # ties with A's insert: later file wins
    ("U", 101, "garden", "hammer", 10, Decimal("9.99"), T3),  # moves partition
]
LATE: list[Event] = [
    ("U", 102, "tools", "saw-stale", 1, Decimal("1.00"), T15),  # older than the table's row
    ("I", 103, "garden", "rake-back", 1, Decimal("1.00"), T15),  # older than its delete
    ("I", 105, "tools", "drill", 1, Decimal("123456.78"), T4),
]
EXPECTED = [
    (101, "garden", "hammer", 10, Decimal("9.99")),
    (102, "tools", "saw", 4, Decimal("18.00")),
    (104, "garden", "hoe-later-file", 3, Decimal("7.10")),
    (105, "tools", "drill", 1, Decimal("123456.78")),
]
COLUMNS = ["product_id", "category", "name", "quantity", "price", "updated_at"]


# ---- DMS CSV and Parquet: LOAD00000001.* full loads, time-named change files -------------
def _dms_name(kind: str, n: int, ext: str) -> str:
    return f"LOAD0000000{n}.{ext}" if kind == "load" else f"2022030{n}-1134010000.{ext}"


def write_dms_csv(folder: Path, kind: str, n: int, events: list[Event]) -> tuple[str, int]:
    lines = ["Op," + ",".join(COLUMNS)] if kind != "load" else [",".join(COLUMNS)]
    bad = 0
    for op, pid, cat, name, qty, price, at in events:
        values = [str(pid), cat, name, str(qty), str(price), at.strftime("%Y-%m-%d %H:%M:%S.%f")]
        lines.append(",".join(values if kind == "load" else [op, *values]))
        bad = len(lines) if op == "X" else bad
    path = _dms_name(kind, n, "csv")
    (folder / path).write_text("\n".join(lines) + "\n")
    return path, bad


def write_dms_parquet(folder: Path, kind: str, n: int, events: list[Event]) -> tuple[str, int]:
    # As the service writes Parquet: `Op` first in change files only; source types kept.
    cols: dict[str, pa.Array] = {}
    if kind != "load":
        cols["Op"] = pa.array([e[0] for e in events], pa.string())
    cols["product_id"] = pa.array([e[1] for e in events], pa.int64())
    cols["category"] = pa.array([e[2] for e in events], pa.string())
    cols["name"] = pa.array([e[3] for e in events], pa.string())
    cols["quantity"] = pa.array([e[4] for e in events], pa.int32())
    cols["price"] = pa.array([e[5] for e in events], pa.decimal128(10, 2))
    cols["updated_at"] = pa.array([e[6] for e in events], pa.timestamp("us"))
    path = _dms_name(kind, n, "parquet")
    pq.write_table(pa.table(cols), folder / path)
    bad = next((i + 1 for i, e in enumerate(events) if e[0] == "X"), 0)
    return path, bad


# ---- Debezium: Kafka Connect S3 sink object names, one record value per line ------------
TOPIC = "dbserver1.inventory.products"
_DBZ_OP = {"I": "c", "U": "u", "D": "d", "X": "x"}


def _micros(at: dt.datetime) -> int:
    return (at - dt.datetime(1970, 1, 1)) // dt.timedelta(microseconds=1)


def _sink_name(n: int, ext: str) -> str:
    return f"topics/{TOPIC}/partition=0/{TOPIC}+0+{n * 1000:010d}.{ext}"


def _row_schema(optional: bool, field: str) -> dict:
    return {
        "type": "struct",
        "optional": optional,
        "name": f"{TOPIC}.Value",
        "field": field,
        "fields": [
            {"type": "int64", "optional": False, "field": "product_id"},
            {"type": "string", "optional": True, "field": "category"},
            {"type": "string", "optional": True, "field": "name"},
            {"type": "int32", "optional": True, "field": "quantity"},
            {
                "type": "bytes",
                "optional": True,
                "name": "org.apache.kafka.connect.data.Decimal",
                "version": 1,
                "parameters": {"scale": "2", "connect.decimal.precision": "10"},
                "field": "price",
            },
            {
                "type": "int64",
                "optional": True,
                "name": "io.debezium.time.MicroTimestamp",
                "version": 1,
                "field": "updated_at",
            },
        ],
    }


ENVELOPE_SCHEMA = {
    "type": "struct",
    "optional": False,
    "name": f"{TOPIC}.Envelope",
    "fields": [
        _row_schema(True, "before"),
        _row_schema(True, "after"),
        {
            "type": "struct",
            "optional": False,
            "name": "io.debezium.connector.postgresql.Source",
            "field": "source",
            "fields": [
                {"type": "string", "optional": False, "field": "connector"},
                {"type": "int64", "optional": False, "field": "ts_ms"},
                {"type": "int64", "optional": True, "field": "lsn"},
            ],
        },
        {"type": "string", "optional": False, "field": "op"},
        {"type": "int64", "optional": True, "field": "ts_ms"},
    ],
}


def _unscaled_b64(price: Decimal) -> str:
    unscaled = int(price.scaleb(2))
    return base64.b64encode(unscaled.to_bytes((unscaled.bit_length() + 8) // 8, "big", signed=True)).decode()


def write_debezium_json(folder: Path, kind: str, n: int, events: list[Event]) -> tuple[str, int]:
    # JsonConverter with schemas.enable=true and decimal.handling.mode=precise (the defaults);
    # events without the envelope are covered in test_formats.py.
    envelope = True
    lines: list[str] = []
    bad = 0
    for op, pid, cat, name, qty, price, at in events:
        row = {
            "product_id": pid,
            "category": cat,
            "name": name,
            "quantity": qty,
            "price": _unscaled_b64(price) if envelope else str(price),
            "updated_at": _micros(at),
        }
        ms = _micros(at) // 1000
        payload = {
            "before": row if op == "D" else None,
            "after": None if op == "D" else row,
            "source": {"connector": "postgresql", "ts_ms": ms, "lsn": ms * 16},
            "op": "r" if kind == "load" else _DBZ_OP[op],
            "ts_ms": ms + 5,
        }
        if op == "X":
            lines.append(json.dumps(payload)[:40])  # a record cut short: malformed JSON
            bad = len(lines)
            continue
        lines.append(json.dumps({"schema": ENVELOPE_SCHEMA, "payload": payload} if envelope else payload))
        if op == "D":  # the tombstone Debezium writes after a delete
            lines.append(json.dumps({"schema": None, "payload": None}) if envelope else "null")
    path = _sink_name(n, "json")
    (folder / path).parent.mkdir(parents=True, exist_ok=True)
    (folder / path).write_text("\n".join(lines) + "\n")
    return path, bad


AVRO_VALUE = {
    "type": "record",
    "name": "Value",
    "namespace": TOPIC,
    "fields": [
        {"name": "product_id", "type": "long"},
        {"name": "category", "type": ["null", "string"], "default": None},
        {"name": "name", "type": ["null", "string"], "default": None},
        {"name": "quantity", "type": ["null", "int"], "default": None},
        {
            "name": "price",
            "type": [
                "null",
                {
                    "type": "bytes",
                    "scale": 2,
                    "precision": 10,
                    "connect.version": 1,
                    "connect.parameters": {"scale": "2", "connect.decimal.precision": "10"},
                    "connect.name": "org.apache.kafka.connect.data.Decimal",
                    "logicalType": "decimal",
                },
            ],
            "default": None,
        },
        {
            "name": "updated_at",
            "type": ["null", {"type": "long", "connect.version": 1, "connect.name": "io.debezium.time.MicroTimestamp"}],
            "default": None,
        },
    ],
    "connect.name": f"{TOPIC}.Value",
}
AVRO_ENVELOPE = {
    "type": "record",
    "name": "Envelope",
    "namespace": TOPIC,
    "fields": [
        {"name": "before", "type": ["null", AVRO_VALUE], "default": None},
        {"name": "after", "type": ["null", f"{TOPIC}.Value"], "default": None},
        {
            "name": "source",
            "type": {
                "type": "record",
                "name": "Source",
                "namespace": "io.debezium.connector.mysql",
                "fields": [
                    {"name": "connector", "type": "string"},
                    {"name": "ts_ms", "type": "long"},
                    {"name": "file", "type": "string"},
                    {"name": "pos", "type": "long"},
                ],
            },
        },
        {"name": "op", "type": "string"},
        {"name": "ts_ms", "type": ["null", "long"], "default": None},
    ],
    "connect.name": f"{TOPIC}.Envelope",
}


def write_debezium_avro(folder: Path, kind: str, n: int, events: list[Event]) -> tuple[str, int]:
    # The S3 sink's AvroFormat: an object container file with the writer schema (MySQL source:
    # no lsn, so source.ts_ms orders the events).
    records = []
    for op, pid, cat, name, qty, price, at in events:
        row = {
            "product_id": pid,
            "category": cat,
            "name": name,
            "quantity": qty,
            "price": price,
            "updated_at": _micros(at),
        }
        ms = _micros(at) // 1000
        records.append(
            {
                "before": row if op == "D" else None,
                "after": None if op == "D" else row,
                "source": {"connector": "mysql", "ts_ms": ms, "file": "binlog.000003", "pos": 4 + len(records)},
                "op": "r" if kind == "load" else _DBZ_OP[op],
                "ts_ms": ms + 5,
            }
        )
    path = _sink_name(n, "avro")
    (folder / path).parent.mkdir(parents=True, exist_ok=True)
    with open(folder / path, "wb") as f:
        fastavro.writer(f, fastavro.parse_schema(AVRO_ENVELOPE), records)
    bad = next((i + 1 for i, e in enumerate(events) if e[0] == "X"), 0)
    return path, bad


Writer = Callable[[Path, str, int, list[Event]], tuple[str, int]]
FORMATS: dict[str, tuple[Writer, dict[str, object], str, str]] = {
    # format: (writer, apply options, the bad row's reason, the timestamp column's type)
    "dms-csv": (
        write_dms_csv,
        {"sequence": "updated_at", "op_column": "Op", "schema": {"price": "decimal(10,2)"}},
        "unknown operation 'X'",
        "timestamp",
    ),
    "dms-parquet": (
        write_dms_parquet,
        {"sequence": "updated_at", "op_column": "Op"},
        "unknown operation 'X'",
        "timestamp_ntz",
    ),
    "debezium-json": (write_debezium_json, {"sequence": ""}, "malformed JSON", "timestamp_ntz"),
    "debezium-avro": (write_debezium_avro, {"sequence": ""}, "unknown operation 'x'", "timestamp_ntz"),
}


def state(spark, table: str) -> list[tuple]:
    return rows(spark, f"SELECT product_id, category, name, quantity, price FROM {table} ORDER BY product_id")


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_acceptance_scenario_per_format(spark, settings, source, table_name, fmt, monkeypatch) -> None:
    write, opts, reason, ts_type = FORMATS[fmt]
    opts = {**opts, "format": fmt}
    write(source, "load", 1, FULL_LOAD)
    first = apply(settings, source, table_name, partition_by="category, bucket(4, product_id)", **opts)
    assert first.table_created and first.inserted == 3
    types = {f.name: f.dataType.simpleString() for f in spark.table(table_name).schema.fields}
    assert types["price"] == "decimal(10,2)" and types["updated_at"] == ts_type

    file_a, bad_line = write(source, "change", 2, BATCH_A)
    write(source, "change", 3, BATCH_B)
    before = current_snapshot(spark, TableName.parse(table_name))[0]
    original = apply_module._Batch._merge

    def crash(*_a, **_k):
        raise RuntimeError("simulated crash before the commit")

    monkeypatch.setattr(apply_module._Batch, "_merge", crash)
    with pytest.raises(RuntimeError, match="simulated crash"):
        apply(settings, source, table_name, on_error="quarantine", **opts)
    monkeypatch.setattr(apply_module._Batch, "_merge", original)
    assert current_snapshot(spark, TableName.parse(table_name))[0] == before  # never half-written
    second = apply(settings, source, table_name, on_error="quarantine", **opts)
    assert (second.inserted, second.updated, second.deleted, second.rejected) == (1, 2, 1, 1)
    if fmt == "debezium-json":
        assert second.tombstone_records_skipped == 1
    rejects = rows(spark, f"SELECT file, line, reason FROM {table_name}__rejects")
    assert [(f, n) for f, n, _ in rejects] == [(file_a, bad_line)]  # once, despite the crash
    assert reason in rejects[0][2]
    # The partition move leaves one live row for the key, in its new partition.
    assert rows(spark, f"SELECT category FROM {table_name} WHERE product_id = 101") == [("garden",)]

    write(source, "change", 4, LATE)
    late = apply(settings, source, table_name, **opts)
    assert (late.ignored_stale, late.inserted) == (2, 1)
    assert state(spark, table_name) == EXPECTED
    again = apply(settings, source, table_name, **opts)
    assert again.files_applied == [] and not again.committed


def test_json_envelope_types_map_to_their_spark_types(spark, settings, source, table_name) -> None:
    """Kafka Connect's JsonConverter spells FLOAT32/FLOAT64 `float`/`double`; these (and the
    integer widths, booleans and base64 `bytes`) become typed columns, not strings."""
    spelled = {"i8": "int8", "i16": "int16", "i32": "int32", "i64": "int64"}
    spelled |= {"f32": "float", "f64": "double", "ok": "boolean", "blob": "bytes", "note": "string"}
    fields = [{"type": "int64", "optional": False, "field": "id"}]
    fields += [{"type": t, "optional": True, "field": f} for f, t in spelled.items()]
    row_schema = {"type": "struct", "optional": True, "name": f"{TOPIC}.Value", "fields": fields}
    schema = {
        "type": "struct",
        "name": f"{TOPIC}.Envelope",
        "fields": [{**row_schema, "field": "before"}, {**row_schema, "field": "after"}]
        + [{"type": "string", "optional": False, "field": "op"}, {"type": "int64", "optional": True, "field": "ts_ms"}],
    }
    blob = bytes([0, 1, 2, 250, 255])
    after = {"id": 1, "i8": -8, "i16": 300, "i32": 70000, "i64": 2**40, "f32": 1.5, "f64": 0.1}
    after |= {"ok": True, "blob": base64.b64encode(blob).decode(), "note": "n"}
    events = [
        {"schema": schema, "payload": {"before": None, "after": row, "op": "c", "ts_ms": 1}}
        for row in (after, {**after, "id": 2, "blob": "not base64!"})
    ]
    path = source / _sink_name(1, "json")
    path.parent.mkdir(parents=True)
    path.write_text("".join(json.dumps(e) + "\n" for e in events))

    result = apply(
        settings, source, table_name, keys=["id"], sequence="", format="debezium-json", on_error="quarantine"
    )
    assert result.inserted == 1 and result.rejected == 1
    [(reason,)] = rows(spark, f"SELECT reason FROM {table_name}__rejects")
    assert "'blob'" in reason and "not a valid binary" in reason
    types = {f.name: f.dataType.simpleString() for f in spark.table(table_name).schema.fields}
    assert {c: types[c] for c in spelled} == {
        "i8": "int",
        "i16": "int",
        "i32": "int",
        "i64": "bigint",
        "f32": "float",
        "f64": "double",
        "ok": "boolean",
        "blob": "binary",
        "note": "string",
    }
    got = rows(spark, f"SELECT i8, i16, i32, i64, f32, f64, ok, blob, note FROM {table_name}")
    assert got == [(-8, 300, 70000, 2**40, 1.5, 0.1, True, bytearray(blob), "n")]
