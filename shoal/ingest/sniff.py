"""Media type detection: libmagic reads the content; the name only refines within a family.

libmagic tells a PDF from a ZIP from text no matter what a file is called. Within generic
families it cannot tell apart (plain text vs Markdown vs CSV; a ZIP that is really an
OOXML or ODF document; an OLE2 container holding a Word, Excel or PowerPoint file), the
container's own manifest or directory or, last, the extension decides. UTF-16 and UTF-32
text, which libmagic calls binary without a byte order mark, is recognised here.
"""

from __future__ import annotations

import io
import json
import posixpath
import re
import zipfile

import magic
import olefile

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
_OLE_GENERIC = {"application/CDFV2", "application/x-ole-storage"}
_LEGACY_OFFICE_BY_EXTENSION = {
    ".doc": "application/msword",
    ".dot": "application/msword",
    ".xls": "application/vnd.ms-excel",
    ".xlt": "application/vnd.ms-excel",
    ".ppt": "application/vnd.ms-powerpoint",
    ".pps": "application/vnd.ms-powerpoint",
    ".pot": "application/vnd.ms-powerpoint",
    ".msg": "application/vnd.ms-outlook",
}
# Top-level OLE2 streams that say what a compound file holds.
_OLE_STREAMS = (
    ("EncryptedPackage", "application/encrypted"),
    ("WordDocument", "application/msword"),
    ("Workbook", "application/vnd.ms-excel"),
    ("Book", "application/vnd.ms-excel"),
    ("PowerPoint Document", "application/vnd.ms-powerpoint"),
    ("__properties_version1.0", "application/vnd.ms-outlook"),
)
_WIDE_BOMS = (
    (b"\x00\x00\xfe\xff", "utf-32-be"),
    (b"\xff\xfe\x00\x00", "utf-32-le"),
    (b"\xfe\xff", "utf-16-be"),
    (b"\xff\xfe", "utf-16-le"),
)
SNIFF_BYTES = 1 << 16


def wide_encoding(data: bytes) -> str | None:
    """ "utf-16-le", "utf-32-be"... when `data` is UTF-16/32 text: a byte order mark, or NUL bytes
    in the places that encoding puts them, with the whole sample decoding cleanly to printable text.
    """
    for bom, encoding in _WIDE_BOMS:
        if data.startswith(bom):
            return encoding
    sample = data[:4096]
    sample = sample[: len(sample) - len(sample) % 4]
    if len(sample) < 4 or b"\x00" not in sample:
        return None
    for encoding, width, zero_at in (
        ("utf-32-le", 4, (2, 3)),
        ("utf-32-be", 4, (0, 1)),
        ("utf-16-le", 2, (1,)),
        ("utf-16-be", 2, (0,)),
    ):
        units = len(sample) // width
        zeros = sum(sample[i::width].count(0) for i in zero_at) / (units * len(zero_at))
        if zeros < 0.5:
            continue  # too few NULs where this encoding puts them (mostly-Latin text has ~100%)
        try:
            text = sample.decode(encoding)
        except UnicodeDecodeError:
            continue
        printable = sum(ch.isprintable() or ch.isspace() for ch in text)
        if "\x00" not in text and printable >= 0.95 * len(text):
            return encoding
    return None


def detect_media_type(head: bytes, name: str, data: bytes | None = None) -> str:
    """Media type of a file from its first bytes (`head`), its name and, for ZIPs, its content."""
    sniffed = magic.from_buffer(head[:SNIFF_BYTES], mime=True) if head else "application/x-empty"
    ext = posixpath.splitext(name.lower())[1]
    if sniffed == "application/octet-stream" and (wide := wide_encoding(head)):
        # libmagic misses BOM-less UTF-16/32: type the same text as UTF-8 instead.
        text = head[: len(head) - len(head) % 4].decode(wide, errors="replace").lstrip("\ufeff")
        sniffed = magic.from_buffer(text.encode("utf-8")[:SNIFF_BYTES], mime=True) if text.strip() else sniffed
    if sniffed in ("application/zip", "application/octet-stream") and data is not None and head[:2] == b"PK":
        return zip_type(data) or sniffed
    if sniffed == "application/octet-stream" and _reads_as_text(head, ext):
        # One stray control character (pdftotext's output, a log) makes libmagic call text "data":
        # text that decodes cleanly is text whatever the name; then the extension refines it.
        sniffed = "text/plain"
    if sniffed == "application/x-empty":
        return "application/x-empty"
    if sniffed in _OLE_GENERIC:
        return _ole_type(data if data is not None else head) or _LEGACY_OFFICE_BY_EXTENSION.get(ext, sniffed)
    if sniffed == "application/CDFV2-encrypted":
        return "application/encrypted"
    if sniffed in _TEXTUAL or sniffed.startswith("text/"):
        by_ext = _TEXT_BY_EXTENSION.get(ext)
        if by_ext:
            return by_ext
        if sniffed in ("text/plain", "application/json") and _looks_like_json(head):
            return "application/json"
    return _ALIASES.get(sniffed, sniffed)


def _reads_as_text(head: bytes, ext: str) -> bool:
    """Whether bytes libmagic has no answer for are text: strict UTF-8 (a character cut at the end of
    the sample allowed) that is almost all printable, or, for a text extension, no NUL byte and
    mostly printable in cp1252 (the extension decides when the sniffer cannot)."""
    if not head or b"\x00" in head:
        return False
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.start < len(head) - 3 or len(head) < SNIFF_BYTES:
            if ext not in _TEXT_BY_EXTENSION:
                return False
            text = head.decode("cp1252", errors="replace")
        else:
            text = head[: exc.start].decode("utf-8")
    printable = sum(ch.isprintable() or ch.isspace() for ch in text)
    return printable >= 0.98 * len(text)


def _ole_type(data: bytes) -> str | None:
    """What an OLE2 compound file holds, from its top-level stream names (None: unreadable or unknown)."""
    try:
        with olefile.OleFileIO(data) as ole:
            names = {entry[0] for entry in ole.listdir(streams=True, storages=True) if len(entry) == 1}
    except Exception:  # noqa: BLE001 - truncated or broken containers fall back to the extension
        return None
    for stream, media_type in _OLE_STREAMS:
        if stream in names:
            return media_type
    return None


def _looks_like_json(head: bytes) -> bool:
    stripped = head.strip()
    if stripped[:1] not in (b"{", b"["):
        return False
    try:
        json.loads(stripped)
    except ValueError:
        return False
    return True


# A container's own `mimetype` member is data from the file: only a ZIP-based type is taken
# (EPUB, OpenDocument, vendor packages), never one that would make the console serve the
# object as HTML or PDF (it ends up in Content-Type headers).
_MEDIA_TYPE = re.compile(r"application/(vnd\.[a-z0-9][a-z0-9.+-]*|[a-z0-9][a-z0-9.-]*\+zip)")


def zip_type(data: bytes) -> str | None:
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            names = zf.namelist()
            if "mimetype" in names:
                # At most 100 bytes are unpacked: the member may be a bomb of its own.
                with zf.open("mimetype") as member:
                    declared = member.read(100).decode("ascii", "replace").strip()
                if _MEDIA_TYPE.fullmatch(declared):
                    return declared
            if "[Content_Types].xml" in names:
                for prefix, media_type in _OOXML.items():
                    if any(n.startswith(prefix) for n in names):
                        return media_type
    except (zipfile.BadZipFile, OSError, KeyError, RuntimeError):
        return None
    return "application/zip"
