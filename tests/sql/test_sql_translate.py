from __future__ import annotations

import pytest

from shoal.sql import split_statements, to_json_value, translate


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("SELECT * FROM t FOR TIMESTAMP AS OF '2024-01-01'", "SELECT * FROM t TIMESTAMP AS OF '2024-01-01'"),
        (
            "SELECT * FROM t FOR SYSTEM_TIME AS OF TIMESTAMP '2024-01-01 00:00:00'",
            "SELECT * FROM t TIMESTAMP AS OF TIMESTAMP '2024-01-01 00:00:00'",
        ),
        ("select * from t for version as of 42", "select * from t VERSION as of 42"),
        ("SELECT * FROM t VERSION AS OF 42", "SELECT * FROM t VERSION AS OF 42"),
        ("SELECT * FROM t TIMESTAMP AS OF '2024-01-01'", "SELECT * FROM t TIMESTAMP AS OF '2024-01-01'"),
        # String literals and comments are never rewritten.
        ("SELECT 'FOR VERSION AS OF 1' AS s", "SELECT 'FOR VERSION AS OF 1' AS s"),
        ("SELECT 1 -- FOR VERSION AS OF 1", "SELECT 1 -- FOR VERSION AS OF 1"),
        (
            "SELECT a.x FROM a FOR VERSION AS OF 1 JOIN b FOR TIMESTAMP AS OF '2024-01-01' ON a.id = b.id",
            "SELECT a.x FROM a VERSION AS OF 1 JOIN b TIMESTAMP AS OF '2024-01-01' ON a.id = b.id",
        ),
    ],
)
def test_translate_time_travel_spellings(query: str, expected: str) -> None:
    assert translate(query) == expected


def test_split_statements_ignores_semicolons_in_strings() -> None:
    assert split_statements("SELECT ';' AS x; SELECT 2;") == ["SELECT ';' AS x", "SELECT 2"]


def test_json_values_are_iso_timestamps() -> None:
    import datetime as dt

    assert to_json_value(dt.datetime(2022, 3, 2, 11, 34, 1)) == "2022-03-02T11:34:01+00:00"
    assert to_json_value(dt.date(2022, 3, 2)) == "2022-03-02"
