"""A small document corpus written for Shoal, with the facts each file is known to contain.

The demo ingests it, the tests assert against `EXPECTED`, and the extraction benchmark
scales it up. Every file is generated here (nothing downloaded), so its content is known.
"""

from __future__ import annotations

import io
import json
from email.message import EmailMessage
from pathlib import Path
from typing import Any

POSITIVE_REVIEW = (
    "I absolutely love this coffee grinder. It is quiet, fast and the burrs are excellent. "
    "Highly recommended to anyone who enjoys fresh espresso!"
)
NEGATIVE_REVIEW = (
    "Terrible experience with the café grinder. It broke after two days, the motor smelled burnt "
    "and support never answered my emails. I want a refund."
)
FRENCH_REVIEW = (
    "Ce moulin à café est vraiment excellent. Le café est plus savoureux et la machine est silencieuse. "
    "Je le recommande à tous mes amis."
)
EMAIL_BODY = (
    "Hello Northwind team,\n\nPlease find attached the order summary for order 1001. "
    "You can reach me at +1 212-555-0198 if anything is unclear.\n\nBest regards,\nMaria Garcia\n"
)
INVOICE_ROWS = [
    ["Item", "Qty", "Unit price", "Total"],
    ["Burr grinder", "2", "149.00", "298.00"],
    ["Espresso cups", "6", "8.50", "51.00"],
    ["Descaler", "3", "12.00", "36.00"],
]
FORM_VALUES = {"full_name": "Jonas Berg", "email": "jonas.berg@example.org", "city": "Oslo"}
SCANNED_SENTENCE = "The quarterly audit found no material weaknesses in the warehouse ledger."
ARTICLE_TITLE = "How Shoal keeps raw files governed"
ARTICLE_PARAGRAPH = (
    "Shoal copies every raw file into a zone laid out by source and day, extracts its text and tables, "
    "and records what it found in Iceberg tables that people can query with SQL."
)
REPORT_HEADING = "Quarterly operations report"
REPORT_PARAGRAPH = "Shipments from the Rotterdam warehouse grew by twelve percent this quarter."
REPORT_TABLE = [["Region", "Orders"], ["North", "1200"], ["South", "950"]]

# source path -> facts the extraction must find (used by tests, the demo and the benchmark's recall).
EXPECTED: dict[str, dict] = {
    "reviews/grinder-positive.txt": {
        "media_type": "text/plain",
        "text": POSITIVE_REVIEW,
        "sentiment": "positive",
        "language": "en",
    },
    "reviews/grinder-negative.txt": {
        "media_type": "text/plain",
        "text": NEGATIVE_REVIEW,
        "sentiment": "negative",
        "language": "en",
        "encoding": "cp1252",
    },
    "reviews/moulin-fr.txt": {
        "media_type": "text/plain",
        "text": FRENCH_REVIEW,
        "language": "fr",
        "encoding": "utf-16-le",
    },
    "mail/order-1001.eml": {
        "media_type": "message/rfc822",
        "text": EMAIL_BODY,
        "pii": ["EMAIL_ADDRESS", "PERSON"],
        "children": ["order-1001.csv"],
    },
    "invoices/invoice-1001.pdf": {
        "media_type": "application/pdf",
        "table": INVOICE_ROWS,
        "pages": 1,
        "text": "Invoice 1001 Burr grinder Espresso cups Descaler",
    },
    "forms/membership-form.pdf": {
        "media_type": "application/pdf",
        "form": FORM_VALUES,
        "text": "Membership application",
    },
    "scans/audit-letter.pdf": {"media_type": "application/pdf", "text": SCANNED_SENTENCE, "ocr": True},
    "web/governed-raw-files.html": {"media_type": "text/html", "title": ARTICLE_TITLE, "text": ARTICLE_PARAGRAPH},
    "office/quarterly-report.docx": {
        "media_type": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
        "text": REPORT_PARAGRAPH,
        "table": REPORT_TABLE,
        "title": "Quarterly report",
    },
    "office/regional-sales.xlsx": {
        "media_type": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
        "table": [["Region", "Revenue"], ["North", "48000"], ["South", "39500"]],
        "text": "North 48000 South 39500",
    },
    "office/roadmap.pptx": {
        "media_type": "application/vnd.openxmlformats-officedocument.presentationml.presentation",
        "text": "Roadmap 2027 Launch the semantic search service",
    },
    "notes/meeting-notes.md": {
        "media_type": "text/markdown",
        "text": "Decide on the retention policy for raw scans",
        "title": "Meeting notes",
    },
    "data/suppliers.json": {
        "media_type": "application/json",
        "text": "Rotterdam Beans BV",
        "table": [["name", "city"], ["Rotterdam Beans BV", "Rotterdam"], ["Oslo Roasters", "Oslo"]],
    },
}


