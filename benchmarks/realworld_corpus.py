"""A mixed "real-world" corpus for benchmarks/extract.py --corpus real-world (issue 20).

Every file is written here or ships with the repository (nothing downloaded): Word/Excel/
PowerPoint 97-2003 files converted by LibreOffice from generated OOXML (when `soffice` is
installed) plus Apache Tika's legacy test documents from tests/data; UTF-16/32 text, HTML
and CSV with and without byte order marks; a HEIC photo of a printed page (pillow-heif);
a long PDF; a damaged PDF (no cross-reference table or trailer); ODT, EPUB, RTF and source
code; issue 35's files that yielded no text (a Markdown table alone, text in an ODT frame, a
`.pdf.txt` with a control character, a picture-only PPTX, OOXML named `.doc`/`.ppt`); and the
sample corpus. Controls that carry no text (an empty file, an encrypted PDF)
are listed but left out of coverage.

Each text-bearing file holds a marker word unique to its copy, so "has text" can be told
apart from "has the right text".
"""

from __future__ import annotations

import io
import shutil
import subprocess
import tempfile
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from shoal.samples import corpus as samples

ROOT = Path(__file__).resolve().parent.parent
TIKA = ROOT / "tests" / "data" / "legacy_office"
# Words known to be in Tika's legacy test documents (catdoc/xls2csv/catppt find them).
TIKA_WORDS = {"testWORD.doc": "sample", "testEXCEL.xls": "sample", "testPPT.ppt": "sample"}


@dataclass
class Item:
    rel: str
    kind: str  # what the file is, for the per-kind table
    marker: str | None  # a word the text must contain; None: a control that carries no text

    @property
    def text_bearing(self) -> bool:
        return self.marker is not None


def _marker(kind: str, n: int) -> str:
    # Letters only: OCR reads a 0 as an O now and then, which is not what is measured here.
    return f"zq{kind}" + "".join("abcdefghij"[int(c)] for c in f"{n:03d}")


def _sentence(marker: str) -> str:
    return f"The harbour inspection log {marker} lists cranes, berths and the tide tables."


def _docx(text: str) -> bytes:
    from docx import Document

    doc = Document()
    doc.add_heading("Inspection report", level=1)
    doc.add_paragraph(text)
    buf = io.BytesIO()
    doc.save(buf)
    return buf.getvalue()


def _xlsx(text: str) -> bytes:
    from openpyxl import Workbook

    wb = Workbook()
    ws = wb.active
    ws.append(["berth", "note"])
    ws.append(["B7", text])
    buf = io.BytesIO()
    wb.save(buf)
    return buf.getvalue()


def _pptx(text: str) -> bytes:
    from pptx import Presentation

    prs = Presentation()
    slide = prs.slides.add_slide(prs.slide_layouts[1])
    slide.shapes.title.text = "Inspection"
    slide.placeholders[1].text = text
    buf = io.BytesIO()
    prs.save(buf)
    return buf.getvalue()


def _odt(text: str) -> bytes:
    from odf.opendocument import OpenDocumentText
    from odf.text import P

    doc = OpenDocumentText()
    doc.text.addElement(P(text=text))
    buf = io.BytesIO()
    doc.save(buf)
    return buf.getvalue()


def _odt_frame(text: str) -> bytes:
    """An ODT whose only text sits in a text box inside a frame (issue 35's simple.odt)."""
    from odf.draw import Frame, TextBox
    from odf.opendocument import OpenDocumentText
    from odf.text import P

    doc = OpenDocumentText()
    frame = Frame(width="12cm", height="3cm", anchortype="page", anchorpagenumber="1")
    box = TextBox()
    box.addElement(P(text=text))
    frame.addElement(box)
    doc.text.addElement(frame)  # anchored to the page: outside any paragraph
    buf = io.BytesIO()
    doc.save(buf)
    return buf.getvalue()


