"""The state of one `shoal glue run`: Shoal's session handed to the script, catalog names, bookmarks.

A Glue script builds its own Spark entry points (`SparkContext()`, `SparkSession.builder`)
and names its Iceberg catalog (`glue_catalog`, `job_catalog`, ...). While a script runs,
those entry points hand back Shoal's one session (built in shoal/spark.py), and every
catalog name the script configures is bound to Shoal's Iceberg catalog object in Spark's
catalog manager: `job_catalog.db.t` and `lake.db.t` are then the same table, with no
second catalog client and no copy of the catalog settings.
"""

from __future__ import annotations

import re
import threading
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from shoal import storage
from shoal.config import Settings
from shoal.exceptions import ShoalError
from shoal.glue import bookmarks

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# Names Glue jobs use for Iceberg catalogs, bound even when the script sets none itself.
DEFAULT_CATALOG_ALIASES = ("glue_catalog", "job_catalog")
_CATALOG_KEY = re.compile(r"^spark\.sql\.catalog\.([A-Za-z_][A-Za-z0-9_]*)$")


class GlueError(ShoalError):
    """A Glue script cannot run, or asked for something Shoal's awsglue does not do."""


@dataclass
class GlueRun:
    settings: Settings
    spark: Any  # pyspark.sql.SparkSession
    job_name: str
    bookmark_option: str = bookmarks.DISABLE
    run_id: str = field(default_factory=lambda: "jr_" + uuid.uuid4().hex)
    initialized: bool = False
    committed: bool = False
    reads: list[dict[str, Any]] = field(default_factory=list)
    writes: list[dict[str, Any]] = field(default_factory=list)
    catalogs: list[str] = field(default_factory=list)
    ignored_conf: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    _states: dict[str, dict[str, Any]] = field(default_factory=dict)
    _pending: dict[str, dict[str, Any]] = field(default_factory=dict)

    # ---- job lifecycle (awsglue.job.Job) ----------------------------------------------------
    def init(self, job_name: str) -> None:
        if job_name and job_name != self.job_name:
            # Bookmarks belong to the name the job runs under (--JOB_NAME), as in Glue.
            raise GlueError(
                f"Job.init({job_name!r}) but the run's --JOB_NAME is {self.job_name!r}",
                hint="pass args['JOB_NAME'] to job.init, or run with --JOB_NAME " + job_name,
            )
        self._states = bookmarks.load(self.settings, self.job_name) if self.bookmark_option != bookmarks.DISABLE else {}
        self._pending = {}
        self.initialized = True

    def commit(self) -> None:
        if not self.initialized:
            raise GlueError("Job.commit() before Job.init()", hint="call job.init(args['JOB_NAME'], args) first")
        if self.bookmark_option == bookmarks.ENABLE:
            bookmarks.commit(self.settings, self.job_name, self.run_id, self._pending)
            self._states.update(self._pending)
            self._pending = {}
        self.committed = True

    # ---- bookmarks over files ---------------------------------------------------------------
    def select_files(self, ctx: str, source: str, files: list[storage.FileEntry]) -> list[storage.FileEntry]:
        """The files of `source` this run reads: all, or those the bookmark of `ctx` has not seen."""
        use = bool(ctx) and self.initialized and self.bookmark_option != bookmarks.DISABLE
        chosen = files
        if use:
            seen = self._states.get(ctx, {}).get("files", {})
            chosen = [f for f in files if seen.get(f.uri) != [f.size, f.mtime]]
            if self.bookmark_option == bookmarks.ENABLE:
                # Every file listed now counts as read once the job commits (the new ones are).
                self._pending[ctx] = {"source": source, "files": {**seen, **{f.uri: [f.size, f.mtime] for f in files}}}
        self.reads.append(
            {
                "transformation_ctx": ctx or None,
                "source": source,
                "bookmark": "used" if use else "not used",
                "files_listed": len(files),
                "files_read": len(chosen),
            }
        )
        return chosen

    def warn(self, message: str) -> None:
        if message not in self.warnings:
            self.warnings.append(message)

    def note_read(self, ctx: str, source: str, note: str) -> None:
        self.reads.append({"transformation_ctx": ctx or None, "source": source, "bookmark": note})

    def note_write(self, ctx: str, target: str) -> None:
        self.writes.append({"transformation_ctx": ctx or None, "target": target})

    # ---- Spark conf and catalog names -------------------------------------------------------
    def adopt_conf(self, items: Iterable[tuple[str, str]]) -> None:
        """Apply a script's Spark settings to Shoal's session.

        `spark.sql.catalog.NAME` binds NAME to Shoal's catalog; the settings under it
        (warehouse, catalog-impl, io-impl, ...) describe the catalog in AWS and are not
        used. Settings Spark can change at run time are set (Iceberg's spark.sql.iceberg.*
        included); static ones (extensions, jars, executor memory) stay Shoal's and are
        listed as ignored. Values are never logged.
        """
        for key, value in items:
            m = _CATALOG_KEY.match(key)
            if m:
                self.bind_catalog(m.group(1))
            elif key.startswith("spark.sql.catalog."):
                continue
            elif key == "spark.sql.variable.substitute":
                # Shoal keeps it off: substitution would expand secrets in SQL text.
                self._ignore(key)
            else:
                try:
                    self.spark.conf.set(key, value)
                except Exception:  # noqa: BLE001 - Spark refuses static and core settings once it runs
                    if self.spark.sparkContext.getConf().get(key) != value:
                        self._ignore(key)

    def _ignore(self, key: str) -> None:
        if key not in self.ignored_conf:
            self.ignored_conf.append(key)

    def bind_catalog(self, name: str) -> None:
        target = self.settings.catalog.name
        if name.lower() in (target.lower(), "spark_catalog") or name in self.catalogs:
            return
        manager = self.spark._jsparkSession.sessionState().catalogManager()
        plugin = manager.catalog(target)
        _catalog_map(manager).put(name, plugin)
        # Registered in the conf too, so Spark's checks for a configured catalog pass; the
        # bound object above is what resolves the name.
        self.spark.conf.set(f"spark.sql.catalog.{name}", "org.apache.iceberg.spark.SparkCatalog")
        self.catalogs.append(name)

    def unbind_catalogs(self) -> None:
        manager = self.spark._jsparkSession.sessionState().catalogManager()
        catalogs = _catalog_map(manager)
        for name in self.catalogs:
            catalogs.remove(name)
            prefix = f"spark.sql.catalog.{name}"
            for key in [k for k in _session_conf_keys(self.spark) if k == prefix or k.startswith(prefix + ".")]:
                self.spark.conf.unset(key)

    def summary(self) -> dict[str, Any]:
        return {
            "job_name": self.job_name,
            "run_id": self.run_id,
            "bookmark_option": self.bookmark_option,
            "bookmark_committed": self.committed and self.bookmark_option == bookmarks.ENABLE,
            "job_committed": self.committed,
            "reads": self.reads,
            "writes": self.writes,
            "catalogs": self.catalogs,
            "ignored_conf": self.ignored_conf,
            "warnings": self.warnings,
        }


