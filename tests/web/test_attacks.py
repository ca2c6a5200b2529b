"""Attacks on every read path around governed SELECT (issue 18), with canaries.

Secrets are canary strings placed in a refused table, a refused column, a filtered-out row and
a document's text. Every attempt below must (a) never return a canary in any output and
(b) leave an audit row for each refusal. Generated variants mutate known-safe queries with
sqlglot so that new syntax around a secret table is tried, not just the forms listed here.
"""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path

import pytest
import sqlglot
from sqlglot import exp

from shoal.governance import AccessDenied, AuditLog, Governance, GovernedSql, Principals
from shoal.governance.access import RawAccess
from shoal.sql import SqlError
from tests.support.helpers import run_cli

U = uuid.uuid4().hex[:8]
CANARY_TABLE = f"CANARYTABLE{U}"  # in a table mallory has no grant on
CANARY_COLUMN = f"CANARYCOLUMN{U}"  # in a column mallory's grant leaves out
CANARY_ROW = f"CANARYROW{U}"  # in a row mallory's row filter leaves out
CANARY_TEXT = f"canarytext{U}"  # in a document's extracted text
CANARY_PATH = f"canarypath{U}"  # in a path known only to shoal.object_sources (a duplicate's)
CANARIES = (CANARY_TABLE, CANARY_COLUMN, CANARY_ROW, CANARY_TEXT.lower(), CANARY_PATH)


def leaked(value: object) -> list[str]:
    text = json.dumps(value, default=str).lower()
    return [c for c in CANARIES if c.lower() in text]


class Lake:
    def __init__(self, spark, settings) -> None:
        self.spark, self.settings = spark, settings
        self.db = f"atk_{U}"
        db = self.db
        spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {db}")
        spark.sql(f"CREATE TABLE {db}.vault (id int, secret string) USING iceberg")
        spark.sql(f"INSERT INTO {db}.vault VALUES (1, '{CANARY_TABLE}'), (2, '4242')")
        spark.sql(f"CREATE TABLE {db}.public (id int, region string, secret string, pin string) USING iceberg")
        spark.sql(
            f"INSERT INTO {db}.public VALUES (1, 'EU', '{CANARY_COLUMN}', '1234'), "
            f"(2, 'US', '{CANARY_ROW}', '9876'), (3, 'EU', '{CANARY_COLUMN}', '5555')"
        )
        spark.sql(f"CREATE TABLE {db}.scratch (id int, val string) USING iceberg")
        self.p, self.g = Principals(settings), Governance(settings)
        admin = self.p.principal("admin")
        self.mallory, self.hasher, self.reader = f"mallory_{U}", f"hasher_{U}", f"reader_{U}"
        for n in (self.mallory, self.hasher, self.reader):
            self.p.add(n)
        cols = ["id", "region", "secret", "pin"]
        self.g.grant(
            admin,
            "SELECT",
            "TABLE",
            f"{db}.public",
            self.mallory,
            columns=["id", "region"],
            row_filter="region = 'EU'",
            table_columns=cols,
        )
        for priv in ("SELECT", "INSERT", "ALTER"):
            self.g.grant(admin, priv, "TABLE", f"{db}.scratch", self.mallory)
        self.g.grant(
            admin,
            "SELECT",
            "TABLE",
            f"{db}.public",
            self.hasher,
            masks={"pin": "hash"},
            exclude_columns=["secret"],
            table_columns=cols,
        )

    def sql(self, who: str, query: str):
        return GovernedSql(self.spark, self.settings, self.p.principal(who)).execute(query.format(db=self.db))

    def denials(self, who: str) -> int:
        return len(AuditLog(self.settings).list(principal=who, decision="deny", limit=100000))


@pytest.fixture(scope="module")
def lake(spark, settings) -> Lake:
    return Lake(spark, settings)


def assert_refused(lake: Lake, who: str, query: str) -> None:
    before = lake.denials(who)
    try:
        result = lake.sql(who, query)
    except (AccessDenied, SqlError) as exc:
        assert not leaked(str(exc)), f"{query}: the error names a canary"
        assert isinstance(exc, AccessDenied), f"{query}: {exc!r} (refusals must be AccessDenied, audited)"
        assert lake.denials(who) == before + 1, f"{query}: no audit row for the refusal"
    else:
        pytest.fail(f"ran: {query} -> {result.rows}")


