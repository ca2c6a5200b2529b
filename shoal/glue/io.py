"""Reads and writes behind awsglue's readers and writers, on Shoal's catalog and storage.

`from_catalog` resolves DATABASE.TABLE as an external table first (crawled or created with
CREATE EXTERNAL TABLE: read through its files, so bookmarks apply) and then as a lake table
(Iceberg, read in full). `from_options` reads files under local paths or s3:// URIs.
"""

from __future__ import annotations

import fnmatch
import json
import posixpath
from typing import TYPE_CHECKING, Any

from shoal import storage
from shoal.exceptions import ShoalError, first_line
from shoal.glue.runtime import GlueError, GlueRun

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

FILE_CONNECTIONS = ("s3", "file")
_FORMATS = {"csv": "csv", "json": "json", "parquet": "parquet", "glueparquet": "parquet", "orc": "orc"}


def _format(fmt: str | None) -> str:
    name = (fmt or "").lower()
    if name not in _FORMATS:
        raise GlueError(
            f"format {fmt!r} is not supported by Shoal's awsglue",
            hint="use csv, json, parquet, glueparquet or orc",
        )
    return _FORMATS[name]


def _check_connection(connection_type: str) -> None:
    if connection_type.lower() not in FILE_CONNECTIONS:
        raise GlueError(
            f"connection_type {connection_type!r} is not supported by Shoal's awsglue",
            hint="use connection_type='s3' (s3:// URIs or local paths) or from_catalog",
        )


def _data_file(entry: storage.FileEntry) -> bool:
    # Spark skips these too: job markers (_SUCCESS), checksums, hidden files.
    name = posixpath.basename(entry.relative)
    return not name.startswith(("_", ".")) and not name.endswith(".crc")


def _list(path: str, *, recurse: bool, exclusions: list[str]) -> list[storage.FileEntry]:
    from shoal.sql.external import table_location

    location = table_location(path)
    try:
        entries = storage.list_files(location)
    except ShoalError as exc:
        size = storage.size(location) if "not a folder" in str(exc) else None
        if size is None:
            raise GlueError(f"cannot list {path}: {str(exc).splitlines()[0]}") from exc
        entries = [storage.FileEntry(location, posixpath.basename(location), size, _mtime(location))]
    out = []
    for e in entries:
        if not _data_file(e) or (not recurse and "/" in e.relative):
            continue
        if any(fnmatch.fnmatch(e.uri, pat) or fnmatch.fnmatch(e.relative, pat) for pat in exclusions):
            continue
        out.append(e)
    return out


def _mtime(uri: str) -> float | None:
    import pyarrow.fs as pafs

    fs, path = storage.filesystem(uri)
    info = fs.get_file_info(path)
    return info.mtime.timestamp() if info.type == pafs.FileType.File and info.mtime is not None else None


def _csv_options(format_options: dict[str, Any], *, writing: bool = False) -> dict[str, str]:
    fo = {k.lower(): v for k, v in format_options.items()}
    header = fo.get("writeheader" if writing else "withheader", writing)  # Glue: read without, write with
    opts = {"header": str(bool(header)).lower(), "sep": str(fo.get("separator", ","))}
    if "quotechar" in fo:
        opts["quote"] = str(fo["quotechar"]) if fo["quotechar"] not in (-1, "-1") else "\u0000"
    if "escaper" in fo:
        opts["escape"] = str(fo["escaper"])
    if "multiline" in fo:
        opts["multiLine"] = str(bool(fo["multiline"])).lower()
    if not writing:
        opts["inferSchema"] = "true"
    return opts


def read_options(
    run: GlueRun,
    connection_type: str,
    connection_options: dict[str, Any],
    fmt: str | None,
    format_options: dict[str, Any],
    ctx: str,
) -> DataFrame:
    """DataFrame over the files named by `connection_options` (paths, recurse, exclusions)."""
    _check_connection(connection_type)
    spark = run.spark
    paths = connection_options.get("paths") or ([connection_options["path"]] if "path" in connection_options else [])
    if isinstance(paths, str):
        paths = [paths]
    if not paths:
        raise GlueError("from_options needs connection_options={'paths': [...]}")
    exclusions = connection_options.get("exclusions") or []
    if isinstance(exclusions, str):
        exclusions = json.loads(exclusions)
    recurse = str(connection_options.get("recurse", False)).lower() == "true"
    kind = _format(fmt)
    files: list[storage.FileEntry] = []
    for p in paths:
        files += _list(str(p), recurse=recurse, exclusions=list(exclusions))
    chosen = run.select_files(ctx, ",".join(map(str, paths)), files)
    from pyspark.sql.types import StructType

    if not chosen:
        return spark.createDataFrame([], StructType([]))  # Glue: an empty frame has no fields
    reader = spark.read.format(kind)
    if kind == "csv":
        reader = reader.options(**_csv_options(format_options))
    elif kind == "json" and str(format_options.get("multiline", format_options.get("multiLine", ""))).lower() == "true":
        reader = reader.option("multiLine", "true")
    if recurse and len(paths) == 1:
        # Partition folders (key=value) below the path become columns, as in Glue.
        from shoal.sql.external import table_location

        reader = reader.option("basePath", table_location(str(paths[0])))
    try:
        df = reader.load([f.uri for f in chosen])
    except Exception as exc:  # Spark's own reason: unreadable file, bad encoding
        raise GlueError(f"cannot read {kind} files under {', '.join(map(str, paths))}: {first_line(exc)}") from exc
    if kind == "csv" and _csv_options(format_options)["header"] == "false":
        # Glue names header-less CSV columns col0, col1, ...
        df = df.toDF(*[f"col{i}" for i in range(len(df.columns))])
    return df


