"""PDF: text per page and tables (pdfplumber), form fields (pypdf), OCR for pages without a text layer."""

from __future__ import annotations

import io
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from shoal.extract.base import (
    Context,
    ExtractedTable,
    Extraction,
    ExtractionSkipped,
    Extractor,
    FormField,
    TextPart,
)

if TYPE_CHECKING:
    import PIL.Image

MIN_TEXT_CHARS = 3  # a page with fewer characters in its text layer is treated as scanned


def ocr_image(image: PIL.Image.Image, languages: str) -> str:
    import pytesseract

    return pytesseract.image_to_string(image, lang=languages)


class Pdf(Extractor):
    name = "pdf"
    version = "3"  # 2: ruled tables on scanned pages; 3: text by PDFium (pdf_text), pages streamed
    preload = ("pdfplumber", "pypdf", "pypdfium2", "pytesseract")

    def run(self, ctx: Context) -> Extraction:
        import pypdf
        from pypdf.errors import PdfReadError

        problems: list[str] = []  # what a parser could not read, for the JSON output

        fields: list[FormField] = []
        info: dict = {}
        try:
            reader = pypdf.PdfReader(io.BytesIO(ctx.data))
            if reader.is_encrypted and not reader.decrypt(""):
                raise ExtractionSkipped("encrypted PDF: a password is required")
            fields = self._fields(reader)
            info = reader.metadata or {}
        except PdfReadError as exc:
            if "encrypt" in str(exc).lower() or "password" in str(exc).lower():
                raise ExtractionSkipped(f"encrypted PDF: {exc}") from exc
            problems.append(f"pypdf: {exc}")  # metadata and fields are lost; the text may not be
        except (ExtractionSkipped, RecursionError, MemoryError):
            raise
        except Exception as exc:  # noqa: BLE001 - pypdf raises many types for broken files
            problems.append(f"pypdf: {type(exc).__name__}: {exc}")
        parts: list[TextPart] = []
        tables: list[ExtractedTable] = []
        ocr_pages: list[int] = []
        fallback_pages: list[int] = []
        fast = self._pdfium_pages(ctx, tables, ocr_pages, problems) if ctx.settings.pdf_text == "pdfium" else None
        if fast is not None:
            parts, page_count = fast
        else:
            parts, page_count = self._plumber_pages(ctx, tables, ocr_pages, fallback_pages, problems)
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
                "pdfium_pages": fallback_pages,
            },
            details={"problems": problems} if problems else {},
        )

    def _plumber_pages(
        self,
        ctx: Context,
        tables: list[ExtractedTable],
        ocr_pages: list[int],
        fallback_pages: list[int],
        problems: list[str],
    ) -> tuple[list[TextPart], int]:
        """Text by pdfminer (pdfplumber), PDFium for what it rejects (`pdf_text = "pdfplumber"`)."""
        import pdfplumber

        parts: list[TextPart] = []
        try:
            pdf = pdfplumber.open(io.BytesIO(ctx.data), password="")
            page_count = len(pdf.pages)
        except Exception as exc:  # noqa: BLE001 - pdfminer raises many types for broken files
            # pdfminer rejects some files PDFium reads (a stream without /N, a damaged xref...).
            problems.append(f"pdfminer: {type(exc).__name__}: {exc}")
            texts = _pdfium_texts(ctx.data, problems)
            page_count = len(texts)
            fallback_pages.extend(range(1, page_count + 1))
            for number, text in enumerate(texts, 1):
                if len(text.strip()) < MIN_TEXT_CHARS:
                    text = self._ocr(ctx, number, tables, problems)
                    ocr_pages.append(number)
                parts.append(TextPart(f"page {number}", text))
        else:
            with pdf:
                for number, page in enumerate(_streamed(pdf), 1):
                    label = f"page {number}"
                    try:
                        text = page.extract_text() or ""
                    except Exception as exc:  # noqa: BLE001 - one broken page: PDFium reads it
                        problems.append(f"page {number}: pdfminer: {type(exc).__name__}: {exc}")
                        text = _pdfium_page_text(ctx.data, number)
                        fallback_pages.append(number)
                    if len(text.strip()) < MIN_TEXT_CHARS:
                        text = self._ocr(ctx, number, tables, problems)
                        ocr_pages.append(number)
                    parts.append(TextPart(label, text))
                    try:
                        found = page.extract_tables()
                    except Exception as exc:  # noqa: BLE001 - tables are a bonus: the text is kept
                        problems.append(f"page {number}: tables: {type(exc).__name__}: {exc}")
                        found = []
                    for rows in found:
                        cleaned = [["" if c is None else str(c) for c in row] for row in rows]
                        if any(any(c.strip() for c in row) for row in cleaned):
                            tables.append(ExtractedTable(label, cleaned))
        return parts, page_count

    def _pdfium_pages(
        self, ctx: Context, tables: list[ExtractedTable], ocr_pages: list[int], problems: list[str]
    ) -> tuple[list[TextPart], int] | None:
        """Text by PDFium, page by page (None: PDFium cannot open the file, pdfminer tries).

        PDFium reads a text page some 50x faster than pdfminer. Tables still come from
        pdfplumber, whose line strategy needs ruling lines: only pages that draw paths are
        opened with it, so the tables found are the same.
        """
        import pypdfium2

        try:
            doc = pypdfium2.PdfDocument(ctx.data)
        except Exception as exc:  # noqa: BLE001 - PdfiumError and friends
            problems.append(f"pdfium: {type(exc).__name__}: {exc}")
            return None
        plumber = None
        parts: list[TextPart] = []
        try:
            page_count = len(doc)
            for index in range(page_count):
                number = index + 1
                page = doc[index]
                try:
                    textpage = page.get_textpage()
                    try:
                        text = textpage.get_text_bounded().replace("\r\n", "\n")
                    finally:
                        textpage.close()
                    if len(text.strip()) < MIN_TEXT_CHARS:
                        text = self._ocr_page(ctx, page, number, tables, problems)
                        ocr_pages.append(number)
                    if _draws_paths(page):
                        if plumber is None:
                            import pdfplumber

                            plumber = pdfplumber.open(io.BytesIO(ctx.data), password="")
                        tables.extend(_plumber_tables(plumber.pages[index], number, problems))
                finally:
                    page.close()
                parts.append(TextPart(f"page {number}", text))
        finally:
            if plumber is not None:
                plumber.close()
            doc.close()
        return parts, page_count

    @staticmethod
    def _fields(reader: Any) -> list[FormField]:
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

    def _ocr(self, ctx: Context, number: int, tables: list[ExtractedTable], problems: list[str]) -> str:
        import pypdfium2

        pdf = pypdfium2.PdfDocument(ctx.data)
        try:
            return self._ocr_page(ctx, pdf[number - 1], number, tables, problems)
        finally:
            pdf.close()

    @staticmethod
    def _ocr_page(ctx: Context, page: Any, number: int, tables: list[ExtractedTable], problems: list[str]) -> str:
        image = page.render(scale=ctx.settings.ocr_dpi / 72).to_pil()
        text = ocr_image(image, ctx.settings.ocr_languages)
        # Before the page closes: the picture may share PDFium's bitmap memory.
        if ctx.settings.media.ocr_tables:
            found = _scanned_tables(ctx, image, number, problems)
            tables.extend(ExtractedTable(f"page {number}", t) for t in found)
        return text


