"""The one place a SparkSession is built.

Everything that talks to Spark calls `get_spark(settings)`; it returns the live session
when one exists (tests share one per test session; a CLI call builds one per process).
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import closing, contextmanager
from contextvars import ContextVar
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from shoal import class_archive
from shoal.config import Settings

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
from shoal.exceptions import DependencyError
from shoal.private import private_dir, private_file, scratch_dir, scratch_path

ICEBERG_RUNTIME_JAR = "iceberg-spark-runtime-3.5_2.12-1.10.2.jar"
_lock = threading.Lock()
# The warm engine gives each command a session of its own (temp views, SQL settings, current
# database), all on its one SparkContext; get_spark returns it to that command's code.
_command_session: ContextVar = ContextVar("shoal_command_session", default=None)
# Which kind of Shoal process this is ([spark.cores_max] has a key for each): set once, early,
# by the engine, `serve` and the scheduler; every other process is a "command".
_role = {"name": "command"}


def run_in_utc() -> None:
    """Make this process's local time zone UTC, as its Spark sessions' is. PySpark hands TIMESTAMP
    values back naive in the process's local zone, and every face (JSON, the HTTP API, the console,
    the PostgreSQL endpoint) writes them as UTC: on a machine set to another zone they came out
    shifted. For Shoal's own processes (the CLI, serve, the warm engine), not the Python API's
    host process (`shoal.Lake` converts its values itself)."""
    import time

    if os.environ.get("TZ") != "UTC":
        os.environ["TZ"] = "UTC"
        time.tzset()


def set_role(name: str) -> None:
    """This process's share of a cluster's cores is `[spark.cores_max] <name>`. The engine's stays
    (a command it runs must not change the share its SparkContext was started with)."""
    if _role["name"] != "engine":
        _role["name"] = name


@contextmanager
def command_session(session: SparkSession) -> Iterator[None]:
    """Make `session` what get_spark returns in this context (and threads started from it)."""
    token = _command_session.set(session)
    try:
        yield
    finally:
        _command_session.reset(token)


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


# From the bodo-iceberg-connector wheel (Maven Central is out of reach): the AWS SDK v2 modules
# Iceberg's S3FileIO needs (s3:// table files), and hadoop-aws with SDK v1 (s3a:// for Spark's
# own file sources: external tables). Spark already ships the Apache HTTP client they use.
_S3_JAR_PREFIXES = (
    "annotations-2.",
    "apache-client-2.",
    "arns-2.",
    "auth-2.",
    "aws-core-2.",
    "aws-json-protocol-2.",
    "aws-query-protocol-2.",
    "aws-xml-protocol-2.",
    "checksums-2.",
    "checksums-spi-2.",
    "crt-core-2.",
    "endpoints-spi-2.",
    "http-auth-2.",
    "http-auth-aws-2.",
    "http-auth-aws-eventstream-2.",
    "http-auth-spi-2.",
    "http-client-spi-2.",
    "identity-spi-2.",
    "json-utils-2.",
    "kms-2.",
    "metrics-spi-2.",
    "profiles-2.",
    "protocol-core-2.",
    "regions-2.",
    "retries-2.",
    "retries-spi-2.",
    "s3-2.",
    "sdk-core-2.",
    "sts-2.",
    "third-party-jackson-core-2.",
    "url-connection-client-2.",
    "utils-2.",
    "eventstream-1.",
    "reactive-streams-1.",
    "hadoop-aws-3.",
    "aws-java-sdk-core-1.",
    "aws-java-sdk-s3-1.",
    "aws-java-sdk-kms-1.",
    "aws-java-sdk-sts-1.",
    "aws-java-sdk-dynamodb-1.",
)


def uses_object_store(settings: Settings) -> bool:
    return settings.warehouse_uri.startswith(("s3://", "s3a://")) or settings.storage.endpoint is not None


def s3_jars() -> list[str]:
    """The S3 client jars shipped by the bodo-iceberg-connector wheel."""
    try:
        libs = Path(str(resources.files("bodo_iceberg_connector") / "jars" / "libs"))
    except ModuleNotFoundError as exc:
        raise DependencyError(
            "S3 support needs the AWS SDK jars", hint="pip install --no-deps 'bodo-iceberg-connector==2026.10'"
        ) from exc
    jars = sorted(str(p) for p in libs.glob("*.jar") if p.name.startswith(_S3_JAR_PREFIXES))
    if not any("/s3-2." in j for j in jars) or not any("hadoop-aws" in j for j in jars):
        raise DependencyError(f"{libs} lacks the S3 jars", hint="reinstall bodo-iceberg-connector==2026.10")
    return jars


def storage_conf(settings: Settings) -> dict[str, str]:
    """S3 settings for Iceberg's S3FileIO (table files) and Hadoop's s3a (Spark file sources)."""
    st = settings.storage
    prefix = f"spark.sql.catalog.{settings.catalog.name}"
    conf = {
        f"{prefix}.io-impl": "org.apache.iceberg.aws.s3.S3FileIO",
        f"{prefix}.client.region": st.region,
        f"{prefix}.s3.path-style-access": "true" if st.path_style else "false",
        "spark.hadoop.fs.s3.impl": "org.apache.hadoop.fs.s3a.S3AFileSystem",
        "spark.hadoop.fs.s3a.path.style.access": "true" if st.path_style else "false",
        "spark.hadoop.fs.s3a.endpoint.region": st.region,
    }
    if st.endpoint:
        conf[f"{prefix}.s3.endpoint"] = st.endpoint
        conf["spark.hadoop.fs.s3a.endpoint"] = st.endpoint
        conf["spark.hadoop.fs.s3a.connection.ssl.enabled"] = "true" if st.endpoint.startswith("https") else "false"
    if st.access_key and st.secret_key:
        key, secret = st.access_key.get_secret_value(), st.secret_key.get_secret_value()
        conf[f"{prefix}.s3.access-key-id"] = key
        conf[f"{prefix}.s3.secret-access-key"] = secret
        conf["spark.hadoop.fs.s3a.access.key"] = key
        conf["spark.hadoop.fs.s3a.secret.key"] = secret
        conf["spark.hadoop.fs.s3a.aws.credentials.provider"] = "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider"
    # Python workers on executors reach the store with the same settings (storage.py).
    from shoal import storage

    for name, value in storage.configure(st).items():
        conf[f"spark.executorEnv.{name}"] = value
    return conf


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
        if _iceberg_tables_exist(settings.catalog_sqlite_file):
            # Iceberg's table check at start-up (JdbcCatalog.atomicCreateTable) leaves the
            # DatabaseMetaData.getTables ResultSet open when the table exists. On SQLite that
            # un-reset statement keeps a read transaction, so the pooled connection holds a
            # WAL snapshot from start-up for good: once any other connection writes (workflow
            # events, job registry), that connection's next write (DROP TABLE, a commit)
            # fails with SQLITE_BUSY_SNAPSHOT, which no busy timeout waits out. When the
            # tables exist there is nothing to create, so the check is skipped.
            conf[f"{prefix}.jdbc.init-catalog-tables"] = "false"
    if settings.catalog.user:
        conf[f"{prefix}.jdbc.user"] = settings.catalog.user
    if settings.catalog.password:
        conf[f"{prefix}.jdbc.password"] = settings.catalog.password.get_secret_value()
    return conf


ICEBERG_CATALOG_TABLES = ("iceberg_tables", "iceberg_namespace_properties")


def _iceberg_tables_exist(db: Path | None) -> bool:
    """Whether the SQLite catalog file already holds Iceberg's catalog tables."""
    if db is None or not db.is_file():
        return False
    import sqlite3

    try:
        # One SELECT, then closed: this connection holds no snapshot either.
        with closing(sqlite3.connect(db, timeout=30)) as conn:
            found = {
                name
                for (name,) in conn.execute(
                    "SELECT name FROM sqlite_master WHERE type = 'table' AND name IN (?, ?)", ICEBERG_CATALOG_TABLES
                )
            }
    except sqlite3.Error:
        return False  # let Iceberg create or report it
    return found == set(ICEBERG_CATALOG_TABLES)