def _font(size: int) -> Any:
    from PIL import ImageFont

    for path in ("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf", "/usr/share/fonts/dejavu/DejaVuSans.ttf"):
        if Path(path).is_file():
            return ImageFont.truetype(path, size)
    return ImageFont.load_default(size=size)


def email_bytes() -> bytes:
    msg = EmailMessage()
    msg["From"] = "Maria Garcia <maria.garcia@example.com>"
    msg["To"] = "orders@northwind.example"
    msg["Subject"] = "Order 1001 confirmation"
    msg["Date"] = "Mon, 16 Nov 2026 09:30:00 +0000"
    msg["Message-ID"] = "<order-1001@example.com>"
    msg.set_content(EMAIL_BODY)
    csv_text = "sku,quantity\nGR-200,2\nCUP-6,6\n"
    msg.add_attachment(csv_text.encode(), maintype="text", subtype="csv", filename="order-1001.csv")
    return msg.as_bytes()


def invoice_pdf() -> bytes:
    from reportlab.lib import colors
    from reportlab.lib.pagesizes import A4
    from reportlab.lib.styles import getSampleStyleSheet
    from reportlab.platypus import Paragraph, SimpleDocTemplate, Spacer, Table, TableStyle

    buf = io.BytesIO()
    doc = SimpleDocTemplate(buf, pagesize=A4, title="Invoice 1001", author="Northwind Coffee")
    styles = getSampleStyleSheet()
    table = Table(INVOICE_ROWS)
    table.setStyle(TableStyle([("GRID", (0, 0), (-1, -1), 0.8, colors.black)]))
    doc.build(
        [
            Paragraph("Invoice 1001", styles["Title"]),
            Paragraph("Northwind Coffee, Rotterdam", styles["Normal"]),
            Spacer(1, 12),
            table,
        ]
    )
    return buf.getvalue()


def form_pdf() -> bytes:
    from reportlab.lib.pagesizes import A4
    from reportlab.pdfgen import canvas

    buf = io.BytesIO()
    c = canvas.Canvas(buf, pagesize=A4)
    c.setTitle("Membership application")
    c.drawString(72, 780, "Membership application")
    y = 740
    for name, value in FORM_VALUES.items():
        c.drawString(72, y + 5, name.replace("_", " ").title())
        c.acroForm.textfield(name=name, value=value, x=180, y=y, width=250, height=20)
        y -= 40
    c.drawString(72, y + 5, "Agree to terms")
    c.acroForm.checkbox(name="agree", x=180, y=y, size=16, checked=True)
    c.save()
    return buf.getvalue()


def scanned_pdf(sentence: str = SCANNED_SENTENCE) -> bytes:
    """An image-only page (no text layer), as a scanner would produce."""
    from PIL import Image, ImageDraw

    img = Image.new("L", (1700, 2200), 255)
    draw = ImageDraw.Draw(img)
    font = _font(44)
    words, lines, line = sentence.split(), [], ""
    for w in words:
        if draw.textlength(f"{line} {w}".strip(), font=font) > 1400:
            lines.append(line)
            line = w
        else:
            line = f"{line} {w}".strip()
    lines.append(line)
    for i, text in enumerate(lines):
        draw.text((150, 200 + i * 70), text, fill=0, font=font)
    buf = io.BytesIO()
    img.save(buf, format="PDF", resolution=200.0)
    return buf.getvalue()


