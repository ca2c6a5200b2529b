"""`shoal glue run|bookmarks|reset-bookmark`: AWS Glue PySpark scripts on Shoal."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer

from shoal.cli import output
from shoal.cli.context import JsonOpt, out, settings
from shoal.exceptions import ShoalError

glue_app = typer.Typer(help="Run AWS Glue PySpark scripts unchanged (operator-level code).", no_args_is_help=True)


def register(app: typer.Typer) -> None:
    app.add_typer(glue_app, name="glue")


class BookmarkOption(StrEnum):
    enable = "job-bookmark-enable"
    pause = "job-bookmark-pause"
    disable = "job-bookmark-disable"


@glue_app.command(
    "run",
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
)
def run(
    ctx: typer.Context,
    script: Annotated[
        str, typer.Argument(help="The Glue PySpark script (.py), or the name of a Glue job `shoal job register` took.")
    ],
    job_name: Annotated[
        str | None,
        typer.Option("--JOB_NAME", help="Job name; bookmarks are kept under it (default: a registered job's name)."),
    ] = None,
    bookmark_option: Annotated[
        BookmarkOption | None,
        typer.Option(
            "--job-bookmark-option", help="As in Glue: enable, pause (read new, keep state) or disable (the default)."
        ),
    ] = None,
    conf: Annotated[
        list[str] | None,
        typer.Option("--conf", help="Spark setting KEY=VALUE (repeatable); spark.sql.catalog.NAME binds NAME."),
    ] = None,
    _json: JsonOpt = False,
) -> None:
    """Run SCRIPT as a Glue job: other --KEY VALUE arguments reach the script (getResolvedOptions).

    The script runs with the operator's rights, like any Spark job: Shoal's governance does
    not check what it reads or writes."""
    if script.startswith("-"):  # unknown options pass on to the script, so one can land here
        raise typer.BadParameter(f"{script!r} is an option, not a script or a job name", param_hint="'SCRIPT'")
    # What the script prints is its log (CloudWatch's, in Glue): with --json it goes to stderr,
    # so stdout stays one JSON document.
    with out().script_stdout():
        summary = _run(ctx, script, job_name, bookmark_option, conf)
    for warning in summary["warnings"]:
        output.print_warning(warning)

    def as_text() -> None:
        output.print_kv(
            f"Glue job {summary['job_name']}: {summary['status']}",
            {
                "run_id": summary["run_id"],
                "bookmark_option": summary["bookmark_option"],
                "bookmark_committed": summary["bookmark_committed"],
                "catalogs": ", ".join(summary["catalogs"]) or "-",
                "duration_s": summary["duration_s"],
            },
        )
        if summary["reads"]:
            output.print_rows(
                "Reads",
                ["transformation_ctx", "source", "bookmark", "files_listed", "files_read"],
                [
                    [
                        r["transformation_ctx"] or "-",
                        r["source"],
                        r["bookmark"],
                        r.get("files_listed", "-"),
                        r.get("files_read", "-"),
                    ]
                    for r in summary["reads"]
                ],
            )
        if summary["writes"]:
            output.print_rows(
                "Writes",
                ["transformation_ctx", "target"],
                [[w["transformation_ctx"] or "-", w["target"]] for w in summary["writes"]],
            )
        if summary["ignored_conf"]:
            output.print_warning("static Spark settings left as Shoal set them: " + ", ".join(summary["ignored_conf"]))

    out().show(summary, as_text)


def _run(
    ctx: typer.Context,
    script: str,
    job_name: str | None,
    bookmark_option: BookmarkOption | None,
    conf: list[str] | None,
) -> dict[str, Any]:
    from shoal.glue import run_defined_job, run_script, split_conf

    registered = _registered_glue_job(script)
    if registered is not None:
        job_name = job_name or registered.name
        assert registered.script is not None  # a glue job's definition requires its script
        with out().progress(f"glue {job_name}") as say:
            arguments = _arguments(list(ctx.args))
            if bookmark_option is not None:
                arguments["--job-bookmark-option"] = bookmark_option.value
            if conf:
                arguments["--conf"] = " --conf ".join(conf)
            summary = run_defined_job(settings(), job_name, registered.script, registered.arguments, arguments, say=say)
    else:
        with out().progress(f"glue {job_name}") as say:
            summary = run_script(
                settings(),
                script,
                job_name or "",
                list(ctx.args),
                bookmark_option=(bookmark_option or BookmarkOption.disable).value,
                conf=split_conf(conf or []),
                say=say,
            )
    return summary


def _registered_glue_job(ref: str) -> Any:
    """The Glue job registered under `ref` when `ref` is not a file, else None."""
    if Path(ref).expanduser().exists() or ref.endswith(".py"):
        return None
    from shoal.recipes import JobRegistry

    job = JobRegistry(settings()).get(ref)
    if job is None:
        raise ShoalError(
            f"{ref} is neither a script nor a registered job",
            hint="pass a .py script, or register the job's `aws glue get-job` export with `shoal job register`",
        )
    if job.kind != "glue":
        raise ShoalError(f"job {ref} is a {job.kind} job, not a Glue job", hint=f"run it with `shoal recipe run {ref}`")
    return job


def _arguments(args: list[str]) -> dict[str, str]:
    """`--KEY VALUE` pairs after the script, as a run's Arguments."""
    parsed: dict[str, str] = {}
    it = iter(args)
    for key in it:
        if not key.startswith("--"):
            raise ShoalError(f"argument {key!r} is not --KEY", hint="pass job arguments as --KEY VALUE")
        name, sep, value = key.partition("=")
        parsed[name] = value if sep else next(it, "")
    return parsed


@glue_app.command("bookmarks")
def show_bookmarks(
    job_name: Annotated[str, typer.Argument(help="Job name (--JOB_NAME of its runs).")],
    _json: JsonOpt = False,
) -> None:
    """The committed bookmark of each transformation_ctx of a job."""
    from shoal.glue import bookmarks

    rows = bookmarks.show(settings(), job_name)
    out().table(
        f"Bookmarks of {job_name}",
        ["transformation_ctx", "files", "run_id", "updated_at"],
        [[r["transformation_ctx"], r["files"], r["run_id"], r["updated_at"]] for r in rows],
        rows,
    )


@glue_app.command("reset-bookmark")
def reset_bookmark(
    job_name: Annotated[str, typer.Argument(help="Job name.")],
    _json: JsonOpt = False,
) -> None:
    """Forget a job's bookmarks: its next run reads all its input again."""
    from shoal.glue import bookmarks

    removed = bookmarks.reset(settings(), job_name)

    def as_text() -> None:
        output.out.print(f"reset {removed} bookmark(s) of {output.escape(job_name)}")

    out().show({"job_name": job_name, "bookmarks_removed": removed}, as_text)


@glue_app.command("runs")
def show_runs(
    job_name: Annotated[str | None, typer.Argument(help="Only this job.")] = None,
    limit: Annotated[int, typer.Option("--limit", help="At most this many runs.")] = 50,
    _json: JsonOpt = False,
) -> None:
    """Glue job runs, newest first (RUNNING with no process behind it: the process died)."""
    from shoal.glue import runs

    rows = runs.history(settings(), job_name, limit)
    out().table(
        "Glue job runs",
        ["run_id", "job_name", "status", "bookmark_option", "started_at", "duration_s", "error"],
        [
            [
                r["run_id"],
                r["job_name"],
                r["status"],
                r["bookmark_option"],
                r["started_at"],
                r["duration_s"],
                r["error"] or "",
            ]
            for r in rows
        ],
        rows,
    )
