"""Issue 35: real files that yielded no text, one test per kind (no Spark: extractors called directly).

Every test file is built here: a Markdown table, an ODT whose text sits in a frame, a text file
named `*.pdf.txt` with a stray control character, a PPTX whose slide is a picture of text,
OOXML files saved as `.doc`/`.ppt`, and a long PDF read page by page.
"""

from __future__ import annotations

import io

import pytest

from shoal.config import ExtractSettings
from shoal.extract.base import Context, Extraction, ObjectInfo
from shoal.extract.router import Router
from shoal.ingest.sniff import detect_media_type

FONT = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"
router = Router(ExtractSettings())


def run(data: bytes, name: str, **settings) -> tuple[str, Extraction]:
    """Sniff as ingest does, then run the first extractor of the object's route."""
    media_type = detect_media_type(data[:65536], name, data)
    extractor = router.extractors[router.chain(media_type)[0]]
    obj = ObjectInfo("3" * 32, "/dev/null", media_type, name, len(data))
    return media_type, extractor.run(Context(obj, data, ExtractSettings(**settings)))


def all_text(ex: Extraction) -> str:
    return "\n".join(p.text for p in ex.text)


def test_markdown_table_alone_is_text() -> None:
    data = b"| berth | crane |\n|-------|-------|\n| B7    | Liebherr zqmdtable |\n"
    media_type, ex = run(data, "simple-table.md")
    assert media_type == "text/markdown"
    assert ex.tables[0].rows == [["berth", "crane"], ["B7", "Liebherr zqmdtable"]]
    assert "Liebherr zqmdtable" in all_text(ex)


def test_odt_text_in_a_frame() -> None:
    from odf.draw import Frame, TextBox
    from odf.opendocument import OpenDocumentText
    from odf.text import P

    doc = OpenDocumentText()
    # Anchored to the page: the frame sits in the body itself, outside any paragraph (a frame
    # inside a paragraph was read before, through the paragraph's text).
    frame = Frame(width="10cm", height="3cm", anchortype="page", anchorpagenumber="1")
    box = TextBox()
    box.addElement(P(text="Harbour log zqodtframe in a text box"))
    frame.addElement(box)
    doc.text.addElement(frame)
    buf = io.BytesIO()
    doc.save(buf)
    media_type, ex = run(buf.getvalue(), "simple.odt")
    assert media_type == "application/vnd.oasis.opendocument.text"
    assert "zqodtframe" in all_text(ex)


def test_odt_xml_fallback_reads_paragraphs_odfpy_misses() -> None:
    from shoal.extract.documents.office import _odt_xml_text

    content = (
        b'<office:document-content xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0"'
        b' xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0"'
        b' xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0" xmlns:x="urn:example">'
        b"<office:body><office:text><x:unknown><text:p>kept <text:span>zqodtxml</text:span></text:p></x:unknown>"
        b"<text:tracked-changes><text:p>deleted words</text:p></text:tracked-changes>"
        b"<table:table><table:table-row><table:table-cell><text:p>cell</text:p></table:table-cell>"
        b"</table:table-row></table:table></office:text></office:body></office:document-content>"
    )
    parts = _odt_xml_text(content)
    assert [p.text for p in parts] == ["kept zqodtxml"]


@pytest.mark.parametrize(
    "data",
    [
        # pdftotext output: a page's control characters make libmagic answer "data".
        b"Annual report zqpdftxt\n\x02Revenue grew by four percent in the harbour division.\n" * 20,
        "Résumé of the inspection zqpdftxt – cranes\x01 and berths.\n".encode() * 20,
    ],
)
def test_text_named_pdf_txt_is_text(data: bytes) -> None:
    import magic

    assert magic.from_buffer(data, mime=True) == "application/octet-stream"  # what the sniffer said
    media_type, ex = run(data, "annual-report.pdf.txt")
    assert media_type == "text/plain"
    assert "zqpdftxt" in all_text(ex)


def test_binary_named_txt_is_not_text() -> None:
    import random

    data = b"\x00\x01" + random.Random(35).randbytes(65534)  # noise, as compressed data is
    assert detect_media_type(data[:65536], "x.pdf.txt", data) == "application/octet-stream"


def _picture_of_text(text: str) -> bytes:
    from PIL import Image, ImageDraw, ImageFont

    image = Image.new("RGB", (1400, 260), "white")
    ImageDraw.Draw(image).text((40, 80), text, fill="black", font=ImageFont.truetype(FONT, 64))
    buf = io.BytesIO()
    image.save(buf, format="PNG")
    return buf.getvalue()