def _draws_paths(page: Any) -> bool:
    """Whether a PDFium page draws lines, rectangles or curves (form XObjects included)."""
    import pypdfium2.raw as pdfium_c

    return any(obj.type == pdfium_c.FPDF_PAGEOBJ_PATH for obj in page.get_objects())


def _plumber_tables(page: Any, number: int, problems: list[str]) -> list[ExtractedTable]:
    """pdfplumber's tables of one page, the page's parsed layout freed after."""
    try:
        found = page.extract_tables()
    except Exception as exc:  # noqa: BLE001 - tables are a bonus: the text is kept
        problems.append(f"page {number}: tables: {type(exc).__name__}: {exc}")
        found = []
    finally:
        page.close()
    out = []
    for rows in found:
        cleaned = [["" if c is None else str(c) for c in row] for row in rows]
        if any(any(c.strip() for c in row) for row in cleaned):
            out.append(ExtractedTable(f"page {number}", cleaned))
    return out


def _streamed(pdf: Any) -> Iterator[Any]:
    """pdfplumber's pages one at a time, each page's parsed layout freed once the next is asked for.

    A page keeps its characters, layout and text map cached until closed: without this a
    600-page PDF held every page's objects at once and a worker passed its memory cap.
    """
    for page in pdf.pages:
        try:
            yield page
        finally:
            page.close()


def _scanned_tables(ctx: Context, image: PIL.Image.Image, number: int, problems: list[str]) -> list[list[list[str]]]:
    """Ruled tables on a scanned page (img2table); word boxes are read only if a grid is found."""
    import functools

    from shoal.extract.media.tables import cell_reader, find_tables, table_words

    media = ctx.settings.media
    words = functools.partial(table_words, image, ctx.settings.ocr_languages, media.ocr_min_confidence)
    try:
        return find_tables(
            image,
            words,
            borderless=media.ocr_borderless_tables,
            read_cell=cell_reader(ctx.settings.ocr_languages),
        )
    except Exception as exc:  # noqa: BLE001 - tables are a bonus: the page's text is kept
        problems.append(f"page {number}: tables in the scan: {type(exc).__name__}: {exc}")
        return []


def _pdfium_texts(data: bytes, problems: list[str]) -> list[str]:
    """Every page's text layer as PDFium reads it; ValueError when PDFium cannot open the file either."""
    import pypdfium2

    try:
        pdf = pypdfium2.PdfDocument(data)
    except Exception as exc:  # PdfiumError and friends
        raise ValueError(f"corrupt PDF: {'; '.join([*problems, f'pdfium: {exc}'])}") from exc
    try:
        return [_page_text(pdf, i) for i in range(len(pdf))]
    finally:
        pdf.close()


def _pdfium_page_text(data: bytes, number: int) -> str:
    import pypdfium2

    pdf = pypdfium2.PdfDocument(data)
    try:
        return _page_text(pdf, number - 1)
    finally:
        pdf.close()


def _page_text(pdf: Any, index: int) -> str:
    page = pdf[index]
    textpage = page.get_textpage()
    try:
        return textpage.get_text_bounded().replace("\r\n", "\n")
    finally:
        textpage.close()
        page.close()


def _meta(info: Any, key: str) -> str | None:
    value = info.get(key) if info else None
    return str(value) if value else None
