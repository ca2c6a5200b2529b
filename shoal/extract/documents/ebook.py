"""RTF (striprtf) and EPUB (zipfile + lxml: container.xml -> OPF -> spine; chapters read as HTML)."""

from __future__ import annotations

import posixpath
import zipfile
from urllib.parse import unquote

from lxml import etree

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


_CONTAINER = "META-INF/container.xml"
_NS = {
    "c": "urn:oasis:names:tc:opendocument:xmlns:container",
    "opf": "http://www.idpf.org/2007/opf",
    "dc": "http://purl.org/dc/elements/1.1/",
}
# Untrusted XML: no entities, no DTDs fetched, no network (billion-laughs and XXE stay inert).
_XML = etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False, huge_tree=False, recover=False)


class EpubError(ValueError):
    """A damaged EPUB: says which part is missing or unreadable."""


def _xml(zf: zipfile.ZipFile, name: str, what: str) -> etree._Element:
    try:
        data = zf.read(name)
    except KeyError as exc:
        raise EpubError(f"damaged EPUB: {what} {name!r} is missing") from exc
    except (zipfile.BadZipFile, OSError, ValueError) as exc:  # bad CRC, truncated member
        raise EpubError(f"damaged EPUB: cannot read {what} {name!r}: {exc}") from exc
    try:
        return etree.fromstring(data, _XML)
    except etree.XMLSyntaxError as exc:
        raise EpubError(f"damaged EPUB: {what} {name!r} is not well-formed XML: {exc}") from exc


def read_epub(zf: zipfile.ZipFile) -> tuple[dict[str, str | None], list[tuple[str, bytes]]]:
    """The book's Dublin Core metadata and its content documents in spine (reading) order.

    A spine item that is missing from the archive is skipped (readers do the same), but a
    book with no readable content document at all is an error."""
    container = _xml(zf, _CONTAINER, "container")
    rootfiles = container.xpath("//c:rootfile/@full-path", namespaces=_NS)
    if not rootfiles:
        raise EpubError(f"damaged EPUB: {_CONTAINER} names no rootfile (the OPF package document)")
    opf_path = unquote(str(rootfiles[0]))
    opf = _xml(zf, opf_path, "package document")
    base = posixpath.dirname(opf_path)

    def first(field: str) -> str | None:
        values = [v.strip() for v in opf.xpath(f"//opf:metadata/dc:{field}/text()", namespaces=_NS) if v.strip()]
        return values[0] if values else None

    manifest = {
        item.get("id"): (
            posixpath.normpath(posixpath.join(base, unquote(item.get("href", "")))),
            item.get("media-type"),
        )
        for item in opf.xpath("//opf:manifest/opf:item", namespaces=_NS)
    }
    order = [str(ref) for ref in opf.xpath("//opf:spine/opf:itemref/@idref", namespaces=_NS)]
    if not order:  # no spine: fall back to the manifest's documents in their listed order
        order = [i for i, (_h, mt) in manifest.items() if mt in ("application/xhtml+xml", "text/html")]
    docs: list[tuple[str, bytes]] = []
    missing: list[str] = []
    for idref in order:
        href, _mt = manifest.get(idref, (None, None))
        if href is None:
            missing.append(idref)
            continue
        try:
            docs.append((href, zf.read(href)))
        except KeyError:
            missing.append(href)
        except (zipfile.BadZipFile, OSError, ValueError) as exc:
            raise EpubError(f"damaged EPUB: cannot read chapter {href!r}: {exc}") from exc
    if not docs and missing:
        raise EpubError(f"damaged EPUB: none of the spine's documents is in the archive (missing: {missing[:5]})")
    meta = {"title": first("title"), "author": first("creator"), "language": first("language")}
    return meta, docs


class Epub(Extractor):
    name = "epub"
    version = "2"

    def run(self, ctx: Context) -> Extraction:
        zf = check_zip(ctx.data, ctx.settings, "EPUB")
        meta, docs = read_epub(zf)
        parts = []
        for number, (_href, content) in enumerate(docs, 1):
            text = html_text(content)
            if text.strip():
                parts.append(TextPart(f"chapter {number}", text))
        if not parts:
            raise ExtractionSkipped("no text in the EPUB's chapters")
        return Extraction(text=parts, properties={**meta, "page_count": len(parts)})
