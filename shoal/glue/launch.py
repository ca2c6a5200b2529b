"""Run AWS Glue PySpark scripts unchanged: `shoal glue run SCRIPT.py --JOB_NAME NAME [--KEY VALUE ...]`.

The script runs in this process, as the operator (like any Spark job Shoal runs: no
governance check applies to what it does). For the run only:
- the folder holding Shoal's `awsglue` package is first on sys.path (and any `awsglue`
  already imported is set aside), so `from awsglue.context import GlueContext` works;
- `SparkContext()`, `SparkContext.getOrCreate()` and `SparkSession.builder.getOrCreate()`
  hand back Shoal's session, taking the settings the script passes (runtime.adopt_conf);
- sys.argv is what Glue passes: the script path, then the job arguments.
Everything is put back afterwards, also when the script fails.
"""

from __future__ import annotations

import contextlib
import os
import runpy
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from shoal.config import Settings
from shoal.exceptions import ShoalError, first_line
from shoal.glue import bookmarks, runs
from shoal.glue.runtime import DEFAULT_CATALOG_ALIASES, GlueError, GlueRun, activate
from shoal.private import scratch_dir

if TYPE_CHECKING:
    from pyspark import SparkConf, SparkContext
    from pyspark.sql import SparkSession

COMPAT_DIR = str(Path(__file__).parent / "compat")

__all__ = ["GlueError", "GlueRun", "run_defined_job", "run_script", "split_conf"]


def split_conf(values: list[str]) -> list[tuple[str, str]]:
    """`--conf` values as (key, value). Glue jobs chain several in one value:
    'k1=v1 --conf k2=v2' (the only way the console lets one set more than one)."""
    out = []
    for value in values:
        for part in value.split("--conf"):
            part = part.strip()
            if not part:
                continue
            key, sep, val = part.partition("=")
            if not sep or not key.strip():
                raise GlueError(f"--conf {part!r} is not KEY=VALUE", hint="e.g. --conf spark.sql.catalog.x=...")
            out.append((key.strip(), val.strip()))
    return out


def run_script(
    settings: Settings,
    script: str,
    job_name: str,
    args: list[str] | None = None,
    *,
    bookmark_option: str = bookmarks.DISABLE,
    conf: list[tuple[str, str]] | None = None,
    say: Callable[[str], None] = lambda _m: None,
) -> dict[str, Any]:
    """Run a Glue script to its end; returns the run's summary. A failing script raises GlueError
    naming the line of the script where it failed (its bookmarks stay where they were)."""
    from shoal.spark import get_spark

    path = Path(script).expanduser()
    if not path.is_file():
        raise GlueError(f"script {script} does not exist", hint="pass the path of a Glue PySpark script (.py)")
    if not job_name:
        raise GlueError("--JOB_NAME is empty", hint="name the job: its bookmarks are kept under that name")
    if bookmark_option not in bookmarks.OPTIONS:
        raise GlueError(f"--job-bookmark-option {bookmark_option!r}", hint="one of " + ", ".join(bookmarks.OPTIONS))
    spark = get_spark(settings)
    run = GlueRun(settings, spark, job_name, bookmark_option)
    argv = [
        str(path),
        "--JOB_NAME",
        job_name,
        "--JOB_ID",
        f"j_{job_name}",
        "--JOB_RUN_ID",
        run.run_id,
        "--job-bookmark-option",
        bookmark_option,
        *(args or []),
    ]
    started = time.monotonic()
    say(f"running {path.name} as {job_name} ({run.run_id}, {bookmark_option})")
    runs.started(settings, run.run_id, job_name, str(path.resolve()), bookmark_option)
    try:
        with _script_environment(run, argv, conf or []):
            _execute(path, run)
    except BaseException as exc:
        error = str(exc).splitlines()[0] if isinstance(exc, GlueError) else type(exc).__name__
        runs.finished(settings, run.run_id, runs.FAILED, _since(started), error=error, summary=run.summary())
        raise
    summary = {"script": str(path), "status": runs.SUCCEEDED, **run.summary(), "duration_s": _since(started)}
    runs.finished(settings, run.run_id, runs.SUCCEEDED, summary["duration_s"], summary=summary)
    return summary


def run_defined_job(
    settings: Settings,
    job_name: str,
    script: str,
    default_arguments: dict[str, str],
    arguments: dict[str, str] | None = None,
    *,
    say: Callable[[str], None] = lambda _m: None,
) -> dict[str, Any]:
    """Run a registered Glue job as `StartJobRun` does: the run's `Arguments` override the job's
    `DefaultArguments`; `--job-bookmark-option` and `--conf` are taken as Glue takes them, the
    rest reach the script. A script at an s3:// location is read from the store for the run."""
    merged = {**default_arguments, **(arguments or {})}
    for key in merged:
        if not key.startswith("--"):
            raise GlueError(f"job {job_name}: argument {key!r} does not start with --", hint="name it --" + key)
    bookmark_option = merged.pop("--job-bookmark-option", bookmarks.DISABLE)
    conf = split_conf([merged.pop("--conf")]) if "--conf" in merged else []
    merged.pop("--JOB_NAME", None)  # the job's name is the job's
    argv = [part for key, value in merged.items() for part in (key, str(value))]
    if "://" not in script:
        return run_script(settings, script, job_name, argv, bookmark_option=bookmark_option, conf=conf, say=say)
    from shoal import storage

    try:
        text = storage.read_bytes(script)
    except (OSError, ShoalError) as exc:
        raise GlueError(
            f"job {job_name}: cannot read its script {script}: {first_line(exc)}",
            hint="point Command.ScriptLocation at the script and register the job again",
        ) from exc
    # The script is the customer's code: a private folder in the workspace, not the shared /tmp.
    with tempfile.TemporaryDirectory(prefix="shoal-glue-", dir=scratch_dir(settings, "glue")) as folder:
        local = Path(folder) / Path(script.rstrip("/")).name
        local.write_bytes(text)
        return run_script(settings, str(local), job_name, argv, bookmark_option=bookmark_option, conf=conf, say=say)


