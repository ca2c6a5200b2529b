"""The notification task: `shoal:notify`, and what `sns:publish` runs underneath."""

from __future__ import annotations

from typing import Any

from shoal.workflows.interpreter import TaskContext
from shoal.workflows.params import need as _need
from shoal.workflows.params import task_params as _params


def notify(ctx: TaskContext, params: Any) -> Any:
    from shoal.notify import Notifier, NotifyError

    p = _params(params)
    topic = _need(p, "Topic", "TopicArn", "TopicName")
    message = p.get("Message", p.get("Payload", ""))
    result = Notifier(ctx.settings).publish(topic, message, subject=p.get("Subject"))
    if result.failed and not result.delivered:
        raise NotifyError(
            f"no subscriber of topic {result.topic!r} received the message: "
            + "; ".join(d.error or "" for d in result.deliveries)
        )
    return result.to_dict()
