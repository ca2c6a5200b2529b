"""Point lookups without Spark (issue 43): the fast path gives exactly the Spark path's answer.

Each query runs twice through GovernedSql, once with `[sql] point_lookup` off (Spark) and once
on; columns, Spark type names and rows must be identical, and the engine that ran is checked.
Governance (masks, row filters, denied columns and tables, a revoked grant) must come out the
same; merge-on-read deletes go to Spark.
"""

from __future__ import annotations

import datetime as dt
import uuid
from decimal import Decimal

import pytest

from shoal.exceptions import SqlError
from shoal.governance import AccessDenied, AuditLog, Governance, GovernedSql, Principals
from shoal.governance.point_lookup import ENGINE_ARROW, ENGINE_SPARK

COLS = "id bigint, k int, s string, amount decimal(10,2), day date, ts timestamp, ntz timestamp_ntz, flag boolean, f double, raw binary"
ROWS = [
    (1, 10, "eu", Decimal("1.50"), dt.date(2024, 1, 1), dt.datetime(2024, 1, 1, 8, 30), dt.datetime(2024, 1, 1, 8, 30), True, 1.5, b"a"),
    (2, 20, "us", Decimal("-2.25"), dt.date(2024, 2, 29), dt.datetime(2024, 2, 29, 23, 59, 59, 123456), dt.datetime(2024, 2, 29, 0, 0), False, -0.0, b"\x00\xff"),
    (3, None, "apac", None, None, None, None, None, None, None),
    (4, 40, None, Decimal("99999999.99"), dt.date(1969, 12, 31), dt.datetime(1969, 12, 31, 23, 59, 59), dt.datetime(1900, 1, 1), True, float("nan"), b""),
    (5, -50, "Ünïcode ☃", Decimal("0.00"), dt.date(2000, 1, 1), dt.datetime(2000, 1, 1), dt.datetime(2000, 1, 1), False, 1e300, b"z"),
    (6, 60, "eu", Decimal("0.01"), dt.date(2024, 1, 1), dt.datetime(2024, 1, 1, 8, 30), None, None, 2.0, None),
    (7, 70, "us", Decimal("3.00"), dt.date(2024, 3, 1), dt.datetime(2030, 1, 1), dt.datetime(2030, 1, 1), True, 3.0, b"q"),
]  # fmt: skip

