"""Media type detection: libmagic reads the content; the name only refines within a family.

libmagic tells a PDF from a ZIP from text no matter what a file is called. Within generic
families it cannot tell apart (plain text vs Markdown vs CSV; a ZIP that is really an
OOXML or ODF document), the container's own manifest or, last, the extension decides.
"""

from __future__ import annotations

import io
import json
import posixpath
import zipfile

import magic

# Text formats libmagic reports as text/plain (or close): refined by extension.
_TEXT_BY_EXTENSION = {
    ".md": "text/markdown",
    ".markdown": "text/markdown",
    ".rst": "text/x-rst",
    ".org": "text/org",
    ".csv": "text/csv",
    ".tsv": "text/tab-separated-values",
    ".tab": "text/tab-separated-values",
    ".json": "application/json",
    ".ndjson": "application/x-ndjson",
    ".jsonl": "application/x-ndjson",
    ".xml": "application/xml",
    ".html": "text/html",
    ".htm": "text/html",
    ".xhtml": "text/html",
    ".eml": "message/rfc822",
    ".rtf": "text/rtf",
    ".txt": "text/plain",
}
# Textual types outside text/* (every text/* type is textual too).
_TEXTUAL = {"application/csv", "application/json", "application/xml", "message/rfc822"}
_OOXML = {
    "word/": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    "xl/": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
    "ppt/": "application/vnd.openxmlformats-officedocument.presentationml.presentation",
}
_ALIASES = {
    "text/xml": "application/xml",
    "application/csv": "text/csv",
    "application/x-ndjason": "application/x-ndjson",
}
SNIFF_BYTES = 1 << 16


def detect_media_type(head: bytes, name: str, data: bytes | None = None) -> str:
    """Media type of a file from its first bytes (`head`), its name and, for ZIPs, its content."""
    sniffed = magic.from_buffer(head[:SNIFF_BYTES], mime=True) if head else "application/x-empty"
    ext = posixpath.splitext(name.lower())[1]
    if sniffed in ("application/zip", "application/octet-stream") and data is not None and head[:2] == b"PK":
        return _zip_type(data) or sniffed
    if sniffed == "application/x-empty":
        return "application/x-empty"
    if sniffed in ("application/CDFV2", "application/x-ole-storage") and ext == ".msg":
        return "application/vnd.ms-outlook"
    if sniffed == "application/CDFV2-encrypted":
        return "application/encrypted"
    if sniffed in _TEXTUAL or sniffed.startswith("text/"):
        by_ext = _TEXT_BY_EXTENSION.get(ext)
        if by_ext:
            return by_ext
        if sniffed in ("text/plain", "application/json") and _looks_like_json(head):
            return "application/json"
    return _ALIASES.get(sniffed, sniffed)


def _looks_like_json(head: bytes) -> bool:
    stripped = head.strip()
    if stripped[:1] not in (b"{", b"["):
        return False
    try:
        json.loads(stripped)
    except ValueError:
        return False
    return True


def _zip_type(data: bytes) -> str | None:
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            names = zf.namelist()
            if "mimetype" in names:
                declared = zf.read("mimetype")[:100].decode("ascii", "replace").strip()
                if declared:
                    return declared
            if "[Content_Types].xml" in names:
                for prefix, media_type in _OOXML.items():
                    if any(n.startswith(prefix) for n in names):
                        return media_type
    except (zipfile.BadZipFile, OSError, KeyError, RuntimeError):
        return None
    return "application/zip"
