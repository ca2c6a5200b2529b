"""Office documents: DOCX, PPTX, XLSX (python-docx, python-pptx, openpyxl) and ODT (odfpy).

All four are ZIP containers: the bomb check runs before any of them is opened.
"""

from __future__ import annotations

import io

from shoal.extract.base import Context, ExtractedTable, Extraction, ExtractionSkipped, Extractor, Sections, TextPart
from shoal.extract.safety import check_zip

MAX_SHEET_TEXT_ROWS = 5_000


def _core(props) -> dict[str, str | None]:
    author = getattr(props, "author", None) or getattr(props, "creator", None)
    return {"title": props.title or None, "author": author or None}


class Docx(Extractor):
    name = "docx"
    version = "1"
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
        tables = [
            ExtractedTable(f"table {i + 1}", [[cell.text for cell in row.cells] for row in t.rows])
            for i, t in enumerate(document.tables)
        ]
        for t in tables:
            parts.append(TextPart(t.part, "\n".join(" | ".join(r) for r in t.rows)))
        return Extraction(text=parts, tables=tables, properties=_core(document.core_properties))


class Pptx(Extractor):
    name = "pptx"
    version = "1"
    preload = ("pptx",)

    def run(self, ctx: Context) -> Extraction:
        from pptx import Presentation

        check_zip(ctx.data, ctx.settings, "PPTX")
        deck = Presentation(io.BytesIO(ctx.data))
        parts, tables = [], []
        for number, slide in enumerate(deck.slides, 1):
            label = f"slide {number}"
            lines = []
            for shape in slide.shapes:
                if shape.has_text_frame:
                    lines.extend(p.text for p in shape.text_frame.paragraphs if p.text)
                if getattr(shape, "has_table", False) and shape.has_table:
                    rows = [[c.text for c in r.cells] for r in shape.table.rows]
                    tables.append(ExtractedTable(label, rows))
                    lines.extend(" | ".join(r) for r in rows)
            if slide.has_notes_slide and slide.notes_slide.notes_text_frame is not None:
                notes = slide.notes_slide.notes_text_frame.text
                if notes.strip():
                    lines.append(notes)
            parts.append(TextPart(label, "\n".join(lines)))
        props = _core(deck.core_properties)
        props["page_count"] = len(parts)
        return Extraction(text=parts, tables=tables, properties=props)


class Xlsx(Extractor):
    name = "xlsx"
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


class Odt(Extractor):
    name = "odt"
    version = "1"
    preload = ("odf.opendocument", "odf.teletype", "odf.table")

    def run(self, ctx: Context) -> Extraction:
        from odf import teletype
        from odf.namespaces import TEXTNS
        from odf.opendocument import load
        from odf.table import Table, TableCell, TableRow

        zf = check_zip(ctx.data, ctx.settings, "ODT")
        if "META-INF/manifest.xml" in zf.namelist() and b"encryption-data" in zf.read("META-INF/manifest.xml"):
            raise ExtractionSkipped("encrypted ODT: a password is required")
        doc = load(io.BytesIO(ctx.data))
        sections = Sections()
        for el in doc.text.childNodes:
            if el.qname == (TEXTNS, "h"):
                sections.start(teletype.extractText(el).strip() or sections.heading)
                sections.add(teletype.extractText(el))
            elif el.qname == (TEXTNS, "p"):
                sections.add(teletype.extractText(el))
        parts = sections.done()
        tables = []
        for i, t in enumerate(doc.getElementsByType(Table)):
            rows = [
                [teletype.extractText(c) for c in r.getElementsByType(TableCell)] for r in t.getElementsByType(TableRow)
            ]
            tables.append(ExtractedTable(f"table {i + 1}", rows))
            parts.append(TextPart(f"table {i + 1}", "\n".join(" | ".join(r) for r in rows)))
        meta = doc.meta
        title = author = None
        for node in meta.childNodes if meta is not None else []:
            if node.qname[1] == "title":
                title = teletype.extractText(node)
            elif node.qname[1] in ("initial-creator", "creator"):
                author = author or teletype.extractText(node)
        return Extraction(text=parts, tables=tables, properties={"title": title, "author": author})
