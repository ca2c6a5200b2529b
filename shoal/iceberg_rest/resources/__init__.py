"""The REST catalog's routes, one module per resource; each has a `routes` table (shoal.iceberg_rest.routes)."""