def _picture_pptx(marker: str) -> bytes:
    """A deck whose slide is only a picture of text (an exported or scanned deck)."""
    from PIL import Image, ImageDraw
    from pptx import Presentation
    from pptx.util import Inches

    img = Image.new("RGB", (1400, 260), "white")
    ImageDraw.Draw(img).text((40, 90), f"Harbour briefing {marker}", fill="black", font=samples._font(56))
    png = io.BytesIO()
    img.save(png, format="PNG")
    prs = Presentation()
    slide = prs.slides.add_slide(prs.slide_layouts[6])
    slide.shapes.add_picture(io.BytesIO(png.getvalue()), Inches(0.5), Inches(1))
    buf = io.BytesIO()
    prs.save(buf)
    return buf.getvalue()


def _epub(title: str, text: str) -> bytes:
    opf = (
        '<?xml version="1.0"?><package xmlns="http://www.idpf.org/2007/opf" version="3.0" unique-identifier="i">'
        '<metadata xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:identifier id="i">b</dc:identifier>'
        f"<dc:title>{title}</dc:title><dc:language>en</dc:language></metadata>"
        '<manifest><item id="c1" href="c1.xhtml" media-type="application/xhtml+xml"/></manifest>'
        '<spine><itemref idref="c1"/></spine></package>'
    )
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("mimetype", "application/epub+zip", compress_type=zipfile.ZIP_STORED)
        zf.writestr(
            "META-INF/container.xml",
            '<?xml version="1.0"?><container version="1.0" xmlns="urn:oasis:names:tc:opendocument:xmlns:container">'
            '<rootfiles><rootfile full-path="OEBPS/book.opf" media-type="application/oebps-package+xml"/>'
            "</rootfiles></container>",
        )
        zf.writestr("OEBPS/book.opf", opf)
        zf.writestr(
            "OEBPS/c1.xhtml",
            f'<html xmlns="http://www.w3.org/1999/xhtml"><body><h1>One</h1><p>{text}</p></body></html>',
        )
    return buf.getvalue()


def _long_pdf(marker: str, pages: int = 60) -> bytes:
    from reportlab.lib.pagesizes import A4
    from reportlab.pdfgen import canvas

    buf = io.BytesIO()
    c = canvas.Canvas(buf, pagesize=A4)
    for page in range(1, pages + 1):
        y = 800
        for line in range(40):
            c.drawString(50, y, f"Page {page} line {line}: tide table entry for berth {line % 9}, {marker}.")
            y -= 18
        c.showPage()
    c.save()
    return buf.getvalue()


def _damaged_pdf(marker: str) -> bytes:
    """A one-page PDF cut before its cross-reference table: readers must rebuild it."""
    from reportlab.pdfgen import canvas

    buf = io.BytesIO()
    c = canvas.Canvas(buf)
    c.drawString(72, 720, _sentence(marker))
    c.showPage()
    c.save()
    data = buf.getvalue()
    return data[: data.rindex(b"xref")]


def _heic(marker: str) -> bytes:
    """A photo of a printed page, as a phone stores it (HEIC)."""
    import pillow_heif
    from PIL import Image, ImageDraw

    img = Image.new("RGB", (1400, 300), "white")
    draw = ImageDraw.Draw(img)
    font = samples._font(40)
    draw.text((40, 60), "Harbour inspection log", fill="black", font=font)
    draw.text((40, 150), f"reference {marker} berth seven", fill="black", font=font)
    heif = pillow_heif.from_pillow(img)
    buf = io.BytesIO()
    heif.save(buf, quality=90)
    return buf.getvalue()


def _msg(marker: str) -> bytes | None:
    """An Outlook .msg written by aspose-email-foss (a test dependency), if installed."""
    try:
        from aspose.email_foss.msg import MapiMessage
    except ImportError:
        return None
    import email
    from email import policy
    from email.message import EmailMessage

    m = EmailMessage()
    m["From"], m["To"], m["Subject"] = "harbour@example.org", "ops@example.org", "Inspection"
    m.set_content(_sentence(marker))
    parsed = email.message_from_bytes(m.as_bytes(), policy=policy.default)
    return MapiMessage.from_email_message(parsed).to_bytes()