def article_html() -> bytes:
    return f"""<!doctype html>
<html><head><title>{ARTICLE_TITLE}</title><meta name="author" content="Ada Lindqvist"></head>
<body><nav><a href="/">Home</a></nav>
<article><h1>{ARTICLE_TITLE}</h1>
<p>{ARTICLE_PARAGRAPH}</p>
<p>Access is granted per source, and every read of a raw file is audited. Read the
<a href="https://example.org/shoal/governance">governance guide</a> for details.</p>
<table><tr><th>Zone</th><th>Contents</th></tr><tr><td>raw</td><td>original files</td></tr>
<tr><td>extracted</td><td>JSON results</td></tr></table>
</article><script>var tracking = "not text";</script></body></html>""".encode()


def report_docx() -> bytes:
    import docx

    d = docx.Document()
    d.core_properties.title = "Quarterly report"
    d.core_properties.author = "Operations"
    d.add_heading(REPORT_HEADING, level=1)
    d.add_paragraph(REPORT_PARAGRAPH)
    t = d.add_table(rows=len(REPORT_TABLE), cols=2)
    for r, row in enumerate(REPORT_TABLE):
        for c, value in enumerate(row):
            t.cell(r, c).text = value
    buf = io.BytesIO()
    d.save(buf)
    return buf.getvalue()


def sales_xlsx() -> bytes:
    import openpyxl

    wb = openpyxl.Workbook()
    ws = wb.active
    ws.title = "Sales"
    for row in (["Region", "Revenue"], ["North", 48000], ["South", 39500]):
        ws.append(row)
    buf = io.BytesIO()
    wb.save(buf)
    return buf.getvalue()


def roadmap_pptx() -> bytes:
    from pptx import Presentation

    deck = Presentation()
    slide = deck.slides.add_slide(deck.slide_layouts[1])
    slide.shapes.title.text = "Roadmap 2027"
    slide.placeholders[1].text = "Launch the semantic search service"
    buf = io.BytesIO()
    deck.save(buf)
    return buf.getvalue()


def write_corpus(folder: Path) -> dict[str, dict]:
    """Write the sample corpus under `folder`; returns EXPECTED (source path -> known facts)."""
    files: dict[str, bytes] = {
        "reviews/grinder-positive.txt": POSITIVE_REVIEW.encode("utf-8"),
        "reviews/grinder-negative.txt": NEGATIVE_REVIEW.encode("cp1252"),
        "reviews/moulin-fr.txt": b"\xff\xfe" + FRENCH_REVIEW.encode("utf-16-le"),
        "mail/order-1001.eml": email_bytes(),
        "invoices/invoice-1001.pdf": invoice_pdf(),
        "forms/membership-form.pdf": form_pdf(),
        "scans/audit-letter.pdf": scanned_pdf(),
        "web/governed-raw-files.html": article_html(),
        "office/quarterly-report.docx": report_docx(),
        "office/regional-sales.xlsx": sales_xlsx(),
        "office/roadmap.pptx": roadmap_pptx(),
        "notes/meeting-notes.md": (
            b"# Meeting notes\n\nAttendees: Ada, Jonas.\n\n## Decisions\n\n"
            b"- Decide on the retention policy for raw scans\n- See [the policy draft](https://example.org/policy)\n"
        ),
        "data/suppliers.json": json.dumps(
            [{"name": "Rotterdam Beans BV", "city": "Rotterdam"}, {"name": "Oslo Roasters", "city": "Oslo"}]
        ).encode(),
    }
    for rel, data in files.items():
        path = folder / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return EXPECTED
