"""Chunking extracted text for embedding: sentence-aware windows with overlap.

A chunk never crosses a part (a page, a section, a transcript segment group): the part is
what a search result points back to. Within a part, whole sentences fill a window of about
`size` characters; the next window starts with the last sentences of the previous one
(about `overlap` characters), so a passage cut at a boundary is still found whole. A
sentence longer than a window is cut at word boundaries.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_SENTENCE_END = re.compile(r"(?<=[.!?。！？])\s+|\n{2,}|\n(?=[-*•\d])")
_WS = re.compile(r"\s+")


@dataclass(frozen=True)
class Chunk:
    index: int
    start: int  # character offsets in the part's text
    end: int
    text: str


def _sentences(text: str) -> list[tuple[int, int]]:
    spans, pos = [], 0
    for m in _SENTENCE_END.finditer(text):
        if m.start() > pos:
            spans.append((pos, m.start()))
        pos = m.end()
    if pos < len(text):
        spans.append((pos, len(text)))
    return [(a, b) for a, b in spans if text[a:b].strip()]


def _split_long(text: str, start: int, end: int, size: int) -> list[tuple[int, int]]:
    out = []
    while end - start > size:
        cut = text.rfind(" ", start, start + size)
        cut = cut if cut > start + size // 2 else start + size
        out.append((start, cut))
        start = cut
        while start < end and text[start].isspace():
            start += 1
    if end > start:
        out.append((start, end))
    return out


def fold_whitespace(text: str) -> str:
    """Runs of whitespace as one space, ends trimmed: how chunk text is stored."""
    return _WS.sub(" ", text).strip()


def chunk_text(text: str, *, size: int = 800, overlap: int = 150) -> list[Chunk]:
    if size <= 0 or not 0 <= overlap < size:
        raise ValueError("need size > 0 and 0 <= overlap < size")
    if not text or not text.strip():
        return []
    units: list[tuple[int, int]] = []
    for a, b in _sentences(text):
        units.extend(_split_long(text, a, b, size))
    chunks: list[Chunk] = []
    i = 0
    while i < len(units):
        j = i
        while j + 1 < len(units) and units[j + 1][1] - units[i][0] <= size:
            j += 1
        start, end = units[i][0], units[j][1]
        chunks.append(Chunk(len(chunks), start, end, fold_whitespace(text[start:end])))
        if j + 1 >= len(units):
            break
        # Step back over trailing sentences worth about `overlap` characters (never to i).
        k = j
        while k > i and end - units[k][0] < overlap:
            k -= 1
        i = k if k > i and end - units[k][0] <= size // 2 else j + 1
    return chunks
