"""Verbs the command groups lacked: `shoal group list|delete`, `shoal tag delete`, `shoal job delete`
and `shoal workflow delete` (create/delete/list/show everywhere)."""

from __future__ import annotations

from typing import Annotated

import typer

from shoal.cli.context import JsonOpt, out, settings
from shoal.cli.governance import _gov, _principals, group_app, tag_app
from shoal.cli.jobs import job_app
from shoal.cli.workflows import workflow_app
from shoal.exceptions import ShoalError


@group_app.command("list")
def group_list(_json: JsonOpt = False) -> None:
    """Groups and their members."""
    everyone = _principals().list()
    groups = [
        {"name": g["name"], "members": sorted(p["name"] for p in everyone if g["name"] in p["groups"])}
        for g in everyone
        if g["kind"] == "group"
    ]
    out().table(
        f"{len(groups)} group(s)", ["group", "members"], [[g["name"], ", ".join(g["members"])] for g in groups], groups
    )


@group_app.command("delete")
def group_delete(name: Annotated[str, typer.Argument(help="Group name.")], _json: JsonOpt = False) -> None:
    """Delete a group with its memberships and the grants to it (its members keep their own grants)."""
    people = _principals()
    if people.get_row(name).kind != "group":
        raise ShoalError(f"{name!r} is a user, not a group", hint=f"delete a user with: shoal principal delete {name}")
    people.remove(name)
    out().done(f"group {name} deleted")


@tag_app.command("delete")
def tag_delete(key: Annotated[str, typer.Argument(help="Tag key.")], _json: JsonOpt = False) -> None:
    """Delete a tag key and its assignments (refused while a grant ON TAGS names it)."""
    gone = _gov().delete_tag(key)
    out().done(f"tag {key.lower()} deleted with {gone} assignment(s)", assignments_removed=gone)


@job_app.command("delete")
def job_delete(name: Annotated[str, typer.Argument(help="Job name.")], _json: JsonOpt = False) -> None:
    """Forget a registered job (its recipe file and the tables it wrote stay)."""
    from shoal.recipes import JobRegistry

    JobRegistry(settings()).delete(name)
    out().done(f"job {name} deleted")


@workflow_app.command("delete")
def workflow_delete(name: Annotated[str, typer.Argument(help="Workflow name.")], _json: JsonOpt = False) -> None:
    """Delete a registered workflow; its executions and history stay. Refused while a schedule
    fires it or an execution runs."""
    from shoal.workflows.removal import delete_workflow

    delete_workflow(settings(), name)
    out().done(f"workflow {name} deleted (its executions' history is kept)")
