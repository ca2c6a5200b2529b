"""Notifications: topics with subscriptions (email over SMTP, webhook, file).

The implementation is in `shoal.notify.notifier`; this package re-exports its public names."""

from shoal.notify.notifier import (
    PROTOCOLS,
    Delivery,
    Notifier,
    NotifyError,
    PublishResult,
    deliveries,
    redact,
    state_tables,
    subscriptions,
    topic_name,
    topics,
)

__all__ = [
    "Delivery",
    "Notifier",
    "NotifyError",
    "PROTOCOLS",
    "PublishResult",
    "deliveries",
    "redact",
    "state_tables",
    "subscriptions",
    "topic_name",
    "topics",
]