def test_pptx_slide_that_is_a_picture_is_ocrd() -> None:
    from pptx import Presentation
    from pptx.util import Inches

    prs = Presentation()
    slide = prs.slides.add_slide(prs.slide_layouts[6])  # blank: no placeholders, no text
    slide.shapes.add_picture(io.BytesIO(_picture_of_text("Quarterly harbour tonnage")), Inches(0.5), Inches(1))
    texty = prs.slides.add_slide(prs.slide_layouts[1])
    texty.shapes.title.text = "Cranes and berths"
    texty.shapes.add_picture(io.BytesIO(_picture_of_text("not read: the slide has text")), Inches(0.5), Inches(4))
    buf = io.BytesIO()
    prs.save(buf)
    _, ex = run(buf.getvalue(), "picture.pptx")
    assert "harbour tonnage" in ex.text[0].text.lower()
    assert ex.properties["ocr_slides"] == [1]
    assert "not read" not in ex.text[1].text


def _docx(text: str) -> bytes:
    from docx import Document

    doc = Document()
    doc.add_paragraph(text)
    buf = io.BytesIO()
    doc.save(buf)
    return buf.getvalue()


def _pptx(text: str) -> bytes:
    from pptx import Presentation

    prs = Presentation()
    prs.slides.add_slide(prs.slide_layouts[0]).shapes.title.text = text
    buf = io.BytesIO()
    prs.save(buf)
    return buf.getvalue()


@pytest.mark.parametrize(("build", "name", "legacy"), [(_docx, "minutes.doc", "doc"), (_pptx, "deck.ppt", "ppt")])
def test_ooxml_saved_with_a_legacy_extension(build, name: str, legacy: str) -> None:
    data = build("Berth schedule zqmisnamed")
    media_type, ex = run(data, name)
    assert "openxmlformats" in media_type  # the sniffer reads the content, not the name
    assert "zqmisnamed" in all_text(ex)
    # An object typed by its name before (an older sniffer): the legacy extractor routes by content.
    obj = ObjectInfo("4" * 32, "/dev/null", f"application/{legacy}", name, len(data))
    routed = router.extractors[legacy].run(Context(obj, data, ExtractSettings()))
    assert "zqmisnamed" in all_text(routed)


def test_zip_that_is_not_office_named_doc_says_what_it_is() -> None:
    import zipfile

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("a.txt", "hello")
    obj = ObjectInfo("5" * 32, "/dev/null", "application/msword", "old.doc", len(buf.getvalue()))
    with pytest.raises(ValueError, match=r"old\.doc: typed application/msword but is a ZIP"):
        router.extractors["doc"].run(Context(obj, buf.getvalue(), ExtractSettings()))


def _long_pdf(pages: int) -> bytes:
    from reportlab.pdfgen import canvas

    buf = io.BytesIO()
    c = canvas.Canvas(buf)
    for n in range(1, pages + 1):
        for line in range(12):
            c.drawString(40, 800 - line * 18, f"Page {n} line {line}: the tide table for berth {line} zqp{n}x")
        c.showPage()
    c.save()
    return buf.getvalue()


def test_long_pdf_is_read_page_by_page(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every page is extracted, and no more than one page holds its parsed layout at a time."""
    import pdfplumber.page

    open_pages: set[int] = set()
    most = 0
    extract_text = pdfplumber.page.Page.extract_text
    close = pdfplumber.page.Page.close

    def tracked_extract(self, *args, **kwargs):
        nonlocal most
        open_pages.add(id(self))
        most = max(most, len(open_pages))
        return extract_text(self, *args, **kwargs)

    def tracked_close(self) -> None:
        open_pages.discard(id(self))
        close(self)

    # Spies that call the real methods: the extraction itself is unchanged.
    monkeypatch.setattr(pdfplumber.page.Page, "extract_text", tracked_extract)
    monkeypatch.setattr(pdfplumber.page.Page, "close", tracked_close)
    pages = 30
    _, ex = run(_long_pdf(pages), "DA-long.pdf", pdf_text="pdfplumber")
    assert ex.properties["page_count"] == pages
    assert [p.part for p in ex.text] == [f"page {n}" for n in range(1, pages + 1)]
    assert all(f"zqp{n}x" in ex.text[n - 1].text for n in range(1, pages + 1))
    assert most == 1 and not open_pages  # each page's layout freed before the next is parsed
    # PDFium (the default reader) reads the same pages, and opens none with pdfplumber: no rules drawn.
    most = 0
    _, fast = run(_long_pdf(pages), "DA-long.pdf")
    assert [p.part for p in fast.text] == [p.part for p in ex.text] and most == 0
    assert all(f"zqp{n}x" in fast.text[n - 1].text for n in range(1, pages + 1))


def test_pdfium_text_keeps_pdfplumber_tables_and_words() -> None:
    from shoal.samples import corpus as samples

    for data in (samples.invoice_pdf(), samples.form_pdf()):
        _, slow = run(data, "i.pdf", pdf_text="pdfplumber")
        _, fast = run(data, "i.pdf")
        assert [t.rows for t in fast.tables] == [t.rows for t in slow.tables]
        assert fast.form_fields == slow.form_fields
        assert set(all_text(fast).split()) == set(all_text(slow).split())
    assert [t.rows for t in run(samples.invoice_pdf(), "i.pdf")[1].tables][0] == samples.INVOICE_ROWS
