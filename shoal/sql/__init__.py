"""Spark SQL on the lake catalog, accepting the time-travel spellings users bring along.

`translate` rewrites Athena/Trino/BigQuery-style `FOR TIMESTAMP AS OF`, `FOR SYSTEM_TIME AS
OF` and `FOR VERSION AS OF` into Spark's `TIMESTAMP AS OF` / `VERSION AS OF`. It works on
sqlglot's tokens (string literals and comments are never touched) and edits only those
keywords, so the rest of the statement reaches Spark exactly as written.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import sqlglot
from sqlglot.errors import TokenError
from sqlglot.tokens import Token, TokenType

from shoal.exceptions import SqlError, first_line
from shoal.sql.positions import spark_positions

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

_TIME_KINDS = {"TIMESTAMP": "TIMESTAMP", "SYSTEM_TIME": "TIMESTAMP", "VERSION": "VERSION", "SYSTEM_VERSION": "VERSION"}


def _tokens(sql: str, dialect: Any = "spark") -> list[Token]:
    try:
        return sqlglot.tokenize(sql, read=dialect)
    except TokenError as exc:
        raise SqlError(f"cannot read SQL: {exc}") from exc


def translate(sql: str) -> str:
    """Rewrite foreign time-travel clauses into Spark SQL."""
    tokens = _tokens(sql)
    edits: list[tuple[int, int, str]] = []
    for i, tok in enumerate(tokens[:-3]):
        if tok.token_type != TokenType.FOR:
            continue
        kind, as_, of = tokens[i + 1], tokens[i + 2], tokens[i + 3]
        if kind.text.upper() in _TIME_KINDS and as_.text.upper() == "AS" and of.text.upper() == "OF":
            edits.append((tok.start, kind.end + 1, _TIME_KINDS[kind.text.upper()]))
    for start, end, text in reversed(edits):
        sql = sql[:start] + text + sql[end:]
    return sql


def split_statements(sql: str, dialect: Any = "spark") -> list[str]:
    """Split on top-level semicolons (not those inside strings or comments, as the dialect quotes
    them: PostgreSQL's dollar-quoted strings too)."""
    parts, start = [], 0
    for tok in _tokens(sql, dialect):
        if tok.token_type == TokenType.SEMICOLON:
            parts.append(sql[start : tok.start])
            start = tok.end + 1
    parts.append(sql[start:])
    return [p.strip() for p in parts if p.strip()]


@dataclass
class QueryResult:
    columns: list[str]
    types: list[str]
    rows: list[tuple[Any, ...]]
    # With run(stream=True): the rows, read from Spark as they are asked for (`rows` is empty).
    stream: Iterator[tuple[Any, ...]] | None = None
    # A statement without a result set (GovernedSql): what it was ("insert", "create"...) and
    # the rows it wrote where that is known, so a caller says "1 row inserted", not "0 rows".
    statement: str | None = None
    affected: int | None = None

    def records(self) -> list[dict[str, Any]]:
        """Rows as dicts by column name, values as Spark collected them: a face that prints JSON
        (`shoal sql --json`, the HTTP API) serialises them itself, with to_json_value."""
        return [dict(zip(self.columns, row, strict=True)) for row in self.rows]


def to_json_value(value: Any) -> Any:
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=dt.UTC)  # the session time zone is UTC
        return value.isoformat()
    if isinstance(value, dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(value).decode()
    if isinstance(value, dict):
        return {str(k): to_json_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [to_json_value(v) for v in value]
    if hasattr(value, "asDict"):
        return {k: to_json_value(v) for k, v in value.asDict().items()}
    return value


def run(spark: SparkSession, sql: str, *, limit: int | None = None, stream: bool = False) -> QueryResult:
    """Run one or more statements; returns the last statement's result. `stream`: its rows are
    not collected but read a partition at a time as the caller iterates `stream`."""
    from pyspark.errors import PySparkException
    from pyspark.sql.utils import AnalysisException, ParseException

    statements = split_statements(sql)
    if not statements:
        raise SqlError("no SQL statement given")
    df = None
    for i, stmt in enumerate(statements, 1):
        try:
            df = spark.sql(translate(stmt))
        except (ParseException, AnalysisException, PySparkException) as exc:
            where = f"statement {i}: " if len(statements) > 1 else ""
            raise SqlError(f"{where}{spark_positions(first_line(exc))}") from exc
        except Exception as exc:  # Py4J errors from the JVM carry the reason in their text
            raise SqlError(spark_positions(first_line(exc))) from exc
    assert df is not None
    if stream:
        return QueryResult(
            columns=list(df.columns),
            types=[f.dataType.simpleString() for f in df.schema.fields],
            rows=[],
            stream=_stream(df) if df.columns else iter(()),  # a command has run already: no job
        )
    try:
        rows = (df.limit(limit) if limit else df).collect()
    except Exception as exc:
        raise SqlError(first_line(exc)) from exc
    return QueryResult(
        columns=list(df.columns),
        types=[f.dataType.simpleString() for f in df.schema.fields],
        rows=[tuple(r) for r in rows],
    )


def _stream(df: Any) -> Iterator[tuple[Any, ...]]:
    """The rows a partition at a time: the driver holds one partition, never the whole result.
    Closing the generator drops the local iterator, which tells Spark to stop serving. No
    prefetch: it doubled what the driver holds, was no faster when measured (1M rows, 8
    partitions, local[2]), and a later partition's failure then lost the rows of earlier ones."""
    try:
        for row in df.toLocalIterator(prefetchPartitions=False):
            yield tuple(row)
    except Exception as exc:  # GeneratorExit (a close) is not an Exception: it passes
        raise SqlError(_task_failure(exc)) from exc


def _task_failure(exc: Exception) -> str:
    """A failed task's reason: the local iterator's error reads "Exception thrown in awaitResult"
    on its first line, the reason further down."""
    m = re.search(r"most recent failure: Lost task [^)]*\)[^:]*: (?:[\w.$]+(?:Exception|Error): )?(.+)", str(exc))
    return m.group(1).strip() if m else first_line(exc)