# ---- SQL beyond SELECT ---------------------------------------------------------------------------

STATEMENTS = [
    "INSERT INTO {db}.scratch TABLE {db}.vault",  # issue 18, finding 1
    "INSERT INTO {db}.scratch SELECT * FROM {db}.vault",
    "INSERT INTO {db}.scratch SELECT id, secret FROM {db}.public",
    "INSERT INTO {db}.scratch VALUES (1, (SELECT secret FROM {db}.vault LIMIT 1))",
    "INSERT INTO {db}.scratch (id, val) SELECT id, secret FROM {db}.vault",
    "WITH c AS (SELECT * FROM {db}.vault) INSERT INTO {db}.scratch SELECT * FROM c",
    "INSERT INTO {db}.scratch REPLACE WHERE id = 1 SELECT id, region FROM {db}.public",
    "INSERT OVERWRITE {db}.scratch SELECT id, region FROM {db}.public",
    "CREATE TABLE {db}.copy AS SELECT * FROM {db}.vault",
    "MERGE INTO {db}.scratch t USING {db}.vault s ON t.id = s.id WHEN NOT MATCHED THEN INSERT *",
    "UPDATE {db}.scratch SET val = (SELECT secret FROM {db}.vault LIMIT 1)",
    "DELETE FROM {db}.scratch WHERE val IN (SELECT secret FROM {db}.vault)",
    "EXPLAIN SELECT * FROM {db}.vault",
    "EXPLAIN EXTENDED SELECT secret FROM {db}.public",
    "CACHE TABLE leak AS SELECT * FROM {db}.vault",
    "CREATE TEMPORARY VIEW leak AS SELECT * FROM {db}.vault",
    "ALTER TABLE {db}.scratch RENAME TO {db}.vault2",
    "ALTER TABLE {db}.scratch SET LOCATION '/tmp/elsewhere'",
    "ALTER TABLE {db}.scratch SET TBLPROPERTIES ('write.data.path' = '/tmp/elsewhere')",
    "SELECT * FROM {db}.public.snapshots",
    "SELECT * FROM {db}.public VERSION AS OF 1",
    "SELECT shoal_mask_hmac(secret) FROM {db}.public",
    "SELECT * FROM parquet.`/etc`",
    "SELECT " + "(" * 500 + "1" + ")" * 500,
    "SELECT 1; SELECT * FROM {db}.vault",
]


@pytest.mark.parametrize("statement", STATEMENTS)
def test_statement_forms_are_governed(lake, statement):
    assert_refused(lake, lake.mallory, statement)


def test_a_permitted_insert_copies_only_permitted_cells_and_the_audit_names_both_tables(lake):
    lake.sql(lake.mallory, "INSERT INTO {db}.scratch SELECT id, region FROM {db}.public")
    copied = lake.spark.sql(f"SELECT id, val FROM {lake.db}.scratch ORDER BY id").collect()
    assert [tuple(r) for r in copied] == [(1, "EU"), (3, "EU")]
    row = AuditLog(lake.settings).list(principal=lake.mallory, decision="allow", limit=1)[0]
    assert row["action"] == "insert"
    assert set(row["resource"].split(",")) == {f"{lake.db}.scratch", f"{lake.db}.public"}
    detail = row["detail"]
    assert detail["writes"] == [f"{lake.db}.scratch"] and detail["reads"] == [f"{lake.db}.public"]
    # INSERT INTO t TABLE src is governed like SELECT * FROM src: filtered, not refused, when granted.
    lake.sql(lake.mallory, "INSERT INTO {db}.scratch TABLE {db}.scratch")
    assert lake.spark.sql(f"SELECT count(*) FROM {lake.db}.scratch").collect()[0][0] == 4


