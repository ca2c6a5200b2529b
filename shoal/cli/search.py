"""`shoal search` (hybrid semantic + keyword search) and `shoal search-index`."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

import typer

from shoal.cli.context import JsonOpt, out, settings
from shoal.exceptions import ShoalError


class Mode(StrEnum):
    hybrid = "hybrid"
    vector = "vector"
    keyword = "keyword"


def search(
    query: Annotated[str, typer.Argument(help="What to look for, in your own words.")],
    type_: Annotated[str | None, typer.Option("--type", help="Media type or its subtype (pdf, text/*).")] = None,
    lang: Annotated[str | None, typer.Option("--lang", help="Language code, e.g. en.")] = None,
    tag: Annotated[list[str] | None, typer.Option("--tag", help="KEY=VALUE (repeatable).")] = None,
    k: Annotated[int, typer.Option("--limit", "--k", help="How many objects (--k is the earlier spelling).")] = 10,
    as_: Annotated[str | None, typer.Option("--as", help="Only objects this principal may read.")] = None,
    mode: Annotated[Mode, typer.Option("--mode", help="Ranking: hybrid, vector or keyword.")] = Mode.hybrid,
    _json: JsonOpt = False,
) -> None:
    """Find objects by meaning and words; one line per object with its best passage."""
    from shoal.search.query import search as run_search

    s = settings()
    tags = {}
    for t in tag or []:
        if "=" not in t:
            raise ShoalError(f"--tag {t!r}: write KEY=VALUE")
        key, value = t.split("=", 1)
        tags[key] = value
    spark = principal = None
    if as_:
        from shoal.governance import Principals
        from shoal.spark import get_spark

        principal = Principals(s).principal(as_)
        spark = get_spark(s)
    hits = run_search(
        s, query, k=k, media_type=type_, lang=lang, tags=tags or None, principal=principal, spark=spark, mode=mode.value
    )
    out().table(
        f"{len(hits)} result(s) for {query!r}",
        ["score", "object", "path", "part", "snippet"],
        [
            [
                h.score,
                h.object_id[:12],
                # every path holding the content (duplicates included), else the indexed one
                "\n".join(f"{p['source_name']}:{p['source_path']}" for p in h.paths) or h.source_path or h.raw_path,
                h.part or "",
                h.snippet,
            ]
            for h in hits
        ],
        [h.to_dict() for h in hits],
    )


def search_index(
    rebuild: Annotated[
        bool, typer.Option("--rebuild", help="Build the vector and keyword indexes afresh instead of growing them.")
    ] = False,
    _json: JsonOpt = False,
) -> None:
    """Embed new or re-extracted objects' text and drop removed ones (incremental)."""
    from shoal.search.index import SearchIndex
    from shoal.spark import get_spark

    s = settings()
    with out().progress("search-index") as say:
        result = SearchIndex(s).update(
            get_spark(s),
            model=s.search.model,
            size=s.search.chunk_size,
            overlap=s.search.chunk_overlap,
            say=say,
            rebuild=rebuild,
        )
    out().record("Search index", result.to_dict())
