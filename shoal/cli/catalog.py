"""`shoal catalog`: discover ingested objects and their extracted data; crawl data files into tables."""

from __future__ import annotations

import json
from enum import StrEnum
from typing import Annotated

import typer

from shoal.cli import output
from shoal.cli.context import JsonOpt, out, settings
from shoal.exceptions import ShoalError

app = typer.Typer(help="Discover ingested objects and their extracted data.", no_args_is_help=True)
crawler_app = typer.Typer(
    help="Named crawlers, which workflows run with arn:aws:states:::glue:startCrawler.", no_args_is_help=True
)
app.add_typer(crawler_app, name="crawler")


@app.command("objects")
def catalog_objects(
    media_type: Annotated[
        str | None, typer.Option("--type", help="Media type, glob (text/*) or subtype (pdf).")
    ] = None,
    lang: Annotated[str | None, typer.Option("--lang", help="Language code found in the object, e.g. en.")] = None,
    has_pii: Annotated[bool, typer.Option("--has-pii", help="Only objects where PII was found.")] = False,
    tag: Annotated[list[str] | None, typer.Option("--tag", help="key=value (repeatable; all must match).")] = None,
    text: Annotated[str | None, typer.Option("--text", help="Words that must all occur in the text.")] = None,
    source_name: Annotated[str | None, typer.Option("--source-name", help="Only this source.")] = None,
    all_versions: Annotated[bool, typer.Option("--all-versions", help="Include superseded versions.")] = False,
    limit: Annotated[int, typer.Option("--limit", help="At most this many objects.")] = 1000,
    _json: JsonOpt = False,
    as_: Annotated[
        str | None,
        typer.Option("--as", help="As this principal: --text matches only the text it may read (audited)."),
    ] = None,
) -> None:
    """Objects with their raw and extracted paths, filtered by type, language, PII, tags or words."""
    from shoal.catalog import list_objects
    from shoal.governance import Principals
    from shoal.ingest import parse_tags
    from shoal.spark import get_spark

    tags = parse_tags(tag or [])
    s = settings()
    principal = Principals(s).principal(as_) if as_ else None
    rows = list_objects(
        get_spark(s),
        media_type=media_type,
        language=lang,
        has_pii=True if has_pii else None,
        tags=tags,
        text=text,
        source_name=source_name,
        all_versions=all_versions,
        limit=limit,
        principal=principal,
        settings=s,
    )
    out().table(
        f"{len(rows)} object(s) (ids shortened; catalog show accepts a prefix)",
        ["id", "source", "path", "type", "status", "lang", "pii", "pages", "paths"],
        [
            [
                r["object_id"][:12],
                r["source_name"],
                r["source_path"],
                _short_type(r["media_type"]),
                r["status"],
                ",".join(r["languages"] or []),
                "yes" if r["has_pii"] else "",
                r["page_count"] if r["page_count"] is not None else "",
                # Every path holding this content (duplicates included), from shoal.object_sources.
                "\n".join(f"{p['source_name']}:{p['source_path']}" for p in r["paths"]),
            ]
            for r in rows
        ],
        rows,
    )


_SHORT_TYPES = {
    "wordprocessingml.document": "docx",
    "spreadsheetml.sheet": "xlsx",
    "presentationml.presentation": "pptx",
    "opendocument.text": "odt",
    "ms-outlook": "msg",
    "rfc822": "eml",
}


def _short_type(media_type: str | None) -> str:
    sub = (media_type or "").split("/")[-1]
    return next((v for k, v in _SHORT_TYPES.items() if sub.endswith(k)), sub.removeprefix("x-"))


class CrawlFormat(StrEnum):
    auto = "auto"
    csv = "csv"
    json = "json"
    parquet = "parquet"


@app.command("crawl")
def catalog_crawl(
    path: Annotated[str, typer.Argument(help="Folder of data files (local or s3://bucket/prefix).")],
    table: Annotated[str, typer.Option("--table", help="NAMESPACE.TABLE to create or update.")],
    fmt: Annotated[CrawlFormat, typer.Option("--format", help="File format (auto: by extension).")] = CrawlFormat.auto,
    _json: JsonOpt = False,
) -> None:
    """Infer the schema of a folder of files (header, types, key=value partitions) and create or
    update a table over it; schema changes become versions."""
    from shoal.catalog.crawl import crawl
    from shoal.spark import get_spark

    s = settings()
    with out().progress("crawl") as say:
        result = crawl(get_spark(s), s, path, table, fmt=fmt.value, say=say)
    data = result.to_dict()

    def as_text() -> None:
        output.print_kv(
            f"Crawled {result.table}",
            {k: data[k] for k in ("location", "format", "version", "created", "changed", "files", "partitions")},
        )
        output.print_rows(
            "Columns",
            ["column", "type", "partition"],
            [[c, t, ""] for c, t in result.columns] + [[c, t, "yes"] for c, t in result.partition_columns],
        )
        if result.changes:
            output.print_rows(
                "What changed",
                ["change", "column", "detail"],
                [
                    [c["change"], c["column"], c.get("type") or f"{c.get('from')} -> {c.get('to')}"]
                    for c in result.changes
                ],
            )

    out().show(data, as_text)


