"""One CDC batch: new change files -> validated, deduplicated events -> one Iceberg commit."""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from functools import partial
from typing import Any, Literal

from pyspark import StorageLevel
from pyspark.sql import DataFrame, Observation, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema

from shoal.cdc import formats, ledger, rowdelta, tombstones
from shoal.cdc.batch import ACTION_COL, APPLIED_ACTIONS, TARGET_PREFIX, classify, latest_events
from shoal.cdc.schema import cast_checked, declared_types, infer_types, quote
from shoal.cdc.source import (
    ERROR_COL,
    FILE_COL,
    LINE_COL,
    ORDER_COL,
    RAW_COL,
    ChangeFile,
    CsvLayout,
    discover,
    output_schema,
)
from shoal.config import Settings
from shoal.exceptions import BadChangeRowError, ShoalError, SourceError, literal
from shoal.lake import commit_with_properties, current_snapshot, empty_commit, set_properties, table_exists, tasks
from shoal.lake.locks import table_lock
from shoal.lake.partitioning import partition_sql
from shoal.lake.tables import TableName, require_table, table_properties
from shoal.progress import Say, spark_tasks

REJECTS_SUFFIX = "__rejects"
TOMBSTONES_SUFFIX = "__cdc_tombstones"
WriteMode = Literal["merge-on-read", "copy-on-write"]
# The comparison narrows the table to the batch's keys only for tables at least this many
# times larger than the batch (see _Batch._narrow).
NARROW_MIN_RATIO = 10
# What opening one change file costs a parse task on top of its bytes (the reader's start-up).
FILE_COST_BYTES = 256 << 10


def _row_level_modes(mode: WriteMode) -> dict[str, str]:
    """The table properties that make DELETE, UPDATE and MERGE use `mode`."""
    return {"write.delete.mode": mode, "write.update.mode": mode, "write.merge.mode": mode}


def _props_sql(props: dict[str, str]) -> str:
    return ", ".join(f"'{k}' = '{v}'" for k, v in props.items())


@dataclass
class ApplyOptions:
    table: str
    keys: list[str]
    sequence: str
    partition_by: str | None = None
    # None: from `[cdc]` in the settings, resolved in one place (apply_changes).
    op_column: str | None = None
    header: bool = True
    columns: list[str] | None = None
    on_error: Literal["fail", "quarantine"] | None = None
    write_mode: WriteMode | None = None
    delimiter: str = ","
    # Take files rewritten under a name already applied, as new changes (else reported, skipped).
    reapply: bool = False
    # dms-csv, dms-parquet, debezium-json or debezium-avro (shoal.cdc.formats); None: by
    # each file's name ending.
    format: str | None = None
    # Declared column types that override inference and the files' own schema: a mapping
    # column -> Spark SQL type, or a file / existing table to take them from (see
    # shoal.cdc.schema.declared_types).
    schema: str | dict[str, str] | None = None

    def resolved(self, settings: Settings) -> ApplyOptions:
        """These options with every unset choice taken from `[cdc]`."""
        return replace(
            self,
            op_column=self.op_column or settings.cdc.op_column,
            on_error=self.on_error or settings.cdc.on_error,
        )


@dataclass
class ApplyResult:
    table: str
    files_applied: list[str] = field(default_factory=list)
    rows_read: int = 0
    inserted: int = 0
    updated: int = 0
    deleted: int = 0
    ignored_stale: int = 0
    deletes_of_missing_keys: int = 0
    duplicates_collapsed: int = 0
    rejected: int = 0
    columns_added: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    table_created: bool = False
    snapshot_id: int | None = None
    committed: bool = False
    seconds: float = 0.0
    # Files rewritten after they were applied: skipped (reported in warnings) or, with
    # reapply, applied again and listed in files_applied too.
    files_rewritten: list[str] = field(default_factory=list)
    files_reapplied: list[str] = field(default_factory=list)
    tombstones_pruned: int = 0
    # Kafka tombstone records (null values after a Debezium delete): nothing to apply.
    tombstone_records_skipped: int = 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def apply_changes(
    spark: SparkSession, settings: Settings, source: str, options: ApplyOptions, say: Say | None = None
) -> ApplyResult:
    """Apply the change files under `source` not yet applied to `options.table`; `say` hears the
    steps (`shoal.progress.Say`, the library's one progress callback)."""
    say = say or (lambda _msg: None)
    table = TableName.parse(options.table)
    options = options.resolved(settings)
    _validate_options(options)
    with table_lock(settings, str(table)):
        return _Batch(spark, settings, source, table, options, say).run()


