"""`shoal.Lake`: the lake from Python, over the same library calls the `shoal` commands make.

Nothing here starts Spark until a method needs it: opening a lake reads settings only.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from shoal.api.result import Result
from shoal.config import Settings, load_settings
from shoal.exceptions import ConfigError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from shoal.cdc import ApplyResult
    from shoal.extract import ExtractResult
    from shoal.governance import Principal
    from shoal.ingest import IngestResult
    from shoal.search.index import IndexResult
    from shoal.search.query import Hit
    from shoal.workflows import ExecutionRecord, StateMachine

Say = Callable[[str], None]


def _quiet(_message: str) -> None:
    """The default progress callback: say nothing (pass `print` to follow long runs)."""


class Lake:
    """One Shoal workspace: its catalog, warehouse, raw zone, governance and search index.

    Open it with `Lake.open(...)`; the SparkSession starts on first use and is this process's
    one session (PySpark allows one per process), so a process works on one lake at a time.
    """

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.cdc = Cdc(self)
        self.workflow = Workflows(self)

    @classmethod
    def open(cls, config: str | Path | None = None, *, workspace: str | Path | None = None, **overrides: Any) -> Lake:
        """Settings as `shoal` reads them: `config` (a shoal.toml), else $SHOAL_CONFIG or ./shoal.toml,
        then SHOAL_* variables; `workspace` and keyword overrides (`spark={"master": "local[2]"}`,
        one dict per section) win over both. Relative paths count from the current folder."""
        if workspace is not None:
            overrides["workspace"] = Path(workspace)
        return cls(load_settings(config, **overrides))

    def __repr__(self) -> str:
        return f"<shoal.Lake {self.settings.workspace_dir}>"

    def __enter__(self) -> Lake:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    # ---- Spark ------------------------------------------------------------------------------
    @property
    def spark(self) -> SparkSession:
        """The SparkSession on this lake's catalog (started on first use)."""
        from shoal.spark import catalog_conf, get_spark

        spark = get_spark(self.settings)
        key = f"spark.sql.catalog.{self.settings.catalog.name}.warehouse"
        want = catalog_conf(self.settings)[key]
        have = spark.conf.get(key, None)
        if have != want:
            # get_spark hands back the process's running session, which may be another lake's.
            raise ConfigError(
                f"this process's SparkSession serves another lake (warehouse {have}, not {want})",
                hint="close the other Lake first (lake.close()), or use one process per lake",
            )
        return spark

    def close(self) -> None:
        """Stop the SparkSession (if one runs); the lake's files stay as they are."""
        from shoal.spark import stop_spark

        stop_spark()

    # ---- SQL --------------------------------------------------------------------------------
    def sql(
        self,
        query: str,
        *,
        principal: str | Principal | None = None,
        limit: int | None = None,
        dialect: Literal["spark", "athena", "trino", "presto", "hive"] = "spark",
        database: str | None = None,
    ) -> Result:
        """Run SQL (one or more statements; the last one's rows come back) as `shoal sql` does.

        With `principal` (a name or a Principal) the query is governed exactly as `shoal sql --as`,
        the console and the PostgreSQL endpoint govern it: only granted rows, columns and masked
        cells, refused statements raise AccessDenied, and every statement is audited.
        """
        from shoal.governance.query import run_sql

        spark = self.spark
        result = run_sql(
            spark, self.settings, query, principal=principal, dialect=dialect, database=database, limit=limit
        )
        return Result(result, spark)

    def list_tables(
        self, namespace: str | None = None, *, principal: str | Principal | None = None
    ) -> list[dict[str, str]]:
        """[{namespace, table, name}] as `shoal table list` shows them; with `principal`, only the
        tables it may discover (the rule the SQL endpoints and the REST catalog apply)."""
        from shoal.governance.catalog import list_tables

        return list_tables(self.spark, self.settings, namespace, principal=principal)

    def table(self, name: str) -> DataFrame:
        """A lake table as a Spark DataFrame, ungoverned (the operator's view): NS.TABLE."""
        from shoal.lake import TableName

        return self.spark.table(TableName.parse(name).qualified(self.settings.catalog.name))

    # ---- unstructured data ------------------------------------------------------------------
    def ingest(
        self,
        source: str | Path,
        *,
        source_name: str | None = None,
        tags: dict[str, str] | None = None,
        say: Say = _quiet,
    ) -> IngestResult:
        """Copy a folder's files into the raw zone and register them as objects (`shoal ingest`)."""
        from shoal.ingest import ingest

        return ingest(self.spark, self.settings, str(source), source_name=source_name, tags=tags, say=say)

    def extract(
        self,
        *,
        force: bool = False,
        retry_errors: bool = False,
        only: Sequence[str] | None = None,
        say: Say = _quiet,
    ) -> ExtractResult:
        """Extract pending objects on Spark (`shoal extract`); rows land in shoal.text, shoal.pii, ..."""
        from shoal.extract import run_extract

        return run_extract(
            self.spark,
            self.settings,
            force=force,
            retry_errors=retry_errors,
            only=list(only) if only else None,
            say=say,
        )

    def search_index(self, *, rebuild: bool = False, say: Say = _quiet) -> IndexResult:
        """Embed new or re-extracted objects' text for search (`shoal search-index`)."""
        from shoal.search.index import SearchIndex

        s = self.settings
        return SearchIndex(s).update(
            self.spark,
            model=s.search.model,
            size=s.search.chunk_size,
            overlap=s.search.chunk_overlap,
            say=say,
            rebuild=rebuild,
        )

    def search(
        self,
        query: str,
        *,
        limit: int = 10,
        principal: str | Principal | None = None,
        media_type: str | None = None,
        lang: str | None = None,
        tags: dict[str, str] | None = None,
        mode: Literal["hybrid", "vector", "keyword"] = "hybrid",
    ) -> list[Hit]:
        """Objects ranked by meaning and words (`shoal search`); with `principal`, only those it may read."""
        from shoal.search.query import search

        who = self._principal(principal)
        return search(
            self.settings,
            query,
            k=limit,
            media_type=media_type,
            lang=lang,
            tags=tags,
            principal=who,
            spark=self.spark if who is not None else None,
            mode=mode,
        )

    def _principal(self, principal: str | Principal | None) -> Principal | None:
        if principal is None or not isinstance(principal, str):
            return principal
        from shoal.governance import Principals

        return Principals(self.settings).principal(principal)


