"""Every function on Trino's list (Athena engine 3) is either checked by a conformance case or
refused with a clear error and listed as refused in docs/sql.md (no Spark session needed)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import sqlglot
from sqlglot import exp

from shoal.sql.athena import AthenaTranslator, NotSupported, ShoalAthena
from tests.sql.athena_cases import CASES

ROOT = Path(__file__).resolve().parents[2]
# Names Athena reads without parentheses (current_date, localtime, ...).
BARE = {"current_date", "current_time", "current_timestamp", "current_user", "localtime", "localtimestamp"}
# setdigest's `set`: sqlglot reads SET(x) as a column with aliases, which Spark cannot resolve.
NOT_READ_AS_CALLS = {"set"}


def trino_functions() -> list[str]:
    lines = (Path(__file__).with_name("trino_functions.txt")).read_text(encoding="utf-8").splitlines()
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]


def documented_refusals() -> set[str]:
    text = (ROOT / "docs" / "sql.md").read_text(encoding="utf-8")
    m = re.search(r"<!-- refused-functions.*?-->(.*?)<!-- /refused-functions -->", text, re.S)
    assert m, "docs/sql.md has no refused-functions list"
    return set(re.findall(r"`([a-z0-9_]+)`", m.group(1)))


def covered_by_a_case(name: str) -> bool:
    text = "\n".join(expr for _, expr, _ in CASES).lower()
    called = re.search(rf"(?<![\w.$]){re.escape(name)}\s*\(", text)
    return bool(called or (name in BARE and re.search(rf"(?<![\w.]){name}\b", text)))


def test_every_listed_function_is_covered_or_documented_as_refused():
    refused = documented_refusals()
    missing = [n for n in trino_functions() if not covered_by_a_case(n) and n not in refused]
    assert not missing, f"neither a conformance case nor a documented refusal: {missing}"
    assert refused <= set(trino_functions()), refused - set(trino_functions())


@pytest.mark.parametrize("name", sorted(documented_refusals()))
def test_a_documented_refusal_is_refused(name):
    """Called with 0 to 3 arguments, the function is refused, never translated."""
    calls = 0
    for args in ("", "x", "x, x", "x, x, x"):
        sql = f"SELECT {name}({args})"
        try:
            tree = sqlglot.parse_one(sql, read=ShoalAthena)
        except sqlglot.errors.ParseError:
            continue  # Athena's parser rejects it too: no answer given
        if tree.find(exp.Func, exp.Unary, exp.Binary, exp.JSONValue) is None:
            continue  # not read as a call (e.g. a keyword)
        calls += 1
        with pytest.raises(NotSupported, match="not supported in Shoal: "):
            AthenaTranslator(sql, lambda: {"x": "double"}).translate(tree)
    assert calls or name in BARE | NOT_READ_AS_CALLS, f"{name} is never read as a call"
