"""HTML: main text (trafilatura), title, links and tables (lxml)."""

from __future__ import annotations

from urllib.parse import urljoin

import lxml.html
import trafilatura

from shoal.extract.base import Context, ExtractedTable, Extraction, ExtractionSkipped, Extractor, Link, TextPart
from shoal.extract.documents.text import decode_text


def html_text(markup: str | bytes) -> str:
    """Visible text of an HTML fragment (for e-mail bodies and e-book chapters)."""
    if isinstance(markup, str) and markup.lstrip().startswith("<?xml"):
        markup = markup.encode("utf-8")  # lxml refuses str input that declares an encoding
    try:
        doc = lxml.html.fromstring(markup)
    except (lxml.etree.ParserError, ValueError):
        return ""
    for bad in doc.xpath("//script|//style|//noscript"):
        bad.drop_tree()
    return "\n".join(t.strip() for t in doc.itertext() if t.strip())


class Html(Extractor):
    name = "html"
    version = "1"

    def run(self, ctx: Context) -> Extraction:
        markup, encoding = decode_text(ctx.data)
        if not markup.strip():
            raise ExtractionSkipped("no text: the file is empty")
        try:
            doc = lxml.html.fromstring(markup)
        except (lxml.etree.ParserError, ValueError) as exc:
            raise ValueError(f"unparseable HTML: {exc}") from exc
        title = (doc.findtext(".//title") or "").strip() or None
        base = doc.xpath("string(//base/@href)") or ""
        links = []
        for a in doc.xpath("//a[@href]"):
            href = a.get("href", "").strip()
            if href and not href.lower().startswith(("javascript:", "data:")):
                links.append(Link("document", urljoin(base, href) if base else href, a.text_content().strip() or None))
        tables = []
        for t in doc.xpath("//table"):
            rows = [[c.text_content().strip() for c in tr.xpath("./th|./td")] for tr in t.xpath(".//tr")]
            if rows:
                tables.append(ExtractedTable("document", rows))
        main = trafilatura.extract(markup, include_tables=False, include_comments=False, favor_recall=True)
        if not main:
            main = html_text(markup)  # short or unusual pages: all visible text
        meta = trafilatura.extract_metadata(markup)
        author = getattr(meta, "author", None) if meta else None
        return Extraction(
            text=[TextPart("document", main or "")],
            tables=tables,
            links=links,
            properties={"encoding": encoding, "title": title or (meta.title if meta else None), "author": author},
        )
