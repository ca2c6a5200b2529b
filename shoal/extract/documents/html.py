"""HTML: main text (trafilatura), title, links and tables (lxml)."""

from __future__ import annotations

import codecs
import re
from urllib.parse import urljoin

import lxml.html
import trafilatura

from shoal.extract.base import Context, ExtractedTable, Extraction, ExtractionSkipped, Extractor, Link, TextPart
from shoal.extract.documents.text import decode_text
from shoal.ingest.sniff import wide_encoding

# lxml refuses a str that still declares its encoding: the declaration goes once decoded.
_XML_DECLARATION = re.compile(r"^\s*<\?xml[^>]*\?>", re.IGNORECASE)
_DECLARED_CHARSET = re.compile(
    rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9._:-]+)|<\?xml[^>]+encoding\s*=\s*["']([A-Za-z0-9._:-]+)""",
    re.IGNORECASE,
)


def decode_html(data: bytes) -> tuple[str, str]:
    """Markup as str and its encoding: a BOM or UTF-16/32, else the charset the page declares
    (`<meta charset>`, `http-equiv`, an XML declaration) if it decodes cleanly, else detection."""
    if wide_encoding(data) is None and not data.startswith(b"\xef\xbb\xbf"):
        m = _DECLARED_CHARSET.search(data[:4096])
        if m:
            declared = (m.group(1) or m.group(2)).decode("ascii")
            try:
                encoding = codecs.lookup(declared).name
                return _XML_DECLARATION.sub("", data.decode(encoding), count=1), encoding
            except (LookupError, UnicodeDecodeError):
                pass  # an unknown or wrong declaration: detect instead
    markup, encoding = decode_text(data)
    return _XML_DECLARATION.sub("", markup, count=1), encoding


def html_text(markup: str | bytes) -> str:
    """Visible text of an HTML fragment (for e-mail bodies and e-book chapters)."""
    markup = decode_html(markup)[0] if isinstance(markup, bytes) else _XML_DECLARATION.sub("", markup, count=1)
    try:
        doc = lxml.html.fromstring(markup)
    except (lxml.etree.ParserError, ValueError):
        return ""
    for bad in doc.xpath("//script|//style|//noscript"):
        bad.drop_tree()
    return "\n".join(t.strip() for t in doc.itertext() if t.strip())


class Html(Extractor):
    name = "html"
    version = "2"

    def run(self, ctx: Context) -> Extraction:
        markup, encoding = decode_html(ctx.data)
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