def _validate_options(options: ApplyOptions) -> None:
    # Options are named `{field}` in messages: each face re-words them (ShoalError.in_terms_of).
    if not options.keys or any(not k.strip() for k in options.keys):
        raise ShoalError("the key needs at least one column name", hint="give {keys} COL[,COL...]", options=True)
    if not options.header and not options.columns:
        raise ShoalError(
            "files without a header need the data column names in file order",
            hint="give {columns} a,b,c",
            options=True,
        )
    if options.format is not None:
        formats.get(options.format)  # an unknown name is a clear error before any work
    if options.on_error not in ("fail", "quarantine"):
        raise ShoalError(
            f"{{on_error}} must be fail or quarantine, not {literal(repr(options.on_error))}", options=True
        )


class _Batch:
    def __init__(
        self,
        spark: SparkSession,
        settings: Settings,
        source: str,
        table: TableName,
        options: ApplyOptions,
        say: Say,
    ) -> None:
        self.spark, self.settings, self.source, self.table, self.opt, self.say = (
            spark,
            settings,
            source,
            table,
            options,
            say,
        )
        self.t0 = time.monotonic()
        self.batch_id = uuid.uuid4().hex
        self.result = ApplyResult(table=str(table))
        assert options.op_column is not None  # resolved from [cdc] by apply_changes
        self.layout = CsvLayout(
            op_column=options.op_column,
            header=options.header,
            columns=tuple(c.strip() for c in options.columns) if options.columns else None,
            delimiter=options.delimiter,
        )
        self._cached: list[DataFrame] = []
        self._listing = ledger.Check([], [])
        # Set when the batch commits as a row-delta: the snapshot the classification read.
        self._base_snapshot: int | None = None
        self._carried: list[str] = []
        # On the row-delta path: the read snapshot's data files (path -> spec id, partition)
        # and each path's 64-bit hash (None: carry the paths themselves).
        self._data_files: dict[str, tuple[int, Any]] = {}
        self._file_ids: dict[int, str] | None = None
        # The sequence column: as given, or (empty) the one the files' format carries.
        self.sequence = options.sequence
        self._file_types: dict[str, str] = {}
        self._declared: dict[str, str] = {}

    # ---- the batch, step by step ---------------------------------------------------
    def run(self) -> ApplyResult:
        try:
            with spark_tasks(self.spark, self.say, "applying"):  # a bar over the batch's Spark tasks
                return self._run()
        finally:
            for df in self._cached:
                df.unpersist()

    def _run(self) -> ApplyResult:
        exists = table_exists(self.spark, self.table)
        applied = ledger.current(self.spark, self.table) if exists else ledger.Ledger()
        files = self._new_files(applied)
        if not files:
            self.say("no new change files")
            self.result.snapshot_id = current_snapshot(self.spark, self.table)[0] if exists else None
            return self._finish()
        self.say(f"{len(files)} new change file(s)")
        self.result.files_applied = [f.name for f in files]

        table_cols = self._table_columns() if exists else {}
        if self.opt.schema:
            self._declared = {k.lower(): v for k, v in declared_types(self.spark, self.opt.schema).items()}
        if exists:
            self._check_existing(table_cols)
        headers, columns = self._columns(files, table_cols)
        if not columns:  # only empty files: nothing to merge, but they count as applied
            if not exists:
                raise SourceError(
                    f"the new change files are empty ({', '.join(self.result.files_applied)})",
                    hint="the first batch creates the table from its rows",
                )
            props = self._commit_properties(applied, files)
            name = self.table.qualified(self.settings.catalog.name)
            self.result.snapshot_id, self.result.committed = empty_commit(self.spark, name, props), True
            return self._finish()
        self.say("reading change files")
        parsed = self._parse(files, headers, columns, raw=False)
        if any(c not in table_cols for c in columns):
            parsed = self._cache(parsed)  # read twice: type inference, then typing
        self.say("validating, deduplicating and comparing with the table")
        types = self._types(parsed, columns, table_cols)
        typed = self._check(cast_checked(parsed, types, ERROR_COL))
        # One pass does it all: rows are counted on the way (observe) while the good ones
        # flow on to deduplication and the comparison with the table, which is cached for
        # the MERGE. Bad rows are read again only when there are some.
        observation = Observation("shoal_cdc_rows")
        observed = typed.observe(observation, F.count(F.lit(1)).alias("rows"), F.count(ERROR_COL).alias("bad"))
        # The change file's name is needed only for bad rows (re-read below): not shuffled.
        good = observed.where(F.col(ERROR_COL).isNull()).drop(RAW_COL, ERROR_COL, FILE_COL)
        keys = [self._name(k, columns) for k in self.opt.keys]
        seq = self._name(self.sequence, columns)
        latest = latest_events(good, keys, seq)
        target = self._target(keys, seq, columns, table_cols) if exists else None
        tomb = self.table.sibling(TOMBSTONES_SUFFIX)
        tombstones = self.spark.table(tomb.sql) if exists and table_exists(self.spark, tomb) else None
        n_keys: int | None = None
        if target is not None:
            latest, target, tombstones, n_keys = self._narrow(latest, target, tombstones, keys)
        # Spark's hash join does not spill: only for batches whose keys were counted and are
        # no more than `[cdc] broadcast_keys` (the driver holds that many for narrowing too).
        hash_join = n_keys is not None and n_keys <= self.settings.cdc.broadcast_keys
        classified = self._cache(
            classify(latest, target, keys, seq, tombstones, carry=self._carried, hash_join=hash_join)
        )
        counts = {r[ACTION_COL]: int(r["count"]) for r in classified.groupBy(ACTION_COL).count().collect()}
        if latest.is_cached:
            latest.unpersist()  # classified holds all it is needed for
        totals = observation.get
        if "rows" not in totals:
            # Spark reports no metrics when the observed plan ran only inside a cache's build
            # (seen when every type was declared, so no inference pass ran): count directly.
            counted = typed.agg(F.count(F.lit(1)).alias("rows"), F.count(ERROR_COL).alias("bad")).first()
            totals = counted.asDict() if counted is not None else {"rows": 0, "bad": 0}
        self.result.rows_read, n_bad = int(totals["rows"]), int(totals["bad"])
        parsed.unpersist()
        # Bad rows are parsed again, with their raw text (the pass above left it out).
        bad = self._check(cast_checked(self._parse(files, headers, columns, raw=True), types, ERROR_COL)).where(
            F.col(ERROR_COL).isNotNull()
        )
        if n_bad and self.opt.on_error == "fail":
            first = bad.orderBy(ORDER_COL, LINE_COL).select(FILE_COL, LINE_COL, ERROR_COL).first()
            assert first is not None  # n_bad > 0
            more = f" ({n_bad} bad rows in this batch; nothing was applied)" if n_bad > 1 else " (nothing was applied)"
            raise BadChangeRowError(first[FILE_COL], int(first[LINE_COL]), first[ERROR_COL] + more)
        self._count(counts, n_good=self.result.rows_read - n_bad, n_bad=n_bad)

        if not exists:
            self._create_table(columns, types, keys, seq)
        else:
            self._evolve(columns, types, table_cols)
        if n_bad:
            self._quarantine(bad, files)
        if self.result.deleted or self.result.deletes_of_missing_keys:
            self.say("recording deleted keys")
            self._record_deletes(classified, keys, seq, types)

        props = self._commit_properties(applied, files)
        self.say("merging into the table")
        self._merge(classified, columns, keys, props)
        self._prune_tombstones()
        return self._finish()

    # ---- steps ---------------------------------------------------------------------
    def _new_files(self, applied: ledger.Ledger) -> list[ChangeFile]:
        """Files not applied yet; rewritten ones are reported, and taken with `reapply`."""
        self._listing = applied.check(discover(self.source, formats.suffixes(self.opt.format)))
        rewritten = [r.file for r in self._listing.rewritten]
        self.result.files_rewritten = [f.name for f in rewritten]
        if self.opt.reapply:
            self.result.files_reapplied = self.result.files_rewritten
            return sorted([*self._listing.new, *rewritten], key=lambda f: f.sort_key)
        self.result.warnings.extend(r.message() for r in self._listing.rewritten)
        return self._listing.new

    def _commit_properties(self, applied: ledger.Ledger, files: list[ChangeFile]) -> dict[str, str]:
        """Writes the new ledger head; returns the summary properties the commit must carry."""
        now = datetime.now(UTC).isoformat()
        added = {f.name: ledger.entry_meta(f, self.batch_id, now) for f in files}
        verified = self._listing.verified(set(added))
        stats = ("rows_read", "inserted", "updated", "deleted", "ignored_stale", "rejected")
        return {
            ledger.SUMMARY_KEY: ledger.write(self.settings, self.table, applied, added, self.batch_id, verified),
            "shoal.cdc.batch-id": self.batch_id,
            "shoal.cdc.files": json.dumps(self.result.files_applied),
            "shoal.cdc.stats": json.dumps({k: getattr(self.result, k) for k in stats}),
        }

    def _target(self, keys: list[str], seq: str, columns: list[str], table_cols: dict[str, str]) -> DataFrame:
        """The table as the classification joins it.

        On the row-delta path (see shoal.cdc.rowdelta) it is pinned to one snapshot and
        brings each row's position (`_file`, `_pos`) plus the columns this batch lacks, so
        the commit needs no second join with the table.
        """
        props = table_properties(self.spark, self.table)
        if self.opt.write_mode:
            props.update(_row_level_modes(self.opt.write_mode))
        jtable = rowdelta.iceberg_table(self.spark, self.table.qualified(self.settings.catalog.name))
        rowdelta.drop_stale_branches(jtable)  # left by a batch killed mid-commit
        snapshot = jtable.currentSnapshot()
        if snapshot is None or not rowdelta.supported(self.spark, props):
            return self.spark.table(self.table.sql)
        self._base_snapshot = int(snapshot.snapshotId())
        kept = [c for c in table_cols if c not in columns]
        # Each row's data file travels through the comparison's shuffle as a 64-bit hash of
        # its path (8 bytes instead of a path of ~150: the path was most of the shuffled
        # bytes); the commit maps the hashes of the deleted rows back to the snapshot's paths.
        # If two of the snapshot's files share a hash (never seen: ~n^2/2^65), the path is
        # carried as before.
        self._data_files = rowdelta.data_files(jtable, self._base_snapshot)
        self._file_ids = rowdelta.file_ids(self.spark, self._data_files)
        position = rowdelta.FILE_ID_COL if self._file_ids is not None else "_file"
        self._carried = [*kept, position, "_pos"]
        pinned = f"{self.table.sql} VERSION AS OF {self._base_snapshot}"
        # The pinned snapshot reads with its own schema: a column the table lacks there (the
        # sequence column a Debezium batch brings to a table loaded otherwise, or one added
        # since by ALTER TABLE) is null, as the table's rows are.
        present = {c.lower() for c in self.spark.sql(f"SELECT * FROM {pinned}").columns}
        wanted = ", ".join(
            quote(c) if c.lower() in present else f"NULL AS {quote(c)}" for c in dict.fromkeys([*keys, seq, *kept])
        )
        file_col = f"xxhash64(_file) AS {rowdelta.FILE_ID_COL}" if self._file_ids is not None else "_file"
        return self.spark.sql(f"SELECT {wanted}, {file_col}, _pos FROM {pinned}")

    def _narrow(
        self, latest: DataFrame, target: DataFrame, tombstones: DataFrame | None, keys: list[str]
    ) -> tuple[DataFrame, DataFrame, DataFrame | None, int | None]:
        """The table (and tombstones) cut to the rows whose key is in the batch, and the
        batch's key count (None: not counted).

        Left as they are, the comparison shuffles every table row to meet the batch's; a
        left-semi join with the batch's keys broadcast drops the others where they are
        read. The batch is cached (and so parsed once) to count its keys. Above `[cdc]
        broadcast_keys` the driver would have to hold too many, and when the table is not
        much larger than the batch the extra pass costs what it saves (measured: a 1M-row
        table and 200k keys broke even, 10k keys halved the join): then the whole table is
        shuffled as before. The result is the same either way.
        """
        limit = self.settings.cdc.broadcast_keys
        if limit == 0:
            return latest, target, tombstones, None
        latest = self._cache(latest)
        n = latest.count()  # one row per key: latest_events kept one event per key
        table_rows = self._table_rows()
        if n > limit or (table_rows is not None and table_rows < NARROW_MIN_RATIO * n):
            return latest, target, tombstones, n
        batch_keys = F.broadcast(latest.select(*[quote(k) for k in keys]))

        def semi(df: DataFrame) -> DataFrame:
            return df.join(batch_keys, on=keys, how="left_semi")

        return latest, semi(target), semi(tombstones) if tombstones is not None else None, n

    def _table_rows(self) -> int | None:
        """Rows in the table's current snapshot, from its summary (None: not recorded)."""
        _, summary = current_snapshot(self.spark, self.table)
        try:
            return int(summary["total-records"])
        except (KeyError, TypeError, ValueError):
            return None

    def _table_columns(self) -> dict[str, str]:
        """name -> Spark SQL type of the existing table."""
        schema = self.spark.table(self.table.sql).schema
        return {f.name: f.dataType.simpleString() for f in schema.fields}

    def _check_existing(self, table_cols: dict[str, str]) -> None:
        """Options that only shape a new table are reported, not silently dropped."""
        props = table_properties(self.spark, self.table)
        if self.opt.partition_by:
            current = [
                r.data_type
                for r in self.spark.sql(f"DESCRIBE TABLE {self.table.sql}").collect()
                if r.col_name.startswith("Part ")
            ]
            wanted = partition_sql(self.opt.partition_by, list(table_cols)).replace("`", "")
            if wanted.lower() != ", ".join(current).lower():
                self.result.warnings.append(
                    f"--partition-by is ignored: the table exists, partitioned by ({', '.join(current)}); "
                    f"evolve its spec with ALTER TABLE {self.table} ADD/DROP PARTITION FIELD ..."
                )
        recorded = props.get("shoal.cdc.keys")
        if recorded and [k.lower() for k in recorded.split(",")] != [k.lower() for k in self.opt.keys]:
            self.result.warnings.append(
                f"--key {','.join(self.opt.keys)} differs from the keys the table was created with ({recorded})"
            )

    def _columns(self, files: list[ChangeFile], table_cols: dict[str, str]) -> tuple[dict[str, str], list[str]]:
        """What the parser needs per file (its format and header, as JSON), and the batch's
        data columns (table spelling where known). Types the files declare are kept."""
        canonical = {c.lower(): c for c in table_cols}
        headers: dict[str, str] = {}
        columns: list[str] = []
        sequences: set[str | None] = set()
        for f in files:
            fmt_name = formats.format_of(f.name, self.opt.format)
            fmt = formats.get(fmt_name)
            sequences.add(fmt.sequence_column)
            found = fmt.read_columns(f, self.layout)
            self.result.tombstone_records_skipped += found.tombstones
            if found.header or found.error:
                headers[f.name] = json.dumps({"format": fmt_name, "header": found.header})
            for c in found.columns:
                name = canonical.setdefault(c.lower(), c)
                if name not in columns:
                    columns.append(name)
                if c in found.types:
                    self._file_types[name] = found.types[c]
        if not self.sequence:
            # Debezium events carry their own order: the sequence column is the format's.
            own = sequences - {None}
            if len(own) != 1 or None in sequences:
                raise ShoalError("the sequence column is not known", hint="give {sequence} COL", options=True)
            self.sequence = str(next(iter(own)))
        if not columns:
            return headers, columns
        lower = {c.lower() for c in columns} | set(canonical)
        for needed, option in [(k, "keys") for k in self.opt.keys] + [(self.sequence, "sequence")]:
            if needed.lower() not in lower:
                raise SourceError(
                    f"{{{option}}} column {literal(repr(needed))} is not in the change files "
                    f"(columns: {literal(', '.join(columns))})",
                    options=True,
                )
        # Columns the table has but these files lack stay as they are (never dropped).
        return headers, columns

    def _name(self, wanted: str, columns: list[str]) -> str:
        return next(c for c in columns if c.lower() == wanted.lower())

    def _parse(self, files: list[ChangeFile], headers: dict[str, str], columns: list[str], raw: bool) -> DataFrame:
        rows = [(f.uri, f.name, i, headers[f.name]) for i, f in enumerate(files) if f.name in headers]
        in_schema = "uri string, name string, file_order int, header string"
        # The executor-side parser defines the schema; Spark's is derived from it.
        spark_schema = from_arrow_schema(output_schema(columns))
        files_df = self.spark.createDataFrame(self._file_tasks(files, rows), in_schema)
        layout_json = json.dumps(asdict(self.layout))
        return files_df.mapInArrow(
            partial(formats.parse_files, layout_json=layout_json, columns=columns, raw=raw), spark_schema
        )

    def _file_tasks(self, files: list[ChangeFile], rows: list[tuple[str, str, int, str]]) -> Any:
        """The files to parse, spread over tasks by size without a shuffle. One task per file
        cost a backlog of small files ~0.2 s each (300 files of 5 rows: 68 s of a 72 s apply)."""
        if not rows:
            return rows
        sc = self.spark.sparkContext
        sizes = {f.name: f.size for f in files}
        task_of, count = tasks.balance([(r[2], sizes[r[1]]) for r in rows], sc.defaultParallelism, FILE_COST_BYTES)
        groups: list[list[tuple[str, str, int, str]]] = [[] for _ in range(count)]
        for r in rows:
            groups[task_of[r[2]]].append(r)
        # As many slices as groups: each task gets exactly one group.
        return sc.parallelize(groups, count).flatMap(lambda group: group)

    def _types(self, parsed: DataFrame, columns: list[str], table_cols: dict[str, str]) -> dict[str, str]:
        types = {c: table_cols[c] for c in columns if c in table_cols}
        # A new column's type: declared (--schema), else the files' own schema, else inferred.
        for c in columns:
            if c not in types:
                declared = self._declared.get(c.lower()) or self._file_types.get(c)
                if declared:
                    types[c] = declared
        new = [c for c in columns if c not in types]
        if new:
            clean = parsed.where(F.col(ERROR_COL).isNull())
            seq = self.sequence.lower()
            keys = {k.lower() for k in self.opt.keys}
            inferred = infer_types(
                clean,
                new,
                sequence=next((c for c in new if c.lower() == seq), ""),
                keys=[c for c in new if c.lower() in keys],
            )
            types.update(inferred)
        return types

    def _check(self, typed: DataFrame) -> DataFrame:
        """Keys and the sequence must be present in every row."""
        checks = [
            F.when(F.col(quote(self._name(k, typed.columns))).isNull(), F.lit(f"key column {k!r} is empty"))
            for k in self.opt.keys
        ]
        seq = self._name(self.sequence, typed.columns)
        checks.append(F.when(F.col(quote(seq)).isNull(), F.lit(f"sequence column {self.sequence!r} is empty")))
        return typed.withColumn(ERROR_COL, F.coalesce(F.col(ERROR_COL), *checks))

    def _cache(self, df: DataFrame) -> DataFrame:
        # Deserialized: building the compressed columnar cache cost ~40% more time here.
        df = df.persist(StorageLevel.MEMORY_AND_DISK_DESER)
        self._cached.append(df)
        return df

    def _count(self, counts: dict[str, int], n_good: int, n_bad: int) -> None:
        r = self.result
        r.inserted, r.updated, r.deleted = counts.get("insert", 0), counts.get("update", 0), counts.get("delete", 0)
        r.ignored_stale = counts.get("stale", 0)
        r.deletes_of_missing_keys = counts.get("missing_delete", 0)
        r.duplicates_collapsed = n_good - sum(counts.values())
        r.rejected = n_bad

    def _write_mode(self) -> WriteMode:
        return self.opt.write_mode or self.settings.cdc.write_mode

    def _create_table(self, columns: list[str], types: dict[str, str], keys: list[str], seq: str) -> None:
        self.say(f"creating table {self.table}")
        self.spark.sql(f"CREATE NAMESPACE IF NOT EXISTS `{self.table.namespace}`")
        cols = ", ".join(f"{quote(c)} {types[c]}{' NOT NULL' if c in keys else ''}" for c in columns)
        part = f"PARTITIONED BY ({partition_sql(self.opt.partition_by, columns)})" if self.opt.partition_by else ""
        mode = self._write_mode()
        props = {
            "format-version": "2",
            **_row_level_modes(mode),
            "shoal.cdc.keys": ",".join(keys),
            "shoal.cdc.sequence": seq,
        }
        self.spark.sql(
            f"CREATE TABLE {self.table.sql} ({cols}) USING iceberg {part} TBLPROPERTIES ({_props_sql(props)})"
        )
        self.spark.sql(f"ALTER TABLE {self.table.sql} SET IDENTIFIER FIELDS {', '.join(quote(k) for k in keys)}")
        self.result.table_created = True

    def _evolve(self, columns: list[str], types: dict[str, str], table_cols: dict[str, str]) -> None:
        new = [c for c in columns if c not in table_cols]
        if new:
            self.say(f"adding column(s) {', '.join(new)}")
            added = ", ".join(f"{quote(c)} {types[c]}" for c in new)
            self.spark.sql(f"ALTER TABLE {self.table.sql} ADD COLUMNS ({added})")
            self.result.columns_added = new
        if self.opt.write_mode:
            set_properties(self.spark, self.table, _row_level_modes(self.opt.write_mode))

    def _quarantine(self, bad: DataFrame, files: list[ChangeFile]) -> None:
        """Append bad rows to NS.TABLE__rejects, once per file even across crashes."""
        rejects = self.table.sibling(REJECTS_SUFFIX)
        self.spark.sql(f"CREATE NAMESPACE IF NOT EXISTS `{rejects.namespace}`")
        self.spark.sql(
            f"""CREATE TABLE IF NOT EXISTS {rejects.sql} (file string, line bigint, raw_row string,
                reason string, batch_id string, rejected_at timestamp) USING iceberg
                TBLPROPERTIES ('format-version' = '2')"""
        )
        names = [f.name for f in files]
        # A crash between this append and the MERGE re-reads the same files: skip files
        # whose rejects are already recorded.
        recorded = self.spark.table(rejects.sql).where(F.col("file").isin(names))
        # A reapplied file's rejects from its earlier version do not count.
        for r in self._listing.rewritten if self.opt.reapply else []:
            before = datetime.fromisoformat(r.applied["applied_at"])
            recorded = recorded.where((F.col("file") != r.file.name) | (F.col("rejected_at") > F.lit(before)))
        done = {r.file for r in recorded.select("file").distinct().collect()}
        rows = bad.where(~F.col(FILE_COL).isin(list(done))) if done else bad
        rows.select(
            F.col(FILE_COL).alias("file"),
            F.col(LINE_COL).alias("line"),
            F.col(RAW_COL).alias("raw_row"),
            F.col(ERROR_COL).alias("reason"),
            F.lit(self.batch_id).alias("batch_id"),
            F.current_timestamp().alias("rejected_at"),
        ).orderBy("file", "line").writeTo(rejects.sql).append()

    def _record_deletes(self, classified: DataFrame, keys: list[str], seq: str, types: dict[str, str]) -> None:
        """Keep each deleted key's delete sequence in NS.TABLE__cdc_tombstones.

        Written before the table's commit and idempotent (the newest sequence wins), so a
        crash between the two is repaired by the re-run.
        """
        tomb = self.table.sibling(TOMBSTONES_SUFFIX)
        cols = [*keys, seq]
        ddl = ", ".join(f"{quote(c)} {types[c]}" for c in cols)
        at = tombstones.RECORDED_COL  # when the delete was applied: the age retention prunes by
        self.spark.sql(
            f"""CREATE TABLE IF NOT EXISTS {tomb.sql} ({ddl}, batch_id string, {at} timestamp) USING iceberg
                TBLPROPERTIES ({_props_sql({"format-version": "2", **_row_level_modes("merge-on-read")})})"""
        )
        tombstones.add_recorded_at(self.spark, tomb)
        view = f"shoal_cdc_deletes_{self.batch_id}"
        classified.where(F.col(ACTION_COL).isin("delete", "missing_delete")).select(
            *[quote(c) for c in cols], F.lit(self.batch_id).alias("batch_id"), F.current_timestamp().alias(at)
        ).createOrReplaceTempView(view)
        on = " AND ".join(f"t.{quote(k)} = s.{quote(k)}" for k in keys)
        names = ", ".join(quote(c) for c in [*cols, "batch_id", at])
        values = ", ".join(f"s.{quote(c)}" for c in [*cols, "batch_id", at])
        try:
            self.spark.sql(
                f"""MERGE INTO {tomb.sql} t USING {view} s ON {on}
                    WHEN MATCHED AND s.{quote(seq)} > t.{quote(seq)}
                      THEN UPDATE SET t.{quote(seq)} = s.{quote(seq)}, t.batch_id = s.batch_id, t.{at} = s.{at}
                    WHEN NOT MATCHED THEN INSERT ({names}) VALUES ({values})"""
            ).collect()
        finally:
            self.spark.catalog.dropTempView(view)

    def _merge(self, classified: DataFrame, columns: list[str], keys: list[str], props: dict[str, str]) -> None:
        r = self.result
        if r.inserted and not (r.updated or r.deleted):
            # Only new keys: an append is the whole change, no join with the table needed.
            rows = self._new_rows(classified, columns)
            commit_with_properties(self.spark, props, lambda: rows.writeTo(self.table.sql).append())
        elif (r.updated or r.deleted) and self._base_snapshot is not None:
            touched = classified.where(F.col(ACTION_COL).isin("update", "delete"))
            pos = F.col(TARGET_PREFIX + "_pos").alias("pos")
            if self._file_ids is None:
                deletes = touched.select(F.col(TARGET_PREFIX + "_file").alias("file_path"), pos)
            else:
                by_id = touched.select(F.col(TARGET_PREFIX + rowdelta.FILE_ID_COL).alias(rowdelta.FILE_ID_COL), pos)
                deletes = rowdelta.with_paths(self.spark, by_id, self._file_ids)
            rowdelta.commit(
                self.spark,
                self.table,
                self.settings.catalog.name,
                self._base_snapshot,
                self._new_rows(classified, columns) if r.inserted or r.updated else None,
                deletes,
                props,
                self.batch_id,
                self.say,
                data_files=self._data_files,
            )
        elif r.updated or r.deleted:
            view = f"shoal_cdc_{self.batch_id}"
            classified.where(F.col(ACTION_COL).isin(*APPLIED_ACTIONS)).select(
                *[quote(c) for c in columns], ACTION_COL
            ).createOrReplaceTempView(view)
            on = " AND ".join(f"t.{quote(k)} = s.{quote(k)}" for k in keys)
            sets = ", ".join(f"t.{quote(c)} = s.{quote(c)}" for c in columns)
            names = ", ".join(quote(c) for c in columns)
            values = ", ".join(f"s.{quote(c)}" for c in columns)
            sql = f"""MERGE INTO {self.table.sql} t USING {view} s ON {on}
                WHEN MATCHED AND s.{ACTION_COL} = 'delete' THEN DELETE
                WHEN MATCHED AND s.{ACTION_COL} = 'update' THEN UPDATE SET {sets}
                WHEN NOT MATCHED AND s.{ACTION_COL} = 'insert' THEN INSERT ({names}) VALUES ({values})"""
            try:
                commit_with_properties(self.spark, props, lambda: self.spark.sql(sql).collect())
            finally:
                self.spark.catalog.dropTempView(view)
        snapshot_id, summary = current_snapshot(self.spark, self.table)
        if summary.get("shoal.cdc.batch-id") != self.batch_id:
            # Nothing to change (all stale, rejected or no-op deletes): still record the
            # files as applied, in a snapshot of their own.
            snapshot_id = empty_commit(self.spark, self.table.qualified(self.settings.catalog.name), props)
        self.result.snapshot_id = snapshot_id
        self.result.committed = True

    def _prune_tombstones(self) -> None:
        """After the commit: a failure here leaves the batch applied, so it is a warning."""
        tomb = self.table.sibling(TOMBSTONES_SUFFIX)
        try:
            self.result.tombstones_pruned = tombstones.prune(self.spark, tomb, self.settings.cdc.tombstone_horizon)
        except Exception as exc:  # noqa: BLE001 - the batch is committed whatever happens here
            self.result.warnings.append(f"pruning {tomb} failed (the batch is applied; the next one retries): {exc}")

    def _new_rows(self, classified: DataFrame, columns: list[str]) -> DataFrame:
        """Inserted and updated rows in the table's columns; those the batch lacks keep the
        table row's value (carried by the classification) or are null for new keys."""
        types = self._table_columns()

        def column(c: str) -> Any:
            if c in columns:
                return F.col(quote(c))
            if c in self._carried:
                return F.col(quote(TARGET_PREFIX + c))
            return F.lit(None).cast(types[c])

        return classified.where(F.col(ACTION_COL).isin("insert", "update")).select(*[column(c).alias(c) for c in types])

    def _finish(self) -> ApplyResult:
        self.result.seconds = round(time.monotonic() - self.t0, 3)
        return self.result


def file_status(spark: SparkSession, settings: Settings, table: str, source: str | None = None) -> dict[str, Any]:
    """Change files applied to `table` (from its ledger) and, given a source, those pending."""
    name = TableName.parse(table)
    require_table(spark, name)
    state = ledger.current(spark, name)
    out: dict[str, Any] = {
        "table": str(name),
        "applied": [{"file": f, **meta} for f, meta in sorted(state.all_entries().items())],
    }
    if source is not None:
        check = state.check(discover(source, formats.suffixes(None)))
        out["pending"] = [f.name for f in check.new]
        out["rewritten"] = [r.file.name for r in check.rewritten]
    return out
