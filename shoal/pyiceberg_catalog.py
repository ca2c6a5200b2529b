"""PyIceberg's catalog over the lake's catalog database: what the REST catalog serves and what
point lookups read (one opener, below both, so neither imports the other)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

from shoal.config import Settings
from shoal.exceptions import DependencyError


def storage_props(settings: Settings, *, secrets: bool) -> dict[str, str]:
    """FileIO settings for an S3 warehouse; `secrets` adds the server's own keys (never sent)."""
    if not settings.warehouse_uri.startswith(("s3://", "s3a://")):
        return {}
    st = settings.storage
    out = {"s3.region": st.region, "client.region": st.region}
    if st.endpoint:
        out["s3.endpoint"] = st.endpoint
    out["s3.path-style-access"] = "true" if st.path_style else "false"
    out["s3.force-virtual-addressing"] = "false" if st.path_style else "true"
    if secrets and st.access_key and st.secret_key:
        out["s3.access-key-id"] = st.access_key.get_secret_value()
        out["s3.secret-access-key"] = st.secret_key.get_secret_value()
    return out


# Parsed metadata files kept per opened catalog (a few MB at most for ordinary tables).
_PARSED_METADATA_KEPT = 64


class _MetadataCache:
    """Parsed table metadata by metadata-file location, least recently used out first; shared
    by a server's threads."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._items: OrderedDict[str, Any] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, location: str) -> Any | None:
        with self._lock:
            found = self._items.get(location)
            if found is not None:
                self._items.move_to_end(location)
            return found

    def put(self, location: str, metadata: Any) -> None:
        with self._lock:
            self._items[location] = metadata
            self._items.move_to_end(location)
            while len(self._items) > self._size:
                self._items.popitem(last=False)


def open_catalog(settings: Settings) -> Any:
    """PyIceberg's SqlCatalog over the lake's catalog database (same name as Spark's catalog)."""
    try:
        from pyiceberg.catalog.sql import SqlCatalog
    except ModuleNotFoundError as exc:
        raise DependencyError(
            "the Iceberg REST catalog needs PyIceberg", hint="pip install 'shoal[iceberg-rest]'"
        ) from exc

    class GovernedSqlCatalog(SqlCatalog):
        """FileIO from the catalog's own properties only: a table's properties (`py-io-impl`,
        `s3.endpoint`, keys) never choose the class the server imports or where it connects."""

        def _load_file_io(self, properties: Any = None, location: str | None = None) -> Any:
            from pyiceberg.io import load_file_io

            return load_file_io(dict(self.properties), location)

        def _convert_orm_to_iceberg(self, orm_table: Any) -> Any:
            """The table from its metadata file, parsed once per file: a commit always writes a
            new file, so a location names one immutable metadata. Every load (each point lookup
            loads and refreshes its table, each REST request loads one) then costs the catalog
            row's query, not a read and parse of a JSON that grows with the table's history."""
            from pyiceberg.table import Table

            location = orm_table.metadata_location
            metadata = _parsed.get(location) if location else None
            if metadata is None:
                table = super()._convert_orm_to_iceberg(orm_table)
                _parsed.put(location, table.metadata)
                return table
            return Table(
                identifier=(*self.identifier_to_tuple(orm_table.table_namespace), orm_table.table_name),
                metadata=metadata,
                metadata_location=location,
                io=self._load_file_io(metadata.properties, location),
                catalog=self,
            )

    _parsed = _MetadataCache(_PARSED_METADATA_KEPT)

    props = {"uri": settings.catalog_sqlalchemy_uri, "warehouse": settings.warehouse_uri}
    props.update(storage_props(settings, secrets=True))
    return GovernedSqlCatalog(settings.catalog.name, **props)


_OPENED: dict[tuple[str, ...], Any] = {}
_OPENED_LOCK = threading.Lock()


def cached_catalog(settings: Settings) -> Any:
    """`open_catalog`, once per catalog database, warehouse and storage settings (opening one
    builds a SQLAlchemy engine); shared by a server's threads."""
    key = (settings.catalog_sqlalchemy_uri, settings.warehouse_uri, repr(settings.catalog), repr(settings.storage))
    with _OPENED_LOCK:
        if key not in _OPENED:
            _OPENED[key] = open_catalog(settings)
        return _OPENED[key]
