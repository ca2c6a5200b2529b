"""Structured text: CSV/TSV, JSON, NDJSON and XML (parsed with defusedxml: entity bombs are refused)."""

from __future__ import annotations

import csv
import io
import json
import re
import xml.etree.ElementTree as ET
from typing import Any

from defusedxml import ElementTree as SafeET
from defusedxml.common import DefusedXmlException

from shoal.extract.base import Context, ExtractedTable, Extraction, ExtractionRefused, Extractor, TextPart
from shoal.extract.documents.text import decode_text, read_text
from shoal.ingest.sniff import wide_encoding

MAX_TEXT_ROWS = 10_000  # rows rendered into text for NLP; the table keeps them all


class Delimited(Extractor):
    name = "delimited"
    version = "1"

    def run(self, ctx: Context) -> Extraction:
        text, encoding = read_text(ctx)
        if ctx.obj.media_type == "text/tab-separated-values":
            delimiter = "\t"
        else:
            try:
                delimiter = csv.Sniffer().sniff(text[:8192], delimiters=",;\t|").delimiter
            except csv.Error:
                delimiter = ","
        rows = [row for row in csv.reader(io.StringIO(text, newline=""), delimiter=delimiter)]
        rendered = "\n".join(" ".join(c for c in row if c) for row in rows[:MAX_TEXT_ROWS])
        return Extraction(
            text=[TextPart("document", rendered)],
            tables=[ExtractedTable("document", rows)],
            properties={"encoding": encoding, "rows": len(rows), "delimiter": delimiter},
        )


def _flatten(value: Any, path: str, out: list[str]) -> None:
    if isinstance(value, dict):
        for k, v in value.items():
            _flatten(v, f"{path}.{k}" if path else str(k), out)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            _flatten(v, f"{path}[{i}]", out)
    elif isinstance(value, str) and value.strip():
        out.append(f"{path}: {value}" if path else value)


def _records_table(records: list[Any]) -> list[list[str]] | None:
    """A list of flat objects reads as a table: header from the union of keys."""
    if not records or not all(isinstance(r, dict) for r in records):
        return None
    header: list[str] = []
    for r in records:
        for k, v in r.items():
            if isinstance(v, dict | list):
                return None
            if k not in header:
                header.append(k)
    body = [["" if r.get(k) is None else str(r.get(k)) for k in header] for r in records]
    return [header, *body]


class Json(Extractor):
    name = "json"
    version = "1"

    def run(self, ctx: Context) -> Extraction:
        text, encoding = read_text(ctx)
        try:
            value = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}") from exc
        lines: list[str] = []
        _flatten(value, "", lines)
        table = _records_table(value) if isinstance(value, list) else None
        return Extraction(
            text=[TextPart("document", "\n".join(lines))],
            tables=[ExtractedTable("document", table)] if table else [],
            properties={"encoding": encoding, "top_level": type(value).__name__},
        )


class NdJson(Extractor):
    name = "ndjson"
    version = "1"

    def run(self, ctx: Context) -> Extraction:
        text, encoding = read_text(ctx)
        records, bad = [], []
        for lineno, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError as exc:
                bad.append({"line": lineno, "error": exc.msg})
        if not records and bad:
            raise ValueError(f"no valid JSON line; line {bad[0]['line']}: {bad[0]['error']}")
        lines: list[str] = []
        for i, r in enumerate(records[:MAX_TEXT_ROWS]):
            _flatten(r, f"[{i}]", lines)
        table = _records_table(records)
        return Extraction(
            text=[TextPart("document", "\n".join(lines))],
            tables=[ExtractedTable("document", table)] if table else [],
            properties={"encoding": encoding, "records": len(records), "bad_lines": len(bad)},
            details={"bad_lines": bad[:100]},
        )


_XML_DECLARATION = re.compile(r"^\s*<\?xml[^>]*\?>")


def _parse_xml(data: bytes) -> ET.Element:
    return SafeET.fromstring(data, forbid_dtd=False, forbid_entities=True, forbid_external=True)


class Xml(Extractor):
    name = "xml"
    version = "1"

    def run(self, ctx: Context) -> Extraction:
        data, encoding = ctx.data, None
        if wide_encoding(data) is not None:
            # expat reads UTF-16 only with a BOM and UTF-32 never: hand it UTF-8 without the declaration.
            text, encoding = decode_text(data)
            data = _XML_DECLARATION.sub("", text, count=1).encode("utf-8")
        try:
            try:
                root = _parse_xml(data)
            except SafeET.ParseError as exc:
                if "encoding" not in str(exc) or encoding is not None:
                    raise
                # The declaration names another encoding than the bytes are in: detect, then parse.
                text, encoding = decode_text(data)
                root = _parse_xml(_XML_DECLARATION.sub("", text, count=1).encode("utf-8"))
        except DefusedXmlException as exc:
            raise ExtractionRefused(f"XML refused: {exc} (entity expansion or external references)") from exc
        except SafeET.ParseError as exc:
            raise ValueError(f"invalid XML: {exc}") from exc
        lines = []
        for el in root.iter():
            tag = el.tag.split("}", 1)[-1] if isinstance(el.tag, str) else ""
            if el.text and el.text.strip():
                lines.append(f"{tag}: {el.text.strip()}")
        return Extraction(
            text=[TextPart("document", "\n".join(lines))],
            properties={
                "root": root.tag.split("}", 1)[-1],
                "elements": sum(1 for _ in root.iter()),
                "encoding": encoding,
            },
        )
