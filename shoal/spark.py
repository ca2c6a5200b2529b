"""The one place a SparkSession is built.

Everything that talks to Spark calls `get_spark(settings)`; it returns the live session
when one exists (tests share one per test session; a CLI call builds one per process).
"""

from __future__ import annotations

import os
import sys
import threading
from importlib import resources
from pathlib import Path

from shoal.config import Settings
from shoal.exceptions import DependencyError

ICEBERG_RUNTIME_JAR = "iceberg-spark-runtime-3.5_2.12-1.10.2.jar"
_lock = threading.Lock()


def iceberg_runtime_jar() -> str:
    """Path of the Iceberg Spark runtime jar shipped by the pinned PyPI wheel."""
    try:
        jars = resources.files("snowpark_connect_deps_iceberg") / "jars"
    except ModuleNotFoundError as exc:
        raise DependencyError(
            "the Iceberg runtime jar package is not installed",
            hint="pip install 'snowpark-connect-deps-iceberg==1.0.2' (1.0.3 ships a broken jar)",
        ) from exc
    jar = Path(str(jars / ICEBERG_RUNTIME_JAR))
    if not jar.is_file():
        raise DependencyError(f"{jar} is missing", hint="reinstall snowpark-connect-deps-iceberg==1.0.2")
    return str(jar)


def catalog_conf(settings: Settings) -> dict[str, str]:
    """spark.sql.catalog.* entries for the Iceberg JDBC catalog."""
    prefix = f"spark.sql.catalog.{settings.catalog.name}"
    conf = {
        prefix: "org.apache.iceberg.spark.SparkCatalog",
        f"{prefix}.catalog-impl": "org.apache.iceberg.jdbc.JdbcCatalog",
        f"{prefix}.uri": settings.catalog_jdbc_uri,
        f"{prefix}.warehouse": settings.warehouse_uri,
        # V1 schema enables Iceberg views in the JDBC catalog.
        f"{prefix}.jdbc.schema-version": "V1",
        # Other processes (CLI calls, PyIceberg) commit to the same tables: always read
        # the current metadata instead of a cached copy.
        f"{prefix}.cache-enabled": "false",
    }
    if settings.catalog.type == "sqlite":
        # Without WAL, concurrent readers make commits fail with SQLITE_BUSY.
        conf[f"{prefix}.jdbc.journal_mode"] = "WAL"
        conf[f"{prefix}.jdbc.busy_timeout"] = "30000"
    if settings.catalog.user:
        conf[f"{prefix}.jdbc.user"] = settings.catalog.user
    if settings.catalog.password:
        conf[f"{prefix}.jdbc.password"] = settings.catalog.password.get_secret_value()
    return conf


def spark_conf(settings: Settings) -> dict[str, str]:
    jdbc_jar = settings.catalog_jdbc_jar
    if not Path(jdbc_jar).is_file():
        pkg = "libxerial-sqlite-jdbc-java" if settings.catalog.type == "sqlite" else "libpostgresql-jdbc-java"
        raise DependencyError(f"JDBC driver {jdbc_jar} not found", hint=f"apt-get install {pkg}")
    ws = settings.workspace_dir
    conf = {
        "spark.master": settings.spark.master,
        "spark.app.name": "shoal",
        "spark.jars": ",".join([iceberg_runtime_jar(), jdbc_jar]),
        "spark.driver.memory": settings.spark.driver_memory,
        "spark.sql.extensions": "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions",
        "spark.sql.defaultCatalog": settings.catalog.name,
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.shuffle.partitions": str(settings.spark.shuffle_partitions),
        "spark.sql.warehouse.dir": str(ws / "spark-warehouse"),
        "spark.ui.enabled": "false",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.ui.showConsoleProgress": "false",
        "spark.driver.extraJavaOptions": f"-Dderby.system.home={ws} -Dlog4j2.level=error",
        # Workflow branches share this session: FAIR pools keep one branch's big job from
        # starving the others (each branch thread submits to a pool of its own).
        "spark.scheduler.mode": "FAIR",
        # Listing a table's partition folders with a Spark job only pays off beyond many
        # hundreds of them (measured: a 731-day table's query 4.2 s -> 1.8 s locally).
        "spark.sql.sources.parallelPartitionDiscovery.threshold": "1024",
    }
    conf.update(catalog_conf(settings))
    conf.update(settings.spark.conf)
    return conf


def get_spark(settings: Settings):  # -> pyspark.sql.SparkSession
    """Return the process's SparkSession, building it from `settings` on first use."""
    from pyspark.sql import SparkSession

    with _lock:
        active = SparkSession.getActiveSession()
        if active is not None:
            return active
        # pandas UDFs and Python workers must run on this interpreter, not a system one.
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
        settings.workspace_dir.mkdir(parents=True, exist_ok=True)
        if "://" not in settings.warehouse_uri:
            Path(settings.warehouse_uri).mkdir(parents=True, exist_ok=True)
        builder = SparkSession.builder
        for key, value in spark_conf(settings).items():
            builder = builder.config(key, value)
        spark = builder.getOrCreate()
        spark.sparkContext.setLogLevel(settings.spark.log_level)
        return spark


def stop_spark() -> None:
    from pyspark.sql import SparkSession

    with _lock:
        active = SparkSession.getActiveSession()
        if active is not None:
            active.stop()
