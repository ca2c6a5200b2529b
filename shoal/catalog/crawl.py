"""Crawlers: find the schema of a folder of files and keep a table over it, like a catalog crawler.

`crawl()` looks at the files under a path (local or s3://): their format (by extension, or
as told), a CSV header and delimiter (csv.Sniffer on the first file), column types (Spark's
inference) and Hive-style `key=value` partition folders. It then creates an external table
over the files (the SQL-step registry: `shoal sql` and workflows query it, MSCK REPAIR keeps
its partitions) or, when the data's schema changed, updates it: new columns are added,
types only ever widen (int -> bigint -> double -> string), and columns missing from the data
are kept. Every schema change is a new version in `shoal_crawl_versions`, with what changed.
"""

from __future__ import annotations

import csv
import json
import posixpath
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from sqlalchemy import Column, DateTime, Integer, MetaData, String, Table, Text, delete, insert, select

from shoal import storage
from shoal.config import Settings
from shoal.exceptions import ShoalError
from shoal.lake import database

if TYPE_CHECKING:
    from collections.abc import Callable

    from pyspark.sql import SparkSession

    from shoal.sql.external_tables import ExternalTable

state_tables = MetaData()
crawl_versions = Table(
    "shoal_crawl_versions",
    state_tables,
    Column("table_name", String(200), primary_key=True),
    Column("version", Integer, primary_key=True),
    Column("location", Text, nullable=False),
    Column("format", String(20), nullable=False),
    Column("columns", Text, nullable=False),
    Column("partition_columns", Text, nullable=False),
    Column("changes", Text, nullable=False),
    Column("crawled_at", DateTime, nullable=False),
)

# Named crawlers (`shoal catalog crawler create`): what `glue:startCrawler` runs by name.
crawlers = Table(
    "shoal_crawlers",
    state_tables,
    Column("name", String(200), primary_key=True),
    Column("path", Text, nullable=False),
    Column("table_name", String(200), nullable=False),
    Column("format", String(20), nullable=False),
    Column("updated_at", DateTime, nullable=False),
)

FORMATS = ("csv", "json", "parquet")
_BY_EXTENSION = {
    ".csv": "csv",
    ".tsv": "csv",
    ".txt": "csv",
    ".json": "json",
    ".jsonl": "json",
    ".ndjson": "json",
    ".parquet": "parquet",
}
# Types a column may widen through; anything else that disagrees becomes string.
_RANK = {"boolean": 0, "int": 1, "bigint": 2, "double": 3}


class CrawlError(ShoalError):
    """The folder cannot be crawled (missing, empty, mixed formats, inconsistent partitions)."""


@dataclass
class CrawlResult:
    table: str
    location: str
    format: str
    version: int
    created: bool
    changed: bool
    columns: list[tuple[str, str]]
    partition_columns: list[tuple[str, str]]
    files: int
    partitions: int
    changes: list[dict[str, Any]] = field(default_factory=list)
    options: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def widen(old: str, new: str) -> str:
    """The narrowest type holding values of both."""
    if old == new:
        return old
    if old in _RANK and new in _RANK and "boolean" not in (old, new):
        return old if _RANK[old] >= _RANK[new] else new
    if {old, new} == {"date", "timestamp"}:
        return "timestamp"
    return "string"


def _data_files(path: str) -> list[storage.FileEntry]:
    files = [f for f in storage.list_files(path) if not posixpath.basename(f.relative).startswith(("_", "."))]
    if not files:
        raise CrawlError(f"no data files under {path}", hint="point the crawler at the folder holding the files")
    return files


def detect_format(files: list[storage.FileEntry]) -> str:
    by_file = {_BY_EXTENSION.get(posixpath.splitext(f.relative.lower())[1]) for f in files}
    if None in by_file:
        odd = sorted(
            {
                posixpath.splitext(f.relative)[1] or f.relative
                for f in files
                if _BY_EXTENSION.get(posixpath.splitext(f.relative.lower())[1]) is None
            }
        )
        raise CrawlError(f"cannot tell the format of {', '.join(odd[:5])} files", hint="pass --format csv|json|parquet")
    found = {fmt for fmt in by_file if fmt is not None}
    if len(found) > 1:
        raise CrawlError(
            f"mixed formats in one folder: {', '.join(sorted(found))}", hint="crawl each format's folder apart"
        )
    return found.pop()


def partition_keys(files: list[storage.FileEntry]) -> list[str]:
    """Hive-style partition keys from the folder names; every file must agree on them."""
    layouts = {tuple(p.split("=", 1)[0] for p in posixpath.dirname(f.relative).split("/") if "=" in p) for f in files}
    if len(layouts) > 1:
        shown = " vs ".join("/".join(k) or "(none)" for k in sorted(layouts))
        raise CrawlError(f"files disagree on partition folders: {shown}", hint="crawl a folder with one layout")
    return list(layouts.pop())


