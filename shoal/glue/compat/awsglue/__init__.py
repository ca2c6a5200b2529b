"""Shoal's AWS Glue compatibility layer: the `awsglue` API a Glue PySpark script imports.

Importable as top-level `awsglue` only inside `shoal glue run` (see shoal/glue/launch.py),
so it never shadows a real awsglue installation. Written from awsglue's public signatures;
everything runs on Shoal's Spark session, catalog and storage.
"""

from .dynamicframe import DynamicFrame

__all__ = ["DynamicFrame"]