def _encrypted_pdf() -> bytes:
    import pypdf

    reader = pypdf.PdfReader(io.BytesIO(samples.invoice_pdf()))
    writer = pypdf.PdfWriter()
    for page in reader.pages:
        writer.add_page(page)
    writer.encrypt("secret")
    buf = io.BytesIO()
    writer.write(buf)
    return buf.getvalue()


def _legacy(ooxml: dict[str, bytes], work: Path) -> dict[str, bytes]:
    """OOXML -> Word/Excel/PowerPoint 97-2003 through LibreOffice, in one soffice run per format."""
    soffice = shutil.which("soffice") or shutil.which("libreoffice")
    if not soffice:
        return {}
    out: dict[str, bytes] = {}
    for src_ext, target in ((".docx", "doc"), (".xlsx", "xls"), (".pptx", "ppt")):
        names = [n for n in ooxml if n.endswith(src_ext)]
        if not names:
            continue
        src, dst = Path(tempfile.mkdtemp(dir=work)), Path(tempfile.mkdtemp(dir=work))
        for n in names:
            (src / n).write_bytes(ooxml[n])
        profile = Path(tempfile.mkdtemp(dir=work))
        subprocess.run(
            [
                soffice,
                f"-env:UserInstallation=file://{profile}",
                "--headless",
                "--convert-to",
                target,
                "--outdir",
                str(dst),
                *[str(src / n) for n in names],
            ],
            check=True,
            capture_output=True,
            timeout=600,
        )
        for n in names:
            converted = dst / (Path(n).stem + "." + target)
            if converted.exists():
                out[converted.name] = converted.read_bytes()
    return out


def _known_word(rel: str) -> str:
    facts = samples.EXPECTED[rel]
    text = " ".join(
        [facts.get("text", ""), *[c for row in facts.get("table", []) for c in row], *facts.get("form", {}).values()]
    )
    return max((w.strip(".,!?:;()").lower() for w in text.split()), key=len)


