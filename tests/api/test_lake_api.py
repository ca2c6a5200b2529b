"""The Python API as a notebook user takes it (issue 46): one value mapping for rows, records,
Arrow and pandas; tables listed by the same discovery rule as the other faces; no stray warnings."""

from __future__ import annotations

import datetime as dt
import logging
import time
import uuid
from collections.abc import Iterator
from decimal import Decimal

import pytest

from shoal.api import Lake


@pytest.fixture(scope="module")
def lake(settings, spark) -> Lake:
    return Lake(settings)


@pytest.fixture(scope="module")
def typed(lake: Lake, spark) -> str:
    """A table of every scalar kind the mapping covers, with a NULL in each column."""
    name = f"api{uuid.uuid4().hex[:8]}.typed"
    cat = lake.settings.catalog.name
    spark.sql(
        f"CREATE TABLE {cat}.{name} (id BIGINT, n INT, amount DECIMAL(10,2), day DATE, at TIMESTAMP, label STRING)"
        " USING iceberg"
    )
    spark.sql(
        f"INSERT INTO {cat}.{name} VALUES"
        " (1, 7, 120.50, DATE'2024-03-01', TIMESTAMP'2024-03-01 09:00:00', 'a'),"
        " (2, NULL, NULL, NULL, NULL, NULL)"
    )
    return name


@pytest.fixture
def new_york() -> Iterator[None]:
    """The notebook's local time zone is not UTC: PySpark hands timestamps back in local time."""
    import os

    before = os.environ.get("TZ")
    os.environ["TZ"] = "America/New_York"
    time.tzset()
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("TZ", None)
        else:
            os.environ["TZ"] = before
        time.tzset()


def test_rows_records_and_arrow_share_one_mapping(lake: Lake, typed: str, new_york: None) -> None:
    result = lake.sql(f"SELECT amount, day, at, n FROM {typed} ORDER BY id")
    at = dt.datetime(2024, 3, 1, 9, 0, tzinfo=dt.UTC)
    first = (Decimal("120.50"), dt.date(2024, 3, 1), at, 7)
    assert result.rows == [first, (None, None, None, None)]
    assert result.rows[0][2].utcoffset() == dt.timedelta(0)  # aware, in UTC
    assert result.records()[0] == dict(zip(["amount", "day", "at", "n"], first, strict=True))
    assert [tuple(r.values()) for r in result.to_arrow().to_pylist()] == result.rows
    assert list(result) == result.rows


def test_nested_timestamps_are_aware_too(lake: Lake, typed: str, new_york: None) -> None:
    result = lake.sql(f"SELECT array(at) AS a, named_struct('t', at) AS s, map('k', at) AS m FROM {typed} WHERE id = 1")
    at = dt.datetime(2024, 3, 1, 9, 0, tzinfo=dt.UTC)
    ((a, s, m),) = result.rows
    assert a == [at] and s.t == at and m == {"k": at}
    assert result.to_arrow().to_pylist() == [{"a": [at], "s": {"t": at}, "m": [("k", at)]}]


def test_pandas_keeps_decimals_dates_and_nullable_integers(lake: Lake, typed: str) -> None:
    import pandas as pd
    import pyarrow as pa

    frame = lake.sql(f"SELECT id, n, amount, day, at, label FROM {typed} ORDER BY id").to_pandas()
    dtypes = {c: frame[c].dtype for c in frame.columns}
    assert dtypes["n"] == pd.ArrowDtype(pa.int32())  # a NULL does not make it float64
    assert dtypes["amount"] == pd.ArrowDtype(pa.decimal128(10, 2))
    assert dtypes["day"] == pd.ArrowDtype(pa.date32())
    assert dtypes["at"] == pd.ArrowDtype(pa.timestamp("us", tz="UTC"))
    assert frame["n"].tolist()[0] == 7 and pd.isna(frame["n"].tolist()[1])
    assert frame["amount"].tolist()[0] == Decimal("120.50")


