"""Office documents: DOCX, PPTX, XLSX (python-docx, python-pptx, openpyxl) and ODT (odfpy).

All four are ZIP containers: the bomb check runs before any of them is opened.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from typing import Any

from shoal.extract.base import Context, ExtractedTable, Extraction, ExtractionSkipped, Extractor, Sections, TextPart
from shoal.extract.safety import check_zip

MAX_SHEET_TEXT_ROWS = 5_000
MIN_TEXT_CHARS = 3  # a slide with less text than this is read from its pictures (as PDF scans are)
MIN_OCR_SIDE = 32  # pixels: smaller pictures are icons, not text


def _core(props: Any) -> dict[str, Any]:
    author = getattr(props, "author", None) or getattr(props, "creator", None)
    return {"title": props.title or None, "author": author or None}


def _docx_rows(table: Any) -> list[list[str]]:
    """A DOCX table's rows read from its `w:tr`/`w:tc` XML, one value per grid column.

    python-docx's cell grid raises on merges it cannot resolve (`no 'tc' element at
    grid_offset=...`) and repeats a merged cell's text in every column and row it spans;
    here a merged cell's text appears once, in its first column and row, and the columns
    it covers read "".
    """
    from docx.oxml.ns import qn
    from docx.text.paragraph import Paragraph

    rows = []
    for tr in table._tbl.iterchildren(qn("w:tr")):
        row: list[str] = []
        pr = tr.find(qn("w:trPr"))
        before = pr.find(qn("w:gridBefore")) if pr is not None else None
        if before is not None:
            row.extend([""] * _int_attr(before, 0))
        for tc in tr.iterchildren(qn("w:tc")):
            tcpr = tc.find(qn("w:tcPr"))
            span = vmerge = None
            if tcpr is not None:
                span, vmerge = tcpr.find(qn("w:gridSpan")), tcpr.find(qn("w:vMerge"))
            continued = vmerge is not None and vmerge.get(qn("w:val"), "continue") == "continue"
            # Only the text is read: the paragraph needs no story part (python-docx types it as required).
            paras = (Paragraph(p, None).text for p in tc.iterchildren(qn("w:p")))  # type: ignore[arg-type]
            text = "" if continued else "\n".join(paras)
            row.append(text)
            row.extend([""] * (max(1, _int_attr(span, 1)) - 1))
        rows.append(row)
    return rows


def _int_attr(el: Any, default: int) -> int:
    from docx.oxml.ns import qn

    try:
        return int(el.get(qn("w:val"))) if el is not None else default
    except (TypeError, ValueError):
        return default


class Docx(Extractor):
    name = "docx"
    media_type = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
    version = "2"
    preload = ("docx",)

    def run(self, ctx: Context) -> Extraction:
        import docx

        check_zip(ctx.data, ctx.settings, "DOCX")
        document = docx.Document(io.BytesIO(ctx.data))
        sections = Sections()
        for p in document.paragraphs:
            style = (p.style.name or "") if p.style is not None else ""
            if style.startswith(("Heading", "Title")) and p.text.strip():
                sections.start(p.text.strip())
            sections.add(p.text)
        parts = sections.done()
        tables = [ExtractedTable(f"table {i + 1}", _docx_rows(t)) for i, t in enumerate(document.tables)]
        for t in tables:
            parts.append(TextPart(t.part, "\n".join(" | ".join(r) for r in t.rows)))
        return Extraction(text=parts, tables=tables, properties=_core(document.core_properties))


def _pictures(shapes: Any) -> Iterator[bytes]:
    """The image bytes of a slide's pictures, groups included (picture placeholders too)."""
    from pptx.enum.shapes import MSO_SHAPE_TYPE

    for shape in shapes:
        if shape.shape_type == MSO_SHAPE_TYPE.GROUP:
            yield from _pictures(shape.shapes)
            continue
        try:
            image = shape.image  # pictures and filled picture placeholders have one
        except (AttributeError, ValueError, KeyError):
            continue
        yield image.blob


class Pptx(Extractor):
    name = "pptx"
    media_type = "application/vnd.openxmlformats-officedocument.presentationml.presentation"
    version = "2"  # 2: slides that are pictures are OCR'd
    preload = ("pptx", "pytesseract")

    def run(self, ctx: Context) -> Extraction:
        from pptx import Presentation

        check_zip(ctx.data, ctx.settings, "PPTX")
        deck = Presentation(io.BytesIO(ctx.data))
        parts, tables = [], []
        ocr_slides: list[int] = []
        problems: list[str] = []
        for number, slide in enumerate(deck.slides, 1):
            label = f"slide {number}"
            lines: list[str] = []
            for shape in slide.shapes:
                if shape.has_text_frame:
                    lines.extend(p.text for p in shape.text_frame.paragraphs if p.text)
                if getattr(shape, "has_table", False) and shape.has_table:
                    rows = [[c.text for c in r.cells] for r in shape.table.rows]
                    tables.append(ExtractedTable(label, rows))
                    lines.extend(" | ".join(r) for r in rows)
            if sum(len(line.strip()) for line in lines) < MIN_TEXT_CHARS:
                # A slide that is a picture (a scanned or exported deck): read its pictures as scans are.
                ocr = [t for t in (self._ocr(ctx, blob, label, problems) for blob in _pictures(slide.shapes)) if t]
                if ocr:
                    lines.extend(ocr)
                    ocr_slides.append(number)
            if slide.has_notes_slide and slide.notes_slide.notes_text_frame is not None:
                notes = slide.notes_slide.notes_text_frame.text
                if notes.strip():
                    lines.append(notes)
            parts.append(TextPart(label, "\n".join(lines)))
        props = _core(deck.core_properties)
        props["page_count"] = len(parts)
        props["ocr_slides"] = ocr_slides
        return Extraction(
            text=parts, tables=tables, properties=props, details={"problems": problems} if problems else {}
        )

    @staticmethod
    def _ocr(ctx: Context, blob: bytes, label: str, problems: list[str]) -> str:
        from shoal.extract.base import ExtractionRefused
        from shoal.extract.documents.pdf import ocr_image
        from shoal.extract.media.frames import open_image

        try:
            image = open_image(blob, ctx.settings.media.max_pixels)
            if min(image.size) < MIN_OCR_SIDE:
                return ""  # an icon or a bullet: no text worth a tesseract run
            return ocr_image(image.convert("RGB"), ctx.settings.ocr_languages).strip()
        except (ValueError, ExtractionRefused) as exc:  # one unreadable picture: the deck's text is kept
            problems.append(f"{label}: picture: {exc}")
            return ""


class Xlsx(Extractor):
    name = "xlsx"
    media_type = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
    version = "1"
    preload = ("openpyxl",)

    def run(self, ctx: Context) -> Extraction:
        import openpyxl

        check_zip(ctx.data, ctx.settings, "XLSX")
        wb = openpyxl.load_workbook(io.BytesIO(ctx.data), read_only=True, data_only=True)
        try:
            parts, tables = [], []
            for ws in wb.worksheets:
                label = f"sheet {ws.title}"
                rows = [["" if v is None else str(v) for v in row] for row in ws.iter_rows(values_only=True)]
                while rows and not any(rows[-1]):
                    rows.pop()
                tables.append(ExtractedTable(label, rows))
                parts.append(
                    TextPart(label, "\n".join(" ".join(c for c in r if c) for r in rows[:MAX_SHEET_TEXT_ROWS]))
                )
            props = _core(wb.properties)
            props["sheets"] = [ws.title for ws in wb.worksheets]
        finally:
            wb.close()
        return Extraction(text=parts, tables=tables, properties=props)


# Deleted text kept for change tracking, and notes' bodies already read in place.
_ODT_SKIP = {
    ("urn:oasis:names:tc:opendocument:xmlns:text:1.0", "tracked-changes"),
    ("urn:oasis:names:tc:opendocument:xmlns:text:1.0", "sequence-decls"),
    ("urn:oasis:names:tc:opendocument:xmlns:text:1.0", "variable-decls"),
}


def _odt_xml_text(content: bytes) -> list[TextPart]:
    """Every paragraph and heading of content.xml outside tables (read apart), with the XML parser alone."""
    from defusedxml.ElementTree import fromstring

    text_ns = "{urn:oasis:names:tc:opendocument:xmlns:text:1.0}"
    table = "{urn:oasis:names:tc:opendocument:xmlns:table:1.0}table"
    lines: list[str] = []

    def walk(el: Any) -> None:
        for child in el:
            if child.tag in (f"{text_ns}p", f"{text_ns}h"):
                lines.append("".join(child.itertext()))
            elif child.tag not in (table, f"{text_ns}tracked-changes"):
                walk(child)

    walk(fromstring(content))
    text = "\n".join(line for line in lines if line.strip())
    return [TextPart("document", text)] if text.strip() else []


class Odt(Extractor):
    name = "odt"
    version = "3"  # 3: text in frames, text boxes and shapes
    preload = ("odf.opendocument", "odf.teletype", "odf.table")

    def run(self, ctx: Context) -> Extraction:
        from odf import teletype
        from odf.namespaces import TABLENS, TEXTNS
        from odf.opendocument import load
        from odf.table import Table, TableCell, TableRow

        zf = check_zip(ctx.data, ctx.settings, "ODT")
        if "META-INF/manifest.xml" in zf.namelist() and b"encryption-data" in zf.read("META-INF/manifest.xml"):
            raise ExtractionSkipped("encrypted ODT: a password is required")
        doc = load(io.BytesIO(ctx.data))
        sections = Sections()

        def walk(parent: Any) -> None:
            for el in parent.childNodes:
                qname = getattr(el, "qname", None)  # text and comment nodes have none
                if qname == (TEXTNS, "h"):
                    sections.start(teletype.extractText(el).strip() or sections.heading)
                    sections.add(teletype.extractText(el))
                elif qname == (TEXTNS, "p"):
                    sections.add(teletype.extractText(el))
                elif qname is not None and qname[0] != TABLENS and qname not in _ODT_SKIP:
                    # Sections, lists, frames, text boxes and shapes hold paragraphs too (tables: below).
                    walk(el)

        walk(doc.text)
        parts = sections.done()
        if not parts:
            # Whatever odfpy's tree misses (an element it does not model), the XML still holds.
            parts = _odt_xml_text(zf.read("content.xml")) if "content.xml" in zf.namelist() else []
        tables = []
        for i, t in enumerate(doc.getElementsByType(Table)):
            rows = [
                [teletype.extractText(c).strip() for c in r.getElementsByType(TableCell)]
                for r in t.getElementsByType(TableRow)
            ]
            tables.append(ExtractedTable(f"table {i + 1}", rows))
            parts.append(TextPart(f"table {i + 1}", "\n".join(" | ".join(r) for r in rows)))
        meta = doc.meta
        title = author = None
        for node in meta.childNodes if meta is not None else []:
            local = (getattr(node, "qname", None) or ("", ""))[1]
            if local == "title":
                title = teletype.extractText(node)
            elif local in ("initial-creator", "creator"):
                author = author or teletype.extractText(node)
        return Extraction(text=parts, tables=tables, properties={"title": title, "author": author})
