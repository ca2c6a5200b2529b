"""A governed Iceberg REST catalog over the lake's catalog, for other engines (PyIceberg,
DuckDB, Spark, Trino, Flink): `shoal serve --iceberg-rest`.

Public API: `IcebergRestServer` (start/stop/url) and `create_app` (the FastAPI app).
docs/engines.md says what each client types to connect.
"""

from shoal.iceberg_rest.app import create_app, open_catalog
from shoal.iceberg_rest.server import IcebergRestServer

__all__ = ["IcebergRestServer", "create_app", "open_catalog"]
