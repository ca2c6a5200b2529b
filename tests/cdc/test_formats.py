"""Each format's reader on its own (no Spark): Debezium's value modes and envelopes, DMS
Parquet's typed columns, and unreadable files becoming one reported bad row."""

from __future__ import annotations

import base64
import datetime as dt
import json
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from shoal.cdc import formats
from shoal.cdc.debezium import SEQUENCE_COLUMN, normalize, render, spark_type
from shoal.cdc.source import FILE_COL, LINE_COL, ChangeFile, CsvLayout
from shoal.exceptions import ShoalError

DECIMAL_FIELD = {
    "type": "bytes",
    "name": "org.apache.kafka.connect.data.Decimal",
    "parameters": {"scale": "2", "connect.decimal.precision": "10"},
    "field": "price",
}


def _b64(unscaled: int) -> str:
    return base64.b64encode(unscaled.to_bytes(8, "big", signed=True).lstrip(b"\x00") or b"\x00").decode()


def parse(path: Path, fmt: str, layout: CsvLayout | None = None) -> tuple[formats.FileColumns, list[dict]]:
    layout = layout or CsvLayout()
    file = ChangeFile(str(path), path.name, path.stat().st_size)
    found = formats.get(fmt).read_columns(file, layout)
    batch = pa.RecordBatch.from_pydict(
        {
            "uri": [str(path)],
            "name": [path.name],
            "file_order": [0],
            "header": [json.dumps({"format": fmt, "header": found.header})],
        }
    )
    layout_json = json.dumps(layout.__dict__)
    out = list(formats.parse_files(iter([batch]), layout_json, found.columns or ["id"], raw=True))
    return found, pa.Table.from_batches(out).to_pylist() if out else []