def driver_jars(settings: Settings) -> list[str]:
    """The jars `spark.jars` adds to Spark's own: Iceberg, the catalog's JDBC driver, S3 when used."""
    jdbc_jar = settings.catalog_jdbc_jar
    if not Path(jdbc_jar).is_file():
        pkg = "libxerial-sqlite-jdbc-java" if settings.catalog.type == "sqlite" else "libpostgresql-jdbc-java"
        raise DependencyError(f"JDBC driver {jdbc_jar} not found", hint=f"apt-get install {pkg}")
    jars = [iceberg_runtime_jar(), jdbc_jar]
    if uses_object_store(settings):
        jars += s3_jars()
    return jars


def spark_conf(settings: Settings) -> dict[str, str]:
    ws = settings.workspace_dir
    jars = driver_jars(settings)
    conf = {
        "spark.master": settings.spark.master,
        "spark.app.name": "shoal",
        "spark.jars": ",".join(jars),
        "spark.driver.memory": settings.spark.driver_memory,
        "spark.sql.extensions": "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions",
        "spark.sql.defaultCatalog": settings.catalog.name,
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.shuffle.partitions": str(settings.spark.shuffle_partitions),
        "spark.sql.warehouse.dir": str(ws / "spark-warehouse"),
        "spark.ui.enabled": "false",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.ui.showConsoleProgress": "false",
        # The JVM's own temporary files go to the workspace's private scratch folder too.
        "spark.driver.extraJavaOptions": (
            f"-Dderby.system.home={ws} -Dlog4j2.level=error -Djava.io.tmpdir={scratch_path(settings, 'jvm')}"
            + (f" {archive}" if (archive := class_archive.java_options(settings)) else "")
        ),
        # Workflow branches share this session: FAIR pools keep one branch's big job from
        # starving the others (each branch thread submits to a pool of its own).
        "spark.scheduler.mode": "FAIR",
        # Listing a table's partition folders with a Spark job only pays off beyond many
        # hundreds of them (measured: a 731-day table's query 4.2 s -> 1.8 s locally).
        "spark.sql.sources.parallelPartitionDiscovery.threshold": "1024",
        # Generated code is compiled once per distinct plan shape and kept; Spark keeps 100, and
        # long-lived sessions (the warm engine, serve, the PostgreSQL endpoint) cycle through more,
        # compiling the same shapes again and again. Measured on the CDC suite's one session:
        # 853 compilations -> 349 and the JVM's CPU 177 s -> 141-150 s with 1000 kept.
        "spark.sql.codegen.cache.maxEntries": "1000",
    }
    conf.update(catalog_conf(settings))
    if uses_object_store(settings):
        conf.update(storage_conf(settings))
    # Spark starts its Python workers with OMP_NUM_THREADS=1 (SPARK-28843) unless this is set,
    # and CTranslate2 takes it over its own thread setting: `[extract.media] speech_threads`
    # was ignored inside `shoal extract`, and the arithmetic with it. Whisper base sits near a
    # tie on the demo's WAV: one thread read "Maria Darcy ... Roger Damware House", two threads
    # (and the same file outside Spark) "Maria Garcia ... Rotterdam warehouse".
    conf["spark.executorEnv.OMP_NUM_THREADS"] = str(settings.extract.media.speech_threads)
    if settings.spark.master.startswith("spark://"):
        # Without a cap the first application takes every core and the next waits with none.
        cores = getattr(settings.spark.cores_max, _role["name"])
        if cores:
            conf["spark.cores.max"] = str(cores)
    conf.update(settings.spark.conf)
    # Applied after the user's conf on purpose: these close read paths around governance.
    # Spark would expand ${env:...}, ${system:...} and ${spark.*} inside any SQL text, string
    # literals included, handing secrets (catalog password, S3 keys) to whoever writes SQL.
    conf["spark.sql.variable.substitute"] = "false"
    if settings.spark.master.startswith("local"):
        # Embedded mode needs no network: the driver's RPC and block manager stay on loopback,
        # and their connections are authenticated (local masters generate the secret).
        conf["spark.driver.bindAddress"] = "127.0.0.1"
        conf["spark.driver.host"] = "127.0.0.1"
        conf["spark.authenticate"] = "true"
    # Table files written through Hadoop's local file system: owner only, like their folder.
    conf.setdefault("spark.hadoop.fs.permissions.umask-mode", "077")
    # Shuffle and spill files hold table rows (whatever governance filtered later): they go to
    # the 0700 workspace, not the shared system temp folder. An operator may point them at a
    # bigger disk with [spark] conf; that folder's modes are then theirs to keep private.
    conf.setdefault("spark.local.dir", str(scratch_path(settings, "spark")))
    return conf


