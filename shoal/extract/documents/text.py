"""Plain text (encoding detected) and lightweight markup: Markdown, reStructuredText, Org."""

from __future__ import annotations

import re

import charset_normalizer
from markdown_it import MarkdownIt

from shoal.extract.base import (
    Context,
    ExtractedTable,
    Extraction,
    ExtractionSkipped,
    Extractor,
    Link,
    Sections,
    TextPart,
)
from shoal.ingest.sniff import wide_encoding

_CANDIDATES = [
    "utf_16_le",
    "utf_16_be",
    "utf_32_le",
    "utf_32_be",
    "cp1252",
    "latin_1",
    "cp1251",
    "shift_jis",
    "gb18030",
]


def decode_text(data: bytes) -> tuple[str, str]:
    """Text and the encoding it was read with: a BOM or UTF-16/32's NUL pattern, else strict UTF-8,
    else the best detected guess."""
    wide = wide_encoding(data)
    if wide is not None:
        return data.decode(wide, errors="replace").removeprefix("\ufeff"), wide
    if data.startswith(b"\xef\xbb\xbf"):
        return data[3:].decode("utf-8", errors="replace"), "utf-8"
    try:
        return data.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        pass
    best = charset_normalizer.from_bytes(data[: 1 << 20], cp_isolation=_CANDIDATES).best()
    encoding = best.encoding if best is not None else "cp1252"
    return data.decode(encoding, errors="replace"), encoding.replace("_", "-")


def read_text(ctx: Context) -> tuple[str, str]:
    text, encoding = decode_text(ctx.data)
    if not text.strip():
        raise ExtractionSkipped("no text: the file is empty or whitespace")
    return text, encoding


# Source code: libmagic's text/x-<language> types and common source-file extensions.
_CODE_TYPES = {
    "text/x-c": "c",
    "text/x-c++": "c++",
    "text/x-java": "java",
    "text/x-objective-c": "objective-c",
    "text/x-python": "python",
    "text/x-script.python": "python",
    "text/x-shellscript": "shell",
    "text/x-perl": "perl",
    "text/x-ruby": "ruby",
    "text/x-php": "php",
    "text/x-lua": "lua",
    "text/x-tcl": "tcl",
    "text/x-asm": "assembly",
    "text/x-makefile": "make",
    "text/x-m4": "m4",
    "text/x-awk": "awk",
}
_CODE_EXTENSIONS = {
    ".py": "python",
    ".go": "go",
    ".rs": "rust",
    ".js": "javascript",
    ".mjs": "javascript",
    ".ts": "typescript",
    ".java": "java",
    ".kt": "kotlin",
    ".scala": "scala",
    ".c": "c",
    ".h": "c",
    ".cc": "c++",
    ".cpp": "c++",
    ".hpp": "c++",
    ".cs": "c#",
    ".rb": "ruby",
    ".php": "php",
    ".pl": "perl",
    ".lua": "lua",
    ".sh": "shell",
    ".bash": "shell",
    ".swift": "swift",
    ".sql": "sql",
    ".r": "r",
}


def code_language(media_type: str, file_name: str) -> str | None:
    """The programming language of a source file, or None for prose."""
    dot = file_name.rfind(".")
    by_ext = _CODE_EXTENSIONS.get(file_name[dot:].lower()) if dot > 0 else None
    return by_ext or _CODE_TYPES.get(media_type.split(";")[0])


class PlainText(Extractor):
    """Plain text and every other text/* type without a route of its own (source code, logs...)."""

    name = "text"
    version = "1"

    def run(self, ctx: Context) -> Extraction:
        text, encoding = read_text(ctx)
        props: dict[str, str | bool] = {"encoding": encoding}
        language = code_language(ctx.obj.media_type, ctx.obj.file_name)
        if language:
            # Read by the language enricher: code has no natural language to detect.
            props.update(source_code=True, code_language=language)
        return Extraction(text=[TextPart("document", text)], properties=props)


# ---- markup: split into sections at headings, strip the markup ------------------------------------
_md = MarkdownIt("commonmark").enable("table")