def test_debezium_value_modes() -> None:
    assert render("AvQ=", DECIMAL_FIELD) == "7.56"  # precise: base64 big-endian unscaled 756
    assert render(_b64(-12345), DECIMAL_FIELD) == "-123.45"
    assert render("123.45", {**DECIMAL_FIELD, "type": "string", "name": None}) == "123.45"  # string mode
    assert render(123.45, {"type": "float64", "field": "price"}) == "123.45"  # double mode
    assert render({"scale": 3, "value": "AeI="}, {"name": "io.debezium.data.VariableScaleDecimal"}) == "0.482"
    assert spark_type(DECIMAL_FIELD) == "decimal(10,2)"
    micros = 1_646_220_841_250_000
    assert render(micros, {"name": "io.debezium.time.MicroTimestamp"}) == "2022-03-02 11:34:01.250000"
    assert render(micros // 1000, {"name": "io.debezium.time.Timestamp"}) == "2022-03-02 11:34:01.250000"
    assert render(micros * 1000, {"name": "io.debezium.time.NanoTimestamp"}) == "2022-03-02 11:34:01.250000"
    assert render(19053, {"name": "io.debezium.time.Date"}) == "2022-03-02"
    assert render(41_641_250_000, {"name": "io.debezium.time.MicroTime"}) == "11:34:01.250000"
    zoned = "2022-03-02T11:34:01.25+01:00"
    assert render(zoned, {"name": "io.debezium.time.ZonedTimestamp"}) == zoned
    assert spark_type({"name": "io.debezium.time.ZonedTimestamp", "type": "string"}) == "timestamp"
    assert spark_type({"name": "io.debezium.time.MicroTimestamp", "type": "int64"}) == "timestamp_ntz"
    assert spark_type({"type": "int32"}) == "int" and spark_type({"type": "boolean"}) == "boolean"
    assert render(True, None) == "true" and render({"a": 1}, None) == '{"a": 1}'


def test_debezium_operations_and_sequence() -> None:
    row = {"id": 1, "name": "a"}
    src = {"ts_ms": 1000, "lsn": 5000}
    assert normalize({"op": "r", "after": row, "source": src}, None)[0] == "I"
    assert normalize({"op": "c", "after": row, "source": src}, None)[0] == "I"
    op, values, error = normalize({"op": "u", "before": None, "after": row, "source": src}, None)
    assert (op, values[SEQUENCE_COLUMN], error) == ("U", "5000", None)  # lsn first
    op, values, _ = normalize({"op": "d", "before": row, "after": None, "source": {"ts_ms": 7}}, None)
    assert (op, values["id"], values[SEQUENCE_COLUMN]) == ("D", "1", "7")  # ts_ms without lsn
    assert "truncate" in str(normalize({"op": "t", "source": src}, None)[2])
    assert "missing operation" in str(normalize({"after": row}, None)[2])
    assert "without its 'before' row" in str(normalize({"op": "d", "before": None, "source": src}, None)[2])
    assert "no source.lsn or source.ts_ms" in str(normalize({"op": "c", "after": row, "source": {}}, None)[2])


def test_schemaless_json_with_tombstones_and_a_bad_line(tmp_path: Path) -> None:
    f = tmp_path / "dbserver1.inventory.products+0+0000000000.json"
    events = [
        {"before": None, "after": {"id": 1, "price": "7.56"}, "source": {"ts_ms": 10}, "op": "c", "ts_ms": 11},
        {"before": {"id": 1, "price": "7.56"}, "after": None, "source": {"ts_ms": 20}, "op": "d", "ts_ms": 21},
    ]
    f.write_text(json.dumps(events[0]) + "\n\n" + json.dumps(events[1]) + "\nnull\n{oops\n")
    found, rows = parse(f, "debezium-json")
    assert found.columns == ["id", "price", SEQUENCE_COLUMN] and found.tombstones == 1
    assert found.types == {SEQUENCE_COLUMN: "bigint"}  # no schema: inferred later (or --schema)
    assert [(r["_line"], r["_op"], r["id"], r["price"], r["_error"]) for r in rows[:2]] == [
        (1, "I", "1", "7.56", None),
        (3, "D", "1", "7.56", None),
    ]
    assert rows[2]["_line"] == 5 and rows[2]["_error"].startswith("malformed JSON") and rows[2]["_raw"] == "{oops"


def test_parquet_types_full_load_and_zoned_timestamps(tmp_path: Path) -> None:
    f = tmp_path / "LOAD00000001.parquet"
    at = dt.datetime(2022, 3, 2, 11, 34, 1, tzinfo=dt.UTC)
    pq.write_table(
        pa.table(
            {
                "id": pa.array([1], pa.int32()),
                "amount": pa.array([Decimal("12345678901234.5678")], pa.decimal128(18, 4)),
                "at": pa.array([at], pa.timestamp("us", tz="UTC")),
                "day": pa.array([dt.date(2022, 3, 2)], pa.date32()),
            }
        ),
        f,
    )
    found, rows = parse(f, "dms-parquet")
    assert found.types == {"id": "int", "amount": "decimal(18,4)", "at": "timestamp", "day": "date"}
    assert (rows[0]["_op"], rows[0]["amount"], rows[0]["at"], rows[0]["day"]) == (
        "I",
        "12345678901234.5678",
        "2022-03-02T11:34:01.000000Z",
        "2022-03-02",
    )


@pytest.mark.parametrize(("fmt", "name"), [("dms-parquet", "20220302-1134010000.parquet"), ("debezium-avro", "x.avro")])
def test_unreadable_file_is_one_bad_row_naming_it(tmp_path: Path, fmt: str, name: str) -> None:
    f = tmp_path / name
    f.write_bytes(b"not really " + fmt.encode())
    found, rows = parse(f, fmt)
    assert found.error and len(rows) == 1
    assert rows[0]["_file"] == name and rows[0]["_error"].startswith("cannot read")


def test_format_by_name_and_unknown_format() -> None:
    assert formats.format_of("LOAD00000001.csv", None) == "dms-csv"
    assert formats.format_of("a/20220302-1134010000.parquet", None) == "dms-parquet"
    assert formats.format_of("t+0+0000000000.json", None) == "debezium-json"
    assert formats.format_of("t+0+0000000000.avro", None) == "debezium-avro"
    assert formats.format_of("anything.csv", "debezium-json") == "debezium-json"
    with pytest.raises(ShoalError, match="must be one of dms-csv, dms-parquet, debezium-json, debezium-avro"):
        formats.get("maxwell")


def test_cli_takes_format_and_schema_and_rejects_an_unknown_format(capsys, monkeypatch) -> None:
    from tests.support.helpers import run_cli

    code, out, _ = run_cli(["cdc", "apply", "--help"], capsys, monkeypatch)
    assert code == 0 and "--format" in out and "--schema" in out and "debezium-avro" in out
    args = ["cdc", "apply", "src", "--table", "t.x", "--key", "id", "--format", "maxwell"]
    code, _, err = run_cli(args, capsys, monkeypatch)
    assert code == 2 and "'maxwell' is not one of" in err and "dms-parquet" in err


def test_a_backlog_of_small_files_leaves_the_parser_in_few_batches(tmp_path: Path) -> None:
    """A batch per 5-row file cost the JVM more than the parse: small files' rows go on together,
    every row once; a file big enough for a batch of its own goes on as it is."""
    names = [f"20240102-{i:04d}.csv" for i in range(40)]
    for i, name in enumerate(names):
        (tmp_path / name).write_text("op,id,ts\n" + "".join(f"U,{i * 5 + j},2024-01-02\n" for j in range(5)))
    big = "20240103-0000.csv"
    (tmp_path / big).write_text("op,id,ts\n" + "".join(f"I,{10_000 + j},2024-01-03\n" for j in range(5000)))
    header = json.dumps({"format": "dms-csv", "header": ["op", "id", "ts"]})
    files = [*names, big]
    batch = pa.RecordBatch.from_pydict(
        {
            "uri": [str(tmp_path / n) for n in files],
            "name": files,
            "file_order": list(range(len(files))),
            "header": [header] * len(files),
        }
    )
    layout_json = json.dumps(CsvLayout().__dict__)
    out = list(formats.parse_files(iter([batch]), layout_json, ["id", "ts"], raw=False))
    assert sorted(b.num_rows for b in out) == [200, 5000]  # the 40 small files in one batch
    rows = [r for b in out for r in b.to_pylist()]
    assert len({(r[FILE_COL], r[LINE_COL]) for r in rows}) == len(rows) == 5200
    assert sorted(int(r["id"]) for r in rows) == list(range(200)) + list(range(10_000, 15_000))