def test_alter_and_drop_run_what_was_checked(lake):
    """Spark ends `/* /*+ */` at the first `*/`; sqlglot nests it. The text sent must never run."""
    trick = "/* /*+ */ SELECT * FROM {db}.vault -- */ ALTER TABLE {db}.scratch ADD COLUMNS (z int)"
    assert_refused(lake, lake.mallory, trick)
    # A comment that Spark and sqlglot read alike still never reaches Spark as written.
    lake.sql(lake.mallory, "ALTER TABLE {db}.scratch ADD COLUMNS (note string) /* harmless */")
    columns = [f.name for f in lake.spark.table(f"{lake.db}.scratch").schema.fields]
    assert "note" in columns


def test_renaming_a_column_cannot_move_it_out_from_under_a_grant(lake, spark):
    db = lake.db
    spark.sql(f"CREATE TABLE {db}.hr (id int, salary string, ssn string) USING iceberg")
    spark.sql(f"INSERT INTO {db}.hr VALUES (1, '{CANARY_COLUMN}', '{CANARY_ROW}')")
    admin = lake.p.principal("admin")
    cols = ["id", "salary", "ssn"]
    lake.g.grant(
        admin,
        "SELECT",
        "TABLE",
        f"{db}.hr",
        lake.mallory,
        exclude_columns=["salary"],
        masks={"ssn": "redact"},
        table_columns=cols,
    )
    lake.g.grant(admin, "ALTER", "TABLE", f"{db}.hr", lake.mallory)
    for statement in (
        "ALTER TABLE {db}.hr RENAME COLUMN salary TO salary2",
        "ALTER TABLE {db}.hr RENAME COLUMN ssn TO ssn2",
        "ALTER TABLE {db}.hr DROP COLUMN ssn",
        "ALTER TABLE {db}.hr ALTER COLUMN id TYPE bigint",
    ):
        assert_refused(lake, lake.mallory, statement)
    lake.sql(lake.mallory, "ALTER TABLE {db}.hr ADD COLUMNS (extra string)")  # adding hides nothing
    assert not leaked(lake.sql(lake.mallory, "SELECT * FROM {db}.hr").rows)


def test_spark_variables_are_not_expanded(lake):
    result = lake.sql(lake.mallory, "SELECT '${{spark.sql.catalog.lake.uri}}' AS a, '${{env:HOME}}' AS b")
    assert result.rows == [("${spark.sql.catalog.lake.uri}", "${env:HOME}")]


def test_the_hash_mask_resists_a_dictionary_join(lake):
    masked = lake.sql(lake.hasher, "SELECT id, pin FROM {db}.public ORDER BY id").rows
    assert all(len(pin) == 64 and pin not in ("1234", "9876", "5555") for _, pin in masked)
    assert len({pin for _, pin in masked}) == 3  # equal values stay equal, different ones differ
    guesses = (
        "SELECT p.id, g.id AS guess FROM {db}.public p JOIN range(0, 10000) g "
        "ON p.pin = sha2(cast(g.id AS string), 256)"
    )
    assert lake.sql(lake.hasher, guesses).rows == []
    for attempt in (
        "SELECT p.id FROM {db}.public p JOIN range(0, 10000) g ON p.pin = shoal_mask_hmac(cast(g.id AS string))",
        "SELECT p.id FROM {db}.public p JOIN range(0, 10000) g ON p.pin = `shoal_mask_hmac`(cast(g.id AS string))",
    ):
        assert_refused(lake, lake.hasher, attempt)


# ---- generated variants ----------------------------------------------------------------------------

SAFE = [
    "SELECT id, region FROM {db}.public",
    "SELECT region, count(*) FROM {db}.public GROUP BY region",
    "SELECT id FROM {db}.public WHERE region = 'EU' ORDER BY id",
    "SELECT a.id FROM {db}.public a JOIN {db}.public b ON a.id = b.id",
    "WITH x AS (SELECT id FROM {db}.public) SELECT * FROM x",
    "SELECT id FROM {db}.public WHERE id IN (SELECT id FROM {db}.public)",
    "SELECT (SELECT max(id) FROM {db}.public) AS m",
    "SELECT id FROM {db}.public UNION ALL SELECT id FROM {db}.public",
    "SELECT * FROM (SELECT id, region FROM {db}.public) s",
    "SELECT id FROM {db}.public WHERE EXISTS (SELECT 1 FROM {db}.public p2 WHERE p2.id = 1)",
]