@crawler_app.command("create")
def catalog_crawler_create(
    name: Annotated[str, typer.Argument(help="Crawler name (the Name a startCrawler task gives).")],
    path: Annotated[str, typer.Option("--path", help="Folder of data files (local or s3://bucket/prefix).")],
    table: Annotated[str, typer.Option("--table", help="NAMESPACE.TABLE the crawler creates or updates.")],
    fmt: Annotated[CrawlFormat, typer.Option("--format", help="File format (auto: by extension).")] = CrawlFormat.auto,
    _json: JsonOpt = False,
) -> None:
    """Register (or replace) a named crawler; `shoal catalog crawl` runs the same crawl by hand."""
    from shoal.catalog.crawl import create_crawler

    data = create_crawler(settings(), name, path, table, fmt=fmt.value).to_dict()
    out().record(f"Crawler {name}", data)


@crawler_app.command("list")
def catalog_crawler_list(
    _json: JsonOpt = False,
) -> None:
    """Named crawlers."""
    from shoal.catalog.crawl import list_crawlers

    rows = [c.to_dict() for c in list_crawlers(settings())]
    out().table(
        "Crawlers",
        ["name", "path", "table", "format"],
        [[r["name"], r["path"], r["table"], r["format"]] for r in rows],
        rows,
    )


@crawler_app.command("delete")
def catalog_crawler_delete(
    name: Annotated[str, typer.Argument(help="Crawler name.")],
    _json: JsonOpt = False,
) -> None:
    """Forget a named crawler (its table stays)."""
    from shoal.catalog.crawl import delete_crawler

    if not delete_crawler(settings(), name):
        raise ShoalError(f"no crawler named {name!r}", hint="list them with `shoal catalog crawler list`")
    out().line(f"Deleted crawler {name}", {"deleted": name})


@app.command("crawl-versions")
def catalog_crawl_versions(
    table: Annotated[str, typer.Argument(help="A crawled NAMESPACE.TABLE.")],
    _json: JsonOpt = False,
) -> None:
    """The schema versions a crawled table went through, with what changed each time."""
    from shoal.catalog.crawl import versions

    rows = versions(settings(), table)
    out().table(
        f"Schema versions of {table}",
        ["version", "crawled_at", "columns", "changes"],
        [
            [r["version"], r["crawled_at"], ", ".join(f"{c} {t}" for c, t in r["columns"]), json.dumps(r["changes"])]
            for r in rows
        ],
        rows,
    )


@app.command("duplicates")
def catalog_duplicates(
    max_distance: Annotated[
        int, typer.Option("--max-distance", help="Most differing bits of the 64-bit perceptual hash (0-15).")
    ] = 6,
    include_keyframes: Annotated[
        bool, typer.Option("--include-keyframes", help="Also compare video keyframes.")
    ] = False,
    all_versions: Annotated[bool, typer.Option("--all-versions", help="Include superseded versions.")] = False,
    _json: JsonOpt = False,
) -> None:
    """Near-duplicate images, grouped, by perceptual hash (resized, re-encoded or lightly edited copies)."""
    from shoal.catalog.duplicates import find_duplicates
    from shoal.spark import get_spark

    groups = find_duplicates(
        get_spark(settings()), max_distance=max_distance, include_keyframes=include_keyframes, all_versions=all_versions
    )

    def as_text() -> None:
        if not groups:
            output.out.print(f"No near-duplicate images (perceptual hashes within {max_distance} bits).")
            return
        output.print_rows(
            f"{len(groups)} group(s) of near-duplicate images",
            ["group", "object_id", "source_path", "part", "distance", "size"],
            [
                [g["group"], m["object_id"], m["source_path"], m["part"], m["distance"], f"{m['width']}x{m['height']}"]
                for g in groups
                for m in g["members"]
            ],
        )

    out().show(groups, as_text)


@app.command("show")
def catalog_show(
    object_id: Annotated[str, typer.Argument(help="Object id (from shoal catalog objects).")],
    _json: JsonOpt = False,
) -> None:
    """All metadata and all extraction results of one object."""
    from shoal.catalog import show_object
    from shoal.spark import get_spark

    data = show_object(get_spark(settings()), object_id)

    def as_text() -> None:
        output.print_kv(f"Object {object_id}", data["object"])
        if data["children"]:
            output.print_rows(
                "Child objects",
                ["object_id", "file_name", "media_type", "size_bytes"],
                [list(c.values()) for c in data["children"]],
            )
        output.print_rows(
            "Extractions",
            ["extractor", "version", "status", "ms", "output / error"],
            [
                [e["extractor"], e["extractor_version"], e["status"], e["duration_ms"], e["output_path"] or e["error"]]
                for e in data["extractions"]
            ],
        )
        for e in data["extractions"]:
            result = e.get("result") or {}
            for part in result.get("text", [])[:20]:
                snippet = " ".join(part["text"].split())[:300]
                output.out.print(f"[bold]{e['extractor']} / {output.escape(part['part'])}:[/] {output.escape(snippet)}")

    out().show(data, as_text)
