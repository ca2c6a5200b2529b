"""Snapshot summary properties committed atomically with Spark writes.

Spark 3.5's SQL MERGE has no write options, so Iceberg's `CommitMetadata` is used: it
holds properties in a JVM thread-local while a callable runs, and every Iceberg commit
made inside adds them to its snapshot summary. The callable is a Python object called
back through py4j on the same JVM thread (PySpark pins Python threads to JVM threads).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pyspark.sql import SparkSession


class _PyCallable:
    """A java.util.concurrent.Callable backed by a Python function."""

    def __init__(self, fn: Callable[[], Any]) -> None:
        self._fn = fn
        self.result: Any = None
        self.error: BaseException | None = None

    def call(self) -> None:
        try:
            self.result = self._fn()
        except BaseException as exc:  # re-raised on the Python side below
            self.error = exc
            raise
        return None

    class Java:
        implements = ["java.util.concurrent.Callable"]


def commit_with_properties(spark: SparkSession, properties: dict[str, str], fn: Callable[[], Any]) -> Any:
    """Run `fn` so that each Iceberg snapshot it commits carries `properties`."""
    from pyspark.java_gateway import ensure_callback_server_started

    sc = spark.sparkContext
    ensure_callback_server_started(sc._gateway)
    jvm = sc._jvm
    assert jvm is not None  # a live SparkContext has its gateway
    jprops = jvm.java.util.HashMap()
    for k, v in properties.items():
        jprops.put(k, v)
    call = _PyCallable(fn)
    exc_class = jvm.java.lang.Class.forName("java.lang.RuntimeException")
    try:
        jvm.org.apache.iceberg.spark.CommitMetadata.withCommitProperties(jprops, call, exc_class)
    except Exception:
        if call.error is not None:
            raise call.error from None
        raise
    return call.result


def _iceberg_table(spark: SparkSession, qualified_name: str) -> Any:
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    return jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(spark._jsparkSession, qualified_name)


def empty_commit(spark: SparkSession, qualified_name: str, properties: dict[str, str]) -> int:
    """Commit a snapshot that changes no data but records `properties`; returns its id."""
    table = _iceberg_table(spark, qualified_name)
    append = table.newAppend()
    for k, v in properties.items():
        append = append.set(k, v)
    append.commit()
    table.refresh()
    return int(table.currentSnapshot().snapshotId())
