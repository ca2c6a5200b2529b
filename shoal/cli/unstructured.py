"""`shoal ingest` and `shoal extract`: files into the raw zone, and what extraction finds in them."""

from __future__ import annotations

from typing import Annotated

import typer

from shoal.cli import output
from shoal.cli.context import JsonOpt, out, settings, split_values


def ingest(
    source: Annotated[str, typer.Argument(help="Folder of files to ingest into the raw zone.")],
    source_name: Annotated[
        str | None, typer.Option("--source-name", help="Name of the source (default: the folder's name).")
    ] = None,
    tag: Annotated[list[str] | None, typer.Option("--tag", help="key=value tag for every object (repeatable).")] = None,
    _json: JsonOpt = False,
) -> None:
    """Copy files into the raw zone and register them as objects (unchanged files are skipped)."""
    from shoal.ingest import ingest as run_ingest
    from shoal.ingest import parse_tags
    from shoal.spark import get_spark

    tags = parse_tags(tag or [])
    s = settings()
    with out().progress("ingest") as say:
        result = run_ingest(get_spark(s), s, source, source_name=source_name, tags=tags, say=say)
    data = result.to_dict()

    def as_text() -> None:
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

    out().show(data, as_text)


def extract(
    force: Annotated[bool, typer.Option("--force", help="Extract every object again.")] = False,
    retry_errors: Annotated[
        bool, typer.Option("--retry-errors", help="Also redo steps that ended in error or timeout.")
    ] = False,
    only: Annotated[
        list[str] | None,
        typer.Option("--only", help="Only these types: media types, globs (text/*) or extractor names (pdf,email)."),
    ] = None,
    _json: JsonOpt = False,
) -> None:
    """Extract text, tables, forms, entities, key phrases, sentiment and PII from pending objects;
    OCR, faces, labels and properties from images; transcripts from audio and video."""
    from shoal.extract import run_extract
    from shoal.spark import get_spark

    s = settings()
    with out().progress("extract") as say:
        result = run_extract(
            get_spark(s), s, force=force, retry_errors=retry_errors, only=split_values(only or []) or None, say=say
        )
    data = result.to_dict()

    def as_text() -> None:
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

    out().show(data, as_text)
