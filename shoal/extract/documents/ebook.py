"""RTF (striprtf) and EPUB (ebooklib; chapters read as HTML)."""

from __future__ import annotations

import io

from shoal.extract.base import Context, Extraction, ExtractionSkipped, Extractor, TextPart
from shoal.extract.documents.html import html_text
from shoal.extract.safety import check_zip


class Rtf(Extractor):
    name = "rtf"
    version = "1"
    preload = ("striprtf.striprtf",)

    def run(self, ctx: Context) -> Extraction:
        from striprtf.striprtf import rtf_to_text

        source = ctx.data.decode("cp1252", errors="replace")
        if not source.lstrip().startswith("{\\rtf"):
            raise ValueError("not an RTF document: missing {\\rtf header")
        text = rtf_to_text(source, errors="replace")
        if not text.strip():
            raise ExtractionSkipped("no text in the RTF document")
        return Extraction(text=[TextPart("document", text)])


class Epub(Extractor):
    name = "epub"
    version = "1"
    preload = ("ebooklib.epub",)

    def run(self, ctx: Context) -> Extraction:
        import ebooklib
        from ebooklib import epub

        check_zip(ctx.data, ctx.settings, "EPUB")
        book = epub.read_epub(io.BytesIO(ctx.data), options={"ignore_ncx": True})
        parts = []
        for number, item in enumerate(book.get_items_of_type(ebooklib.ITEM_DOCUMENT), 1):
            text = html_text(item.get_content())
            if text.strip():
                parts.append(TextPart(f"chapter {number}", text))

        def first(field: str) -> str | None:
            values = book.get_metadata("DC", field)
            return str(values[0][0]) if values else None

        return Extraction(
            text=parts,
            properties={
                "title": first("title"),
                "author": first("creator"),
                "language": first("language"),
                "page_count": len(parts),
            },
        )