def get_spark(settings: Settings) -> SparkSession:
    """Return the process's SparkSession, building it from `settings` on first use."""
    from pyspark.sql import SparkSession

    session = _command_session.get()
    if session is not None:
        return session
    with _lock:
        active = SparkSession.getActiveSession()
        if active is not None:
            return active
        # pandas UDFs and Python workers must run on this interpreter, not a system one.
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
        if _loopback_master(settings.spark.master):
            # Else the driver advertises the machine's first non-loopback address, which
            # executors of a loopback cluster may not reach (issue 49).
            os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        private_dir(settings.workspace_dir)
        if settings.catalog_sqlite_file is not None:
            private_file(settings.catalog_sqlite_file)
        if "://" not in settings.warehouse_uri:
            private_dir(Path(settings.warehouse_uri))
        conf = spark_conf(settings)
        scratch_dir(settings, "spark")
        scratch_dir(settings, "jvm")
        for folder in conf["spark.local.dir"].split(","):  # an operator's folders, made private too
            private_dir(Path(folder))
        builder = SparkSession.builder
        for key, value in conf.items():
            builder = builder.config(key, value)
        # The JVM (and the Python workers it starts) inherit the umask at launch: 077 makes
        # every blockmgr folder 0700 and every shuffle, spill and broadcast file 0600.
        old_umask = os.umask(0o077)
        try:
            spark = builder.getOrCreate()
        finally:
            os.umask(old_umask)
        spark.sparkContext.setLogLevel(settings.spark.log_level)
        if settings.catalog.type == "sqlite":
            renew_catalog_connections(spark, settings)
        if not settings.spark.master.startswith("local"):
            ship_code(spark, settings)
        from shoal.cluster import guard

        guard.watch(spark, settings)
        return spark