NARROW = [
    "SELECT * FROM {t} WHERE id = 1",
    "SELECT id, s, amount FROM {t} WHERE id = 2",
    "SELECT id AS key, s AS region FROM {t} WHERE id IN (1, 3, 5, 99)",
    "SELECT * FROM {t} WHERE id >= 2 AND id < 6",
    "SELECT id, k FROM {t} WHERE k > -60 AND k <= 40",
    "SELECT id FROM {t} WHERE k IS NULL",
    "SELECT id FROM {t} WHERE s IS NOT NULL AND id <> 1",
    "SELECT id, s FROM {t} WHERE s = 'Ünïcode ☃'",
    "SELECT id, s FROM {t} WHERE s > 'eu'",
    "SELECT id, s FROM {t} WHERE s < 'Z' OR s >= 'us'",
    "SELECT id, amount FROM {t} WHERE amount = 1.5",
    "SELECT id, amount FROM {t} WHERE amount > 0 AND amount <= 99999999.99",
    "SELECT id, day FROM {t} WHERE day = DATE '2024-01-01'",
    "SELECT id, day FROM {t} WHERE day < DATE '2000-01-02'",
    "SELECT id, ts FROM {t} WHERE ts = TIMESTAMP '2024-01-01 08:30:00'",
    "SELECT id, ts FROM {t} WHERE ts >= TIMESTAMP '2024-02-29 23:59:59.123456'",
    "SELECT id, ts, ntz FROM {t} WHERE ntz <= TIMESTAMP_NTZ '1999-01-01 00:00:00'",
    "SELECT id, flag FROM {t} WHERE flag = true",
    "SELECT id, f, raw FROM {t} WHERE id IN (4, 5, 2)",
    "SELECT t.id, t.s FROM {t} t WHERE t.id = 7",
    "SELECT id FROM {t} WHERE 3 < id AND (id = 4 OR id = 5)",
    "SELECT id FROM {t} WHERE id = 12345",
    "SELECT id FROM {t}",
]
OUTSIDE = [
    "SELECT id FROM {t} WHERE id = 1 ORDER BY id",
    "SELECT id FROM {t} WHERE id = 1 LIMIT 1",
    "SELECT upper(s) FROM {t} WHERE id = 1",
    "SELECT id FROM {t} WHERE upper(s) = 'EU'",
    "SELECT count(*) FROM {t} WHERE id = 1",
    "SELECT DISTINCT s FROM {t}",
    "SELECT id FROM {t} WHERE f = 1.5",
    "SELECT id FROM {t} WHERE id = '1'",
    "SELECT id FROM {t} WHERE k = 1.0",
    "SELECT id FROM {t} WHERE amount < 100000000",
    "SELECT id FROM {t} WHERE amount = 1.505",
    "SELECT id FROM {t} WHERE ts = '2024-01-01 08:30:00'",
    "SELECT id FROM {t} WHERE NOT id = 1",
    "SELECT ID FROM {t} WHERE id = 1",
    "SELECT a.id FROM {t} a JOIN {t} b ON a.id = b.id WHERE a.id = 1",
    "WITH c AS (SELECT id FROM {t}) SELECT id FROM c WHERE id = 1",
    "SELECT id FROM {t} WHERE id = 1 UNION ALL SELECT id FROM {t} WHERE id = 2",
    "SELECT id FROM (SELECT id FROM {t}) x WHERE id = 1",
    "SELECT * EXCEPT (s) FROM {t} WHERE id = 1",
    "SELECT id FROM {t} WHERE day = DATE '2024-13-45'",
]


class World:
    def __init__(self, spark, settings) -> None:
        self.spark, self.settings = spark, settings
        u = uuid.uuid4().hex[:6]
        self.db = f"pl_{u}"
        self.t = f"{self.db}.things"
        spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {self.db}")
        spark.sql(f"CREATE TABLE {self.t} ({COLS}) USING iceberg")
        spark.createDataFrame(ROWS[:4], COLS).writeTo(self.t).append()
        spark.createDataFrame(ROWS[4:], COLS).writeTo(self.t).append()  # two data files
        self.p, self.g = Principals(settings), Governance(settings)
        self.admin = self.p.principal("admin")
        self.names = {n: f"{n}_{u}" for n in ("reader", "filtered", "masked", "narrow", "nobody")}
        for full in self.names.values():
            self.p.add(full, kind="user")
        grant = self.g.grant
        cols = [c.split()[0] for c in COLS.split(", ")]
        grant(self.admin, "SELECT", "TABLE", self.t, self.names["reader"])
        self.filtered_grant = grant(
            self.admin, "SELECT", "TABLE", self.t, self.names["filtered"], row_filter="s IN ('eu', 'us') OR k > 45",
            table_columns=cols,
        )  # fmt: skip
        grant(self.admin, "SELECT", "TABLE", self.t, self.names["masked"], masks={"s": "hash"}, table_columns=cols)
        grant(
            self.admin, "SELECT", "TABLE", self.t, self.names["narrow"], columns=["id", "s", "k"],
            row_filter="k >= 20", table_columns=cols,
        )  # fmt: skip
        self.off = settings.model_copy(deep=True)
        self.off.sql.point_lookup = False
        self.on = settings.model_copy(deep=True)
        self.on.sql.point_lookup = True

    def run(self, who: str, sql: str, *, fast: bool) -> tuple[list, list, list, str | None]:
        gs = GovernedSql(self.spark, self.on if fast else self.off, self.p.principal(self.names[who]))
        r = gs.execute(sql.format(t=self.t))
        return r.columns, r.types, sorted(r.rows, key=repr), gs.engine

    def both(self, who: str, sql: str) -> tuple[tuple, tuple]:
        """(Spark's outcome, the fast path's outcome): result or the refusal's class and text."""
        out = []
        for fast in (False, True):
            try:
                out.append(self.run(who, sql, fast=fast))
            except (AccessDenied, SqlError) as exc:
                out.append((type(exc).__name__, str(exc), None, None))
        return out[0], out[1]