class Cdc:
    """`lake.cdc`: change-data-capture upserts (`shoal cdc`)."""

    def __init__(self, lake: Lake) -> None:
        self._lake = lake

    def apply(
        self,
        source: str | Path,
        *,
        table: str,
        keys: Sequence[str],
        sequence: str | None = None,
        say: Say = _quiet,
        **options: Any,
    ) -> ApplyResult:
        """Apply the change files under `source` not yet applied to `table`, as one commit.

        `options` are ApplyOptions' fields, the flags of `shoal cdc apply` in Python spelling:
        partition_by, op_column, header, columns, on_error, write_mode, delimiter, reapply,
        format, schema (a dict column -> Spark SQL type, a file or NS.TABLE).
        """
        from shoal.cdc import ApplyOptions, apply_changes

        opts = ApplyOptions(table=table, keys=list(keys), sequence=sequence or "", **options)
        lake = self._lake
        return apply_changes(lake.spark, lake.settings, str(source), opts, say=say)

    def files(self, table: str, source: str | Path | None = None) -> dict[str, Any]:
        """Change files applied to `table` (and, with `source`, those still pending)."""
        from shoal.cdc import file_status

        lake = self._lake
        return file_status(lake.spark, lake.settings, table, str(source) if source is not None else None)


class Workflows:
    """`lake.workflow`: state machines run by Shoal's engine (`shoal workflow`)."""

    def __init__(self, lake: Lake) -> None:
        self._lake = lake

    def run(self, ref: str | Path, input: Any = None, *, name: str | None = None, say: Say = _quiet) -> ExecutionRecord:
        """Run a state machine (a definition file or a registered name) to its end; returns the
        execution (status, output, error). A failed execution is returned, not raised."""
        from shoal import workflows

        return workflows.run(self._lake.settings, str(ref), input, name=name, say=say)

    def register(self, path: str | Path, *, name: str | None = None) -> tuple[StateMachine, int]:
        """Validate and store a definition file; returns the machine and its version."""
        from shoal import workflows

        return workflows.register(self._lake.settings, path, name=name)

    def list(self) -> list[dict[str, Any]]:
        from shoal.workflows import Store

        return Store(self._lake.settings).list_workflows()
