"""Notifications: topics with subscriptions (email over SMTP, webhook, file), published to
by `shoal:notify` tasks, failed executions and `shoal topic publish`.

Each delivery is retried (tenacity, exponential backoff) and recorded in
`shoal_deliveries`. Webhook URLs often embed a secret token, so only their scheme and
host ever reach logs, errors and the delivery table.
"""

from __future__ import annotations

import fcntl
import json
import re
import smtplib
import ssl
import uuid
from dataclasses import asdict, dataclass, field
from email.message import EmailMessage
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
from sqlalchemy import Column, DateTime, Integer, MetaData, String, Table, Text, delete, insert, select
from tenacity import Retrying, stop_after_attempt, wait_exponential

from shoal.config import Settings
from shoal.exceptions import ShoalError
from shoal.lake import database
from shoal.lake.database import utcnow as _now

state_tables = MetaData()
topics = Table(
    "shoal_topics",
    state_tables,
    Column("name", String(200), primary_key=True),
    Column("description", Text),
    Column("created_at", DateTime, nullable=False),
)
subscriptions = Table(
    "shoal_subscriptions",
    state_tables,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("topic", String(200), nullable=False, index=True),
    Column("protocol", String(16), nullable=False),
    Column("endpoint", Text, nullable=False),
    Column("created_at", DateTime, nullable=False),
)
deliveries = Table(
    "shoal_deliveries",
    state_tables,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("message_id", String(64), nullable=False, index=True),
    Column("topic", String(200), nullable=False),
    Column("subscription_id", Integer),
    Column("protocol", String(16), nullable=False),
    Column("endpoint", Text, nullable=False),
    Column("status", String(16), nullable=False),
    Column("attempts", Integer, nullable=False),
    Column("error", Text),
    Column("ts", DateTime, nullable=False),
)

PROTOCOLS = ("email", "webhook", "file")
_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+$")
_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,200}$")


class NotifyError(ShoalError):
    """A topic or subscription is unknown or invalid."""


def redact(protocol: str, endpoint: str) -> str:
    if protocol == "webhook":
        parts = urlsplit(endpoint)
        return f"{parts.scheme}://{parts.netloc.rsplit('@', 1)[-1]}/..."
    return endpoint


def topic_name(ref: str) -> str:
    """A topic name, also from a cloud topic ARN (arn:...:sns:region:account:NAME)."""
    return ref.rsplit(":", 1)[-1] if ref.startswith("arn:") else ref


@dataclass
class Delivery:
    subscription_id: int
    protocol: str
    endpoint: str
    status: str
    attempts: int
    error: str | None = None


@dataclass
class PublishResult:
    message_id: str
    topic: str
    delivered: int = 0
    failed: int = 0
    deliveries: list[Delivery] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "MessageId": self.message_id,
            "topic": self.topic,
            "delivered": self.delivered,
            "failed": self.failed,
            "deliveries": [asdict(d) for d in self.deliveries],
        }


