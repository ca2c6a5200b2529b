"""Change-file discovery and parsing (runs the executor-side parser directly, no Spark)."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import pyarrow as pa
import pytest

from shoal.cdc.source import CsvLayout, data_columns, discover, parse_files, read_header
from shoal.exceptions import SourceError


def parse(path: Path, layout: CsvLayout, columns: list[str], header: list[str]) -> list[dict]:
    batch = pa.RecordBatch.from_pydict(
        {"uri": [str(path)], "name": [path.name], "file_order": [0], "header": [json.dumps(header)]}
    )
    out = list(parse_files(iter([batch]), json.dumps(asdict(layout)), columns))
    return pa.Table.from_batches(out).to_pylist() if out else []


def test_discover_orders_full_load_first_then_by_name(source: Path) -> None:
    for name in ["20220302-1134010000.csv", "LOAD00000002.csv", "20220301-0000000000.csv", "LOAD00000001.csv"]:
        (source / name).write_text("op,id\n")
    (source / ".hidden.csv").write_text("x")
    (source / "notes.txt").write_text("x")
    assert [f.name for f in discover(str(source))] == [
        "LOAD00000001.csv",
        "LOAD00000002.csv",
        "20220301-0000000000.csv",
        "20220302-1134010000.csv",
    ]


def test_discover_missing_folder_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(SourceError, match="does not exist"):
        discover(str(tmp_path / "nope"))


def test_header_file_rows_have_physical_line_numbers_and_raw_text(source: Path) -> None:
    f = source / "20220302-1134010000.csv"
    f.write_text('Op,id,name\nU,1,"multi\nline"\nD,2,b\n\nI,3,c\n')
    layout = CsvLayout()
    rows = parse(f, layout, ["id", "name"], read_header(discover(str(source))[0], layout))
    assert [(r["_line"], r["_op"], r["id"], r["name"]) for r in rows] == [
        (2, "U", "1", "multi\nline"),
        (4, "D", "2", "b"),
        (6, "I", "3", "c"),
    ]
    assert rows[0]["_raw"] == 'U,1,"multi\nline"'
    assert all(r["_error"] is None for r in rows)


def test_bad_rows_are_reported_with_reason(source: Path) -> None:
    f = source / "20220302-1134010000.csv"
    f.write_text("op,id,name\nX,1,a\n,2,b\nU,3\nu,4,d\n")
    rows = parse(f, CsvLayout(), ["id", "name"], ["op", "id", "name"])
    errors = {r["_line"]: r["_error"] for r in rows}
    assert "unknown operation 'X'" in errors[2]
    assert "missing operation" in errors[3]
    assert "wrong column count: expected 3 fields, got 2" in errors[4]
    assert errors[5] is None and rows[3]["_op"] == "U"  # lower-case ops are accepted


def test_full_load_rows_without_operation_are_inserts(source: Path) -> None:
    f = source / "LOAD00000001.csv"
    f.write_text("id,name\n1,a\n2,\n")
    rows = parse(f, CsvLayout(), ["id", "name"], ["id", "name"])
    assert [(r["_op"], r["id"], r["name"]) for r in rows] == [("I", "1", "a"), ("I", "2", None)]


def test_headerless_files_take_the_operation_as_extra_first_field(source: Path) -> None:
    layout = CsvLayout(header=False, columns=("id", "name"))
    load = source / "LOAD00000001.csv"
    load.write_text("1,a\n")
    change = source / "20220302-1134010000.csv"
    change.write_text("U,1,b\n2,c\n")
    assert [(r["_op"], r["id"]) for r in parse(load, layout, ["id", "name"], ["id", "name"])] == [("I", "1")]
    rows = parse(change, layout, ["id", "name"], ["id", "name"])
    assert (rows[0]["_op"], rows[0]["id"], rows[0]["name"], rows[0]["_line"]) == ("U", "1", "b", 1)
    assert "missing operation" in rows[1]["_error"]


def test_columns_missing_from_a_file_are_null(source: Path) -> None:
    f = source / "20220302-1134010000.csv"
    f.write_text("op,id\nI,1\n")
    rows = parse(f, CsvLayout(), ["id", "color"], ["op", "id"])
    assert rows[0]["color"] is None and rows[0]["id"] == "1"


def test_invalid_utf8_is_reported_not_raised(source: Path) -> None:
    f = source / "20220302-1134010000.csv"
    f.write_bytes(b"op,id\nI,1\nI,\xff\xfe\n")
    rows = parse(f, CsvLayout(), ["id"], ["op", "id"])
    assert [(r["_line"], r["_error"] is None) for r in rows] == [(2, True), (3, False)]
    assert "not valid UTF-8" in rows[1]["_error"]


def test_header_with_repeated_names_is_rejected(source: Path) -> None:
    (source / "20220302-1134010000.csv").write_text("op,id,id\n")
    with pytest.raises(SourceError, match="repeated column names"):
        read_header(discover(str(source))[0], CsvLayout())


def test_data_columns_drop_the_op_column_case_insensitively() -> None:
    assert data_columns(["Op", "id", "name"], CsvLayout(op_column="op")) == ["id", "name"]


@pytest.mark.parametrize(
    ("name", "content", "layout"),
    [
        ("20220302-1134010000.csv", "op,id,name\nU,1,a\nd,2,\nX,3,c\n,4,d\n", CsvLayout()),
        ("LOAD00000001.csv", 'Op,ID,Name\n,1,"quoted, comma"\nI,2,b\r\n', CsvLayout()),
        ("LOAD00000001.csv", "1,a\n2,b\n", CsvLayout(header=False, columns=("id", "name"))),
        ("20220302-1134010000.csv", "U,1,a\nD,2,b\n", CsvLayout(header=False, columns=("id", "name"))),
        ("20220302-1134010000.csv", "op|id|name\nU|1|a\n", CsvLayout(delimiter="|")),
    ],
)
def test_vectorised_and_line_by_line_parsers_agree(source: Path, name: str, content: str, layout: CsvLayout) -> None:
    from shoal.cdc import source as src

    f = source / name
    f.write_text(content)
    header = read_header(discover(str(source))[0], layout)
    columns = data_columns(header, layout)
    columns = ["id", "name"] if not layout.header else [c.lower() for c in columns]
    schema = src.output_schema(columns)
    fast = src._parse_fast(str(f), name, 0, header, layout, columns, schema)
    assert fast is not None, "expected the vectorised path to handle this file"
    slow = pa.Table.from_batches(list(src._parse_one(str(f), name, 0, header, layout, columns, schema)))
    assert fast.to_pylist() == slow.to_pylist()


def test_vectorised_parser_declines_irregular_files(source: Path) -> None:
    from shoal.cdc import source as src

    layout = CsvLayout()
    schema = src.output_schema(["id", "name"])
    for i, content in enumerate(
        ['op,id,name\nU,1,"two\nlines"\n', "op,id,name\nU,1\n", "op,id,name\nU,1,a\n\nU,2,b\n"]
    ):
        f = source / f"2022030{i}-0000000000.csv"
        f.write_text(content)
        assert src._parse_fast(str(f), f.name, 0, ["op", "id", "name"], layout, ["id", "name"], schema) is None
