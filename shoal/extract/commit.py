"""Commit an extraction run's rows without a Spark job per table.

The workers' rows (JSON strings, a few MB for a small run) come to the driver once; each
result table is then appended through PyIceberg (`table.append(arrow)`: write the files,
commit the metadata), tens of ms each where a Spark `writeTo().append()` took seconds. Both
catalogs open the same catalog database and Spark's catalog does not cache tables
(`cache-enabled=false`, shoal.spark), so Spark sees every commit made here.

Exactly the rows Spark's `from_json` would give, or none: a value whose JSON type is not the
one its column takes (where Spark would give null or the raw text) raises `NotFast`, and the
caller commits through Spark instead. Every table's rows are converted before the first commit.
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from typing import Any

from shoal.config import Settings
from shoal.lake import metadata

# Above these a run's rows stay on the executors and are written by Spark.
MAX_ROWS = 500_000
MAX_BYTES = 256 << 20

# What runner.iso writes and Spark parses back with TIMESTAMP_FORMAT (yyyy-MM-dd'T'HH:mm:ss.SSSSSSXXX).
_TIMESTAMP = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}(Z|[+-]\d{2}:\d{2})")
_INT_RANGE = {32: (-(2**31), 2**31 - 1), 64: (-(2**63), 2**63 - 1)}


class NotFast(Exception):
    """The rows cannot be committed here exactly as Spark would: commit them through Spark."""


def open_lake_catalog(settings: Settings) -> Any | None:
    """PyIceberg's catalog over the lake's catalog database, or None without PyIceberg
    (the core-only install) or for a catalog it cannot open."""
    if not settings.catalog_sqlalchemy_uri.startswith("sqlite"):
        return None  # only the SQLite catalog is shared by both engines in one process
    from shoal.exceptions import DependencyError
    from shoal.pyiceberg_catalog import open_catalog

    try:
        import pyarrow  # noqa: F401

        return open_catalog(settings)
    except (ImportError, DependencyError):
        return None


def _value(v: Any, t: Any) -> Any:
    """`v` (from json.loads) as a value of arrow type `t`, or NotFast where Spark's from_json
    would not give it unchanged."""
    import pyarrow as pa

    if v is None:
        return None
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        ok = isinstance(v, str)
    elif pa.types.is_boolean(t):
        ok = isinstance(v, bool)
    elif pa.types.is_int32(t) or pa.types.is_int64(t):
        lo, hi = _INT_RANGE[t.bit_width]
        ok = isinstance(v, int) and not isinstance(v, bool) and lo <= v <= hi
    elif pa.types.is_float64(t):
        ok = isinstance(v, (int, float)) and not isinstance(v, bool)
        v = float(v) if ok else v
    elif pa.types.is_timestamp(t) and t.tz is not None and t.unit == "us":
        if not (isinstance(v, str) and _TIMESTAMP.fullmatch(v)):
            raise NotFast(f"timestamp {v!r}")
        return datetime.fromisoformat(v)
    elif pa.types.is_map(t):
        if not isinstance(v, dict):
            raise NotFast("map")
        return [(str(k), _value(x, t.item_type)) for k, x in v.items()]
    elif pa.types.is_list(t) or pa.types.is_large_list(t):
        if not isinstance(v, list):
            raise NotFast("list")
        return [_value(x, t.value_type) for x in v]
    elif pa.types.is_struct(t):
        if not isinstance(v, dict):
            raise NotFast("struct")
        return {f.name: _value(v.get(f.name), f.type) for f in t}
    else:
        raise NotFast(f"column type {t}")
    if not ok:
        raise NotFast(f"{type(v).__name__} for {t}")
    return v


def to_arrow(table: Any, name: str, rows: list[str]) -> Any:
    """The JSON rows of metadata table `name` as an Arrow table of Iceberg `table`'s schema."""
    import pyarrow as pa

    schema = table.schema().as_arrow()
    if sorted(f.name for f in schema) != sorted(metadata.columns(name)):
        raise NotFast(f"{name}: the table's columns differ from the definition")
    columns: list[list[Any]] = [[] for _ in schema]
    for text in rows:
        row = json.loads(text)
        if not isinstance(row, dict):
            raise NotFast("row")
        for out, field in zip(columns, schema, strict=True):
            out.append(_value(row.get(field.name), field.type))
    try:
        return pa.Table.from_arrays([pa.array(c, f.type) for c, f in zip(columns, schema, strict=True)], schema=schema)
    except (pa.ArrowInvalid, pa.ArrowTypeError, ValueError) as exc:  # e.g. a null in a required column
        raise NotFast(str(exc)) from exc


