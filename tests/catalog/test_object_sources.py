"""Every path is findable (issue 20): identical content under many paths is one object, and
`shoal.object_sources` keeps each (source, path) with first and last seen. The paths show in
`shoal catalog objects`, search hits, the console and the API, governed like any table: a
principal without a grant on shoal.object_sources sees none of them."""

from __future__ import annotations

import json
import time
import uuid

import httpx
import pytest

from shoal.catalog import list_objects, show_object
from shoal.governance import AccessDenied, AuditLog, Governance, GovernedSql, Principals
from shoal.governance.sessions import Sessions
from shoal.ingest import ingest
from shoal.lake import metadata
from tests.support.helpers import run_cli

pytestmark = pytest.mark.slow  # Spark, extraction, embedding and a server: minutes on 2 cores

U = uuid.uuid4().hex[:8]
SHARED = f"Shared report {U}: the harbour crane inspection passed with two minor findings.\n"
ODD_NAME = "<img src=x onerror=alert(1)>&amp.txt"  # a real file name: markup must reach the console escaped


def _sources(spark, object_id: str) -> list[tuple]:
    return [
        tuple(r)
        for r in spark.sql(
            f"SELECT source_name, source_path, first_seen, last_seen FROM {metadata.table('object_sources').sql} "
            "WHERE object_id = :o ORDER BY source_name, source_path",
            args={"o": object_id},
        ).collect()
    ]


@pytest.fixture(scope="module")
def lake(spark, settings, tmp_path_factory):
    one, two = tmp_path_factory.mktemp("paths-one"), tmp_path_factory.mktemp("paths-two")
    (one / "a.txt").write_text(SHARED)
    (one / "other.txt").write_text(f"Unrelated note {U} about the canteen.\n")
    # Source two only holds copies: the object's own row (shoal.objects) stays one:a.txt.
    (two / "copies").mkdir()
    (two / "copies" / "a-copy.txt").write_text(SHARED)
    (two / ODD_NAME).write_text(SHARED)
    (two / "again.txt").write_text(SHARED)
    src1, src2 = f"paths1{U}", f"paths2{U}"
    first = ingest(spark, settings, str(one), source_name=src1, tags={"paths": U})
    second = ingest(spark, settings, str(two), source_name=src2, tags={"paths": U})
    status = {f.source_path: f.status for f in first.files + second.files}
    oid = next(f.object_id for f in first.files if f.source_path == "a.txt")
    first_rows = _sources(spark, oid)
    # Then source two again, one of its copies changed: every test reads the lake after both
    # runs, whatever order they run in.
    time.sleep(0.01)
    (two / "copies" / "a-copy.txt").write_text(SHARED + "Amended: the second finding is closed.\n")
    again = ingest(spark, settings, str(two), source_name=src2)
    return {
        "one": one,
        "two": two,
        "src1": src1,
        "src2": src2,
        "status": status,
        "oid": oid,
        "first_rows": first_rows,
        "again": again,
    }


def test_duplicate_content_keeps_every_path(spark, lake):
    assert lake["status"] == {
        "a.txt": "new",
        "copies/a-copy.txt": "duplicate",
        ODD_NAME: "duplicate",
        "other.txt": "new",
        "again.txt": "duplicate",
    }
    rows = lake["first_rows"]  # after the first run of each source
    assert [(r[0], r[1]) for r in rows] == [
        (lake["src1"], "a.txt"),
        (lake["src2"], ODD_NAME),
        (lake["src2"], "again.txt"),
        (lake["src2"], "copies/a-copy.txt"),
    ]
    assert all(r[2] is not None and r[2] == r[3] for r in rows)  # seen once so far
    # One object for the content: the raw zone holds it once.
    count = spark.sql(
        f"SELECT count(*) FROM {metadata.table('objects').sql} WHERE object_id = :o", args={"o": lake["oid"]}
    ).collect()[0][0]
    assert count == 1


