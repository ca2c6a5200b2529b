"""`shoal glue run|bookmarks|reset-bookmark`: AWS Glue PySpark scripts on Shoal."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

import typer

from shoal.cli import output
from shoal.cli.context import settings, state

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
    script: Annotated[str, typer.Argument(help="The Glue PySpark script (.py).")],
    job_name: Annotated[str, typer.Option("--JOB_NAME", help="Job name; bookmarks are kept under it.")],
    bookmark_option: Annotated[
        BookmarkOption,
        typer.Option("--job-bookmark-option", help="As in Glue: enable, pause (read new, keep state) or disable."),
    ] = BookmarkOption.disable,
    conf: Annotated[
        list[str] | None,
        typer.Option("--conf", help="Spark setting KEY=VALUE (repeatable); spark.sql.catalog.NAME binds NAME."),
    ] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Run SCRIPT as a Glue job: other --KEY VALUE arguments reach the script (getResolvedOptions).

    The script runs with the operator's rights, like any Spark job: Shoal's governance does
    not check what it reads or writes."""
    from shoal.glue import run_script, split_conf

    state["json"] = json_out
    with output.progress(not json_out, f"glue {job_name}") as say:
        summary = run_script(
            settings(),
            script,
            job_name,
            list(ctx.args),
            bookmark_option=bookmark_option.value,
            conf=split_conf(conf or []),
            say=say,
        )
    for warning in summary["warnings"]:
        output.print_warning(warning)
    if json_out:
        output.print_json(summary)
        return
    output.print_kv(
        f"Glue job {job_name}: {summary['status']}",
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


@glue_app.command("bookmarks")
def show_bookmarks(
    job_name: Annotated[str, typer.Argument(help="Job name (--JOB_NAME of its runs).")],
    json_out: Annotated[bool, typer.Option("--json", help="Print a JSON array.")] = False,
) -> None:
    """The committed bookmark of each transformation_ctx of a job."""
    from shoal.glue import bookmarks

    state["json"] = json_out
    rows = bookmarks.show(settings(), job_name)
    if json_out:
        output.print_json(rows)
        return
    output.print_rows(
        f"Bookmarks of {job_name}",
        ["transformation_ctx", "files", "run_id", "updated_at"],
        [[r["transformation_ctx"], r["files"], r["run_id"], r["updated_at"]] for r in rows],
    )


@glue_app.command("reset-bookmark")
def reset_bookmark(
    job_name: Annotated[str, typer.Argument(help="Job name.")],
    json_out: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Forget a job's bookmarks: its next run reads all its input again."""
    from shoal.glue import bookmarks

    state["json"] = json_out
    removed = bookmarks.reset(settings(), job_name)
    if json_out:
        output.print_json({"job_name": job_name, "bookmarks_removed": removed})
        return
    output.out.print(f"reset {removed} bookmark(s) of {output.escape(job_name)}")


@glue_app.command("runs")
def show_runs(
    job_name: Annotated[str | None, typer.Argument(help="Only this job.")] = None,
    limit: Annotated[int, typer.Option("--limit", help="At most this many runs.")] = 50,
    json_out: Annotated[bool, typer.Option("--json", help="Print a JSON array.")] = False,
) -> None:
    """Glue job runs, newest first (RUNNING with no process behind it: the process died)."""
    from shoal.glue import runs

    state["json"] = json_out
    rows = runs.history(settings(), job_name, limit)
    if json_out:
        output.print_json(rows)
        return
    output.print_rows(
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
    )
