"""Semantic search end to end: ingest -> extract -> incremental index -> hybrid search,
filters, paraphrases that share no words with the document, and governed results."""

from __future__ import annotations

import uuid

import faiss
import pytest

from shoal.extract import run_extract
from shoal.governance import Governance, Principals
from shoal.ingest import ingest
from shoal.search.index import SearchIndex
from shoal.search.query import search

DOCS = {
    "invoice-payment.txt": "Please pay invoice 1042 for the shipment of steel pipes by the end of the month. The amount due is 4,200 euros.",
    "vacation-policy.txt": "Employees receive twenty-five days of paid annual leave. Holiday requests go to the team lead two weeks in advance.",
    "server-outage.txt": "The database cluster went down at 3 am after the disk filled up; engineers restored service by adding storage.",
    "sponge-cake.txt": "Whisk the eggs with sugar, fold in flour and bake the sponge cake for thirty minutes.",
    "league-final.txt": "The home team scored twice in the second half and won the league final.",
}


@pytest.fixture(scope="module")
def corpus(spark, settings, tmp_path_factory):
    suite = uuid.uuid4().hex[:8]
    folder = tmp_path_factory.mktemp("search-corpus")
    for name, text in DOCS.items():
        (folder / name).write_text(text + f"\n(ref {suite})\n")
    ingest(spark, settings, str(folder), source_name=f"search{suite}", tags={"suite": suite})
    run_extract(spark, settings, only=["text/plain"])
    first = SearchIndex(settings).update(spark, model=settings.search.model, size=400, overlap=80)
    return {"suite": suite, "folder": folder, "first": first}


def names(hits) -> list[str]:
    return [h.source_path for h in hits]


def test_indexing_is_incremental(spark, settings, corpus):
    assert corpus["first"].chunks_added >= len(DOCS)
    again = SearchIndex(settings).update(spark, model=settings.search.model, size=400, overlap=80)
    assert again.objects_indexed == 0 and again.objects_unchanged >= len(DOCS)


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("time off allowance per year for workers", "vacation-policy.txt"),  # no word in common
        ("outstanding bill for metal tubes delivery", "invoice-payment.txt"),
        ("how to make a dessert", "sponge-cake.txt"),
        ("soccer championship match result", "league-final.txt"),
    ],
)
def test_paraphrases_are_found_by_meaning(settings, corpus, query, expected):
    hits = search(settings, query, k=3, tags={"suite": corpus["suite"]}, mode="vector")
    assert names(hits)[0] == expected


def test_keyword_and_hybrid_and_filters(settings, corpus):
    suite = {"suite": corpus["suite"]}
    assert names(search(settings, "sponge", k=3, tags=suite, mode="keyword")) == ["sponge-cake.txt"]
    hybrid = search(settings, "database outage restored", k=5, tags=suite)
    assert names(hybrid)[0] == "server-outage.txt"
    assert hybrid[0].keyword_rank == 0 and hybrid[0].vector_rank is not None
    assert "database" in hybrid[0].snippet.lower() and hybrid[0].raw_path.endswith("server-outage.txt")
    assert len({h.object_id for h in hybrid}) == len(hybrid)  # one hit per object
    assert search(settings, "database outage", k=5, tags=suite, media_type="pdf") == []
    assert names(search(settings, "database outage", k=1, tags=suite, media_type="text/plain")) == ["server-outage.txt"]


def test_results_respect_the_principal(spark, settings, corpus):
    p, g = Principals(settings), Governance(settings)
    fan, nobody = f"fan_{corpus['suite']}", f"nobody_{corpus['suite']}"
    p.add(fan)
    p.add(nobody)
    cols = [f.name for f in spark.table("shoal.object_index").schema.fields]
    g.grant(
        p.principal("admin"),
        "SELECT",
        "TABLE",
        "shoal.object_index",
        fan,
        row_filter="source_path = 'league-final.txt'",
        table_columns=cols,
    )
    suite = {"suite": corpus["suite"]}
    # Listing objects is not reading their text: without a grant on shoal.text nothing ranks.
    assert search(settings, "payment of an invoice", k=5, tags=suite, principal=p.principal(fan), spark=spark) == []
    text_cols = [f.name for f in spark.table("shoal.text").schema.fields]
    g.grant(p.principal("admin"), "SELECT", "TABLE", "shoal.text", fan, table_columns=text_cols)
    as_fan = search(settings, "payment of an invoice", k=5, tags=suite, principal=p.principal(fan), spark=spark)
    assert names(as_fan) == ["league-final.txt"]
    assert search(settings, "payment of an invoice", k=5, tags=suite, principal=p.principal(nobody), spark=spark) == []


def test_a_new_version_replaces_the_old_in_the_index(spark, settings, corpus):
    path = corpus["folder"] / "league-final.txt"
    path.write_text("The away team lost the cup final on penalties after a goalless draw.\n")
    ingest(
        spark, settings, str(corpus["folder"]), source_name=f"search{corpus['suite']}", tags={"suite": corpus["suite"]}
    )
    run_extract(spark, settings, only=["text/plain"])
    result = SearchIndex(settings).update(spark, model=settings.search.model, size=400, overlap=80)
    assert result.objects_indexed == 1 and result.objects_removed == 1
    # The graph grew in place: the old version's chunks marked deleted, the new one's added,
    # and it holds exactly the stored chunks (new chunk ids never reuse a removed one's).
    assert result.ann_removed >= 1 and result.ann_added >= 1
    index = SearchIndex(settings)
    labels = faiss.vector_to_array(index.ann().id_map)
    assert sorted(labels[labels >= 0].tolist()) == index.chunk_ids().tolist()
    old = search(
        settings, "home team scored twice, won the league", k=50, tags={"suite": corpus["suite"]}, mode="vector"
    )
    assert all("scored twice" not in h.snippet for h in old)
    hits = search(settings, "penalties", k=5, tags={"suite": corpus["suite"]}, mode="keyword")
    assert names(hits) == ["league-final.txt"]
    assert search(settings, "scored twice", k=5, tags={"suite": corpus["suite"]}, mode="keyword") == []  # old text gone


def test_cli_contract(settings, corpus, cli_env, capsys, monkeypatch):
    import json

    from tests.support.helpers import run_cli

    code, out, err = run_cli(["search-index", "--json"], capsys, monkeypatch)
    assert code == 0, err
    assert json.loads(out)["objects_indexed"] == 0
    code, out, err = run_cli(["search-index", "--rebuild", "--json"], capsys, monkeypatch)
    assert code == 0, err
    rebuilt = json.loads(out)
    assert rebuilt["objects_indexed"] == 0 and rebuilt["ann_rebuilt"] and rebuilt["ann_deleted_fraction"] == 0
    code, out, err = run_cli(
        ["search", "how to make a dessert", "--tag", f"suite={corpus['suite']}", "--k", "2", "--json"],
        capsys,
        monkeypatch,
    )
    assert code == 0, err
    hits = json.loads(out)
    assert hits[0]["source_path"] == "sponge-cake.txt" and {"object_id", "raw_path", "snippet", "score", "part"} <= set(
        hits[0]
    )