def test_reingest_moves_last_seen_and_a_changed_path_to_the_new_object(spark, lake):
    before = {r[1]: r for r in lake["first_rows"] if r[0] == lake["src2"]}
    again = lake["again"]
    status = {f.source_path: f.status for f in again.files}
    # A path seen before only as a duplicate has no version of its own yet: new, not new_version.
    assert status == {"again.txt": "duplicate", ODD_NAME: "duplicate", "copies/a-copy.txt": "new"}
    after = {r[1]: r for r in _sources(spark, lake["oid"]) if r[0] == lake["src2"]}
    assert set(after) == {"again.txt", ODD_NAME}  # the changed path left the old object
    for path in after:
        assert after[path][2] == before[path][2]  # first_seen kept
        assert after[path][3] > before[path][3]  # last_seen moved on
    new_oid = next(f.object_id for f in again.files if f.source_path == "copies/a-copy.txt")
    moved = _sources(spark, new_oid)
    assert [(r[0], r[1]) for r in moved] == [(lake["src2"], "copies/a-copy.txt")]
    assert moved[0][2] == before["copies/a-copy.txt"][2]  # the path itself was first seen back then
    # Exactly one row per (source, path), however many runs saw it.
    dupes = spark.sql(
        f"SELECT source_name, source_path, count(*) FROM {metadata.table('object_sources').sql} "
        "GROUP BY source_name, source_path HAVING count(*) > 1"
    ).collect()
    assert dupes == []


def test_catalog_objects_and_show_list_every_path(spark, lake, cli_env, capsys, monkeypatch):
    code, out, err = run_cli(["catalog", "objects", "--source-name", lake["src1"], "--json"], capsys, monkeypatch)
    assert code == 0, err
    row = next(r for r in json.loads(out) if r["object_id"] == lake["oid"])
    assert {(p["source_name"], p["source_path"]) for p in row["paths"]} == {
        (lake["src1"], "a.txt"),
        (lake["src2"], ODD_NAME),
        (lake["src2"], "again.txt"),
    }
    assert all(p["first_seen"] and p["last_seen"] for p in row["paths"])
    code, out, err = run_cli(["catalog", "objects", "--source-name", lake["src1"]], capsys, monkeypatch)
    assert code == 0 and "paths" in out
    shown = show_object(spark, lake["oid"][:10])
    assert (lake["src2"], "again.txt") in {(p["source_name"], p["source_path"]) for p in shown["object"]["paths"]}


@pytest.fixture(scope="module")
def people(spark, settings, lake):
    """nogrant: no grant on object_sources; reader: its row two:again.txt only (row filter);
    boss: an admin."""
    p, g = Principals(settings), Governance(settings)
    admin = p.principal("admin")
    names = {"nogrant": f"nogrant_{U}", "reader": f"pathreader_{U}", "boss": f"boss_{U}"}
    p.add(names["nogrant"], password="correct horse battery")
    p.add(names["reader"], password="correct horse battery")
    p.add(names["boss"], admin=True, password="correct horse battery")
    cols = [f.name for f in spark.table(metadata.table("object_sources").sql).schema.fields]
    g.grant(
        admin,
        "SELECT",
        "TABLE",
        "shoal.object_sources",
        names["reader"],
        row_filter=f"source_name = '{lake['src2']}' AND source_path = 'again.txt'",
        table_columns=cols,
    )
    return {k: p.principal(v) for k, v in names.items()}


def test_object_sources_is_governed_in_sql_and_the_inventory(spark, settings, lake, people):
    who = people["nogrant"]
    denials = len(AuditLog(settings).list(principal=who.name, decision="deny", limit=100000))
    with pytest.raises(AccessDenied):
        GovernedSql(spark, settings, who).execute("SELECT source_path FROM shoal.object_sources")
    assert len(AuditLog(settings).list(principal=who.name, decision="deny", limit=100000)) == denials + 1
    rows = list_objects(spark, source_name=lake["src1"], principal=who, settings=settings)
    assert rows and all(r["paths"] == [] for r in rows)
    reader = list_objects(spark, source_name=lake["src1"], principal=people["reader"], settings=settings)
    mine = next(r for r in reader if r["object_id"] == lake["oid"])
    assert [(p["source_name"], p["source_path"]) for p in mine["paths"]] == [(lake["src2"], "again.txt")]
    boss = list_objects(spark, source_name=lake["src1"], principal=people["boss"], settings=settings)
    assert len(next(r for r in boss if r["object_id"] == lake["oid"])["paths"]) == 3