def _variants() -> list[str]:
    """Each safe query with one table swapped for the refused table, one column swapped for the
    refused column, and the whole query moved into an INSERT."""
    out: list[str] = []
    for safe in SAFE:
        tree = sqlglot.parse_one(safe.replace("{db}", "DB"), read="spark")
        tables = list(tree.find_all(exp.Table))
        for i in range(len(tables)):
            t = tree.copy()
            target = list(t.find_all(exp.Table))[i]
            target.set("this", exp.to_identifier("vault"))
            out.append(t.sql(dialect="spark"))
        columns = [c for c in tree.find_all(exp.Column) if c.name == "id"]
        for i in range(len(columns)):
            t = tree.copy()
            col = [c for c in t.find_all(exp.Column) if c.name == "id"][i]
            col.set("this", exp.to_identifier("secret"))
            out.append(t.sql(dialect="spark"))
        # Filtered-out rows through a predicate that would select them.
        t = tree.copy()
        if t.find(exp.Select) is not None and isinstance(t, exp.Select) and not t.args.get("where"):
            out.append(t.where("region = 'US'").sql(dialect="spark"))
        out.append(f"INSERT INTO DB.scratch SELECT 1, CAST(x.secret AS string) FROM ({tree.sql(dialect='spark')}) x")
    return sorted(set(q.replace("DB.", "{db}.") for q in out))


VARIANTS = _variants()


def test_generated_variants_never_return_a_canary(lake):
    assert len(VARIANTS) >= 40
    refused = 0
    for query in VARIANTS:
        before = lake.denials(lake.mallory)
        try:
            result = lake.sql(lake.mallory, query)
        except (AccessDenied, SqlError) as exc:
            assert not leaked(str(exc)), query
            assert lake.denials(lake.mallory) == before + 1, f"{query}: no audit row"
            refused += isinstance(exc, AccessDenied)
        else:
            assert not leaked(result.rows), f"{query} returned a canary: {result.rows}"
    assert refused >= len(VARIANTS) // 2  # most variants touch the secret; some only filter rows


# ---- text: inventory filters and search ------------------------------------------------------------


@pytest.fixture(scope="module")
def documents(spark, settings, lake, tmp_path_factory):
    from shoal.extract import run_extract
    from shoal.ingest import ingest
    from shoal.search.index import SearchIndex

    folder = tmp_path_factory.mktemp("attack-docs")
    (folder / "payroll.txt").write_text(
        f"Payroll export for the board. Reference {CANARY_TEXT}. Card 4111 1111 1111 1111, "
        "contact payroll@example.com about the salary bands.\n"
    )
    (folder / "menu.txt").write_text("The canteen menu this week: soup, salad and apple pie.\n")
    ingest(spark, settings, str(folder), source_name=f"attack{U}", tags={"attack": U})
    # The menu again under a secret path, ingested after it: a duplicate, so the path lives
    # only in shoal.object_sources, on which nobody below has a grant.
    copies = tmp_path_factory.mktemp("attack-copies")
    (copies / f"{CANARY_PATH}.txt").write_bytes((folder / "menu.txt").read_bytes())
    ingest(spark, settings, str(copies), source_name=f"attackcopies{U}")
    run_extract(spark, settings, only=["text/plain"])
    SearchIndex(settings).update(spark, model=settings.search.model, size=400, overlap=80)
    admin = lake.p.principal("admin")
    index_cols = [f.name for f in spark.table("shoal.object_index").schema.fields]
    text_cols = [f.name for f in spark.table("shoal.text").schema.fields]
    # reader: the inventory (object_index) but no grant on the text.
    lake.g.grant(admin, "SELECT", "TABLE", "shoal.object_index", lake.reader, table_columns=index_cols)
    # mallory: the inventory, and the text of the menu only.
    lake.g.grant(admin, "SELECT", "TABLE", "shoal.object_index", lake.mallory, table_columns=index_cols)
    menu = spark.sql(
        f"SELECT object_id FROM shoal.object_index WHERE source_name = 'attack{U}' AND source_path = 'menu.txt'"
    ).collect()[0][0]
    lake.g.grant(
        admin,
        "SELECT",
        "TABLE",
        "shoal.text",
        lake.mallory,
        row_filter=f"object_id = '{menu}'",
        table_columns=text_cols,
    )
    return {"folder": folder, "menu": menu}


