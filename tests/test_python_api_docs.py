"""docs/python-api.md's examples run as written: every ```python block, in order, in one fresh
process (PySpark allows one session per process, and a user's notebook starts fresh too), in an
empty folder. The blocks assert their own results, so a wrong answer fails here."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import shoal

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "python-api.md"


def python_blocks(text: str) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", text, flags=re.S | re.M)


def test_the_page_has_examples() -> None:
    blocks = python_blocks(DOC.read_text(encoding="utf-8"))
    assert len(blocks) >= 5
    script = "\n".join(blocks)
    for call in (
        "Lake.open(",
        "lake.sql(",
        "principal=",
        "lake.cdc.apply(",
        "lake.ingest(",
        "lake.extract(",
        "lake.search(",
        "lake.workflow.run(",
        "shoal.extract_file(",
        ".to_arrow()",
        ".to_pandas()",
        ".to_spark()",
    ):
        assert call in script, f"docs/python-api.md shows no {call}"


@pytest.mark.slow
def test_the_examples_run(tmp_path: Path) -> None:
    script = tmp_path / "examples.py"
    script.write_text("\n\n".join(python_blocks(DOC.read_text(encoding="utf-8"))), encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("SHOAL_")}
    env["PYTHONPATH"] = str(ROOT)
    work = tmp_path / "work"
    work.mkdir()
    done = subprocess.run([sys.executable, str(script)], cwd=work, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-6000:]
    assert "refused:" in done.stdout and "SUCCEEDED" in done.stdout
    assert (work / "my-lake" / "catalog.db").is_file()


def test_import_is_light_and_typed(tmp_path: Path) -> None:
    """`import shoal` and reaching `shoal.Lake` start no JVM and import no PySpark; the package
    ships py.typed (PEP 561) and packaging includes it."""
    code = (
        "import sys, shoal\n"
        "lake = shoal.Lake.open(workspace='w')\n"
        "assert 'pyspark' not in sys.modules and 'py4j' not in sys.modules, sorted(sys.modules)\n"
        "print(shoal.Lake.__module__, lake)\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("SHOAL_")}
    env["PYTHONPATH"] = str(ROOT)
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    assert "shoal.api.lake" in done.stdout
    assert (ROOT / "shoal" / "py.typed").is_file()
    assert '"shoal" = ["py.typed"]' in (ROOT / "pyproject.toml").read_text(encoding="utf-8")


def test_lake_on_the_running_session_and_a_second_lake_refused(spark, settings, tmp_path: Path) -> None:
    """Lake.sql over the session's lake converts with Spark's types; another lake in the same
    process is refused (PySpark keeps one session per process) instead of reading the wrong catalog."""
    import datetime as dt
    import decimal

    import pyarrow as pa

    from shoal.exceptions import ConfigError

    lake = shoal.Lake(settings)
    result = lake.sql(
        "SELECT 1 AS n, CAST(2.50 AS DECIMAL(10,2)) AS price, TIMESTAMP'2024-03-01 09:00:00' AS at, "
        "array('a', 'b') AS tags, 'x' AS n"
    )
    assert result.columns == ["n", "price", "at", "tags", "n"] and len(result) == 1
    table = result.to_arrow()
    assert table.schema.field(1).type == pa.decimal128(10, 2) and table.column(1)[0].as_py() == decimal.Decimal("2.50")
    assert table.column(3).to_pylist() == [["a", "b"]] and table.column_names[4] == "n"
    assert table.column(2)[0].as_py().replace(tzinfo=None) == dt.datetime(2024, 3, 1, 9, 0)
    assert result.to_pandas().shape == (1, 5)
    assert result.to_spark().collect()[0][0] == 1

    other = shoal.Lake.open(workspace=tmp_path / "other")
    with pytest.raises(ConfigError, match="another lake"):
        other.sql("SELECT 1")