def csv_options(sample: bytes) -> dict[str, str]:
    """Delimiter and header from the first lines of a CSV file."""
    text = sample.decode("utf-8", errors="replace")
    lines = text.splitlines()[:50]
    head = "\n".join(lines)
    try:
        dialect = csv.Sniffer().sniff(head, delimiters=",;\t|")
        sep = dialect.delimiter
    except csv.Error:
        sep = ","
    try:
        header = csv.Sniffer().has_header(head)
    except csv.Error:
        header = True
    return {"sep": sep, "header": "true" if header else "false"}


def crawl(
    spark: SparkSession,
    settings: Settings,
    path: str,
    table: str,
    *,
    fmt: str = "auto",
    say: Callable[[str], None] = lambda _m: None,
) -> CrawlResult:
    from shoal.sql.external import ExternalTable, Registry, SqlRunner, table_location

    name = table.lower()
    if name.count(".") != 1 or not all(p.isidentifier() for p in name.split(".")):
        raise CrawlError(f"invalid table name {table!r}", hint="use NAMESPACE.TABLE, e.g. raw.orders")
    # Absolute once: Spark resolves a relative path against its own default file system.
    location = table_location(path.rstrip("/") or path)
    files = _data_files(location)
    fmt = detect_format(files) if fmt == "auto" else fmt
    if fmt not in FORMATS:
        raise CrawlError(f"unknown format {fmt!r}", hint="auto, csv, json or parquet")
    keys = partition_keys(files)
    options: dict[str, str] = {}
    if fmt == "csv":
        with storage.open_input(files[0].uri) as f:
            options = csv_options(f.read(65536))
    say(f"{len(files)} {fmt} files, partitions by {', '.join(keys) or 'nothing'}")
    try:
        fields = _infer(spark, fmt, location, files, options)
    except Exception as exc:  # Spark's own reason (unreadable file, bad encoding)
        from shoal.exceptions import first_line

        raise CrawlError(f"cannot read the {fmt} files under {location}: {first_line(exc)}") from exc
    found = [(n, t) for n, t in fields if n not in keys]
    parts = [(n, t) for n, t in fields if n in keys]
    parts.sort(key=lambda c: keys.index(c[0]))
    if not found:
        raise CrawlError(f"no columns found in {location}")

    registry = Registry(settings)
    previous = registry.get(name)
    changes: list[dict[str, Any]] = []
    if previous is None:
        columns = found
    else:
        if previous.location.rstrip("/") != table_location(location):
            raise CrawlError(
                f"{name} already points at {previous.location}",
                hint="crawl that location, or choose another table name",
            )
        new_types = dict(found)
        columns = []
        kept: list[dict[str, Any]] = []  # reported after the additions and widenings
        for col, old_type in previous.columns:
            if col not in new_types:
                columns.append((col, old_type))
                kept.append({"change": "missing_in_data", "column": col, "type": old_type, "note": "kept"})
                continue
            wide = widen(old_type, new_types[col])
            if wide != old_type:
                changes.append({"change": "widened", "column": col, "from": old_type, "to": wide})
            columns.append((col, wide))
        for col, typ in found:
            if col not in dict(previous.columns):
                columns.append((col, typ))
                changes.append({"change": "added", "column": col, "type": typ})
        if [c for c, _ in previous.partition_columns] != [c for c, _ in parts]:
            raise CrawlError(
                f"partition folders of {location} changed from {[c for c, _ in previous.partition_columns]} "
                f"to {[c for c, _ in parts]}",
                hint="drop the table (shoal sql 'DROP TABLE ...') and crawl again",
            )
        parts = previous.partition_columns
        changes += kept
    schema_changed = previous is None or any(c["change"] in ("added", "widened") for c in changes)
    runner = SqlRunner(spark, settings, dialect="spark")
    ext = ExternalTable(name, columns, parts, fmt, table_location(location), options)
    if schema_changed:
        registry.put(ext)
        spark.sql(f"DROP TABLE IF EXISTS {ext.spark_name}")
    runner.materialize(ext)
    partitions = 0
    if parts:
        runner.execute(f"MSCK REPAIR TABLE {name}")
        partitions = len(spark.sql(f"SHOW PARTITIONS {ext.spark_name}").collect())
    version = _record(settings, ext, changes, schema_changed)
    say(f"{name}: version {version}, {len(changes)} change(s), {partitions} partition(s)")
    return CrawlResult(
        name,
        ext.location,
        fmt,
        version,
        previous is None,
        schema_changed,
        columns,
        parts,
        len(files),
        partitions,
        changes,
        options,
    )