def test_inventory_text_filter_follows_text_grants(spark, settings, lake, documents, cli_env, capsys, monkeypatch):
    from shoal.catalog import list_objects

    def paths(who: str | None, words: str) -> list[str]:
        principal = lake.p.principal(who) if who else None
        rows = list_objects(spark, text=words, source_name=f"attack{U}", principal=principal, settings=settings)
        return [r["source_path"] for r in rows]

    assert paths(None, CANARY_TEXT) == ["payroll.txt"]  # the operator
    assert paths(lake.p.principal("admin").name, CANARY_TEXT) == ["payroll.txt"]
    for who in (lake.reader, lake.mallory):
        before = lake.denials(who)
        assert paths(who, CANARY_TEXT) == []
        assert paths(who, CANARY_TEXT[:12]) == []  # prefix probing, character by character
        assert paths(who, "4111") == []
        if who == lake.reader:
            assert lake.denials(who) > before  # the refused read of shoal.text is audited
    assert paths(lake.mallory, "apple pie") == ["menu.txt"]  # granted rows still match
    assert paths(lake.reader, "apple pie") == []

    code, out, err = run_cli(
        ["catalog", "objects", "--text", CANARY_TEXT, "--as", lake.reader, "--json"], capsys, monkeypatch
    )
    assert code == 0, err
    assert json.loads(out) == [] and not leaked(out)
    code, out, err = run_cli(["catalog", "objects", "--text", CANARY_TEXT, "--json"], capsys, monkeypatch)
    assert code == 0 and [r["source_path"] for r in json.loads(out)] == ["payroll.txt"]


def test_search_snippets_follow_text_grants(spark, settings, lake, documents):
    from shoal.search.query import search

    tags = {"attack": U}
    as_admin = search(settings, "payroll card salary", k=5, tags=tags)
    assert any(CANARY_TEXT in h.snippet for h in as_admin)  # the snippet is there to be hidden
    for who in (lake.reader, lake.mallory):
        for query in ("payroll card salary", CANARY_TEXT, "4111", "what is on the canteen menu"):
            for mode in ("hybrid", "vector", "keyword"):
                hits = search(settings, query, k=5, tags=tags, principal=lake.p.principal(who), spark=spark, mode=mode)
                assert not leaked([h.__dict__ for h in hits]), (who, query, mode)
                assert "4111" not in json.dumps([h.snippet for h in hits])
                # Ranking itself reads text: unreadable text never takes part, so a hit cannot
                # answer "does payroll.txt contain this word".
                assert "payroll.txt" not in [h.source_path for h in hits], (who, query, mode)
                if who == lake.reader:
                    assert hits == []
    menu_hits = search(
        settings, "canteen menu soup", k=5, tags=tags, principal=lake.p.principal(lake.mallory), spark=spark
    )
    assert menu_hits[0].source_path == "menu.txt" and "soup" in menu_hits[0].snippet


def test_duplicate_paths_follow_object_sources_grants(spark, settings, lake, documents, cli_env, capsys, monkeypatch):
    from shoal.catalog import list_objects, object_paths
    from shoal.search.query import search

    menu = documents["menu"]
    assert CANARY_PATH + ".txt" in json.dumps(object_paths(spark, [menu]))  # the operator sees it
    for who in (lake.reader, lake.mallory, lake.hasher):
        for query in (
            "SELECT * FROM shoal.object_sources",
            "SELECT source_path FROM shoal.object_sources WHERE source_path LIKE 'canary%'",
            "SELECT count(*) FROM shoal.object_sources",
            "SELECT o.source_path FROM shoal.object_index i JOIN shoal.object_sources o ON i.object_id = o.object_id",
        ):
            assert_refused(lake, who, query)
        principal = lake.p.principal(who)
        rows = list_objects(spark, source_name=f"attack{U}", principal=principal, settings=settings)
        assert not leaked(rows) and all(r["paths"] == [] for r in rows)
        hits = search(settings, "canteen menu soup", k=5, tags={"attack": U}, principal=principal, spark=spark)
        assert not leaked([h.to_dict() for h in hits])
    code, out, err = run_cli(
        ["catalog", "objects", "--source-name", f"attack{U}", "--as", lake.mallory, "--json"], capsys, monkeypatch
    )
    assert code == 0, err
    assert "menu.txt" in out and not leaked(out)