def _resolve(run: GlueRun, database: str, table_name: str) -> tuple[str, Any]:
    """('external', ExternalTable) or ('lake', 'catalog.db.table')."""
    from shoal.sql.external import Registry

    name = f"{database}.{table_name}".lower()
    ext = Registry(run.settings).get(name)
    if ext is not None:
        return "external", ext
    lake = f"{run.settings.catalog.name}.`{database}`.`{table_name}`"
    if run.spark.catalog.tableExists(f"{run.settings.catalog.name}.{database}.{table_name}"):
        return "lake", lake
    raise GlueError(
        f"table {name} is in neither the external tables nor the lake catalog",
        hint="crawl its files (shoal catalog crawl PATH --table DB.TABLE) or create the table first",
    )


def read_catalog(
    run: GlueRun,
    database: str,
    table_name: str,
    ctx: str,
    push_down_predicate: str = "",
    additional_options: dict[str, Any] | None = None,
) -> DataFrame:
    kind, target = _resolve(run, database, table_name)
    spark = run.spark
    source = f"{database}.{table_name}"
    if kind == "lake":
        run.note_read(ctx, source, "not used (lake table: read in full)")
        df = spark.table(target)
    else:
        from shoal.sql.external import SqlRunner

        SqlRunner(spark, run.settings, dialect="spark").materialize(target)
        schema = spark.table(target.spark_name).schema
        files = [f for f in storage.list_files(target.location) if _data_file(f)]
        chosen = run.select_files(ctx, source, files)
        if not chosen:
            df = spark.createDataFrame([], schema)
        else:
            reader = spark.read.format(target.format).options(**target.options).schema(schema)
            if target.partition_columns:
                reader = reader.option("basePath", target.location)
            try:
                df = reader.load([f.uri for f in chosen])
            except Exception as exc:
                raise GlueError(f"cannot read {source} at {target.location}: {first_line(exc)}") from exc
            df = df.select(*[f"`{f.name}`" for f in schema.fields])
    if push_down_predicate:
        df = df.filter(push_down_predicate)
    return df


def write_options(
    run: GlueRun,
    df: DataFrame,
    connection_type: str,
    connection_options: dict[str, Any],
    fmt: str | None,
    format_options: dict[str, Any],
    ctx: str,
) -> None:
    """Append files under connection_options['path'] (partitionKeys: key=value folders)."""
    from shoal.sql.external import table_location

    _check_connection(connection_type)
    path = connection_options.get("path")
    if not path:
        raise GlueError("write_dynamic_frame.from_options needs connection_options={'path': ...}")
    if not df.columns:
        run.note_write(ctx, f"{path} (empty frame: nothing written)")
        return
    kind = _format(fmt or "json")
    writer = df.write.mode("append").format(kind)
    if kind == "csv":
        writer = writer.options(**_csv_options(format_options, writing=True))
    keys = connection_options.get("partitionKeys") or []
    if keys:
        writer = writer.partitionBy(*keys)
    location = table_location(str(path))
    try:
        writer.save(location)
    except Exception as exc:
        raise GlueError(f"cannot write {kind} files to {path}: {first_line(exc)}") from exc
    run.note_write(ctx, location)


def write_catalog(run: GlueRun, df: DataFrame, database: str, table_name: str, ctx: str) -> None:
    """Append to a lake table (one Iceberg commit) or to an external table's files."""
    kind, target = _resolve(run, database, table_name)
    name = f"{database}.{table_name}"
    if not df.columns:
        # A source with nothing new gives a frame without fields (as in Glue): nothing to write.
        run.note_write(ctx, f"{name} (empty frame: nothing written)")
        return
    if kind == "lake":
        try:
            df.writeTo(target).append()
        except Exception as exc:
            raise GlueError(f"cannot append to {name}: {first_line(exc)}") from exc
        run.note_write(ctx, name)
        return
    columns = [c for c, _ in target.columns + target.partition_columns]
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise GlueError(
            f"the frame written to {name} lacks its column(s) {', '.join(missing)}",
            hint="map the frame onto the table's columns first (apply_mapping)",
        )
    from pyspark.sql import functions as F

    # Files written in the table's own types: the table reads every file with them.
    typed = [F.col(f"`{c}`").cast(t).alias(c) for c, t in target.columns + target.partition_columns]
    writer = df.select(*typed).write.mode("append").format(target.format)
    writer = writer.options(**target.options)
    if target.partition_columns:
        writer = writer.partitionBy(*[c for c, _ in target.partition_columns])
    try:
        writer.save(target.location)
    except Exception as exc:
        raise GlueError(f"cannot write to {name} at {target.location}: {first_line(exc)}") from exc
    if target.partition_columns:
        run.spark.sql(f"MSCK REPAIR TABLE {target.spark_name}")
    run.note_write(ctx, name)
