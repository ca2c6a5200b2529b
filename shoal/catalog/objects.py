"""Discovery over the metadata layer: find objects by facts and words, show one object whole.

Filters are bound as SQL parameters, never spliced into the query text: tag values and
search words come from users and must not change the query.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

from pyspark.sql import SparkSession

from shoal import storage
from shoal.exceptions import ShoalError
from shoal.lake import metadata
from shoal.sql import to_json_value

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from shoal.config import Settings
    from shoal.governance import Principal

_OBJECT_ID = re.compile(r"^[0-9a-f]{32}$")

LIST_COLUMNS = (
    "object_id",
    "source_name",
    "source_path",
    "file_name",
    "media_type",
    "status",
    "languages",
    "has_pii",
    "pii_types",
    "title",
    "page_count",
    "size_bytes",
    "raw_path",
    "extracted_paths",
    "enriched_paths",
    "tags",
    "is_latest",
    "parent_object_id",
)


# Orders a listing may ask for, by name (never column text from the caller), with a tiebreak
# that keeps pages stable. "name" is the name the listing shows (the file name, else the last part
# of the path), case-blind: sorting by the whole path put the rows in folder order under "name ▲".
ORDERS = {
    "name": "lower(coalesce(nullif(i.file_name, ''), element_at(split(i.source_path, '/'), -1)))",
    "source": "i.source_name",
    "type": "i.media_type",
    "status": "i.status",
    "pii": "i.has_pii",
    "title": "i.title",
    "size": "i.size_bytes",
}


def _records(df: DataFrame) -> list[dict[str, Any]]:
    return [{k: to_json_value(v) for k, v in r.asDict(recursive=True).items()} for r in df.collect()]


def list_objects(
    spark: SparkSession,
    *,
    media_type: str | None = None,
    language: str | None = None,
    has_pii: bool | None = None,
    tags: dict[str, str] | None = None,
    text: str | None = None,
    source_name: str | None = None,
    all_versions: bool = False,
    limit: int = 1000,
    offset: int = 0,
    order: str | None = None,
    descending: bool = False,
    principal: Principal | None = None,
    settings: Settings | None = None,
) -> list[dict[str, Any]]:
    """Objects matching every filter, `limit` of them from `offset`, sorted by one of ORDERS
    (default: source, path, version). With a `principal` (API, console) the `text` filter
    matches only the extracted text that principal may read, through its grant on
    `shoal.text` (columns, row filters; no grant, no match); without one (the operator's
    CLI) it matches all text."""
    metadata.ensure_tables(spark, ("objects", "object_index", "text"))
    where: list[str] = []
    args: dict[str, Any] = {}
    if media_type:
        # "pdf" matches application/pdf; "text/*" matches every text type.
        if "/" in media_type:
            where.append("i.media_type LIKE :mt ESCAPE '!'")
            args["mt"] = media_type.replace("!", "!!").replace("%", "!%").replace("_", "!_").replace("*", "%")
        else:
            where.append("(i.media_type = :mt OR i.media_type LIKE :mt_suffix ESCAPE '!')")
            args["mt"] = media_type
            args["mt_suffix"] = "%/" + media_type.replace("!", "!!").replace("%", "!%").replace("_", "!_")
    if language:
        where.append("array_contains(i.languages, :lang)")
        args["lang"] = language
    if has_pii is not None:
        where.append("i.has_pii = :pii")
        args["pii"] = has_pii
    for n, (k, v) in enumerate((tags or {}).items()):
        where.append(f"i.tags[:tk{n}] = :tv{n}")
        args[f"tk{n}"], args[f"tv{n}"] = k, v
    if source_name:
        where.append("i.source_name = :src")
        args["src"] = source_name
    if not all_versions:
        where.append("i.is_latest")
    words = [w.lower() for w in (text or "").split() if w.strip()]
    if words and principal is not None and not principal.is_admin:
        if settings is None:
            raise ValueError("list_objects needs settings to check a principal's grants")
        ids = _text_matches(spark, settings, principal, words)
        if not ids:
            return []
        where.append(f"i.object_id IN ({', '.join(repr(i) for i in ids)})")  # 32 hex digits each
    elif words:
        conds = " AND ".join(f"bool_or(instr(lower(t.text), :w{n}) > 0)" for n in range(len(words)))
        where.append(
            f"i.object_id IN (SELECT t.object_id FROM {metadata.table('text').sql} t GROUP BY t.object_id "
            f"HAVING {conds})"
        )
        args.update({f"w{n}": w for n, w in enumerate(words)})
    sql = (
        f"SELECT {', '.join('i.' + c for c in LIST_COLUMNS)} FROM {metadata.table('object_index').sql} i"
        + (" WHERE " + " AND ".join(where) if where else "")
        + f" ORDER BY {_order(order, descending)} LIMIT {int(limit)}"
        + (f" OFFSET {int(offset)}" if offset else "")
    )
    rows = _records(spark.sql(sql, args=args))
    paths = object_paths(spark, [r["object_id"] for r in rows], principal=principal, settings=settings)
    for r in rows:
        r["paths"] = paths.get(r["object_id"], [])
    return rows


def _order(order: str | None, descending: bool) -> str:
    default = "i.source_name, i.source_path, i.version"
    if not order:
        return default
    if order not in ORDERS:
        raise ShoalError(f"cannot sort objects by {order!r}", hint="sort by one of: " + ", ".join(ORDERS))
    return f"{ORDERS[order]} {'DESC' if descending else 'ASC'} NULLS LAST, {default}"


def object_paths(
    spark: SparkSession,
    object_ids: list[str],
    *,
    principal: Principal | None = None,
    settings: Settings | None = None,
) -> dict[str, list[dict[str, Any]]]:
    """object id -> every (source, path) holding its content, from `shoal.object_sources`.

    Without a principal (the operator's CLI) or for an admin: all of them. For anyone else the
    rows are read through governed SQL, so grants, row filters and masks on object_sources
    apply, and no grant means no paths (the refusal is audited)."""
    from shoal.ingest import object_paths as all_paths
    from shoal.ingest import paths_by_object

    ids = sorted({o for o in object_ids if _OBJECT_ID.match(o or "")})
    if not ids:
        return {}
    if principal is None or principal.is_admin:
        found = all_paths(spark, ids)
    else:
        from shoal.governance import AccessDenied, GovernedSql

        if settings is None:
            raise ValueError("object_paths needs settings to check a principal's grants")
        try:
            result = GovernedSql(spark, settings, principal).execute(
                "SELECT object_id, source_name, source_path, first_seen, last_seen FROM shoal.object_sources "
                f"WHERE object_id IN ({', '.join(repr(i) for i in ids)})",  # 32 hex digits each
                limit=100000,
            )
        except AccessDenied:
            return {}
        found = paths_by_object([dict(zip(result.columns, r, strict=True)) for r in result.rows])
    return {oid: [{k: to_json_value(v) for k, v in p.items()} for p in ps] for oid, ps in found.items()}


def _text_matches(spark: SparkSession, settings: Settings, principal: Principal, words: list[str]) -> list[str]:
    """Object ids whose text, as `principal` may read it, holds every word (governed SQL)."""
    from shoal.governance import AccessDenied, GovernedSql

    # GovernedSql takes no bound parameters: words go in as hex, which cannot break out.
    conds = " AND ".join(
        f"bool_or(instr(lower(text), decode(unhex('{w.encode('utf-8').hex()}'), 'UTF-8')) > 0)" for w in words
    )
    try:
        result = GovernedSql(spark, settings, principal).execute(
            f"SELECT object_id FROM shoal.text GROUP BY object_id HAVING {conds}"
        )
    except AccessDenied:
        return []  # no grant on the text: the filter matches nothing (the refusal is audited)
    return [r[0] for r in result.rows if isinstance(r[0], str) and _OBJECT_ID.match(r[0])]


def resolve_object_id(spark: SparkSession, prefix: str) -> str:
    """A full object id from a unique prefix (at least 6 characters), as with git commit ids."""
    prefix = prefix.strip().lower()
    if len(prefix) < 6 or not all(c in "0123456789abcdef" for c in prefix):
        raise ShoalError(f"invalid object id {prefix!r}", hint="give at least 6 hex characters of an object id")
    found = [
        r.object_id
        for r in spark.sql(
            f"SELECT object_id FROM {metadata.table('objects').sql} WHERE startswith(object_id, :p) LIMIT 2",
            args={"p": prefix},
        ).collect()
    ]
    if not found:
        raise ShoalError(f"no object {prefix!r}", hint="find object ids with: shoal catalog objects")
    if len(found) > 1:
        raise ShoalError(f"object id prefix {prefix!r} is ambiguous", hint="give more characters")
    return found[0]


def show_object(spark: SparkSession, object_id: str) -> dict[str, Any]:
    """Everything known about one object: index row, extractions, and each extractor's JSON output."""
    metadata.ensure_tables(spark)
    object_id = resolve_object_id(spark, object_id)
    args = {"oid": object_id}
    index = _records(spark.sql(f"SELECT * FROM {metadata.table('object_index').sql} WHERE object_id = :oid", args=args))
    if not index:  # resolve_object_id found it in shoal.objects: not indexed yet
        index = _records(spark.sql(f"SELECT * FROM {metadata.table('objects').sql} WHERE object_id = :oid", args=args))
    extractions = _records(
        spark.sql(
            f"SELECT extractor, extractor_version, stage, status, error, output_path, duration_ms, extracted_at "
            f"FROM {metadata.table('extractions').sql} WHERE object_id = :oid ORDER BY extracted_at, extractor",
            args=args,
        )
    )
    for e in extractions:
        path = e.get("output_path")
        if path and storage.exists(path):
            try:
                e["result"] = json.loads(storage.read_bytes(path))
            except ValueError as exc:
                e["result_error"] = f"unreadable output {path}: {exc}"
    children = _records(
        spark.sql(
            f"SELECT object_id, file_name, media_type, size_bytes FROM {metadata.table('objects').sql} "
            "WHERE parent_object_id = :oid ORDER BY source_path",
            args=args,
        )
    )
    index[0]["paths"] = object_paths(spark, [object_id]).get(object_id, [])
    return {"object": index[0], "children": children, "extractions": extractions}