@pytest.fixture(scope="module")
def w(spark, settings) -> World:
    return World(spark, settings)


def _nan(x: object) -> object:
    return "NaN" if isinstance(x, float) and x != x else x


def _same(spark_side: tuple, fast_side: tuple) -> None:
    spark_side, fast_side = (
        (*side[:2], [tuple(_nan(x) for x in row) for row in side[2]] if isinstance(side[2], list) else side[2], side[3])
        for side in (spark_side, fast_side)
    )
    assert fast_side[:3] == spark_side[:3], f"fast path differs:\n spark {spark_side}\n fast  {fast_side}"
    for a, b in zip(spark_side[2] or [], fast_side[2] or [], strict=True):  # the Python types too
        assert [type(x) for x in a] == [type(x) for x in b]


@pytest.mark.parametrize("who", ["reader", "filtered", "narrow"])
def test_narrow_lookups_match_spark_and_skip_it(w: World, who: str) -> None:
    for sql in NARROW:
        spark_side, fast_side = w.both(who, sql)
        _same(spark_side, fast_side)
        if spark_side[0] != "AccessDenied":
            assert spark_side[3] == ENGINE_SPARK
            assert fast_side[3] == ENGINE_ARROW, sql


def test_values_and_types_are_spark_s(w: World) -> None:
    cols, types, rows, engine = w.run("reader", "SELECT * FROM {t} WHERE id IN (2, 3)", fast=True)
    assert engine == ENGINE_ARROW
    assert types == ["bigint", "int", "string", "decimal(10,2)", "date", "timestamp", "timestamp_ntz", "boolean", "double", "binary"]  # fmt: skip
    assert rows[1][:4] == (3, None, "apac", None) and rows[0][3] == Decimal("-2.25")


@pytest.mark.parametrize("sql", OUTSIDE)
def test_other_shapes_run_on_spark(w: World, sql: str) -> None:
    spark_side, fast_side = w.both("reader", sql)
    _same(spark_side, fast_side)
    assert fast_side[3] in (ENGINE_SPARK, None), sql


def test_masks_filters_denials_as_spark(w: World) -> None:
    spark_side, fast_side = w.both("masked", "SELECT id, s FROM {t} WHERE id = 1")
    _same(spark_side, fast_side)
    assert fast_side[3] == ENGINE_SPARK and fast_side[2][0][1] != "eu"  # masked, by Spark
    # the row filter hides id 3 (apac, k NULL) and 4 (s NULL, k 40) from `filtered`
    spark_side, fast_side = w.both("filtered", "SELECT id FROM {t} WHERE id IN (3, 4, 6, 7)")
    _same(spark_side, fast_side)
    assert fast_side[2] == [(6,), (7,)] and fast_side[3] == ENGINE_ARROW
    # a column outside the grant, used anywhere: the same refusal
    for sql in ("SELECT id, amount FROM {t} WHERE id = 1", "SELECT id FROM {t} WHERE amount = 1.5"):
        spark_side, fast_side = w.both("narrow", sql)
        assert spark_side[0] == fast_side[0] == "AccessDenied" and spark_side[1] == fast_side[1]
    # no grant at all, and a table that does not exist
    for sql in ("SELECT id FROM {t} WHERE id = 1", f"SELECT id FROM {w.db}.nothing WHERE id = 1"):
        spark_side, fast_side = w.both("nobody", sql)
        assert spark_side[0] == fast_side[0] == "AccessDenied" and spark_side[1] == fast_side[1]