def _infer(
    spark: SparkSession, fmt: str, location: str, files: list[storage.FileEntry], options: dict[str, str]
) -> list[tuple[str, str]]:
    """(column, type) in order. CSV files are read per distinct header line and merged with
    widening: Spark takes one header for all files, so files that gained a column would
    otherwise be read by position. JSON and Parquet merge their files' schemas themselves."""
    reader = spark.read.format(fmt).option("basePath", location)
    if fmt == "json":
        return [(f.name, f.dataType.simpleString()) for f in reader.load(location).schema.fields]
    if fmt == "parquet":
        schema = reader.option("mergeSchema", "true").load(location).schema
        return [(f.name, f.dataType.simpleString()) for f in schema.fields]
    reader = reader.options(**options, inferSchema="true")
    groups: dict[bytes, list[str]] = {}
    for f in files:
        with storage.open_input(f.uri) as handle:
            groups.setdefault(handle.read(8192).split(b"\n", 1)[0].strip(), []).append(f.uri)
    merged: dict[str, str] = {}
    for uris in groups.values():
        for field_ in reader.load(uris).schema.fields:
            typ = field_.dataType.simpleString()
            merged[field_.name] = widen(merged[field_.name], typ) if field_.name in merged else typ
    return list(merged.items())


def _record(settings: Settings, ext: ExternalTable, changes: list[dict[str, Any]], changed: bool) -> int:
    engine = database.engine(settings, state_tables)
    with engine.begin() as conn:
        last = conn.execute(
            select(crawl_versions.c.version)
            .where(crawl_versions.c.table_name == ext.name)
            .order_by(crawl_versions.c.version.desc())
            .limit(1)
        ).scalar()
        if last is not None and not changed:
            return last
        version = (last or 0) + 1
        conn.execute(
            insert(crawl_versions).values(
                table_name=ext.name,
                version=version,
                location=ext.location,
                format=ext.format,
                columns=json.dumps(ext.columns),
                partition_columns=json.dumps(ext.partition_columns),
                changes=json.dumps(changes),
                crawled_at=database.utcnow(),
            )
        )
    return version


def versions(settings: Settings, table: str) -> list[dict[str, Any]]:
    """The schema versions of a crawled table, oldest first."""
    engine = database.engine(settings, state_tables)
    with engine.connect() as conn:
        rows = conn.execute(
            select(crawl_versions)
            .where(crawl_versions.c.table_name == table.lower())
            .order_by(crawl_versions.c.version)
        ).all()
    return [
        {
            "version": r.version,
            "crawled_at": r.crawled_at.isoformat() + "Z",
            "format": r.format,
            "location": r.location,
            "columns": json.loads(r.columns),
            "partition_columns": json.loads(r.partition_columns),
            "changes": json.loads(r.changes),
        }
        for r in rows
    ]


# ---- named crawlers ---------------------------------------------------------------------------


@dataclass
class Crawler:
    name: str
    path: str
    table: str
    format: str = "auto"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def create_crawler(settings: Settings, name: str, path: str, table: str, *, fmt: str = "auto") -> Crawler:
    """Register (or replace) a named crawler over `path` that keeps `table` up to date."""
    from pathlib import Path

    from shoal.lake.tables import TableName

    if not name or len(name) > 200 or any(c.isspace() for c in name):
        raise CrawlError(f"crawler name {name!r} must be 1-200 characters without spaces")
    if fmt != "auto" and fmt not in FORMATS:
        raise CrawlError(f"unknown format {fmt!r} (known: auto, {', '.join(FORMATS)})")
    TableName.parse(table)
    if "://" not in path:
        path = str(Path(path).expanduser().resolve())
    crawler = Crawler(name, path, table.lower(), fmt)
    with database.engine(settings, state_tables).begin() as conn:
        database.upsert(
            conn,
            crawlers,
            {"name": name},
            {"path": crawler.path, "table_name": crawler.table, "format": fmt, "updated_at": database.utcnow()},
        )
    return crawler


def get_crawler(settings: Settings, name: str) -> Crawler | None:
    with database.engine(settings, state_tables).connect() as conn:
        row = conn.execute(select(crawlers).where(crawlers.c.name == name)).first()
    return Crawler(row.name, row.path, row.table_name, row.format) if row else None


def list_crawlers(settings: Settings) -> list[Crawler]:
    with database.engine(settings, state_tables).connect() as conn:
        rows = conn.execute(select(crawlers).order_by(crawlers.c.name)).all()
    return [Crawler(r.name, r.path, r.table_name, r.format) for r in rows]


def delete_crawler(settings: Settings, name: str) -> bool:
    with database.engine(settings, state_tables).begin() as conn:
        return bool(conn.execute(delete(crawlers).where(crawlers.c.name == name)).rowcount)