def _loopback_master(master: str) -> bool:
    hosts = [a.rpartition(":")[0] for a in master.removeprefix("spark://").split(",")]
    return master.startswith("spark://") and all(h == "localhost" or h.startswith("127.") for h in hosts)


def renew_catalog_connections(spark: SparkSession, settings: Settings) -> None:
    """Initialize the Iceberg catalog, then replace the SQLite connections it opened doing so.

    Iceberg 1.10.2's JdbcCatalog leaves a metadata ResultSet open when it initializes
    (updateSchemaIfRequired's getColumns, initializeCatalogTables' getTables). On SQLite that
    holds a read transaction for good: the pooled connection then reads a stale catalog (tables
    other processes created are missing) and its commits fail with SQLITE_BUSY_SNAPSHOT, which
    long-lived processes (the warm engine, serve, a test session) run into. Closing those
    connections ends the transaction; the pool opens fresh ones on demand.
    """
    try:
        plugin = spark._jsparkSession.sessionState().catalogManager().catalog(settings.catalog.name)
        catalog = plugin.icebergCatalog()
        pool = _field(catalog, "connections")
        impl = pool.getClass().getSuperclass()  # ClientPoolImpl: the idle connections and their count
        clients = _field(pool, "clients", impl)
        size = impl.getDeclaredField("currentSize")
        size.setAccessible(True)
        while not clients.isEmpty():
            clients.pollFirst().close()
            size.setInt(pool, size.getInt(pool) - 1)
    except Exception as exc:  # noqa: BLE001 - another Iceberg version: keep going, as before
        import logging

        logging.getLogger(__name__).debug("catalog connections not renewed: %s", exc)


def _field(obj: Any, name: str, cls: Any = None) -> Any:
    f = (cls or obj.getClass()).getDeclaredField(name)
    f.setAccessible(True)
    return f.get(obj)


def ship_code(spark: SparkSession, settings: Settings) -> None:
    """Send this process's `shoal` package to the executors (added first on their sys.path).

    Executors then run the driver's code even where an older Shoal is installed; the
    libraries and model packages must be installed on every worker (same environment).
    """
    import hashlib
    import zipfile

    pkg = Path(__file__).resolve().parent  # this module sits at the package's root
    files = sorted(p for p in pkg.rglob("*.py") if "__pycache__" not in p.parts)
    digest = hashlib.sha256()
    for p in files:
        digest.update(str(p.relative_to(pkg)).encode())
        digest.update(p.read_bytes())
    target = settings.workspace_dir / "cluster" / f"shoal-{digest.hexdigest()[:12]}.zip"
    if not target.is_file():
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_suffix(".tmp")
        with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as z:
            for p in files:
                z.write(p, str(Path("shoal") / p.relative_to(pkg)))
        tmp.replace(target)
    spark.sparkContext.addPyFile(str(target))


def stop_spark() -> None:
    from pyspark.sql import SparkSession

    with _lock:
        active = SparkSession.getActiveSession()
        if active is not None:
            active.stop()


def jvm_process(spark: SparkSession | None = None) -> subprocess.Popen[bytes] | None:
    """The Popen of the JVM behind `spark` (default: this process's active SparkContext), or
    None when there is none or this process did not start it (PYSPARK_GATEWAY_PORT)."""
    from pyspark import SparkContext

    sc = spark.sparkContext if spark is not None else SparkContext._active_spark_context
    gateway = getattr(sc, "_gateway", None) if sc is not None else None
    proc = getattr(gateway, "proc", None)
    return proc if isinstance(proc, subprocess.Popen) else None


def jvm_down(spark: SparkSession | None = None) -> str | None:
    """Why the JVM behind `spark` cannot answer, or None (it runs, or none was started).

    A JVM killed under a running process leaves its SparkContext in place and every call
    failing; servers ask this (a non-blocking waitpid) to say "unavailable" instead.
    """
    proc = jvm_process(spark)
    if proc is None:
        return None
    code = proc.poll()
    if code is None:
        return None
    how = f"was killed by signal {-code}" if code < 0 else f"exited with code {code}"
    return f"the Spark JVM (pid {proc.pid}) {how}"