class Markdown(Extractor):
    name = "markdown"
    version = "2"  # 2: table cells are text too

    def run(self, ctx: Context) -> Extraction:
        source, encoding = read_text(ctx)
        tokens = _md.parse(source)
        sections: list[TextPart] = []
        tables: list[ExtractedTable] = []
        links: list[Link] = []
        title = None
        heading = "preamble"
        buf: list[str] = []
        table: list[list[str]] | None = None
        row: list[str] | None = None
        in_heading = False
        for tok in tokens:
            if tok.type == "heading_open":
                if buf:
                    sections.append(TextPart(heading, "\n".join(buf)))
                    buf = []
                in_heading = True
            elif tok.type == "heading_close":
                in_heading = False
            elif tok.type == "table_open":
                table = []
            elif tok.type == "table_close" and table is not None:
                tables.append(ExtractedTable(heading, table))
                # A table's cells are text too (as in DOCX): a file that is only a table has text.
                buf.extend(" | ".join(r) for r in table)
                table = None
            elif tok.type == "tr_open":
                row = []
            elif tok.type == "tr_close" and table is not None and row is not None:
                table.append(row)
                row = None
            elif tok.type == "inline":
                text = "".join(c.content for c in tok.children or [] if c.type in ("text", "code_inline", "softbreak"))
                for child in tok.children or []:
                    if child.type == "link_open":
                        links.append(Link(heading, str(child.attrs.get("href", ""))))
                if in_heading:
                    heading = text.strip() or heading
                    title = title or heading
                    buf.append(text)
                elif row is not None:
                    row.append(text.strip())
                else:
                    buf.append(text)
            elif tok.type in ("fence", "code_block"):
                buf.append(tok.content)
        if buf:
            sections.append(TextPart(heading, "\n".join(buf)))
        return Extraction(text=sections, tables=tables, links=links, properties={"encoding": encoding, "title": title})


_RST_ADORN = re.compile(r"^([=\-~^\"'`#*+:.])\1{2,}\s*$")
_RST_LINK = re.compile(r"`([^`<]+?)\s*<([^>]+)>`_+")
_RST_INLINE = re.compile(r"(\*\*|\*|``)(.+?)\1")
_ORG_HEADING = re.compile(r"^(\*+)\s+(.*)$")
_ORG_LINK = re.compile(r"\[\[([^\]]+)\](?:\[([^\]]+)\])?\]")
_ORG_META = re.compile(r"^#\+(\w+):\s*(.*)$", re.IGNORECASE)


class ReStructuredText(Extractor):
    name = "rst"
    version = "1"

    def run(self, ctx: Context) -> Extraction:
        source, encoding = read_text(ctx)
        lines = source.splitlines()
        sections = Sections("preamble")
        links: list[Link] = []
        title = None
        i = 0
        while i < len(lines):
            line = lines[i]
            nxt = lines[i + 1] if i + 1 < len(lines) else ""
            if line.strip() and _RST_ADORN.match(nxt) and len(nxt.strip()) >= len(line.strip()):
                sections.start(line.strip())
                title = title or line.strip()
                i += 2
                continue
            if _RST_ADORN.match(line) or line.strip().startswith(".. "):
                i += 1
                continue
            for m in _RST_LINK.finditer(line):
                links.append(Link(sections.heading, m.group(2), m.group(1)))
            sections.add(_RST_INLINE.sub(r"\2", _RST_LINK.sub(r"\1", line)))
            i += 1
        return Extraction(text=sections.done(), links=links, properties={"encoding": encoding, "title": title})


class Org(Extractor):
    name = "org"
    version = "1"

    def run(self, ctx: Context) -> Extraction:
        source, encoding = read_text(ctx)
        sections = Sections("preamble")
        links: list[Link] = []
        props: dict[str, str] = {}
        for line in source.splitlines():
            meta = _ORG_META.match(line)
            if meta:
                props[meta.group(1).lower()] = meta.group(2).strip()
                continue
            m = _ORG_HEADING.match(line)
            if m:
                sections.start(m.group(2).strip())
                continue
            for lm in _ORG_LINK.finditer(line):
                links.append(Link(sections.heading, lm.group(1), lm.group(2)))
            sections.add(_ORG_LINK.sub(lambda lm: lm.group(2) or lm.group(1), line))
        parts = sections.done()
        title = props.get("title") or (parts[0].part if parts and parts[0].part != "preamble" else None)
        return Extraction(
            text=parts, links=links, properties={"encoding": encoding, "title": title, "author": props.get("author")}
        )
