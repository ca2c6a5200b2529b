"""Notifications delivered to a real SMTP server, a real HTTP server and a file."""

from __future__ import annotations

import json
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from aiosmtpd.controller import Controller

from shoal.config import load_settings
from shoal.notify import Notifier, NotifyError
from shoal.workflows import definition, run, tasks
from tests.support.servers import free_port


class Inbox:
    def __init__(self) -> None:
        self.messages: list[tuple[str, list[str], bytes]] = []

    async def handle_DATA(self, server, session, envelope):  # aiosmtpd's hook name
        self.messages.append((envelope.mail_from, envelope.rcpt_tos, envelope.content))
        return "250 OK"


@pytest.fixture
def smtp():
    inbox = Inbox()
    controller = Controller(inbox, hostname="127.0.0.1", port=free_port())
    controller.start()
    yield controller, inbox
    controller.stop()


@pytest.fixture
def webhook():
    received: list[dict] = []
    state = {"fail_first": 0}

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # http.server's hook name
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            if state["fail_first"] > 0:
                state["fail_first"] -= 1
                self.send_response(503)
                self.end_headers()
                return
            received.append({"path": self.path, "body": body, "type": self.headers["Content-Type"]})
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", received, state
    server.shutdown()


@pytest.fixture
def notify_settings(settings, smtp):
    controller, _ = smtp
    return load_settings(
        workspace=settings.workspace_dir,
        notify={"smtp": {"host": "127.0.0.1", "port": controller.port, "sender": "shoal@example.test"}, "attempts": 3},
    )


def test_email_webhook_and_file_delivery(notify_settings, smtp, webhook, tmp_path):
    _, inbox = smtp
    url, received, _ = webhook
    topic = f"t-{uuid.uuid4().hex[:6]}"
    n = Notifier(notify_settings)
    assert n.create_topic(topic) is True and n.create_topic(topic) is False
    n.subscribe(topic, "email", "team@example.test")
    n.subscribe(topic, "webhook", f"{url}/hooks/T000/SECRET-TOKEN")
    n.subscribe(topic, "file", str(tmp_path / "notes.jsonl"))
    result = n.publish(topic, "Revenue summary rebuilt: 24 months", subject="Refresh done")
    assert (result.delivered, result.failed) == (3, 0)
    mail_from, rcpts, content = inbox.messages[-1]
    assert mail_from == "shoal@example.test" and rcpts == ["team@example.test"]
    assert b"Subject: Refresh done" in content and b"Revenue summary rebuilt: 24 months" in content
    hook = received[-1]
    assert hook["path"] == "/hooks/T000/SECRET-TOKEN" and hook["type"] == "application/json"
    assert hook["body"]["text"] == "*Refresh done*\nRevenue summary rebuilt: 24 months"  # Slack-compatible
    assert hook["body"]["message_id"] == result.message_id
    line = json.loads((tmp_path / "notes.jsonl").read_text().splitlines()[-1])
    assert line["subject"] == "Refresh done" and line["topic"] == topic
    # The webhook's secret path never reaches listings or the delivery table.
    listed = json.dumps(n.list_topics()) + json.dumps(n.history())
    assert "SECRET-TOKEN" not in listed


def test_webhook_retries_then_records_failure(notify_settings, webhook):
    url, received, state = webhook
    topic = f"t-{uuid.uuid4().hex[:6]}"
    n = Notifier(notify_settings)
    n.create_topic(topic)
    n.subscribe(topic, "webhook", url)
    state["fail_first"] = 2
    ok = n.publish(topic, {"k": 1})
    assert ok.delivered == 1 and ok.deliveries[0].attempts == 3
    state["fail_first"] = 10
    bad = n.publish(topic, "again")
    assert bad.failed == 1 and "HTTP 503" in bad.deliveries[0].error
    assert n.history()[0]["status"] == "failed"


def test_unknown_topic_and_bad_endpoints(notify_settings):
    n = Notifier(notify_settings)
    with pytest.raises(NotifyError, match="no topic named 'ghost'"):
        n.publish("ghost", "x")
    topic = f"t-{uuid.uuid4().hex[:6]}"
    n.create_topic(topic)
    with pytest.raises(NotifyError, match="not an email address"):
        n.subscribe(topic, "email", "nobody")
    with pytest.raises(NotifyError, match="http"):
        n.subscribe(topic, "webhook", "ftp://x")


def test_notify_task_and_failure_notification(notify_settings, smtp):
    _, inbox = smtp
    topic = f"t-{uuid.uuid4().hex[:6]}"
    n = Notifier(notify_settings)
    n.create_topic(topic)
    n.subscribe(topic, "email", "ops@example.test")
    m = definition.build(
        {
            "StartAt": "Tell",
            "States": {
                "Tell": {
                    "Type": "Task",
                    "Resource": "arn:aws:states:::sns:publish",
                    "Parameters": {
                        "TopicArn": f"arn:aws:sns:eu-west-1:123:{topic}",
                        "Subject": "hello",
                        "Message.$": "$.text",
                    },
                    "Next": "Break",
                },
                "Break": {"Type": "Fail", "Error": "Pipeline.Broken", "Cause": "on purpose"},
            },
        },
        name="notify-flow",
        resource_check=tasks.unsupported,
    )
    before = len(inbox.messages)
    record = run(notify_settings, m, {"text": "first message"}, notify_on_failure=topic)
    assert record.status == "FAILED"
    bodies = [c for _, _, c in inbox.messages[before:]]
    assert len(bodies) == 2
    assert b"first message" in bodies[0]
    assert b"Pipeline.Broken" in bodies[1] and record.id.encode() in bodies[1]
