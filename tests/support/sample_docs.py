"""Builders for test documents whose content is known (beyond the sample corpus)."""

from __future__ import annotations

import gzip
import io
import json
import tarfile
import zipfile
from pathlib import Path


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


LEGACY_OFFICE = Path(__file__).parent / "data" / "legacy_office"


def legacy_office(name: str) -> bytes:
    """Word/Excel/PowerPoint 97-2003 files from Apache Tika's test documents (see the README there)."""
    return (LEGACY_OFFICE / name).read_bytes()


def merged_cells_docx() -> bytes:
    """A DOCX table with a horizontal and a vertical merge, plus a vertical-merge continuation
    below a spanned cell: python-docx's cell grid raises "no 'tc' element at grid_offset=1"."""
    import docx
    from docx.oxml import OxmlElement
    from docx.oxml.ns import qn

    d = docx.Document()
    t = d.add_table(rows=3, cols=3)
    for r in range(3):
        for c in range(3):
            t.cell(r, c).text = f"r{r}c{c}"
    t.cell(0, 0).merge(t.cell(0, 1))
    t.cell(1, 2).merge(t.cell(2, 2))
    tc = t._tbl.findall(qn("w:tr"))[1].findall(qn("w:tc"))[1]
    tc.get_or_add_tcPr().append(OxmlElement("w:vMerge"))
    buf = io.BytesIO()
    d.save(buf)
    return buf.getvalue()


def with_whitespace_nodes(odt: bytes) -> bytes:
    """The same ODT with its content.xml pretty-printed: text nodes between the body's elements."""
    src = zipfile.ZipFile(io.BytesIO(odt))
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for info in src.infolist():
            data = src.read(info)
            if info.filename == "content.xml":
                data = data.replace(b"><text:", b">\n  <text:").replace(b"><table:", b">\n  <table:")
            zf.writestr(info, data)
    return buf.getvalue()