class Notifier:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.engine = database.engine(settings, state_tables)

    # ---- topics and subscriptions -------------------------------------------------------------
    def create_topic(self, name: str, description: str | None = None) -> bool:
        if not _NAME.match(name):
            raise NotifyError(f"invalid topic name {name!r}", hint="use letters, digits, '.', '_' and '-'")
        with self.engine.begin() as conn:
            if conn.execute(select(topics.c.name).where(topics.c.name == name)).first():
                return False
            conn.execute(insert(topics).values(name=name, description=description, created_at=_now()))
        return True

    def delete_topic(self, name: str) -> None:
        self._require(name)
        with self.engine.begin() as conn:
            conn.execute(delete(subscriptions).where(subscriptions.c.topic == name))
            conn.execute(delete(topics).where(topics.c.name == name))

    def list_topics(self) -> list[dict[str, Any]]:
        with self.engine.connect() as conn:
            subs = conn.execute(select(subscriptions).order_by(subscriptions.c.id)).all()
            rows = conn.execute(select(topics).order_by(topics.c.name)).all()
        return [
            {
                "name": r.name,
                "description": r.description,
                "subscriptions": [
                    {"id": s.id, "protocol": s.protocol, "endpoint": redact(s.protocol, s.endpoint)}
                    for s in subs
                    if s.topic == r.name
                ],
            }
            for r in rows
        ]

    def subscribe(self, topic: str, protocol: str, endpoint: str) -> int:
        self._require(topic)
        if protocol not in PROTOCOLS:
            raise NotifyError(f"unknown protocol {protocol!r} (known: {', '.join(PROTOCOLS)})")
        if protocol == "email" and not _EMAIL.match(endpoint):
            raise NotifyError(f"{endpoint!r} is not an email address")
        if protocol == "webhook" and urlsplit(endpoint).scheme not in ("http", "https"):
            raise NotifyError("a webhook endpoint must be an http:// or https:// URL")
        if protocol == "file":
            endpoint = str(Path(endpoint).expanduser().resolve())
        with self.engine.begin() as conn:
            return database.inserted_id(
                conn.execute(
                    insert(subscriptions).values(topic=topic, protocol=protocol, endpoint=endpoint, created_at=_now())
                )
            )

    def unsubscribe(self, subscription_id: int) -> None:
        with self.engine.begin() as conn:
            if not conn.execute(delete(subscriptions).where(subscriptions.c.id == subscription_id)).rowcount:
                raise NotifyError(f"no subscription {subscription_id}")

    def _require(self, name: str) -> None:
        with self.engine.connect() as conn:
            if conn.execute(select(topics.c.name).where(topics.c.name == name)).first() is None:
                raise NotifyError(f"no topic named {name!r}", hint=f"create it with `shoal topic create {name}`")

    # ---- publishing -----------------------------------------------------------------------------
    def publish(self, topic: str, message: Any, *, subject: str | None = None) -> PublishResult:
        topic = topic_name(topic)
        self._require(topic)
        with self.engine.connect() as conn:
            subs = conn.execute(
                select(subscriptions).where(subscriptions.c.topic == topic).order_by(subscriptions.c.id)
            ).all()
        result = PublishResult(message_id=str(uuid.uuid4()), topic=topic)
        text = message if isinstance(message, str) else json.dumps(message, indent=2, default=str)
        envelope = {
            "message_id": result.message_id,
            "topic": topic,
            "subject": subject,
            "message": message,
            "timestamp": _now().isoformat() + "Z",
        }
        for sub in subs:
            attempts, error = 0, None
            try:
                for attempt in Retrying(
                    stop=stop_after_attempt(self.settings.notify.attempts),
                    wait=wait_exponential(multiplier=0.2, max=5),
                    reraise=True,
                ):
                    with attempt:
                        attempts += 1
                        self._deliver(sub.protocol, sub.endpoint, subject, text, envelope)
                status = "delivered"
                result.delivered += 1
            except Exception as exc:  # noqa: BLE001 - one subscriber failing must not stop the others
                status, error = "failed", _describe(exc, sub.protocol, sub.endpoint)
                result.failed += 1
            shown = redact(sub.protocol, sub.endpoint)
            result.deliveries.append(Delivery(sub.id, sub.protocol, shown, status, attempts, error))
            with self.engine.begin() as conn:
                conn.execute(
                    insert(deliveries).values(
                        message_id=result.message_id,
                        topic=topic,
                        subscription_id=sub.id,
                        protocol=sub.protocol,
                        endpoint=shown,
                        status=status,
                        attempts=attempts,
                        error=error,
                        ts=_now(),
                    )
                )
        return result

    def _deliver(self, protocol: str, endpoint: str, subject: str | None, text: str, envelope: dict[str, Any]) -> None:
        if protocol == "email":
            self._email(endpoint, subject or f"Shoal notification: {envelope['topic']}", text)
        elif protocol == "webhook":
            # `text` makes the body a valid Slack incoming-webhook message; the rest is for machines.
            body = {"text": f"*{subject}*\n{text}" if subject else text, **envelope}
            response = httpx.post(
                endpoint, json=body, timeout=self.settings.notify.webhook_timeout_s, follow_redirects=False
            )
            if response.status_code >= 400:
                raise NotifyError(f"HTTP {response.status_code}")
        else:
            path = Path(endpoint)
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(path, "a", encoding="utf-8") as fh:
                fcntl.flock(fh, fcntl.LOCK_EX)
                fh.write(json.dumps(envelope, default=str) + "\n")

    def _email(self, to: str, subject: str, text: str) -> None:
        cfg = self.settings.notify.smtp
        msg = EmailMessage()
        msg["From"], msg["To"], msg["Subject"] = cfg.sender, to, subject.replace("\n", " ")[:200]
        msg.set_content(text)
        if cfg.security == "ssl":
            server: smtplib.SMTP = smtplib.SMTP_SSL(
                cfg.host, cfg.port, timeout=cfg.timeout_s, context=ssl.create_default_context()
            )
        else:
            server = smtplib.SMTP(cfg.host, cfg.port, timeout=cfg.timeout_s)
        with server:
            if cfg.security == "starttls":
                server.starttls(context=ssl.create_default_context())
            if cfg.user:
                server.login(cfg.user, cfg.password.get_secret_value() if cfg.password else "")
            server.send_message(msg)

    def history(self, limit: int = 50) -> list[dict[str, Any]]:
        with self.engine.connect() as conn:
            rows = conn.execute(select(deliveries).order_by(deliveries.c.id.desc()).limit(limit)).all()
        return [
            {
                "message_id": r.message_id,
                "topic": r.topic,
                "protocol": r.protocol,
                "endpoint": r.endpoint,
                "status": r.status,
                "attempts": r.attempts,
                "error": r.error,
                "ts": r.ts.isoformat() + "Z",
            }
            for r in rows
        ]


def _describe(exc: BaseException, protocol: str, endpoint: str) -> str:
    text = str(exc) or type(exc).__name__
    if protocol == "webhook":
        text = text.replace(endpoint, redact(protocol, endpoint))
    return f"{type(exc).__name__}: {text}"[:500]