def _since(started: float) -> float:
    return round(time.monotonic() - started, 3)


def _execute(path: Path, run: GlueRun) -> None:
    """Run the script as __main__; its failures become GlueError naming the script's line."""

    def hint() -> str:  # asked when the script has failed: it may have committed before
        if run.committed:
            return "the job had committed its bookmarks before it failed"
        return "the job's bookmarks were not advanced; fix the script or its input and run it again"

    try:
        runpy.run_path(str(path), run_name="__main__")
    except SystemExit as exc:
        if exc.code not in (None, 0):
            raise GlueError(f"{path.name} exited with status {exc.code}", hint=hint()) from exc
    except GlueError as exc:
        raise GlueError(f"{_where(exc, path)}{str(exc).splitlines()[0]}", hint=exc.hint) from exc
    except Exception as exc:
        raise GlueError(f"{_where(exc, path)}{type(exc).__name__}: {first_line(exc)}", hint=hint()) from exc


def _where(exc: BaseException, path: Path) -> str:
    """'SCRIPT.py line N: ' for the deepest frame of the script in the traceback."""
    target = os.path.realpath(path)
    lines = [f.lineno for f in traceback.extract_tb(exc.__traceback__) if os.path.realpath(f.filename) == target]
    return f"{path.name} line {lines[-1]}: " if lines else f"{path.name}: "


@contextlib.contextmanager
def _script_environment(run: GlueRun, argv: list[str], conf: list[tuple[str, str]]) -> Iterator[None]:
    activate(run)  # refuses a second run in this process before anything is changed
    try:
        with _patched(run, argv):
            for name in DEFAULT_CATALOG_ALIASES:
                run.bind_catalog(name)
            run.adopt_conf(conf)
            yield
    finally:
        activate(None)


@contextlib.contextmanager
def _patched(run: GlueRun, argv: list[str]) -> Iterator[None]:
    from pyspark import context as spark_context
    from pyspark.sql import SparkSession

    saved_argv, saved_path = sys.argv, list(sys.path)
    # A real awsglue imported earlier in this process is set aside, then restored.
    saved_modules = {n: m for n, m in sys.modules.items() if n == "awsglue" or n.startswith("awsglue.")}
    for name in saved_modules:
        del sys.modules[name]
    sc_class = spark_context.SparkContext
    had_new, saved_init = "__new__" in sc_class.__dict__, sc_class.__init__
    saved_new = sc_class.__dict__.get("__new__")
    saved_get = sc_class.__dict__["getOrCreate"]
    builder_get = SparkSession.Builder.getOrCreate
    shoal_sc = run.spark.sparkContext
    baseline = dict(shoal_sc.getConf().getAll())

    def adopt(spark_conf: SparkConf | None) -> None:
        if spark_conf is not None:
            # A new SparkConf() copies the JVM's spark.* properties: only what differs is the script's.
            run.adopt_conf([(k, v) for k, v in spark_conf.getAll() if baseline.get(k) != v])

    def new(cls: type[SparkContext], *args: Any, conf: SparkConf | None = None, **kwargs: Any) -> SparkContext:
        adopt(conf if conf is not None or len(args) < 8 else args[7])  # conf is the 8th parameter
        return shoal_sc

    def init(self: SparkContext, *args: Any, **kwargs: Any) -> None:
        if self is not shoal_sc:
            saved_init(self, *args, **kwargs)

    def get_or_create(cls: type[SparkContext], conf: SparkConf | None = None) -> SparkContext:
        adopt(conf)
        return shoal_sc

    def builder_get_or_create(self: SparkSession.Builder) -> SparkSession:
        session = builder_get(self)
        run.adopt_conf(list(self._options.items()))
        return session

    sys.argv = argv
    sys.path[:0] = [COMPAT_DIR, str(Path(argv[0]).resolve().parent)]
    sc_class.__new__ = new  # type: ignore[method-assign, assignment]
    sc_class.__init__ = init  # type: ignore[method-assign]
    sc_class.getOrCreate = classmethod(get_or_create)  # type: ignore[method-assign, assignment]
    SparkSession.Builder.getOrCreate = builder_get_or_create  # type: ignore[method-assign]
    try:
        yield
    finally:
        if had_new:
            sc_class.__new__ = saved_new  # type: ignore[method-assign,assignment]
        else:
            del sc_class.__new__  # back to object.__new__ (setting it would change its checks)
        sc_class.__init__ = saved_init  # type: ignore[method-assign]
        sc_class.getOrCreate = saved_get  # type: ignore[method-assign]
        SparkSession.Builder.getOrCreate = builder_get  # type: ignore[method-assign]
        sys.argv = saved_argv
        sys.path[:] = saved_path
        for name in [n for n in sys.modules if n == "awsglue" or n.startswith("awsglue.")]:
            del sys.modules[name]
        sys.modules.update(saved_modules)
        with contextlib.suppress(Exception):  # the script may have stopped the session
            run.unbind_catalogs()