# ---- raw files -------------------------------------------------------------------------------------------


def test_a_link_inside_the_raw_zone_cannot_leave_the_access_point_prefix(settings, lake):
    raw = Path(settings.warehouse_uri) / "raw" / f"atk{U}"
    (raw / "public").mkdir(parents=True)
    (raw / "private").mkdir()
    (raw / "public" / "ok.txt").write_text("public notice")
    (raw / "private" / "vault.txt").write_text(CANARY_TABLE)
    os.symlink(raw / "private" / "vault.txt", raw / "public" / "link.txt")
    os.symlink(raw / "private", raw / "public" / "dir")
    access = RawAccess(settings)
    access.create(lake.p.principal("admin"), f"atk-{U}", prefix=f"atk{U}/public", principals=[lake.mallory])
    who = lake.p.principal(lake.mallory)
    assert access.resolve(who, f"atk-{U}", f"atk{U}/public/ok.txt").name == "ok.txt"
    for path in (f"atk{U}/public/link.txt", f"atk{U}/public/dir/vault.txt", f"atk{U}/private/vault.txt"):
        before = lake.denials(lake.mallory)
        with pytest.raises(AccessDenied) as caught:
            access.resolve(who, f"atk-{U}", path)
        assert not leaked(str(caught.value))
        assert lake.denials(lake.mallory) == before + 1


def test_ingest_never_follows_a_link(spark, settings, tmp_path):
    from shoal.ingest import ingest

    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "catalog.db").write_text(CANARY_TABLE)
    (outside / "dir").mkdir()
    (outside / "dir" / "x.txt").write_text(CANARY_TABLE)
    source = tmp_path / "drop"
    source.mkdir()
    (source / "real.txt").write_text("a real file")
    os.symlink(outside / "catalog.db", source / "catalog.db")
    os.symlink(outside / "dir", source / "linked-dir")
    result = ingest(spark, settings, str(source), source_name=f"links{U}").to_dict()
    by_path = {f["source_path"]: f for f in result["files"]}
    assert by_path["real.txt"]["status"] == "new"
    assert by_path["catalog.db"]["status"] == "skipped" and "link" in by_path["catalog.db"]["error"]
    assert by_path["linked-dir"]["status"] == "skipped"
    assert result["skipped"] == 2 and result["new"] == 1
    raw = Path(settings.warehouse_uri) / "raw" / f"links{U}"
    assert not any(CANARY_TABLE in p.read_text(errors="replace") for p in raw.rglob("*") if p.is_file())


# ---- names: nested namespaces, metadata, branch and tag suffixes (issue 29, finding 1) ------------

CANARY_NESTED = f"CANARYNESTED{U}"  # in tables whose names look like a granted table plus more


