"""PyIceberg's catalog over the lake's catalog database: what the REST catalog serves and what
point lookups read (one opener, below both, so neither imports the other)."""

from __future__ import annotations

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

    props = {"uri": settings.catalog_sqlalchemy_uri, "warehouse": settings.warehouse_uri}
    props.update(storage_props(settings, secrets=True))
    return GovernedSqlCatalog(settings.catalog.name, **props)
