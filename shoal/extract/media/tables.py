"""Tables in pictures (scanned pages, photos of forms, screenshots): ruled grids found by
img2table (OpenCV line detection), their cells filled with words Tesseract reads.

img2table's own Tesseract wrapper runs the tesseract CLI through a shell; here pytesseract
reads the words (`table_words`: rules erased, two page-segmentation modes, empty cells read
on their own), and only for pictures where a grid was found. Rows are lists of cell
strings, the shape every document extractor gives `ExtractedTable`, so tables from scans
land in `shoal.tables` like tables from PDFs. docs/benchmarks-media.md has the measurements.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from PIL import Image


@dataclass
class OcrWord:
    text: str
    confidence: float
    x: int
    y: int
    width: int
    height: int
    line: tuple[int, ...]  # (block, paragraph, line): words of one line join with spaces in a cell


def words_from_tesseract(data: dict[str, list[Any]], min_confidence: float = 0.0) -> list[OcrWord]:
    """pytesseract.image_to_data(..., output_type=DICT) -> the recognised words."""
    out = []
    for i, text in enumerate(data["text"]):
        text = (text or "").strip()
        conf = float(data["conf"][i])
        if not text or conf < max(0.0, min_confidence):
            continue
        out.append(
            OcrWord(
                text,
                conf,
                int(data["left"][i]),
                int(data["top"][i]),
                int(data["width"][i]),
                int(data["height"][i]),
                (int(data["block_num"][i]), int(data["par_num"][i]), int(data["line_num"][i])),
            )
        )
    return out


def read_words(image: Image.Image, languages: str, min_confidence: float = 0.0, psm: int = 3) -> list[OcrWord]:
    import pytesseract

    data = pytesseract.image_to_data(
        image, lang=languages, config=f"--psm {int(psm)}", output_type=pytesseract.Output.DICT
    )
    return words_from_tesseract(data, min_confidence)


def table_words(
    image: Image.Image, languages: str, min_confidence: float = 0.0, known: list[OcrWord] | None = None
) -> list[OcrWord]:
    """Words to fill cells with, read with the table's rules erased: Tesseract's sparse-text
    mode (page segmentation 11) reads each cell on its own but drops lone digits, which the
    default mode (3) keeps. So the mode-11 words, plus the mode-3 words (`known`: the
    caller's own pass; else read here) where no mode-11 word is."""
    unruled = erase_rules(image)
    sparse = read_words(unruled, languages, min_confidence, psm=11)
    plain = known if known is not None else read_words(unruled, languages, min_confidence, psm=3)
    return sparse + [w for w in plain if not any(_overlap(w, s) for s in sparse)]


def erase_rules(image: Image.Image) -> Image.Image:
    """The picture with its long horizontal and vertical lines painted white.

    Tesseract reads a ruled table far worse once the rules are thicker than a couple of
    pixels (an upscaled scan: 28 of 28 words at 1x, 4 at 2x; 26 at 2x with the rules
    erased, measured on shoal.samples.media.table_image). Strokes of letters are much shorter
    than the opening kernel, so text survives."""
    import cv2

    rgb = np.asarray(image.convert("RGB"))
    gray = cv2.cvtColor(rgb, cv2.COLOR_RGB2GRAY)
    _t, ink = cv2.threshold(gray, 0, 255, cv2.THRESH_BINARY_INV + cv2.THRESH_OTSU)
    # Longer than any letter stroke (50 px: a capital at about 70 px font), shorter than a
    # table's rules, which run the width or height of the whole grid.
    n = max(50, min(gray.shape) // 20)
    rules = cv2.bitwise_or(
        cv2.morphologyEx(ink, cv2.MORPH_OPEN, cv2.getStructuringElement(cv2.MORPH_RECT, (n, 1))),
        cv2.morphologyEx(ink, cv2.MORPH_OPEN, cv2.getStructuringElement(cv2.MORPH_RECT, (1, n))),
    )
    rules = cv2.dilate(rules, np.ones((3, 3), np.uint8))
    out = rgb.copy()
    out[rules > 0] = 255
    return Image.fromarray(out)


def _overlap(a: OcrWord, b: OcrWord) -> bool:
    """The boxes share more than half of the smaller one."""
    dx = min(a.x + a.width, b.x + b.width) - max(a.x, b.x)
    dy = min(a.y + a.height, b.y + b.height) - max(a.y, b.y)
    if dx <= 0 or dy <= 0:
        return False
    return dx * dy > 0.5 * min(a.width * a.height, b.width * b.height)


def find_tables(
    image: Image.Image,
    words: list[OcrWord] | Callable[[], list[OcrWord]],
    *,
    borderless: bool = False,
    min_confidence: int = 1,
    read_cell: Callable[[Image.Image], str] | None = None,
    max_cell_reads: int = 64,
) -> list[list[list[str]]]:
    """Tables in the picture as rows of cell texts (empty cells are ""), top to bottom.

    `words` may be a function: it is called only when a grid was found, so only pictures
    with a table pay for the extra OCR pass (`table_words`). `read_cell` reads a cell that
    came back empty on its own (Tesseract misses lone digits on a full page; at most
    `max_cell_reads` per picture, so a large empty form stays cheap)."""
    from img2table.document import Image as I2TImage
    from img2table.ocr._types import OCRData, OCRInstance

    class KnownWords(OCRInstance):
        """Hands img2table the words already read instead of running an OCR engine."""

        def of(self, document: Any) -> OCRData | None:
            found = words() if callable(words) else words
            if not found:
                return None
            records = [
                {
                    "id": f"w{i}",
                    "parent": "line_" + "_".join(map(str, w.line)),
                    "value": w.text,
                    # img2table compares integer confidences against min_confidence.
                    "confidence": int(round(w.confidence)),
                    "x1": w.x,
                    "y1": w.y,
                    "x2": w.x + w.width,
                    "y2": w.y + w.height,
                }
                for i, w in enumerate(found)
            ]
            return OCRData(records={0: records})

    pixels = np.asarray(image.convert("RGB"))

    class Picture(I2TImage):
        """The decoded picture as it is (img2table would otherwise decode encoded bytes again)."""

        @property
        def images(self) -> list[np.ndarray]:
            return [pixels]

    found = Picture(src=b"").extract_tables(
        ocr=KnownWords(), borderless_tables=borderless, implicit_rows=False, min_confidence=max(1, min_confidence)
    )
    tables = []
    budget = max_cell_reads if read_cell else 0
    for t in sorted(found, key=lambda t: (t.bbox.y1, t.bbox.x1)):
        rows = []
        # A merged cell repeats in every row and column it spans; like pdfplumber for PDFs,
        # keep its text in the first (top-left) position and leave the others empty.
        seen: set[tuple[int, int, int, int]] = set()
        for r in sorted(t.content):
            row = []
            for cell in t.content[r]:
                box = (cell.bbox.x1, cell.bbox.y1, cell.bbox.x2, cell.bbox.y2)
                text = "" if box in seen else " ".join((cell.value or "").split())
                if not text and box not in seen and budget > 0 and read_cell is not None:
                    budget -= 1
                    text = " ".join(read_cell(_inside(image, box)).split())
                row.append(text)
                seen.add(box)
            rows.append(row)
        if any(any(c for c in row) for row in rows):
            tables.append(rows)
    return tables


def _inside(image: Image.Image, box: tuple[int, int, int, int]) -> Image.Image:
    """The cell without its rules: the box shrunk by an eighth of its height (4 px at least)."""
    x1, y1, x2, y2 = box
    inset = max(4, (y2 - y1) // 8)
    return image.crop((x1 + inset, y1 + inset, max(x1 + inset + 1, x2 - inset), max(y1 + inset + 1, y2 - inset)))


def cell_reader(languages: str) -> Callable[[Image.Image], str]:
    """Reads one cell as a single line of text (page segmentation 7)."""

    def read(cell: Image.Image) -> str:
        import pytesseract

        if cell.width < 4 or cell.height < 4:
            return ""
        return pytesseract.image_to_string(cell, lang=languages, config="--psm 7")

    return read