@pytest.fixture(scope="module")
def nested(spark, lake):
    """`{db}.x.public` (a nested namespace), `{db}.public.files` (a nested table named like a
    metadata table of the granted table), each with a branch and a tag; and one grantee per
    grant shape on `{db}.public`: whole table, through a group, a database grant, columns,
    a row filter, masks."""
    import pyarrow as pa
    from pyiceberg.catalog.sql import SqlCatalog

    db, settings = lake.db, lake.settings
    # Spark refuses to create `db.public.files` (it reads the name as the metadata table of
    # `db.public`); Iceberg's catalog API, which other engines use, does not.
    catalog = SqlCatalog(settings.catalog.name, uri=settings.catalog_sqlalchemy_uri, warehouse=settings.warehouse_uri)
    schema = pa.schema([pa.field("id", pa.int32()), pa.field("secret", pa.string())])
    for ns, table in ((f"{db}.x", "public"), (f"{db}.public", "files"), (f"{db}.public", "branch_main")):
        spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {ns}")
        catalog.create_table((*ns.split("."), table), schema=schema)
        spark.sql(f"INSERT INTO {ns}.{table} VALUES (7, '{CANARY_NESTED}')")
        spark.sql(f"ALTER TABLE {ns}.{table} CREATE TAG t1")
    spark.sql(f"ALTER TABLE {db}.public CREATE TAG t1")
    admin = lake.p.principal("admin")
    shapes = {
        "whole": {},
        "group": {},
        "database": {},
        "tags": {},
        "columns": {"columns": ["id", "region"]},
        "rows": {"row_filter": "region = 'EU'"},
        "masks": {"masks": {"pin": "hash", "secret": "redact"}},
    }
    cols = ["id", "region", "secret", "pin"]
    who: dict[str, str] = {}
    for shape, kwargs in shapes.items():
        name = f"n{shape}_{U}"
        lake.p.add(name)
        who[shape] = name
        if shape == "group":
            lake.p.add(f"g_{U}", kind="group")
            lake.p.add_member(f"g_{U}", name)
            lake.g.grant(admin, "SELECT", "TABLE", f"{db}.public", f"g_{U}")
        elif shape == "database":
            lake.g.grant(admin, "SELECT", "DATABASE", db, name)
        elif shape == "tags":
            lake.g.create_tag(f"area{U}", ["open"])
            lake.g.assign_tag(f"area{U}", "open", table=f"{db}.public")
            lake.g.grant(admin, "SELECT", "TAGS", f"area{U}=open", name)
        else:
            lake.g.grant(admin, "SELECT", "TABLE", f"{db}.public", name, table_columns=cols, **kwargs)
    return who


def _name_forms() -> list[str]:
    """Every spelling of the nested tables, and suffixes of the granted table, as a SELECT; the
    nested reads also inside a CTE, a join, a scalar subquery and an INSERT's source."""
    bodies = [
        "{db}.x.public",
        "`{db}`.`x`.`public`",
        "{db}.x.public.branch_main",
        "{db}.x.public.tag_t1",
        "{db}.x.public.files",
        "{db}.x.public.snapshots",
        "{db}.x.public.history",
        "{db}.x.public.entries",
        "{db}.x.public.all_files",
        "{db}.x.public.refs",
        "{db}.x.public.files.branch_main",
        "{db}.public.files",  # a nested table, and the granted table's metadata: ambiguous
        "{db}.public.branch_main",  # a nested table, and a branch of the granted table
        "{db}.public.files.tag_t1",
        "{db}.public.tag_t1",
        "{db}.public.snapshots",
        "{db}.public.refs",
        "`{db}.x`.public",
        "`{db}.public`.files",
    ]
    names = [p + b for p in ("", "lake.") for b in bodies] + [f"spark_catalog.{b}" for b in bodies[:3]]
    queries = [f"SELECT * FROM {n}" for n in names]
    for n in ("lake.{db}.x.public.branch_main", "{db}.public.files", "{db}.public.branch_main"):
        queries += [
            f"WITH c AS (SELECT * FROM {n}) SELECT * FROM c",
            f"SELECT p.id, q.* FROM {{db}}.public p JOIN {n} q ON true",
            f"SELECT (SELECT max(secret) FROM {n}) AS s",
            f"INSERT INTO {{db}}.scratch SELECT 1, CAST(s AS string) FROM (SELECT * FROM {n}) s",
        ]
    return queries


NAME_FORMS = _name_forms()


def _nested_leaks(value: object) -> bool:
    return CANARY_NESTED.lower() in json.dumps(value, default=str).lower()


@pytest.mark.parametrize("shape", ["whole", "group", "database", "tags", "columns", "rows", "masks"])
def test_no_name_form_reads_a_nested_table_through_a_granted_name(lake, nested, shape, spark):
    who = nested[shape]
    ran = refused = failed = 0
    before = lake.denials(who)
    for query in NAME_FORMS:
        q = query.format(db=lake.db)
        try:
            result = GovernedSql(lake.spark, lake.settings, lake.p.principal(who)).execute(q)
        except (AccessDenied, SqlError) as exc:
            assert not _nested_leaks(str(exc)), q
            refused += isinstance(exc, AccessDenied)
            failed += 1
        else:
            ran += 1
            assert not _nested_leaks(result.rows), f"{shape} read a nested table with {q}: {result.rows}"
    assert before + refused <= lake.denials(who) <= before + failed, "a refusal without its audit row"
    rows = spark.sql(f"SELECT count(*) FROM {lake.db}.scratch WHERE val LIKE '%{CANARY_NESTED}%'").first()[0]
    assert rows == 0, "an INSERT copied a nested table's rows"
    if shape in ("whole", "group", "database", "tags"):
        assert ran > 0  # the granted table's own suffixes (tag_t1, snapshots) still read


