"""Builders for test documents whose content is known (beyond the sample corpus)."""

from __future__ import annotations

import gzip
import io
import json
import tarfile
import zipfile


def msg_bytes(eml: bytes) -> bytes:
    import email
    from email import policy

    from aspose.email_foss.msg import MapiMessage

    return MapiMessage.from_email_message(email.message_from_bytes(eml, policy=policy.default)).to_bytes()


def rtf_bytes(text: str) -> bytes:
    return ("{\\rtf1\\ansi\\deff0{\\fonttbl{\\f0 Times;}}\\f0\\fs24 " + text + "\\par}").encode("cp1252")


def odt_bytes(heading: str, paragraph: str, cells: list[list[str]]) -> bytes:
    from odf.opendocument import OpenDocumentText
    from odf.table import Table, TableCell, TableColumn, TableRow
    from odf.text import H, P

    doc = OpenDocumentText()
    doc.text.addElement(H(outlinelevel=1, text=heading))
    doc.text.addElement(P(text=paragraph))
    t = Table(name="T1")
    t.addElement(TableColumn(numbercolumnsrepeated=len(cells[0])))
    for row in cells:
        tr = TableRow()
        for value in row:
            tc = TableCell()
            tc.addElement(P(text=value))
            tr.addElement(tc)
        t.addElement(tr)
    doc.text.addElement(t)
    buf = io.BytesIO()
    doc.save(buf)
    return buf.getvalue()


def epub_bytes(title: str, chapters: list[str]) -> bytes:
    from ebooklib import epub

    book = epub.EpubBook()
    book.set_identifier("shoal-test-book")
    book.set_title(title)
    book.set_language("en")
    book.add_author("Test Author")
    items = []
    for i, text in enumerate(chapters, 1):
        c = epub.EpubHtml(title=f"Chapter {i}", file_name=f"chap_{i}.xhtml", lang="en")
        c.content = f"<html><body><h1>Chapter {i}</h1><p>{text}</p></body></html>"
        book.add_item(c)
        items.append(c)
    book.toc = items
    book.spine = ["nav", *items]
    book.add_item(epub.EpubNcx())
    book.add_item(epub.EpubNav())
    buf = io.BytesIO()
    epub.write_epub(buf, book)
    return buf.getvalue()


def encrypted_pdf(source: bytes, password: str = "secret") -> bytes:
    import pypdf

    reader = pypdf.PdfReader(io.BytesIO(source))
    writer = pypdf.PdfWriter()
    for page in reader.pages:
        writer.add_page(page)
    writer.encrypt(password)
    buf = io.BytesIO()
    writer.write(buf)
    return buf.getvalue()


def zip_bomb(unpacked_mb: int = 600) -> bytes:
    """A small ZIP whose one member unpacks to `unpacked_mb` MiB of zeros."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf, zf.open("zeros.txt", "w", force_zip64=True) as f:
        block = b"\0" * (1 << 20)
        for _ in range(unpacked_mb):
            f.write(block)
    return buf.getvalue()


def zip_of(files: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in files.items():
            zf.writestr(name, data)
    return buf.getvalue()


def tar_gz_of(files: dict[str, bytes]) -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tf:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return gzip.compress(raw.getvalue())


XML_BOMB = b"""<?xml version="1.0"?>
<!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
<!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">]>
<lolz>&lol3;</lolz>"""

NDJSON = "\n".join(json.dumps(r) for r in [{"id": 1, "city": "Lisbon"}, {"id": 2, "city": "Porto"}]) + "\n{bad json\n"
