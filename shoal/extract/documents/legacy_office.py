"""Word 97-2003 `.doc`, Excel `.xls` and PowerPoint `.ppt` (OLE2 binaries), read by the catdoc tools.

Debian's `catdoc` package (catdoc, xls2csv, catppt; scripts/setup.sh installs it) converts
all three in milliseconds, and also reads Word 6/95 files that antiword refuses; LibreOffice
would add some 300 MB for the same text. The converter runs as a subprocess of the sandboxed
child (so under its memory cap), from an argument list (no shell) on a private temporary
copy of the bytes, with a time limit, and writes UTF-8 (`-d utf-8`).
"""

from __future__ import annotations

import csv
import io
import os
import re
import shutil
import subprocess
import tempfile
from abc import abstractmethod
from typing import ClassVar

from shoal.exceptions import DependencyError
from shoal.extract.base import (
    Context,
    ExtractedTable,
    Extraction,
    ExtractionSkipped,
    Extractor,
    Link,
    TextPart,
)

MAX_SHEET_TEXT_ROWS = 5_000
# Word field instructions catdoc prints in front of a field's result: HYPERLINK "url" \h ...
_FIELD = re.compile(r'\s*\b(?:HYPERLINK|PAGEREF|REF|TOC|INCLUDEPICTURE)((?:\s+(?:\\[a-zA-Z*]|"[^"]*"))+)')
_QUOTED = re.compile(r'"([^"]*)"')