def test_list_tables_hides_what_the_principal_may_not_read(lake: Lake, spark) -> None:
    from shoal.governance import Governance, Principals

    ns = f"api{uuid.uuid4().hex[:8]}"
    cat = lake.settings.catalog.name
    for table in ("open", "closed"):
        spark.sql(f"CREATE TABLE {cat}.{ns}.{table} (id BIGINT) USING iceberg")
    people = Principals(lake.settings)
    analyst = f"a{uuid.uuid4().hex[:8]}"
    people.add(analyst)
    Governance(lake.settings).grant(people.principal("admin"), "SELECT", "TABLE", f"{ns}.open", analyst)

    assert [t["name"] for t in lake.list_tables(ns)] == [f"{ns}.closed", f"{ns}.open"]
    assert [t["name"] for t in lake.list_tables(ns, principal=analyst)] == [f"{ns}.open"]
    assert f"{ns}.closed" not in [t["name"] for t in lake.list_tables(principal=analyst)]
    # The same rule on the other faces: the REST catalog and the PostgreSQL endpoint.
    assert _rest_listing(lake.settings, people.principal(analyst), ns, ["closed", "open"]) == ["open"]
    assert _pg_listing(spark, lake.settings, people.principal(analyst), ns) == ["open"]


def test_table_metadata_opens_on_every_face_with_one_setting(lake: Lake, spark) -> None:
    from shoal.config import load_settings
    from shoal.governance import Principals
    from shoal.governance.catalog import list_tables

    ns = f"api{uuid.uuid4().hex[:8]}"
    spark.sql(f"CREATE TABLE {lake.settings.catalog.name}.{ns}.t (id BIGINT) USING iceberg")
    opened = load_settings(workspace=lake.settings.workspace_dir, governance={"tables_visible_to_all": True})
    stranger = f"s{uuid.uuid4().hex[:8]}"
    Principals(opened).add(stranger)
    who = Principals(opened).principal(stranger)
    assert [t["name"] for t in list_tables(spark, opened, ns, principal=who)] == [f"{ns}.t"]
    assert _rest_listing(opened, who, ns, ["t"]) == ["t"]
    assert _rest_listing(lake.settings, who, ns, ["t"]) == []
    assert lake.list_tables(ns, principal=stranger) == []  # the default: hidden


def _rest_listing(settings, who, ns: str, names: list[str]) -> list[str]:
    """What the REST catalog's table listing keeps of `names` (its route filters by this)."""
    from shoal.iceberg_rest.context import Rest

    return [t for t in names if Rest(settings, None).discoverable(who, (ns,), t)]


def _pg_listing(spark, settings, who, ns: str) -> list[str]:
    from shoal.bi.pgcatalog import governed_snapshot

    return sorted(t.name for t in governed_snapshot(spark, settings, who).tables if t.schema == ns)


def test_list_tables_logs_no_sqlglot_warnings(lake: Lake, typed: str, caplog, capfd) -> None:
    from shoal.governance import Principals

    analyst = f"a{uuid.uuid4().hex[:8]}"
    Principals(lake.settings).add(analyst)
    with caplog.at_level(logging.WARNING):
        lake.list_tables(principal=analyst)
        lake.list_tables(typed.split(".")[0], principal=analyst)
    assert not [r.getMessage() for r in caplog.records if r.name.startswith("sqlglot")]
    assert "unsupported syntax" not in capfd.readouterr().err


def test_show_statements_keep_their_own_fingerprints() -> None:
    from shoal.governance.audit import fingerprint

    # sqlglot keeps a SHOW's text as one literal: replaced by `?`, every SHOW looked alike.
    assert fingerprint("SHOW TABLES IN sales") != fingerprint("SHOW TABLES IN hr")
    assert fingerprint("show  tables in sales") == fingerprint("SHOW TABLES IN sales")
    assert fingerprint("SELECT * FROM t WHERE id = 1") == fingerprint("SELECT * FROM t WHERE id = 2")
