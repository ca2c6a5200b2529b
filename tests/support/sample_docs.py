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


def epub_bytes(
    title: str,
    chapters: list[str],
    *,
    spine: list[int] | None = None,
    drop: tuple[str, ...] = (),
    replace: dict[str, bytes] | None = None,
) -> bytes:
    """An EPUB 3 written with zipfile: mimetype, container.xml, OPF in OEBPS/, one XHTML per
    chapter. `spine`: reading order as chapter numbers (default 1..n), which may differ from
    the manifest's order; `drop`: member names left out; `replace`: members with other bytes."""
    from xml.sax.saxutils import escape

    spine = spine or list(range(1, len(chapters) + 1))
    items = "".join(
        f'<item id="c{i}" href="text/chap%20{i}.xhtml" media-type="application/xhtml+xml"/>'
        for i in range(1, len(chapters) + 1)
    )
    refs = "".join(f'<itemref idref="c{i}"/>' for i in spine)
    opf = (
        '<?xml version="1.0" encoding="utf-8"?>'
        '<package xmlns="http://www.idpf.org/2007/opf" version="3.0" unique-identifier="id">'
        '<metadata xmlns:dc="http://purl.org/dc/elements/1.1/">'
        f'<dc:identifier id="id">shoal-test-book</dc:identifier><dc:title>{escape(title)}</dc:title>'
        "<dc:creator>Test Author</dc:creator><dc:language>en</dc:language></metadata>"
        f"<manifest>{items}</manifest>"
        f"<spine>{refs}</spine></package>"
    )
    files = {
        "mimetype": b"application/epub+zip",
        "META-INF/container.xml": b'<?xml version="1.0"?>'
        b'<container version="1.0" xmlns="urn:oasis:names:tc:opendocument:xmlns:container"><rootfiles>'
        b'<rootfile full-path="OEBPS/content.opf" media-type="application/oebps-package+xml"/>'
        b"</rootfiles></container>",
        "OEBPS/content.opf": opf.encode(),
    }
    for i, text in enumerate(chapters, 1):
        files[f"OEBPS/text/chap {i}.xhtml"] = (
            '<?xml version="1.0" encoding="utf-8"?><html xmlns="http://www.w3.org/1999/xhtml">'
            f"<head><title>Chapter {i}</title></head><body><h1>Chapter {i}</h1><p>{escape(text)}</p></body></html>"
        ).encode()
    files.update(replace or {})
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in files.items():
            if name not in drop:
                # The mimetype member comes first and stored, as the EPUB container spec asks.
                zf.writestr(name, data, compress_type=zipfile.ZIP_STORED if name == "mimetype" else None)
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


def ppt_with_drawing_text(text: str) -> bytes:
    """Tika's testPPT.ppt with its 'PowerPoint Document' stream replaced by one whose only text
    sits in a drawing's text box (a PPDrawing container), as LibreOffice writes slides; catppt,
    which reads the slide list's text atoms only, finds nothing in it."""
    import shutil
    import struct
    import tempfile

    import olefile

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "drawing.ppt"
        shutil.copy(LEGACY_OFFICE / "testPPT.ppt", path)
        with olefile.OleFileIO(str(path), write_mode=True) as ole:
            size = len(ole.openstream("PowerPoint Document").read())  # olefile rewrites in place
            body = text.encode("utf-16-le")
            atom = struct.pack("<HHI", 0, 0x0FA0, len(body)) + body  # TextCharsAtom
            drawing = struct.pack("<HHI", 0x000F, 0x040C, len(atom)) + atom  # PPDrawing container
            filler = struct.pack("<HHI", 0, 0x0FFF, size - len(drawing) - 8)
            ole.write_stream("PowerPoint Document", drawing + filler + b"\0" * (size - len(drawing) - 8))
        return path.read_bytes()


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