def test_audit_records_as_spark(w: World) -> None:
    audit = AuditLog(w.settings)
    name = w.names["filtered"]
    before = audit.list(principal=name, limit=10_000)
    w.both("filtered", "SELECT id FROM {t} WHERE id = 1")
    w.both("filtered", "SELECT id, amount FROM {t} WHERE id = 1")
    new = audit.list(principal=name, limit=10_000)[: len(audit.list(principal=name, limit=10_000)) - len(before)]
    assert len(new) == 4
    keep = ("action", "resource", "decision", "reason", "sql")
    (fast_ok, spark_ok) = new[2], new[3]  # newest first: fast after Spark
    assert {k: fast_ok.get(k) for k in keep} == {k: spark_ok.get(k) for k in keep}
    assert {k: new[0].get(k) for k in keep} == {k: new[1].get(k) for k in keep}


def test_revoked_grant_refuses_both(spark, settings) -> None:
    w = World(spark, settings)
    assert w.run("filtered", "SELECT id FROM {t} WHERE id = 1", fast=True)[3] == ENGINE_ARROW
    w.g.revoke(w.admin, w.filtered_grant.id)
    spark_side, fast_side = w.both("filtered", "SELECT id FROM {t} WHERE id = 1")
    assert spark_side[0] == fast_side[0] == "AccessDenied" and spark_side[1] == fast_side[1]


def test_merge_on_read_deletes_go_to_spark(spark, settings) -> None:
    w = World(spark, settings)
    spark.sql(
        f"ALTER TABLE {w.t} SET TBLPROPERTIES ('format-version'='2', 'write.delete.mode'='merge-on-read', "
        "'write.update.mode'='merge-on-read')"
    )
    spark.sql(f"DELETE FROM {w.t} WHERE id = 2")
    spark.sql(f"UPDATE {w.t} SET s = 'moved' WHERE id = 6")
    files = spark.sql(f"SELECT count(*) FROM {w.t}.delete_files").collect()[0][0]
    assert files >= 1  # position deletes were written
    for sql in ("SELECT * FROM {t} WHERE id IN (2, 6)", "SELECT id, s FROM {t} WHERE id >= 1"):
        spark_side, fast_side = w.both("reader", sql)
        _same(spark_side, fast_side)
        assert fast_side[3] == ENGINE_SPARK
    assert w.run("reader", "SELECT id, s FROM {t} WHERE id IN (2, 6)", fast=True)[2] == [(6, "moved")]


def test_explain_names_the_engine(w: World) -> None:
    gs = GovernedSql(w.spark, w.on, w.p.principal(w.names["filtered"]))
    plan = gs.execute(f"EXPLAIN SELECT id FROM {w.t} WHERE id = 1").rows[0][0]
    assert plan.startswith(f"engine: {ENGINE_ARROW}")
    plan = gs.execute(f"EXPLAIN SELECT id FROM {w.t} WHERE id = 1 ORDER BY id").rows[0][0]
    assert plan == f"engine: {ENGINE_SPARK}"
    off = GovernedSql(w.spark, w.off, w.p.principal(w.names["filtered"]))
    assert off.execute(f"EXPLAIN SELECT id FROM {w.t} WHERE id = 1").rows[0][0] == f"engine: {ENGINE_SPARK}"
    with pytest.raises(AccessDenied):
        gs.execute(f"EXPLAIN SELECT id FROM {w.db}.nothing WHERE id = 1")


def test_mixed_case_column_names(w: World) -> None:
    """Columns named in mixed case: the same answer (the rewrite's spelling may send it to Spark)."""
    t = f"{w.db}.cased"
    w.spark.sql(f"CREATE TABLE {t} (Id bigint, Region string) USING iceberg")
    w.spark.sql(f"INSERT INTO {t} VALUES (1, 'eu'), (2, 'us'), (3, NULL)")
    w.g.grant(w.admin, "SELECT", "TABLE", t, w.names["filtered"], row_filter="Region = 'eu' OR Id > 2", table_columns=["Id", "Region"])  # fmt: skip
    for sql in (f"SELECT Id, Region FROM {t} WHERE Id IN (1, 2, 3)", f"SELECT * FROM {t} WHERE id >= 1"):
        spark_side, fast_side = w.both("filtered", sql)
        _same(spark_side, fast_side)
        assert fast_side[2] == [(1, "eu"), (3, None)], sql  # either engine: the same rows