def _catalog_map(manager: Any) -> Any:  # py4j objects
    """Spark's name -> CatalogPlugin map inside CatalogManager (pyspark 3.5: a private field)."""
    fld = manager.getClass().getDeclaredField("catalogs")
    fld.setAccessible(True)
    return fld.get(manager)


def _session_conf_keys(spark: SparkSession) -> list[str]:
    return [r[0] for r in spark.sql("SET").collect()]


def session_catalog_conf(spark: SparkSession) -> list[tuple[str, str]]:
    """The session's `spark.sql.catalog.NAME` entries (a script may set them through the builder)."""
    return [(r[0], r[1]) for r in spark.sql("SET").collect() if _CATALOG_KEY.match(r[0])]


_current: GlueRun | None = None
_lock = threading.Lock()


def current() -> GlueRun:
    if _current is None:
        raise GlueError(
            "awsglue is only available inside `shoal glue run`",
            hint="run the script with: shoal glue run SCRIPT.py --JOB_NAME NAME",
        )
    return _current


def activate(run: GlueRun | None) -> None:
    """Make `run` the process's Glue run (None: end it). One at a time: awsglue, sys.argv and
    the patched Spark entry points are process-wide."""
    global _current
    with _lock:
        if run is not None and _current is not None:
            raise GlueError(
                f"Glue job {_current.job_name} is already running in this process",
                hint="run Glue scripts one after another (or in separate `shoal glue run` processes)",
            )
        _current = run
