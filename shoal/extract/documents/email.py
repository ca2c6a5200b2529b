"""E-mail: RFC 822 `.eml` (stdlib) and Outlook `.msg` (extract-msg). Attachments become child objects."""

from __future__ import annotations

import contextlib
import email
import io
from email import policy
from email.message import EmailMessage
from typing import Any

from shoal.config import ExtractSettings
from shoal.extract.base import Child, Context, Extraction, ExtractionRefused, ExtractionSkipped, Extractor, TextPart
from shoal.extract.documents.html import html_text
from shoal.extract.documents.text import decode_text
from shoal.ingest.sniff import wide_encoding

HEADERS = ("from", "to", "cc", "bcc", "reply-to", "subject", "date", "message-id")


def _headers_text(headers: dict[str, str]) -> str:
    return "\n".join(f"{k.title()}: {v}" for k, v in headers.items() if v)


def _check_children(children: list[Child], ctx: Context) -> None:
    if len(children) > ctx.settings.max_members:
        raise ExtractionRefused(f"{len(children)} attachments (limit {ctx.settings.max_members})")
    total = sum(len(c.data) for c in children)
    if total > ctx.settings.max_unpacked_mb << 20:
        raise ExtractionRefused(f"attachments total {total >> 20} MiB (limit {ctx.settings.max_unpacked_mb} MiB)")


class Eml(Extractor):
    name = "email"
    version = "1"

    def run(self, ctx: Context) -> Extraction:
        data = ctx.data
        wide = wide_encoding(data)
        if wide is not None:  # a message saved as UTF-16/32 text: headers must be read as text
            data = data.decode(wide, errors="replace").removeprefix("\ufeff").encode("utf-8")
        data = data.removeprefix(b"\xef\xbb\xbf")
        if not data.strip():
            raise ExtractionSkipped("no text: the file is empty or whitespace")
        msg = email.message_from_bytes(data, policy=policy.default)
        if not isinstance(msg, EmailMessage) or not any(msg.get(h) for h in ("from", "subject", "date", "to")):
            raise ValueError("not an e-mail message: no From/To/Subject/Date header")
        headers = {h: str(msg.get(h, "")) for h in HEADERS if msg.get(h)}
        parts = [TextPart("headers", _headers_text(headers))]
        body = msg.get_body(preferencelist=("plain", "html"))
        if body is not None:
            if body.get_content_charset() is None:
                # No declared charset (us-ascii by the RFC) but 8-bit text, as in a message saved
                # as UTF-16 and read back as UTF-8: detect rather than replace every accent.
                payload = body.get_payload(decode=True)
                content = decode_text(payload if isinstance(payload, bytes) else b"")[0]
            else:
                content = body.get_content()
            text = content if body.get_content_type() == "text/plain" else html_text(content)
            parts.append(TextPart("body", text))
        children = []
        for i, att in enumerate(msg.iter_attachments()):
            attached: Any = att.get_payload(decode=True)  # bytes, or None when there are none
            if attached is None:
                continue  # attached message/rfc822 without payload bytes
            name = att.get_filename() or f"attachment-{i + 1}"
            children.append(Child(name, attached))
        _check_children(children, ctx)
        return Extraction(
            text=parts,
            children=children,
            properties={
                "title": headers.get("subject"),
                "author": headers.get("from"),
                "headers": headers,
                "attachments": [c.name for c in children],
            },
        )


MSG_EXTRA_MISSING = "Outlook .msg needs the optional extra: pip install 'shoal[msg]' (GPL-3.0)"


class OutlookMsg(Extractor):
    """Outlook .msg through extract-msg, which is GPL-3.0: an optional extra (`shoal[msg]`),
    so the core stays Apache-2.0 compatible. Without it, .msg objects are skipped with the
    reason and the command that installs it."""

    name = "outlook"
    version = "1"

    def warm(self, settings: ExtractSettings) -> None:
        # Without the extra each .msg object is skipped with MSG_EXTRA_MISSING instead.
        with contextlib.suppress(ImportError):
            import extract_msg  # noqa: F401

    def run(self, ctx: Context) -> Extraction:
        try:
            import extract_msg
        except ImportError as exc:
            raise ExtractionSkipped(MSG_EXTRA_MISSING) from exc

        # openMsg returns the class for the file's kind (message, appointment, ...): typed as its base.
        msg: Any = extract_msg.openMsg(io.BytesIO(ctx.data))
        try:
            headers = {
                "from": msg.sender or "",
                "to": msg.to or "",
                "cc": msg.cc or "",
                "subject": msg.subject or "",
                "date": str(msg.date or ""),
                "message-id": getattr(msg, "messageId", None) or "",
            }
            headers = {k: v for k, v in headers.items() if v}
            parts = [TextPart("headers", _headers_text(headers))]
            body = msg.body
            if not body and msg.htmlBody:
                body = html_text(msg.htmlBody.decode("utf-8", "replace"))
            if body:
                parts.append(TextPart("body", body))
            children = []
            for i, att in enumerate(msg.attachments):
                data = getattr(att, "data", None)
                if isinstance(data, bytes):
                    name = att.longFilename or att.shortFilename or f"attachment-{i + 1}"
                    children.append(Child(name, data))
            _check_children(children, ctx)
        finally:
            msg.close()
        return Extraction(
            text=parts,
            children=children,
            properties={
                "title": headers.get("subject"),
                "author": headers.get("from"),
                "headers": headers,
                "attachments": [c.name for c in children],
            },
        )