class Committer:
    """The lake's tables through PyIceberg: convert every table's rows first (`prepare`),
    then append them one commit each, in the order the caller chooses (`append`)."""

    def __init__(self, catalog: Any) -> None:
        self.catalog = catalog
        self.tables: dict[str, Any] = {}
        self.ready: dict[str, Any] = {}

    def prepare(self, name: str, rows: list[str]) -> None:
        if not rows:
            return
        if name not in self.tables:
            self.tables[name] = self.catalog.load_table((metadata.NAMESPACE, name))
        self.ready[name] = to_arrow(self.tables[name], name, rows)

    def known_objects(self, ids: list[str]) -> set[str] | None:
        """Which of these ids shoal.objects holds (None: ask Spark)."""
        if not ids:
            return set()
        if len(ids) > metadata.IN_LIST_LIMIT:
            return None
        try:
            objects = self.catalog.load_table((metadata.NAMESPACE, "objects"))
            return set(_scan(objects, "object_id", sorted(set(ids))).column("object_id").to_pylist())
        except Exception:  # noqa: BLE001 - a layout PyIceberg cannot read (equality deletes): Spark can
            return None

    def append(self, name: str) -> None:
        from pyiceberg.exceptions import CommitFailedException

        data = self.ready.pop(name, None)
        for attempt in range(5):
            if data is None:
                return
            table = self.tables[name]
            try:
                table.refresh().append(data)  # another writer (ingest) may have committed since
                return
            except CommitFailedException:
                if attempt == 4:
                    raise


def _scan(table: Any, column: str, ids: list[str]) -> Any:
    """`table`'s rows whose `column` is one of `ids` (pruned to their buckets by PyIceberg)."""
    from pyiceberg import expressions

    ie: Any = expressions  # In takes a column name where its stubs say a term
    return table.scan(row_filter=ie.In(column, ids)).to_arrow()


def index_objects(committer: Committer, object_ids: list[str], facts: list[str], child_ids: list[str]) -> bool:
    """Replace the object_index rows of these objects in one PyIceberg commit (delete their old
    rows, append the new ones): what `object_index.refresh_index`'s MERGE writes for them,
    from their shoal.objects rows, their old index rows and the facts the workers computed,
    without a Spark job. False (nothing written) where the MERGE could do more: a new version
    of a path not indexed yet (its other versions' is_latest flip), an object with two
    objects or index rows, more ids than one scan filter should carry."""
    from shoal.lake.object_index import FACTS

    ids = sorted(set(object_ids))
    if not ids or len(ids) > metadata.IN_LIST_LIMIT or len(child_ids) > metadata.IN_LIST_LIMIT:
        return False
    index, objects = (committer.catalog.load_table((metadata.NAMESPACE, n)) for n in ("object_index", "objects"))
    try:
        old_rows = _scan(index, "object_id", ids).to_pylist()
        rows = _scan(objects, "object_id", ids).to_pylist()
        kids = _scan(objects, "object_id", sorted(set(child_ids))).to_pylist() if child_ids else []
    except Exception:  # noqa: BLE001 - a layout PyIceberg cannot read (equality deletes): the MERGE can
        return False
    old = {r["object_id"]: r for r in old_rows}
    if len(old) != len(old_rows) or len({r["object_id"] for r in rows}) != len(rows):
        return False
    if any(r["parent_object_id"] is None and (r["version"] or 0) > 1 and r["object_id"] not in old for r in rows):
        return False
    schema = index.schema().as_arrow()
    if sorted(schema.names) != sorted(metadata.columns("object_index")):
        return False
    found = _facts(facts, {f.name: f.type for f in schema if f.name in FACTS})
    if found is None:
        return False
    counts: dict[str, int] = {}
    wanted = set(ids)
    for k in kids:
        if k["parent_object_id"] in wanted:
            counts[k["parent_object_id"]] = counts.get(k["parent_object_id"], 0) + 1
    pending = {c: _default(d) for c, (_t, d) in FACTS.items()}
    out = []
    for r in rows:
        was = old.get(r["object_id"])
        fresh = found.get(r["object_id"]) or ({c: was[c] for c in FACTS} if was else pending)
        out.append(
            {
                **{c: r.get(c) for c in schema.names},
                "child_count": counts.get(r["object_id"], (was or {}).get("child_count") or 0),
                "is_latest": True if r["parent_object_id"] is not None or not was else was["is_latest"],
                **fresh,
            }
        )
    import pyarrow as pa
    from pyiceberg import expressions

    ie: Any = expressions
    try:
        data = pa.Table.from_pylist(out, schema=schema)
    except (pa.ArrowInvalid, pa.ArrowTypeError, ValueError):
        return False
    import warnings

    with warnings.catch_warnings(), index.transaction() as tx:  # one commit: old rows out, new ones in
        # The index's merge-on-read property is Spark's; PyIceberg rewrites the few files instead.
        warnings.filterwarnings("ignore", "Merge on read is not yet supported")
        replaced = sorted(set(old) & {r["object_id"] for r in rows})  # an index row without objects row stays
        if replaced:
            tx.delete(ie.In("object_id", replaced))
        tx.append(data)
    return True


def _facts(facts: list[str], types: dict[str, Any]) -> dict[str, dict[str, Any]] | None:
    """The workers' facts rows by object id, or None where one cannot be read exactly."""
    found: dict[str, dict[str, Any]] = {}
    for text in facts:
        row = json.loads(text)
        oid = row.get("object_id") if isinstance(row, dict) else None
        if not isinstance(oid, str) or oid in found:
            return None  # a second facts row would double the index row (as in the SQL's join)
        try:
            found[oid] = {c: _value(row.get(c), t) for c, t in types.items()}
        except NotFast:
            return None
    return found


def _default(sql: str) -> Any:
    """A FACTS default (SQL text) as a Python value."""
    return {"'pending'": "pending", "array()": [], "map()": [], "false": False, "0": 0, "NULL": None}[sql]
