"""PDF: text per page and tables (pdfplumber), form fields (pypdf), OCR for pages without a text layer."""

from __future__ import annotations

import io

from shoal.extract.base import (
    Context,
    ExtractedTable,
    Extraction,
    ExtractionSkipped,
    Extractor,
    FormField,
    TextPart,
)

MIN_TEXT_CHARS = 3  # a page with fewer characters in its text layer is treated as scanned


def ocr_image(image, languages: str) -> str:
    import pytesseract

    return pytesseract.image_to_string(image, lang=languages)


class Pdf(Extractor):
    name = "pdf"
    version = "1"
    preload = ("pdfplumber", "pypdf", "pypdfium2", "pytesseract")

    def run(self, ctx: Context) -> Extraction:
        import pdfplumber
        import pypdf
        from pypdf.errors import PdfReadError

        try:
            reader = pypdf.PdfReader(io.BytesIO(ctx.data))
            if reader.is_encrypted and not reader.decrypt(""):
                raise ExtractionSkipped("encrypted PDF: a password is required")
            fields = self._fields(reader)
            info = reader.metadata or {}
        except PdfReadError as exc:
            if "encrypt" in str(exc).lower() or "password" in str(exc).lower():
                raise ExtractionSkipped(f"encrypted PDF: {exc}") from exc
            raise ValueError(f"corrupt PDF: {exc}") from exc
        parts: list[TextPart] = []
        tables: list[ExtractedTable] = []
        ocr_pages: list[int] = []
        try:
            pdf = pdfplumber.open(io.BytesIO(ctx.data), password="")
        except Exception as exc:  # pdfminer raises many types for broken files
            raise ValueError(f"corrupt PDF: {type(exc).__name__}: {exc}") from exc
        with pdf:
            page_count = len(pdf.pages)
            for number, page in enumerate(pdf.pages, 1):
                label = f"page {number}"
                text = page.extract_text() or ""
                if len(text.strip()) < MIN_TEXT_CHARS:
                    text = self._ocr(ctx, number)
                    ocr_pages.append(number)
                parts.append(TextPart(label, text))
                for rows in page.extract_tables():
                    cleaned = [["" if c is None else str(c) for c in row] for row in rows]
                    if any(any(c.strip() for c in row) for row in cleaned):
                        tables.append(ExtractedTable(label, cleaned))
        if fields:
            # Filled-in values are text too: language, entities and PII must see them.
            parts.append(TextPart("form", "\n".join(f"{f.name}: {f.value}" for f in fields if f.value)))
        return Extraction(
            text=parts,
            tables=tables,
            form_fields=fields,
            properties={
                "page_count": page_count,
                "title": _meta(info, "/Title"),
                "author": _meta(info, "/Author"),
                "ocr_pages": ocr_pages,
                "producer": _meta(info, "/Producer"),
            },
        )

    @staticmethod
    def _fields(reader) -> list[FormField]:
        out = []
        for name, field in (reader.get_fields() or {}).items():
            value = field.get("/V")
            ftype = {"/Tx": "text", "/Btn": "button", "/Ch": "choice", "/Sig": "signature"}.get(
                str(field.get("/FT")), str(field.get("/FT") or "unknown")
            )
            if value is not None:
                value = str(value)
                if ftype == "button":
                    value = value.lstrip("/")
            out.append(FormField("form", str(name), ftype, value))
        return out

    def _ocr(self, ctx: Context, number: int) -> str:
        import pypdfium2

        pdf = pypdfium2.PdfDocument(ctx.data)
        try:
            page = pdf[number - 1]
            image = page.render(scale=ctx.settings.ocr_dpi / 72).to_pil()
            return ocr_image(image, ctx.settings.ocr_languages)
        finally:
            pdf.close()


def _meta(info, key: str) -> str | None:
    value = info.get(key) if info else None
    return str(value) if value else None
