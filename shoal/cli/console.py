"""The `shoal` command: thin wrappers over the capability packages (rendering in output.py)."""

from __future__ import annotations

import json
import os
import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from shoal import __version__
from shoal.cli import output
from shoal.cli.context import settings
from shoal.cli.context import state as _state
from shoal.exceptions import ShoalError

app = typer.Typer(
    name="shoal",
    help="Shoal: a self-hosted lakehouse for governed unstructured data and change data.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
cdc_app = typer.Typer(help="Change-data-capture upserts into Iceberg tables.", no_args_is_help=True)
table_app = typer.Typer(help="Inspect and maintain lake tables.", no_args_is_help=True)
config_app = typer.Typer(help="Show the effective configuration.", no_args_is_help=True)
catalog_app = typer.Typer(help="Discover ingested objects and their extracted data.", no_args_is_help=True)
app.add_typer(cdc_app, name="cdc")
app.add_typer(table_app, name="table")
app.add_typer(config_app, name="config")
app.add_typer(catalog_app, name="catalog")
crawler_app = typer.Typer(
    help="Named crawlers, which workflows run with arn:aws:states:::glue:startCrawler.", no_args_is_help=True
)
catalog_app.add_typer(crawler_app, name="crawler")


@app.callback()
def _root(
    config: Annotated[
        Path | None, typer.Option("--config", "-c", help="Path of shoal.toml (default: $SHOAL_CONFIG or ./shoal.toml).")
    ] = None,
    no_engine: Annotated[
        bool, typer.Option("--no-engine", help="Run here even when a warm engine serves the workspace.")
    ] = False,
) -> None:
    # Absolute at once: whatever runs later (a scheduler, a server) reads the same file.
    _state["config"] = config.expanduser().resolve() if config is not None else None
    if no_engine:  # (the entry point already chose this process) nor may `serve` start one
        os.environ["SHOAL_ENGINE"] = "off"


@app.command()
def version() -> None:
    """Print Shoal's version."""
    output.out.print(__version__)


def _split(values: list[str]) -> list[str]:
    return [p.strip() for v in values for p in v.split(",") if p.strip()]


class OnError(StrEnum):
    fail = "fail"
    quarantine = "quarantine"


class WriteMode(StrEnum):
    merge_on_read = "merge-on-read"
    copy_on_write = "copy-on-write"


@cdc_app.command("apply")
def cdc_apply(
    source: Annotated[str, typer.Argument(help="Folder of change files (LOAD*.csv full loads, time-named changes).")],
    table: Annotated[str, typer.Option("--table", help="Target table NS.TABLE (created on first apply).")],
    key: Annotated[list[str], typer.Option("--key", help="Key column(s): COL[,COL...].")],
    sequence: Annotated[str, typer.Option("--sequence", help="Column ordering events (newest wins).")],
    partition_by: Annotated[
        str | None,
        typer.Option("--partition-by", help='Partition spec for a new table, e.g. "category, bucket(16, id)".'),
    ] = None,
    op_column: Annotated[
        str | None,
        typer.Option("--op-column", help="Name of the operation column (I/U/D) [default: \\[cdc] op_column, op]."),
    ] = None,
    no_header: Annotated[bool, typer.Option("--no-header", help="Files have no header row (use --columns).")] = False,
    columns: Annotated[
        str | None, typer.Option("--columns", help="Data column names in file order, for --no-header.")
    ] = None,
    on_error: Annotated[
        OnError | None,
        typer.Option(
            "--on-error",
            help="fail: apply nothing; quarantine: divert bad rows to NS.TABLE__rejects [default: \\[cdc] on_error, fail].",
        ),
    ] = None,
    write_mode: Annotated[
        WriteMode | None,
        typer.Option("--write-mode", help="Row-level write mode for this table (default from config)."),
    ] = None,
    delimiter: Annotated[str, typer.Option("--delimiter", help="Field delimiter.")] = ",",
    json_out: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Apply the change files under SOURCE not yet applied to the table, as one commit."""
    from shoal.cdc import ApplyOptions, apply_changes

    _state["json"] = json_out
    opts = ApplyOptions(
        table=table,
        keys=_split(key),
        sequence=sequence,
        partition_by=partition_by,
        op_column=op_column,
        header=not no_header,
        columns=_split([columns]) if columns else None,
        on_error=on_error.value if on_error else None,
        write_mode=write_mode.value if write_mode else None,
        delimiter=delimiter,
    )
    with output.progress(not json_out, f"cdc apply {table}") as say:
        result = apply_changes(settings(), source, opts, progress=say)
    for warning in result.warnings:
        output.print_warning(warning)
    if json_out:
        output.print_json(result.to_dict())
        return
    data = result.to_dict()
    data["files_applied"] = ", ".join(result.files_applied) or "(none: nothing new)"
    output.print_kv(f"Applied {len(result.files_applied)} file(s) to {table}", data)


@cdc_app.command("files")
def cdc_files(
    table: Annotated[str, typer.Argument(help="NS.TABLE")],
    source: Annotated[
        str | None, typer.Option("--source", help="Also list files under SOURCE not yet applied.")
    ] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Change files applied to a table (and, with --source, those still pending)."""
    from shoal.cdc import file_status

    _state["json"] = json_out
    status = file_status(settings(), table, source)
    if json_out:
        output.print_json(status)
        return
    output.print_rows(
        f"Applied to {table}",
        ["file", "size", "batch_id", "applied_at"],
        [[f["file"], f["size"], f["batch_id"], f["applied_at"]] for f in status["applied"]],
    )
    if "pending" in status:
        output.out.print(f"pending: {', '.join(status['pending']) or '(none)'}")


@app.command()
def ingest(
    source: Annotated[str, typer.Argument(help="Folder of files to ingest into the raw zone.")],
    source_name: Annotated[
        str | None, typer.Option("--source-name", help="Name of the source (default: the folder's name).")
    ] = None,
    tag: Annotated[list[str] | None, typer.Option("--tag", help="key=value tag for every object (repeatable).")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Copy files into the raw zone and register them as objects (unchanged files are skipped)."""
    from shoal.ingest import ingest as run_ingest
    from shoal.ingest import parse_tags
    from shoal.spark import get_spark

    _state["json"] = json_out
    tags = parse_tags(tag or [])
    s = settings()
    with output.progress(not json_out, "ingest") as say:
        result = run_ingest(get_spark(s), s, source, source_name=source_name, tags=tags, say=say)
    data = result.to_dict()
    if json_out:
        output.print_json(data)
        return
    for f in data["files"]:
        if f["status"] == "error":
            output.print_warning(f"{f['source_path']}: {f['error']}")
    output.print_kv(
        f"Ingested {source} as source {result.source_name}",
        {
            k: data[k]
            for k in ("files_seen", "new", "new_versions", "unchanged", "duplicates", "errors", "bytes_ingested")
        },
    )
    if data["errors"]:
        raise typer.Exit(1)


@app.command()
def extract(
    force: Annotated[bool, typer.Option("--force", help="Extract every object again.")] = False,
    retry_errors: Annotated[
        bool, typer.Option("--retry-errors", help="Also redo steps that ended in error or timeout.")
    ] = False,
    only: Annotated[
        list[str] | None,
        typer.Option("--only", help="Only these types: media types, globs (text/*) or extractor names (pdf,email)."),
    ] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Extract text, tables, forms, entities, key phrases, sentiment and PII from pending objects;
    OCR, faces, labels and properties from images; transcripts from audio and video."""
    from shoal.extract import run_extract
    from shoal.spark import get_spark

    _state["json"] = json_out
    s = settings()
    with output.progress(not json_out, "extract") as say:
        result = run_extract(
            get_spark(s), s, force=force, retry_errors=retry_errors, only=_split(only or []) or None, say=say
        )
    data = result.to_dict()
    if json_out:
        output.print_json(data)
        return
    if result.nothing_to_do:
        output.out.print("Nothing to extract: every object is up to date (use --force to redo).")
        return
    for w in data["warnings"]:
        output.print_warning(w)
    for p in data["problems"]:
        output.print_warning(f"{p['source_path']} [{p['extractor']}] {p['status']}: {p['error']}")
    output.print_kv(
        "Extraction run " + result.run_id,
        {k: data[k] for k in ("objects", "child_objects", "pages", "seconds", "objects_per_s")},
    )
    output.print_rows(
        "Steps by status",
        ["extractor", "ok", "error", "skipped", "timeout"],
        [
            [name, *(st.get(k, 0) for k in ("ok", "error", "skipped", "timeout"))]
            for name, st in sorted(data["statuses"].items())
        ],
    )


@catalog_app.command("objects")
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
    json_out: Annotated[bool, typer.Option("--json", help="Print a JSON array.")] = False,
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

    _state["json"] = json_out
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
    if json_out:
        output.print_json(rows)
        return
    output.print_rows(
        f"{len(rows)} object(s) (ids shortened; catalog show accepts a prefix)",
        ["id", "source", "path", "type", "status", "lang", "pii", "pages"],
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
            ]
            for r in rows
        ],
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


@catalog_app.command("crawl")
def catalog_crawl(
    path: Annotated[str, typer.Argument(help="Folder of data files (local or s3://bucket/prefix).")],
    table: Annotated[str, typer.Option("--table", help="NAMESPACE.TABLE to create or update.")],
    fmt: Annotated[CrawlFormat, typer.Option("--format", help="File format (auto: by extension).")] = CrawlFormat.auto,
    json_out: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Infer the schema of a folder of files (header, types, key=value partitions) and create or
    update a table over it; schema changes become versions."""
    from shoal.catalog.crawl import crawl
    from shoal.spark import get_spark

    _state["json"] = json_out
    s = settings()
    with output.progress(not json_out, "crawl") as say:
        result = crawl(get_spark(s), s, path, table, fmt=fmt.value, say=say)
    data = result.to_dict()
    if json_out:
        output.print_json(data)
        return
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
            [[c["change"], c["column"], c.get("type") or f"{c.get('from')} -> {c.get('to')}"] for c in result.changes],
        )


@crawler_app.command("create")
def catalog_crawler_create(
    name: Annotated[str, typer.Argument(help="Crawler name (the Name a startCrawler task gives).")],
    path: Annotated[str, typer.Option("--path", help="Folder of data files (local or s3://bucket/prefix).")],
    table: Annotated[str, typer.Option("--table", help="NAMESPACE.TABLE the crawler creates or updates.")],
    fmt: Annotated[CrawlFormat, typer.Option("--format", help="File format (auto: by extension).")] = CrawlFormat.auto,
    json_out: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Register (or replace) a named crawler; `shoal catalog crawl` runs the same crawl by hand."""
    from shoal.catalog.crawl import create_crawler

    _state["json"] = json_out
    data = create_crawler(settings(), name, path, table, fmt=fmt.value).to_dict()
    output.print_json(data) if json_out else output.print_kv(f"Crawler {name}", data)


@crawler_app.command("list")
def catalog_crawler_list(
    json_out: Annotated[bool, typer.Option("--json", help="Print a JSON array.")] = False,
) -> None:
    """Named crawlers."""
    from shoal.catalog.crawl import list_crawlers

    _state["json"] = json_out
    rows = [c.to_dict() for c in list_crawlers(settings())]
    if json_out:
        output.print_json(rows)
        return
    output.print_rows(
        "Crawlers", ["name", "path", "table", "format"], [[r["name"], r["path"], r["table"], r["format"]] for r in rows]
    )


@crawler_app.command("delete")
def catalog_crawler_delete(
    name: Annotated[str, typer.Argument(help="Crawler name.")],
    json_out: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Forget a named crawler (its table stays)."""
    from shoal.catalog.crawl import delete_crawler

    _state["json"] = json_out
    if not delete_crawler(settings(), name):
        raise ShoalError(f"no crawler named {name!r}", hint="list them with `shoal catalog crawler list`")
    output.print_json({"deleted": name}) if json_out else output.out.print(f"Deleted crawler {name}")


@catalog_app.command("crawl-versions")
def catalog_crawl_versions(
    table: Annotated[str, typer.Argument(help="A crawled NAMESPACE.TABLE.")],
    json_out: Annotated[bool, typer.Option("--json", help="Print a JSON array.")] = False,
) -> None:
    """The schema versions a crawled table went through, with what changed each time."""
    from shoal.catalog.crawl import versions

    _state["json"] = json_out
    rows = versions(settings(), table)
    if json_out:
        output.print_json(rows)
        return
    output.print_rows(
        f"Schema versions of {table}",
        ["version", "crawled_at", "columns", "changes"],
        [
            [r["version"], r["crawled_at"], ", ".join(f"{c} {t}" for c, t in r["columns"]), json.dumps(r["changes"])]
            for r in rows
        ],
    )


@catalog_app.command("duplicates")
def catalog_duplicates(
    max_distance: Annotated[
        int, typer.Option("--max-distance", help="Most differing bits of the 64-bit perceptual hash (0-15).")
    ] = 6,
    include_keyframes: Annotated[
        bool, typer.Option("--include-keyframes", help="Also compare video keyframes.")
    ] = False,
    all_versions: Annotated[bool, typer.Option("--all-versions", help="Include superseded versions.")] = False,
    json_out: Annotated[bool, typer.Option("--json", help="Print a JSON array of groups.")] = False,
) -> None:
    """Near-duplicate images, grouped, by perceptual hash (resized, re-encoded or lightly edited copies)."""
    from shoal.catalog.duplicates import find_duplicates
    from shoal.spark import get_spark

    _state["json"] = json_out
    groups = find_duplicates(
        get_spark(settings()), max_distance=max_distance, include_keyframes=include_keyframes, all_versions=all_versions
    )
    if json_out:
        output.print_json(groups)
        return
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


@catalog_app.command("show")
def catalog_show(
    object_id: Annotated[str, typer.Argument(help="Object id (from shoal catalog objects).")],
    json_out: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """All metadata and all extraction results of one object."""
    from shoal.catalog import show_object
    from shoal.spark import get_spark

    _state["json"] = json_out
    data = show_object(get_spark(settings()), object_id)
    if json_out:
        output.print_json(data)
        return
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


class SqlFormat(StrEnum):
    table = "table"
    json = "json"
    csv = "csv"


class Dialect(StrEnum):
    spark = "spark"
    athena = "athena"
    trino = "trino"
    presto = "presto"
    hive = "hive"


@app.command()
def sql(
    query: Annotated[str, typer.Argument(help="SQL; time travel: TIMESTAMP/VERSION AS OF, FOR ... AS OF.")],
    fmt: Annotated[SqlFormat, typer.Option("--format", "-f", help="Output format.")] = SqlFormat.table,
    limit: Annotated[int | None, typer.Option("--limit", help="Return at most this many rows.")] = None,
    dialect: Annotated[
        Dialect, typer.Option("--dialect", help="Dialect the SQL is written in (translated to Spark SQL).")
    ] = Dialect.spark,
    database: Annotated[str | None, typer.Option("--database", help="Database for unqualified table names.")] = None,
    as_: Annotated[
        str | None, typer.Option("--as", help="Run governed: as this principal, with its grants (audited).")
    ] = None,
) -> None:
    """Run SQL on the lake catalog and the external tables (CREATE EXTERNAL TABLE, MSCK REPAIR TABLE, ...)."""
    from shoal.spark import get_spark
    from shoal.sql.external import SqlRunner

    _state["json"] = fmt == SqlFormat.json
    s = settings()
    if as_ is not None:
        from shoal.governance import GovernedSql, Principals

        if dialect != Dialect.spark or database:
            raise ShoalError("--as runs Spark SQL with qualified table names (no --dialect/--database)")
        result = GovernedSql(get_spark(s), s, Principals(s).principal(as_)).execute(query, limit=limit)
        output.print_query(result, fmt.value)
        return
    runner = SqlRunner(get_spark(s), s, dialect=dialect.value, database_name=database)
    result, _ = runner.execute(query, limit=limit)
    output.print_query(result, fmt.value)


@table_app.command("history")
def table_history(
    table: Annotated[str, typer.Argument(help="NS.TABLE")],
    json_out: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Snapshots of a table with time, operation and the change files each applied."""
    from shoal.lake import TableName, history
    from shoal.spark import get_spark

    _state["json"] = json_out
    rows = history(get_spark(settings()), TableName.parse(table))
    if json_out:
        output.print_json(rows)
        return
    output.print_rows(
        f"History of {table}",
        ["snapshot_id", "committed_at", "operation", "current", "+records", "-records", "files"],
        [
            [
                r["snapshot_id"],
                r["committed_at"],
                r["operation"],
                "yes" if r["is_current_ancestor"] else "no",
                r["added_records"],
                r["deleted_records"],
                ", ".join(r["files"]),
            ]
            for r in rows
        ],
    )


@table_app.command("maintain")
def table_maintain(
    table: Annotated[str, typer.Argument(help="NS.TABLE")],
    retention_hours: Annotated[
        float | None, typer.Option("--retention-hours", help="Expire snapshots older than this (default from config).")
    ] = None,
    retain_last: Annotated[int | None, typer.Option("--retain-last", help="Always keep this many snapshots.")] = None,
    orphan_min_age_hours: Annotated[
        float | None, typer.Option("--orphan-min-age-hours", help="Only remove orphan files older than this.")
    ] = None,
    json_out: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Compact data and delete files, expire old snapshots, remove orphan files and
    CDC ledgers nothing refers to any more."""
    from shoal.cdc import ledger
    from shoal.lake import TableName, maintain
    from shoal.lake.locks import table_lock
    from shoal.spark import get_spark

    _state["json"] = json_out
    s = settings()
    m = s.maintenance
    name = TableName.parse(table)
    orphan_age = m.orphan_min_age_hours if orphan_min_age_hours is None else orphan_min_age_hours
    spark = get_spark(s)
    with output.progress(not json_out, f"maintain {table}") as say, table_lock(s, str(name)):
        result = maintain(
            spark,
            name,
            catalog=s.catalog.name,
            retention_hours=m.snapshot_retention_hours if retention_hours is None else retention_hours,
            retain_last=m.retain_last if retain_last is None else retain_last,
            orphan_min_age_hours=orphan_age,
            target_file_size_mb=m.target_file_size_mb,
            progress=say,
        )
        say("removing unreferenced CDC ledgers")
        result["cdc_ledgers_removed"] = ledger.prune(spark, s, name, min_age_hours=orphan_age)
    if json_out:
        output.print_json(result)
    else:
        output.print_kv(f"Maintained {table}", result)


@config_app.command("show")
def config_show(json_out: Annotated[bool, typer.Option("--json")] = False) -> None:
    """Print the effective settings (secrets masked)."""
    s = settings()
    data = s.model_dump(mode="json")
    data["derived"] = {"warehouse": s.warehouse_uri, "catalog_uri": s.catalog_jdbc_uri}
    if json_out:
        output.print_json(data)
    else:
        output.out.print_json(data=data)


@app.command()
def demo(
    workspace: Annotated[Path, typer.Option("--workspace", help="Workspace folder for the demo lake.")] = Path(
        "demo-workspace"
    ),
) -> None:
    """Run the demo end to end: CDC upserts, then documents through ingest, extraction and the catalog."""
    from shoal.demo import run_demo

    run_demo(workspace)


from shoal.cli import cluster as _cluster  # noqa: E402 - registers commands on `app`
from shoal.cli import doctor as _doctor  # noqa: E402
from shoal.cli import engine as _engine  # noqa: E402
from shoal.cli import enrich as _enrich  # noqa: E402
from shoal.cli import glue as _glue  # noqa: E402
from shoal.cli import governance as _governance  # noqa: E402
from shoal.cli import models as _models  # noqa: E402
from shoal.cli import quality as _quality  # noqa: E402
from shoal.cli import search as _search  # noqa: E402
from shoal.cli import wheels as _wheels  # noqa: E402
from shoal.cli import workflows as _workflows  # noqa: E402

_workflows.register(app)
_governance.register(app)
_governance.register_access(app)
_search.register(app)
_cluster.register(app)
_quality.register(app)
_enrich.register(app)
_models.register(app)
_glue.register(app)
_doctor.register(app, config_app)
_wheels.register(app)
app.add_typer(_engine.engine_app, name="engine")


def main(argv: list[str] | None = None, prog_name: str | None = None) -> None:
    try:
        app(args=argv, prog_name=prog_name)
    except ShoalError as exc:
        if _state["json"]:
            output.print_json({"error": str(exc).splitlines()[0], "hint": exc.hint})
        output.print_error(str(exc))
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        output.print_error("interrupted")
        sys.exit(130)


if __name__ == "__main__":
    main()
