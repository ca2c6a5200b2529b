"""`shoal topic`: notification topics and their subscriptions."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from shoal.cli import output
from shoal.cli.context import JsonOpt, out, settings
from shoal.exceptions import ShoalError

app = typer.Typer(help="Notification topics and their subscriptions (email, webhook, file).", no_args_is_help=True)


# ---- topics ----------------------------------------------------------------------------------------


@app.command("create")
def topic_create(
    name: Annotated[str, typer.Argument()],
    description: Annotated[str | None, typer.Option("--description")] = None,
    _json: JsonOpt = False,
) -> None:
    """Create a topic (no-op if it exists)."""
    from shoal.notify import Notifier

    created = Notifier(settings()).create_topic(name, description)
    out().line(f"topic {name} {'created' if created else 'already exists'}", {"topic": name, "created": created})


@app.command("subscribe")
def topic_subscribe(
    name: Annotated[str, typer.Argument(help="Topic name.")],
    email: Annotated[str | None, typer.Option("--email", help="Send email (SMTP settings in [notify.smtp]).")] = None,
    webhook: Annotated[str | None, typer.Option("--webhook", help="POST JSON (Slack-compatible) to this URL.")] = None,
    file: Annotated[Path | None, typer.Option("--file", help="Append one JSON line per message to this file.")] = None,
    _json: JsonOpt = False,
) -> None:
    """Add a subscription to a topic."""
    from shoal.notify import Notifier

    given = [(p, v) for p, v in (("email", email), ("webhook", webhook), ("file", file)) if v is not None]
    if len(given) != 1:
        raise ShoalError("give exactly one of --email, --webhook, --file")
    protocol, endpoint = given[0]
    sub_id = Notifier(settings()).subscribe(name, protocol, str(endpoint))
    out().line(
        f"subscription {sub_id}: {protocol} on topic {name}",
        {"topic": name, "subscription_id": sub_id, "protocol": protocol},
    )


@app.command("unsubscribe")
def topic_unsubscribe(subscription_id: Annotated[int, typer.Argument()], _json: JsonOpt = False) -> None:
    """Remove a subscription by id."""
    from shoal.notify import Notifier

    Notifier(settings()).unsubscribe(subscription_id)
    out().done(f"subscription {subscription_id} removed")


@app.command("list")
def topic_list(_json: JsonOpt = False) -> None:
    """Topics and their subscriptions (webhook URLs shown without their path)."""
    from shoal.notify import Notifier

    topics = Notifier(settings()).list_topics()

    def as_text() -> None:
        rows = [
            [t["name"], s["id"], s["protocol"], s["endpoint"]]
            for t in topics
            for s in t["subscriptions"] or [{"id": "", "protocol": "-", "endpoint": ""}]
        ]
        output.print_rows("Topics", ["topic", "subscription", "protocol", "endpoint"], rows)

    out().show(topics, as_text)


@app.command("delete")
def topic_delete(name: Annotated[str, typer.Argument()], _json: JsonOpt = False) -> None:
    """Delete a topic and its subscriptions."""
    from shoal.notify import Notifier

    Notifier(settings()).delete_topic(name)
    out().done(f"topic {name} deleted")


@app.command("publish")
def topic_publish(
    name: Annotated[str, typer.Argument()],
    message: Annotated[str, typer.Option("--message", "-m")],
    subject: Annotated[str | None, typer.Option("--subject", "-s")] = None,
    _json: JsonOpt = False,
) -> None:
    """Send a message to every subscriber (exit 1 if any delivery failed)."""
    from shoal.notify import Notifier

    result = Notifier(settings()).publish(name, message, subject=subject)
    out().table(
        f"Message {result.message_id}: {result.delivered} delivered, {result.failed} failed",
        ["subscription", "protocol", "endpoint", "status", "attempts", "error"],
        [[d.subscription_id, d.protocol, d.endpoint, d.status, d.attempts, d.error or ""] for d in result.deliveries],
        result.to_dict(),
    )
    if result.failed:
        sys.exit(1)


@app.command("deliveries")
def topic_deliveries(limit: Annotated[int, typer.Option("--limit")] = 50, _json: JsonOpt = False) -> None:
    """Recent deliveries, newest first."""
    from shoal.notify import Notifier

    rows = Notifier(settings()).history(limit)
    out().table(
        "Deliveries",
        ["time", "topic", "protocol", "endpoint", "status", "attempts", "error"],
        [
            [r["ts"], r["topic"], r["protocol"], r["endpoint"], r["status"], r["attempts"], r["error"] or ""]
            for r in rows
        ],
        rows,
    )
