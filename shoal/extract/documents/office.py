"""Office documents: DOCX, PPTX, XLSX (python-docx, python-pptx, openpyxl) and ODT (odfpy).

All four are ZIP containers: the bomb check runs before any of them is opened.
"""

from __future__ import annotations

import io
from typing import Any

from shoal.extract.base import Context, ExtractedTable, Extraction, ExtractionSkipped, Extractor, Sections, TextPart
from shoal.extract.safety import check_zip

MAX_SHEET_TEXT_ROWS = 5_000


def _core(props) -> dict[str, Any]:
    author = getattr(props, "author", None) or getattr(props, "creator", None)
    return {"title": props.title or None, "author": author or None}


def _docx_rows(table) -> list[list[str]]:
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


def _int_attr(el, default: int) -> int:
    from docx.oxml.ns import qn

    try:
        return int(el.get(qn("w:val"))) if el is not None else default
    except (TypeError, ValueError):
        return default


class Docx(Extractor):
    name = "docx"
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
            lines: list[str] = []
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
    version = "2"
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

        def walk(parent) -> None:
            for el in parent.childNodes:
                qname = getattr(el, "qname", None)  # text and comment nodes have none
                if qname == (TEXTNS, "h"):
                    sections.start(teletype.extractText(el).strip() or sections.heading)
                    sections.add(teletype.extractText(el))
                elif qname == (TEXTNS, "p"):
                    sections.add(teletype.extractText(el))
                elif qname is not None and qname[0] == TEXTNS:
                    walk(el)  # sections, lists and list items hold paragraphs too (tables: below)

        walk(doc.text)
        parts = sections.done()
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