def test_an_invalid_literal_is_spark_s_answer_and_audited(w: World) -> None:
    """A DATE Python cannot read (Spark, ANSI off: NULL, no rows) goes to Spark, audited once."""
    audit = AuditLog(w.settings)
    name = w.names["reader"]
    before = len(audit.list(principal=name, limit=10_000))
    cols, _types, rows, engine = w.run("reader", "SELECT id FROM {t} WHERE day = DATE '2024-13-45'", fast=True)
    assert (cols, rows, engine) == (["id"], [], ENGINE_SPARK)
    assert len(audit.list(principal=name, limit=10_000)) == before + 1


def test_a_script_sees_its_own_earlier_insert(spark, settings) -> None:
    """Every statement of a script is planned before any runs: the lookup reads the snapshot
    current when it runs, as Spark does (the INSERT's row is seen)."""
    w = World(spark, settings)
    w.g.grant(w.admin, "INSERT", "TABLE", w.t, w.names["reader"])
    reader = GovernedSql(spark, w.on, w.p.principal(w.names["reader"]))
    assert reader.execute(f"SELECT id, s FROM {w.t} WHERE id = 101").rows == []
    assert reader.engine == ENGINE_ARROW  # the table is loaded (and cached) before the script
    script = (
        f"INSERT INTO {w.t} VALUES (101, 1, 'new', {', '.join(['NULL'] * 7)}); SELECT id, s FROM {w.t} WHERE id = 101"
    )
    assert reader.execute(script).rows == [(101, "new")]
    assert reader.engine == ENGINE_ARROW


def test_spark_settings_it_does_not_copy_send_it_to_spark(w: World) -> None:
    """An operator's session time zone (or case-sensitive names, a write-audit branch) changes
    what Spark compares and reads: every query runs on Spark then."""
    zoned = w.on.model_copy(deep=True)
    zoned.spark.conf["spark.sql.session.timeZone"] = "America/New_York"
    gs = GovernedSql(w.spark, zoned, w.p.principal(w.names["reader"]))
    gs.execute(f"SELECT id FROM {w.t} WHERE id = 1")
    assert gs.engine == ENGINE_SPARK
    utc = w.on.model_copy(deep=True)
    utc.spark.conf["spark.sql.session.timeZone"] = "UTC"
    gs = GovernedSql(w.spark, utc, w.p.principal(w.names["reader"]))
    gs.execute(f"SELECT id FROM {w.t} WHERE id = 1")
    assert gs.engine == ENGINE_ARROW


def test_each_metadata_file_is_parsed_once_and_every_commit_is_seen(spark, settings, monkeypatch) -> None:
    """Loads reuse a metadata file already parsed (a commit always writes a new one), and a
    commit's new file is read: the lookup after an INSERT sees its row."""
    w = World(spark, settings)
    import pyiceberg.catalog.sql as sql_catalog

    from shoal.pyiceberg_catalog import open_catalog

    parsed: list[str] = []
    real = sql_catalog.FromInputFile.table_metadata

    class Counting:
        @staticmethod
        def table_metadata(file, *args, **kwargs):
            parsed.append(file.location)
            return real(file, *args, **kwargs)

    monkeypatch.setattr(sql_catalog, "FromInputFile", Counting)
    catalog = open_catalog(w.settings)
    ident = tuple(w.t.split(".")[-2:])
    first, again = catalog.load_table(ident), catalog.load_table(ident).refresh()
    assert len(parsed) == 1 and first.metadata_location == again.metadata_location
    assert again.metadata == first.metadata and again.scan().to_arrow().num_rows == len(ROWS)
    w.spark.sql(f"INSERT INTO {w.t} VALUES (102, 1, 'after', {', '.join(['NULL'] * 7)})")
    after = catalog.load_table(ident)
    assert len(parsed) == 2 and after.metadata_location != first.metadata_location
    assert 102 in after.scan().to_arrow().column("id").to_pylist()
    assert w.run("reader", "SELECT id, s FROM {t} WHERE id = 102", fast=True)[2:4] == ([(102, "after")], ENGINE_ARROW)