def test_a_suffix_needs_the_whole_table_and_is_audited_as_the_object_read(lake, nested):
    whole, rows_only = nested["whole"], nested["rows"]
    db = lake.db
    result = GovernedSql(lake.spark, lake.settings, lake.p.principal(whole)).execute(
        f"SELECT count(*) FROM lake.{db}.public.tag_t1"
    )
    assert result.rows == [(3,)]
    last = AuditLog(lake.settings).list(principal=whole, limit=1)[0]
    assert f"{db}.public.tag_t1" in json.dumps(last, default=str)
    with pytest.raises(AccessDenied, match="reveals more"):
        GovernedSql(lake.spark, lake.settings, lake.p.principal(rows_only)).execute(f"SELECT * FROM {db}.public.tag_t1")
    with pytest.raises(AccessDenied, match="ambiguous"):
        GovernedSql(lake.spark, lake.settings, lake.p.principal(whole)).execute(f"SELECT * FROM {db}.public.files")
    with pytest.raises(AccessDenied, match="nested namespaces"):
        GovernedSql(lake.spark, lake.settings, lake.p.principal(whole)).execute(f"SELECT * FROM lake.{db}.x.public")
    denied = AuditLog(lake.settings).list(principal=whole, decision="deny", limit=1)[0]
    assert f"{db}.x.public" in json.dumps(denied, default=str)


def test_the_cli_refuses_a_nested_table_read_through_a_granted_name(lake, nested, cli_env, capsys, monkeypatch):
    code, out, err = run_cli(
        ["sql", f"SELECT * FROM lake.{lake.db}.x.public.branch_main", "--as", nested["whole"], "--json"],
        capsys,
        monkeypatch,
    )
    assert code != 0 and CANARY_NESTED not in out + err
    assert "nested namespaces" in out + err


def test_a_column_left_out_then_dropped_stays_out_of_history_and_metadata(spark, lake):
    """A grant that lists or excludes columns covers every current column once the left-out one
    is dropped; old snapshots, tags and file statistics still hold it (found in review)."""
    db, canary = lake.db, f"CANARYDROPPED{U}"
    spark.sql(f"CREATE TABLE {db}.people (id int, region string, ssn string) USING iceberg")
    spark.sql(f"INSERT INTO {db}.people VALUES (1, 'EU', '{canary}')")
    snap = spark.sql(f"SELECT snapshot_id FROM {db}.people.snapshots").first()[0]
    spark.sql(f"ALTER TABLE {db}.people CREATE TAG before_drop")
    admin, cols = lake.p.principal("admin"), ["id", "region", "ssn"]
    listed, excluded = f"listed_{U}", f"excluded_{U}"
    lake.p.add(listed)
    lake.p.add(excluded)
    lake.g.grant(admin, "SELECT", "TABLE", f"{db}.people", listed, columns=["id", "region"], table_columns=cols)
    lake.g.grant(admin, "SELECT", "TABLE", f"{db}.people", excluded, exclude_columns=["ssn"], table_columns=cols)
    spark.sql(f"ALTER TABLE {db}.people DROP COLUMN ssn")
    for who in (listed, excluded):
        for q in (
            f"SELECT * FROM {db}.people.snapshot_id_{snap}",
            f"SELECT * FROM {db}.people.tag_before_drop",
            f"SELECT * FROM {db}.people.files",
            f"SELECT * FROM {db}.people.all_data_files",
            f"SELECT * FROM {db}.people VERSION AS OF {snap}",
        ):
            with pytest.raises(AccessDenied, match="reveals more|whole table"):
                lake.sql(who, q)
        assert lake.sql(who, f"SELECT * FROM {db}.people").rows == [(1, "EU")]