def convert(tool: str, args: list[str], ctx: Context, suffix: str) -> str:
    """Run `tool args... FILE` on a temporary copy of the object; its UTF-8 output, decoded."""
    path = shutil.which(tool)
    if path is None:
        raise DependencyError(
            f"{tool} is not installed: legacy Office files need Debian's catdoc package",
            hint="run scripts/setup.sh (or apt-get install catdoc), then `shoal extract --retry-errors`",
        )
    # The chain's whole time limit also covers the steps after this one: take at most half.
    timeout = max(1.0, ctx.settings.timeout_s / 2)
    with tempfile.TemporaryDirectory(prefix="shoal-legacy-") as tmp:
        source = os.path.join(tmp, "object" + suffix)
        with open(source, "wb") as f:
            f.write(ctx.data)
        try:
            done = subprocess.run(
                [path, *args, source],
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=timeout,
                cwd=tmp,
                env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8"},
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            raise TimeoutError(f"{tool} took longer than {timeout:g} s") from exc
    out = done.stdout.decode("utf-8", errors="replace")
    if done.returncode != 0 and not out.strip():
        err = done.stderr.decode("utf-8", errors="replace").strip()
        if done.returncode < 0:
            err = f"killed by signal {-done.returncode}" + (f": {err}" if err else "")
        raise ValueError(f"{tool} could not read the file (exit {done.returncode}): {err[:500]}")
    return out


def _pages(out: str) -> list[str]:
    """Split at the form feeds the catdoc tools print between sheets and slides."""
    return out.split("\f")


class _Legacy(Extractor):
    tool: ClassVar[str]
    suffix: ClassVar[str]
    what: ClassVar[str]

    def _empty(self) -> ExtractionSkipped:
        return ExtractionSkipped(f"no text in the {self.what}")

    def run(self, ctx: Context) -> Extraction:
        if ctx.data[:2] == b"PK":
            # An OOXML file saved under a legacy name (typed by an older sniffer, or by its extension):
            # its content decides, and catdoc would read nothing.
            return _ooxml_extractor(ctx).run(ctx)
        return self.read(ctx)

    @abstractmethod
    def read(self, ctx: Context) -> Extraction: ...


def _ooxml_extractor(ctx: Context) -> Extractor:
    from shoal.extract.documents.office import Docx, Pptx, Xlsx
    from shoal.ingest.sniff import zip_type

    by_type: dict[str, type[Extractor]] = {cls.media_type: cls for cls in (Docx, Pptx, Xlsx)}
    media_type = zip_type(ctx.data)
    if media_type not in by_type:
        raise ValueError(
            f"{ctx.obj.file_name}: typed {ctx.obj.media_type} but is a ZIP container ({media_type}), not OLE2"
        )
    return by_type[media_type]()


class Doc(_Legacy):
    name = "doc"
    version = "1"
    tool, suffix, what = "catdoc", ".doc", "Word document"

    def read(self, ctx: Context) -> Extraction:
        # -w: one line per paragraph; -d utf-8: output charset.
        out = convert(self.tool, ["-w", "-d", "utf-8"], ctx, self.suffix)
        links, seen = [], set()
        for m in _FIELD.finditer(out):
            url = _QUOTED.search(m.group(1))
            local = "\\l" in m.group(1)  # a bookmark in this document, not a URL
            if m.group(0).lstrip().startswith("HYPERLINK") and url and not local and url.group(1) not in seen:
                seen.add(url.group(1))
                links.append(Link("document", url.group(1)))
        text = _FIELD.sub("", out).replace("\f", "\n").strip()
        if not text:
            raise self._empty()
        return Extraction(text=[TextPart("document", text)], links=links, properties={"encoding": "utf-8"})


class Xls(_Legacy):
    name = "xls"
    version = "1"
    tool, suffix, what = "xls2csv", ".xls", "Excel workbook"

    def read(self, ctx: Context) -> Extraction:
        # -q 1: quote text cells only; -c ,: separator; sheets end with a form feed.
        out = convert(self.tool, ["-d", "utf-8", "-q", "1", "-c", ","], ctx, self.suffix)
        parts, tables = [], []
        for number, sheet in enumerate(_pages(out), 1):
            rows = [r for r in csv.reader(io.StringIO(sheet.strip("\n"), newline=""))]
            rows = [[c.strip() for c in r] for r in rows]
            while rows and not any(rows[-1]):
                rows.pop()
            if not rows:
                continue
            label = f"sheet {number}"
            tables.append(ExtractedTable(label, rows))
            parts.append(TextPart(label, "\n".join(" ".join(c for c in r if c) for r in rows[:MAX_SHEET_TEXT_ROWS])))
        if not parts:
            raise self._empty()
        return Extraction(text=parts, tables=tables, properties={"encoding": "utf-8", "sheets": len(parts)})


class Ppt(_Legacy):
    name = "ppt"
    version = "2"
    tool, suffix, what = "catppt", ".ppt", "PowerPoint presentation"

    def read(self, ctx: Context) -> Extraction:
        try:
            out = convert(self.tool, ["-d", "utf-8"], ctx, self.suffix)
        except ValueError:
            out = ""  # catppt refused the file: the record walk below may still read it
        # catppt ends each slide (then masters and notes) with a form feed.
        chunks = [c.strip() for c in _pages(out) if c.strip()]
        if chunks:
            parts = [TextPart(f"slide {i}", c) for i, c in enumerate(chunks, 1)]
            return Extraction(text=parts, properties={"encoding": "utf-8", "page_count": len(parts)})
        # catppt reads only the slide list's text atoms; LibreOffice (and others) keep slide
        # text inside the drawings' text boxes, which the record walk finds too.
        texts = ppt_text_atoms(ctx.data)
        if not texts:
            raise self._empty()
        return Extraction(
            text=[TextPart("presentation", "\n".join(texts))],
            properties={"encoding": "utf-16-le", "reader": "record walk"},
        )


_CONTAINER = 0xF
_MAIN_MASTER = 0x03F8  # the master slide: placeholder prompts ("Click to edit..."), not content
_TEXT_CHARS = 0x0FA0  # UTF-16LE text
_TEXT_BYTES = 0x0FA8  # 8-bit text (the low bytes of UTF-16 code units)


def ppt_text_atoms(data: bytes, max_depth: int = 32) -> list[str]:
    """Every TextCharsAtom and TextBytesAtom in the 'PowerPoint Document' stream ([MS-PPT]
    records: 8-byte header, containers nest), in file order, master slide left out."""
    import struct

    import olefile

    try:
        with olefile.OleFileIO(data) as ole:
            if not ole.exists("PowerPoint Document"):
                raise ValueError("not a PowerPoint file: no 'PowerPoint Document' stream")
            stream = ole.openstream("PowerPoint Document").read()
    except OSError as exc:  # olefile reports a damaged compound file as OSError
        raise ValueError(f"damaged PowerPoint file: {exc}") from exc
    texts: list[str] = []

    def walk(start: int, end: int, depth: int) -> None:
        pos = start
        while pos + 8 <= end:
            head, kind, length = struct.unpack_from("<HHI", stream, pos)
            body, pos = pos + 8, pos + 8 + length
            if pos > end:
                return  # a truncated record: keep what came before it
            if head & 0xF == _CONTAINER:
                if kind != _MAIN_MASTER and depth < max_depth:
                    walk(body, pos, depth + 1)
            elif kind in (_TEXT_CHARS, _TEXT_BYTES):
                raw = stream[body:pos]
                text = raw.decode("utf-16-le" if kind == _TEXT_CHARS else "cp1252", errors="replace")
                text = text.replace("\r", "\n").replace("\x0b", "\n").strip()
                if text and text != "*":  # "*" stands for a slide-number field
                    texts.append(text)

    walk(0, len(stream), 0)
    return texts