def build(folder: Path, copies: int, unique_copy: Callable[[str, bytes, int], bytes]) -> list[Item]:
    """Write `copies` sets of the mixed corpus under `folder`; returns what each file must hold.
    `unique_copy(rel, data, n)` makes copy n of a sample byte-unique without changing its text."""
    items: list[Item] = []
    work = Path(tempfile.mkdtemp(prefix="shoal-realworld-"))
    try:
        ooxml: dict[str, bytes] = {}
        for n in range(copies):
            ooxml[f"report{n:03d}.docx"] = _docx(_sentence(_marker("doc", n)))
            ooxml[f"budget{n:03d}.xlsx"] = _xlsx(_sentence(_marker("xls", n)))
            ooxml[f"deck{n:03d}.pptx"] = _pptx(_sentence(_marker("ppt", n)))
        legacy = _legacy(ooxml, work)
        base = work / "samples"
        samples.write_corpus(base)
        for n in range(copies):
            d = f"copy{n:03d}"
            files: dict[str, tuple[str, str | None, bytes]] = {}

            def add(rel: str, kind: str, marker: str | None, data: bytes, _files=files) -> None:
                _files[rel] = (kind, marker, data)

            for stem, ext in (("report", "doc"), ("budget", "xls"), ("deck", "ppt")):
                name = f"{stem}{n:03d}.{ext}"
                if name in legacy:
                    add(f"legacy/{name}", f"legacy .{ext}", _marker(ext, n), legacy[name])
            text = _sentence(_marker("utf16", n))
            add(
                "text/notes-utf16le-bom.txt",
                "UTF-16/32 text",
                _marker("utf16", n),
                b"\xff\xfe" + text.encode("utf-16-le"),
            )
            add(
                "text/notes-utf16be-bom.txt",
                "UTF-16/32 text",
                _marker("utf16", n),
                b"\xfe\xff" + text.encode("utf-16-be"),
            )
            add("text/notes-utf16le-nobom.txt", "UTF-16/32 text", _marker("utf16", n), text.encode("utf-16-le"))
            add("text/notes-utf32le-bom.txt", "UTF-16/32 text", _marker("utf16", n), text.encode("utf-32"))
            m = _marker("html16", n)
            page = (
                f'<html><head><meta charset="utf-16"><title>Log</title></head><body><p>{_sentence(m)}</p></body></html>'
            )
            add("web/page-utf16.html", "UTF-16 HTML/CSV", m, page.encode("utf-16"))
            add("data/berths-utf16.csv", "UTF-16 HTML/CSV", m, f"berth,note\nB7,{m}\n".encode("utf-16"))
            m = _marker("latin", n)
            page = f'<html><head><meta charset="iso-8859-1"></head><body><p>Caf\u00e9 cr\u00e8me {m}</p></body></html>'
            add("web/page-latin1.html", "HTML (declared charset)", m, page.encode("iso-8859-1"))
            add("photos/page.heic", "HEIC photo (OCR)", _marker("heic", n), _heic(_marker("heic", n)))
            add("pdf/long-60-pages.pdf", "long PDF (60 pages)", _marker("long", n), _long_pdf(_marker("long", n)))
            add("pdf/damaged-no-xref.pdf", "damaged PDF", _marker("damaged", n), _damaged_pdf(_marker("damaged", n)))
            add("office/notes.odt", "ODT", _marker("odt", n), _odt(_sentence(_marker("odt", n))))
            add("books/log.epub", "EPUB", _marker("epub", n), _epub("Log", _sentence(_marker("epub", n))))
            m = _marker("rtf", n)
            add("office/memo.rtf", "RTF", m, ("{\\rtf1\\ansi\\deff0 " + _sentence(m) + "\\par}").encode("cp1252"))
            m = _marker("code", n)
            add("code/tides.py", "source code", m, f'"""Tide tables."""\n\nMARKER = "{m}"\n'.encode())
            add("code/tides.go", "source code", m, f"package tides\n\n// {m} tide tables\nfunc Run() {{}}\n".encode())
            for rel in samples.EXPECTED:
                # byte-unique per copy without changing what the file says; the marker is the
                # sample's longest known word
                add(
                    f"samples/{rel}",
                    "sample corpus",
                    _known_word(rel),
                    unique_copy(rel, (base / rel).read_bytes(), n + 1),
                )
            # Issue 35's files without text: a Markdown table alone, text in an ODT frame, pdftotext
            # output with a control character, a picture-only slide, OOXML under legacy names.
            m = _marker("mdtable", n)
            add("text/simple-table.md", "Markdown table", m, f"| berth | note |\n|---|---|\n| B7 | {m} |\n".encode())
            add(
                "office/simple-frame.odt",
                "ODT (text in a frame)",
                _marker("odtframe", n),
                _odt_frame(_sentence(_marker("odtframe", n))),
            )
            m = _marker("pdftxt", n)
            add("text/report.pdf.txt", "text named .pdf.txt", m, f"{_sentence(m)}\n\x0c\x02Page two.\n".encode())
            add(
                "office/picture.pptx",
                "picture-only PPTX (OCR)",
                _marker("picppt", n),
                _picture_pptx(_marker("picppt", n)),
            )
            add(
                "office/misnamed-docx.doc",
                "OOXML named .doc/.ppt",
                _marker("misdoc", n),
                _docx(_sentence(_marker("misdoc", n))),
            )
            add(
                "office/misnamed-pptx.ppt",
                "OOXML named .doc/.ppt",
                _marker("misdoc", n),
                _pptx(_sentence(_marker("misdoc", n))),
            )
            msg = _msg(_marker("msg", n))
            if msg:
                add("mail/inspection.msg", "Outlook .msg", _marker("msg", n), msg)
            add("controls/empty.txt", "control: empty", None, b"")
            add("controls/encrypted.pdf", "control: encrypted PDF", None, _encrypted_pdf() + f"%{n}\n".encode())
            if n == 0:  # Tika's files are fixed bytes: one copy, else they are duplicates
                for name, word in TIKA_WORDS.items():
                    if (TIKA / name).exists():
                        add(
                            f"tika/{name}", f"legacy .{name.rsplit('.', 1)[1]} (Tika)", word, (TIKA / name).read_bytes()
                        )
            for rel, (kind, marker, data) in files.items():
                path = folder / d / rel
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(data)
                items.append(Item(f"{d}/{rel}", kind, marker))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return items