@pytest.fixture(scope="module")
def text_readers(spark, settings, lake, people):
    """The lake's text extracted; nogrant and reader may also read object_index and text (not
    object_sources)."""
    from shoal.extract import run_extract

    run_extract(spark, settings, only=["text/plain"])
    g, admin = Governance(settings), Principals(settings).principal("admin")
    for table in ("object_index", "text"):
        cols = [f.name for f in spark.table(metadata.table(table).sql).schema.fields]
        for name in ("nogrant", "reader"):
            g.grant(admin, "SELECT", "TABLE", f"shoal.{table}", people[name].name, table_columns=cols)
    return people


def test_search_hits_carry_paths_governed(spark, settings, lake, people, text_readers):
    from shoal.search.index import SearchIndex
    from shoal.search.query import search

    SearchIndex(settings).update(spark, model=settings.search.model, size=400, overlap=80)
    query = "harbour crane inspection findings"
    # The operator's Spark-free search reads the index's copy of object_sources.
    hit = next(h for h in search(settings, query, k=10, tags={"paths": U}) if h.object_id == lake["oid"])
    assert {(p["source_name"], p["source_path"]) for p in hit.paths} == {
        (lake["src1"], "a.txt"),
        (lake["src2"], ODD_NAME),
        (lake["src2"], "again.txt"),
    }
    admin_hits = search(settings, query, k=10, tags={"paths": U}, principal=people["boss"], spark=spark)
    assert len(next(h for h in admin_hits if h.object_id == lake["oid"]).paths) == 3
    # A principal who may read the text but not object_sources gets the hit without paths.
    nogrant = search(settings, query, k=10, tags={"paths": U}, principal=people["nogrant"], spark=spark)
    hit = next(h for h in nogrant if h.object_id == lake["oid"])
    assert hit.paths == [] and "copies/a-copy.txt" not in json.dumps([h.to_dict() for h in nogrant])
    reader = search(settings, query, k=10, tags={"paths": U}, principal=people["reader"], spark=spark)
    hit = next(h for h in reader if h.object_id == lake["oid"])
    assert [(p["source_name"], p["source_path"]) for p in hit.paths] == [(lake["src2"], "again.txt")]


@pytest.fixture(scope="module")
def server(settings):
    from tests.support.servers import console_server

    with console_server(settings) as base:
        yield base


def test_console_and_api_show_paths_only_with_a_grant(settings, lake, people, text_readers, server):
    def console(who) -> str:
        cookie, _ = Sessions(settings).create(who.name)
        r = httpx.get(f"{server}/objects/{lake['oid']}", cookies={"shoal_session": cookie}, timeout=120)
        assert r.status_code == 200, r.text[:500]
        return r.text

    page = console(people["boss"])
    for path in ("a.txt", "again.txt", lake["src2"]):
        assert path in page
    assert "&lt;img src=x onerror=alert(1)&gt;&amp;amp.txt" in page and "<img src=x" not in page  # escaped
    page = console(people["nogrant"])
    assert "again.txt" not in page and "onerror" not in page
    page = console(people["reader"])
    assert "again.txt" in page and "a-copy" not in page and "onerror" not in page

    def api(who) -> list[dict]:
        token = Principals(settings).create_token(who.name)[1]
        r = httpx.get(
            f"{server}/api/v1/objects",
            params={"limit": 1000},
            headers={"Authorization": f"Bearer {token}"},
            timeout=120,
        )
        assert r.status_code == 200, r.text[:500]
        return next(o for o in r.json() if o["object_id"] == lake["oid"])["paths"]

    assert len(api(people["boss"])) == 3
    assert api(people["nogrant"]) == []
    assert [(p["source_name"], p["source_path"]) for p in api(people["reader"])] == [(lake["src2"], "again.txt")]
