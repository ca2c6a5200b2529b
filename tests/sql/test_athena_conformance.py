"""Athena conformance: each case in athena_cases.py gives Athena's answer or a clear refusal.

Spark work is batched: every case is translated alone (no Spark job; refusals show here);
the ones that translate run together as the columns of one query per kind (one row of t, an
aggregate over u, the window functions over u), split in halves only if that fails; only the
cases Athena rejects run one by one (an error ends a query). The row query then runs once
more as a restricted principal through governed SQL.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import uuid
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import pytest

from shoal.exceptions import SqlError
from shoal.sql.external import SqlRunner
from tests.sql.athena_cases import CASES, ERROR, Unsupported

CLEAR = "not supported in Shoal: "


@dataclass
class Outcome:
    value: Any = None
    error: str | None = None

    @property
    def refused(self) -> bool:
        return self.error is not None and self.error.startswith(CLEAR)


def same(expected: Any, actual: Any) -> bool:
    """Athena's answer and Shoal's are the same value of the same kind."""
    if expected is None:
        return actual is None
    if isinstance(expected, bool) or isinstance(actual, bool):
        return actual is expected
    if isinstance(expected, float):
        if not isinstance(actual, float):
            return False
        return actual == expected or math.isclose(actual, expected, rel_tol=1e-9)
    if isinstance(expected, int):
        return type(actual) is int and actual == expected
    if isinstance(expected, Decimal):
        return isinstance(actual, Decimal) and actual == expected
    if isinstance(expected, list):
        return isinstance(actual, list) and len(actual) == len(expected) and all(map(same, expected, actual))
    if isinstance(expected, tuple):  # a ROW: Spark's Row is a tuple
        return isinstance(actual, tuple) and len(actual) == len(expected) and all(map(same, expected, actual))
    if isinstance(expected, dict):
        return (
            isinstance(actual, dict)
            and actual.keys() == expected.keys()
            and all(same(v, actual[k]) for k, v in expected.items())
        )
    if isinstance(expected, dt.datetime):
        return type(actual) is dt.datetime and actual == expected
    if isinstance(expected, dt.date):
        return type(actual) is dt.date and actual == expected
    return type(actual) is type(expected) and actual == expected


def verdict(expected: Any, outcome: Outcome) -> str:
    """same | clear-error | wrong."""
    if expected is ERROR:
        return "same" if outcome.error is not None else "wrong"
    if outcome.refused:
        return "clear-error"
    if outcome.error is not None:
        return "wrong"  # an error Athena does not give, and not a clear refusal
    target = expected.value if isinstance(expected, Unsupported) else expected
    return "same" if same(target, outcome.value) else "wrong"


@pytest.fixture(scope="module")
def athena_db(spark) -> str:
    db = f"athena_{uuid.uuid4().hex[:8]}"
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {db}")
    spark.sql(
        f"CREATE TABLE {db}.t (ts timestamp, d date, s string, i int, j int, x double, js string, nul int) USING iceberg"
    )
    spark.sql(
        f"""INSERT INTO {db}.t VALUES (TIMESTAMP '2024-01-15 10:30:45.123', DATE '2024-01-15', 'Hello World',
        7, 2, 2.5D, '{{"a":{{"b":[1,2,3]}},"c":"x","n":null,"f":1.50}}', CAST(NULL AS INT))"""
    )
    return db


U = (
    "WITH u AS (SELECT * FROM (VALUES (1, 'a', 1), (2, 'a', 2), (3, 'b', 3), (4, 'b', 3), (5, 'c', 5), "
    "(6, 'd', NULL)) AS u (id, g, v))\n"
)
KINDS = {"aggregates": "aggregate", "window": "window"}


def kind(k: int) -> str:
    return KINDS.get(CASES[k][0], "row")


def batch_sql(exprs: list[tuple[int, str]], of: str = "row") -> str:
    """One query for many cases of one kind: row (one row of t), aggregate or window (over u)."""
    cols = ",\n  ".join(f"{e} AS c{k}" for k, e in exprs)
    if of == "row":
        return f"SELECT {cols}\nFROM t"
    if of == "aggregate":
        return f"{U}SELECT {cols}\nFROM u"
    return f"{U}SELECT {cols}\nFROM u ORDER BY id"


def run_batch(run, exprs: list[tuple[int, str]], out: dict[int, Outcome], of: str = "row") -> None:
    """One query for all; on failure, halves (a case that fails alone gets its own error)."""
    if not exprs:
        return
    try:
        rows = run(batch_sql(exprs, of))
    except SqlError as exc:
        if len(exprs) == 1:
            out[exprs[0][0]] = Outcome(error=str(exc))
            return
        mid = len(exprs) // 2
        run_batch(run, exprs[:mid], out, of)
        run_batch(run, exprs[mid:], out, of)
        return
    for k, _ in exprs:
        values = [r[f"c{k}"] for r in rows]
        out[k] = Outcome(value=values if of == "window" else values[0])


def runner_for(spark, settings, db) -> SqlRunner:
    return SqlRunner(spark, settings, dialect="athena", database_name=db)


@pytest.fixture(scope="module")
def outcomes(spark, settings, athena_db) -> dict[int, Outcome]:
    runner = runner_for(spark, settings, athena_db)
    out: dict[int, Outcome] = {}
    batches: dict[str, list[tuple[int, str]]] = {"row": [], "aggregate": [], "window": []}
    one_by_one = []
    for k, (_, expr, expected) in enumerate(CASES):
        try:
            runner.translate(batch_sql([(k, expr)], kind(k)))
        except SqlError as exc:
            out[k] = Outcome(error=str(exc))
            continue
        (one_by_one if expected is ERROR else batches[kind(k)]).append((k, expr))

    def run(sql: str) -> list[dict[str, Any]]:
        result, _ = runner.execute(sql)
        return [dict(zip(result.columns, row, strict=True)) for row in result.rows]

    for of, exprs in batches.items():
        run_batch(run, exprs, out, of)
    for k, expr in one_by_one:
        run_batch(run, [(k, expr)], out, kind(k))
    return out


@pytest.mark.parametrize("k", range(len(CASES)), ids=[f"{c[0]}:{c[1][:60]}" for c in CASES])
def test_case_gives_athenas_answer_or_a_clear_refusal(outcomes, k):
    area, expr, expected = CASES[k]
    outcome = outcomes[k]
    result = verdict(expected, outcome)
    assert result != "wrong", f"{expr}: Athena {expected!r}, Shoal {outcome.value!r} {outcome.error or ''}"
    # The table says which answers Shoal refuses; keep it honest both ways.
    assert (result == "clear-error") == isinstance(expected, Unsupported), (expr, outcome)


def test_counts(outcomes):
    counts = {"same": 0, "clear-error": 0, "wrong": 0}
    for k, (_, _, expected) in enumerate(CASES):
        counts[verdict(expected, outcomes[k])] += 1
    print(f"\nAthena conformance: {len(CASES)} cases: {counts}")
    assert counts["wrong"] == 0
    assert counts["same"] >= 0.9 * len(CASES)


def test_refusals_name_the_function_and_where_it_is(spark, settings, athena_db):
    runner = runner_for(spark, settings, athena_db)
    with pytest.raises(SqlError, match=r"not supported in Shoal: WORD_STEM \(line 3, column 3\)"):
        runner.execute("SELECT 1;\nSELECT\n  word_stem(s) FROM t")
    with pytest.raises(SqlError, match=r"^The input strings to hamming_distance function must have the same length$"):
        runner.execute("SELECT hamming_distance(s, 'x') FROM t")
    with pytest.raises(SqlError, match=r"DATE_FORMAT specifier %D .*\(line 1, column 8\)"):
        runner.execute("SELECT date_format(ts, '%D') FROM t")
    with pytest.raises(SqlError, match=r"`nope` cannot be resolved.*\(line 2, column 11\)"):
        runner.execute("SELECT 1;\nSELECT s, nope FROM t")
    with pytest.raises(SqlError, match=r"^Cannot cast 'Hello World' to INTEGER$"):
        runner.execute("SELECT CAST(s AS INTEGER) FROM t")
    with pytest.raises(SqlError, match=r"cannot parse the statement \(line 3, column \d+\)"):
        runner.execute("SELECT 1;\n\nSELECT FROM WHERE")


@pytest.fixture(scope="module")
def analyst(settings, athena_db) -> str:
    """A principal whose only grant is SELECT on the test table."""
    from shoal.governance import Governance, Principals

    principals = Principals(settings)
    name = f"analyst_{uuid.uuid4().hex[:6]}"
    principals.add(name, kind="user")
    Governance(settings).grant(principals.principal("admin"), "SELECT", "TABLE", f"{athena_db}.t", name)
    return name


def test_governed_sql_gives_the_same_answers(spark, settings, athena_db, outcomes, analyst):
    """Translate first, govern after: the restricted principal gets the same row (one query)."""
    from shoal.governance import GovernedSql, Principals

    runner = runner_for(spark, settings, athena_db)
    cases = [(k, c[1]) for k, c in enumerate(CASES) if outcomes[k].error is None and kind(k) == "row"]
    translated = runner.translate(batch_sql(cases))
    governed = GovernedSql(runner.session, settings, Principals(settings).principal(analyst)).execute(translated)
    row = dict(zip(governed.columns, governed.rows[0], strict=True))
    differ = [CASES[k][1] for k, _ in cases if not same(outcomes[k].value, row[f"c{k}"])]
    assert not differ


def test_cli_translates_then_governs(athena_db, analyst, cli_env, capsys, monkeypatch):
    from tests.support.helpers import run_cli

    query = "SELECT day_of_week(ts) AS dow, typeof(7 / 2) AS t, format_datetime(ts, 'yyyy-MM-dd') AS f FROM t"
    args = ["sql", "--dialect", "athena", "--database", athena_db, "--as", analyst, "--format", "json", query]
    code, out, err = run_cli(args, capsys, monkeypatch)
    assert code == 0, err
    assert json.loads(out) == [{"dow": 1, "t": "integer", "f": "2024-01-15"}]
    code, out, err = run_cli([*args[:-1], "SELECT word_stem(s) FROM t"], capsys, monkeypatch)
    assert code == 1 and "not supported in Shoal: WORD_STEM (line 1, column 8)" in err


def test_unnest_gives_trinos_rows(spark, settings, athena_db):
    """sql/select.md, UNNEST: an array expands to a column, a map to two (key, value); CROSS JOIN
    UNNEST drops rows whose array is empty and keeps NULL elements; WITH ORDINALITY counts from 1.
    One query for all shapes."""
    runner = runner_for(spark, settings, athena_db)
    result, _ = runner.execute(
        "SELECT 'array' AS k, CAST(n AS VARCHAR) AS a, NULL AS b FROM UNNEST(ARRAY[1, 2]) AS t(n)\n"
        "UNION ALL SELECT 'map', language, CAST(first_appeared AS VARCHAR)\n"
        "  FROM UNNEST(map(ARRAY['SQL', 'Java'], ARRAY[1974, 1995])) AS t(language, first_appeared)\n"
        "UNION ALL SELECT 'join', s, w FROM t CROSS JOIN UNNEST(split(s, ' ')) AS u(w)\n"
        "UNION ALL SELECT 'empty', s, w FROM t CROSS JOIN UNNEST(filter(split(s, ' '), e -> e = 'x')) AS u(w)\n"
        "UNION ALL SELECT 'nulls', s, w FROM t CROSS JOIN UNNEST(ARRAY[NULL, 'z']) AS u(w)\n"
        "UNION ALL SELECT 'ordinality', w, CAST(n AS VARCHAR) FROM t\n"
        "  CROSS JOIN UNNEST(ARRAY['p', NULL, 'q']) WITH ORDINALITY AS u(w, n) WHERE i = 7\n"
        "UNION ALL SELECT 'ordinality', w, CAST(n AS VARCHAR) FROM UNNEST(filter(ARRAY['r'], e -> e = 'x'))\n"
        "  WITH ORDINALITY AS u(w, n)\n"
        "UNION ALL SELECT 'from', w, CAST(n AS VARCHAR) FROM UNNEST(ARRAY['s']) WITH ORDINALITY AS u(w, n)"
    )
    rows = sorted(tuple("" if v is None else v for v in r) for r in result.rows)
    assert rows == [
        ("array", "1", ""),
        ("array", "2", ""),
        ("from", "s", "1"),
        ("join", "Hello World", "Hello"),
        ("join", "Hello World", "World"),
        ("map", "Java", "1995"),
        ("map", "SQL", "1974"),
        ("nulls", "Hello World", ""),
        ("nulls", "Hello World", "z"),
        ("ordinality", "", "2"),
        ("ordinality", "p", "1"),
        ("ordinality", "q", "3"),
    ]
    with pytest.raises(SqlError, match=r"not supported in Shoal: UNNEST \.\.\. WITH ORDINALITY"):
        runner.translate("SELECT x, n FROM t LEFT JOIN UNNEST(ARRAY['a']) WITH ORDINALITY AS u(x, n) ON TRUE")


def test_xxhash64_is_xxh64_at_every_length(spark):
    """athena_udfs' XXH64 (xxhash64 at seed 0) gives Spark's own XXH64 at Spark's seed, 42, for
    inputs of every length through the 32-byte stripes and their tails."""
    import random

    from shoal.sql.athena_udfs import _xxh64

    rnd = random.Random(44)
    data = [bytes(rnd.getrandbits(8) for _ in range(n)) for n in [*range(0, 72), 257]]
    rows = spark.createDataFrame([(d,) for d in data], "b binary").selectExpr("xxhash64(b) AS h").collect()
    ours = [h - 2**64 if h >= 2**63 else h for h in (_xxh64(d, 42) for d in data)]
    assert [r["h"] for r in rows] == ours


def test_parse_data_size_at_the_edges_of_decimal_38():
    """DataSizeFunctions keeps up to 127 bits (an error beyond); a decimal(38,0) holds less, so
    the values between are refused; digits Java reads beyond 0-9 are refused too."""
    from shoal.sql.athena_udfs import parse_data_size

    assert parse_data_size("9" * 38 + "B") == Decimal(10**38 - 1)
    with pytest.raises(ValueError, match=r"^not supported in Shoal: PARSE_DATA_SIZE of 10\^38"):
        parse_data_size("1" + "0" * 38 + "B")
    with pytest.raises(ValueError, match=r"^Value out of range: '200000000000000YB'"):
        parse_data_size("200000000000000YB")
    with pytest.raises(ValueError, match=r"^not supported in Shoal: PARSE_DATA_SIZE of digits"):
        parse_data_size("\u0661kB")
    with pytest.raises(ValueError, match=r"^Invalid data size: '\.B'$"):
        parse_data_size(".B")
