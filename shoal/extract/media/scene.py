"""What a picture is, as a person would say it: people (with boxes) and text scenes
(document, poster, sign, screenshot), fused with the ImageNet classifier's labels.

No image-text (CLIP-class) model or general object detector ships inside a package that
installs offline (docs/media.md lists the packages checked), and ImageNet-1k has neither
"person" nor "document": its classifiers call a portrait "football helmet" and a poster
"web site". So the labeller combines what does ship:

- people: OpenCV's frontal-face Haar cascade (a face makes a person; its box is widened to
  head and shoulders) and OpenCV's HOG pedestrian detector (whole bodies, with boxes);
- text scenes: Tesseract's words with boxes (the OCR step's, or a pass of its own) give the
  amount, size and layout of text; with background flatness, page count and EXIF they say
  document, poster, sign or screenshot;
- everything else: the ImageNet classifier (EfficientNet-Lite by default).

Scores of people and scenes are rule confidences in [0, 1], ranked together with the
classifier's probabilities; benchmarks/labels.py measures the result on 50+ labelled pictures.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from PIL import Image

# Below this many pixels a side HOG's 64x128 window does not fit: OpenCV's
# detectMultiScale then corrupts memory (seen on a 10x15 TIFF page), so it is never called.
_HOG_MIN = (64, 128)
_MAX_SIDE = 640  # detectors run on a copy this large at most: cost, not accuracy, past it


@dataclass(frozen=True)
class Found:
    """A labelled box in the frame's own pixel coordinates."""

    label: str
    score: float
    x: int
    y: int
    width: int
    height: int


@dataclass(frozen=True)
class Word:
    text: str
    confidence: float
    x: int
    y: int
    width: int
    height: int
    line: tuple[int, int, int]  # Tesseract's (block, paragraph, line)


def words_from_tesseract(data: dict[str, list[Any]], min_confidence: float = 50) -> list[Word]:
    """Words worth counting as text: confident and with a letter or digit in them."""
    out = []
    for i, raw in enumerate(data["text"]):
        text = (raw or "").strip()
        conf = float(data["conf"][i])
        if conf < min_confidence or sum(ch.isalnum() for ch in text) < 2:
            continue
        out.append(
            Word(
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


def read_words(image: Image.Image, languages: str) -> list[Word]:
    """A Tesseract pass of the labeller's own, when the OCR step did not run before it."""
    import pytesseract

    data = pytesseract.image_to_data(image, lang=languages, output_type=pytesseract.Output.DICT)
    return words_from_tesseract(data)


def _small_gray(image: Image.Image, max_side: int = _MAX_SIDE) -> tuple[np.ndarray, float]:
    gray = image.convert("L")
    scale = min(1.0, max_side / max(gray.size))
    if scale < 1:
        gray = gray.resize(
            (max(1, round(gray.width * scale)), max(1, round(gray.height * scale))), Image.Resampling.BILINEAR
        )
    return np.asarray(gray), scale


def _skin_share(rgb: np.ndarray) -> float:
    """Share of skin-coloured pixels (the YCrCb range of Chai & Ngan, 1999)."""
    import cv2

    ycc = cv2.cvtColor(rgb, cv2.COLOR_RGB2YCrCb)
    cr, cb = ycc[..., 1], ycc[..., 2]
    return float(np.mean((cr >= 133) & (cr <= 173) & (cb >= 77) & (cb <= 127)))


def is_colour(image: Image.Image) -> bool:
    rgb = np.asarray(image.convert("RGB").resize((64, 64)), dtype=np.int16)
    return bool(np.abs(rgb[..., 0] - rgb[..., 1]).mean() + np.abs(rgb[..., 1] - rgb[..., 2]).mean() > 6)


def people(
    image: Image.Image,
    face_cascade: Any,
    hog: Any,
    face_min_weight: float,
    hog_min_score: float,
    words: Sequence[Word] = (),
) -> list[Found]:
    """Person boxes: faces widened to head and shoulders, and HOG's whole bodies.

    A Haar face counts only with a strong cascade weight and, in a colour picture, skin
    colour inside its box: the cascade alone fires on coins, cells and the moon. A HOG body
    over text is dropped: letters' strokes fire it (posters, signs, scans)."""
    import cv2

    gray, scale = _small_gray(image)
    colour = is_colour(image)
    rgb = np.asarray(image.convert("RGB"))
    h_img, w_img = rgb.shape[:2]
    found: list[Found] = []
    if min(gray.shape) >= 24:
        boxes, _levels, weights = face_cascade.detectMultiScale3(
            cv2.equalizeHist(gray), scaleFactor=1.1, minNeighbors=5, minSize=(24, 24), outputRejectLevels=True
        )
        for (x, y, w, h), weight in zip(boxes, np.ravel(weights), strict=True):
            x, y, w, h = (int(round(v / scale)) for v in (x, y, w, h))
            if float(weight) < face_min_weight:
                continue
            if colour and _skin_share(rgb[y : y + h, x : x + w]) < 0.25:
                continue
            # Head and shoulders: a face is about a third of their width.
            px, py = max(0, x - w), max(0, y - h // 2)
            pw, ph = min(w_img, x + 2 * w) - px, min(h_img, y + 3 * h) - py
            found.append(Found("person", _squash(float(weight), 6.0), px, py, pw, ph))
    if gray.shape[1] >= _HOG_MIN[0] and gray.shape[0] >= _HOG_MIN[1]:
        boxes, weights = hog.detectMultiScale(gray, winStride=(8, 8), padding=(8, 8), scale=1.08)
        for (x, y, w, h), weight in zip(boxes, np.ravel(weights), strict=True):
            if float(weight) < hog_min_score:
                continue
            bx, by, bw, bh = (int(round(v / scale)) for v in (x, y, w, h))
            body = Found("person", _squash(float(weight), 1.0), bx, by, bw, bh)
            if any(_overlap(body, Found("text", 0, t.x, t.y, t.width, t.height)) > 0.3 for t in words):
                continue
            found.append(body)
    return _suppress(found)


def _squash(value: float, half: float) -> float:
    """A detector's margin as a score in (0.5, 1): `half` maps to 0.75."""
    return round(0.5 + 0.5 * value / (value + half), 4)


def _overlap(a: Found, b: Found) -> float:
    ix = max(0, min(a.x + a.width, b.x + b.width) - max(a.x, b.x))
    iy = max(0, min(a.y + a.height, b.y + b.height) - max(a.y, b.y))
    inter = ix * iy
    return inter / max(1, min(a.width * a.height, b.width * b.height))


def _suppress(found: list[Found]) -> list[Found]:
    """One box per person: the best-scored of boxes that mostly cover each other."""
    kept: list[Found] = []
    for f in sorted(found, key=lambda f: -f.score):
        if all(_overlap(f, k) < 0.6 for k in kept):
            kept.append(f)
    return kept


def text_blocks(words: list[Word]) -> list[Found]:
    """One box per Tesseract block of words, scored by the words' mean confidence."""
    blocks: dict[int, list[Word]] = {}
    for w in words:
        blocks.setdefault(w.line[0], []).append(w)
    out = []
    for ws in blocks.values():
        x0, y0 = min(w.x for w in ws), min(w.y for w in ws)
        x1, y1 = max(w.x + w.width for w in ws), max(w.y + w.height for w in ws)
        out.append(Found("text", round(statistics.fmean(w.confidence for w in ws) / 100, 4), x0, y0, x1 - x0, y1 - y0))
    return out


def _runs(rows: np.ndarray) -> int:
    """Separate lines among row (or column) indices: neighbours within 3 pixels are one line."""
    return int(len(rows) and 1 + np.count_nonzero(np.diff(rows) > 3))


def _edge_runs(gray: np.ndarray, axis: int, reach: float) -> int:
    """How many separate straight edges cross at least `reach` of the picture along `axis`
    (0: horizontal edges, 1: vertical ones), away from the border (a scan's margin is no
    edge). Window bars and panels of a screen run edge to edge; photos and text do not."""
    g = gray.astype(np.int16)
    # Over two pixels: a resized edge is spread over two; dark themes differ by ~15 levels.
    jumps = np.abs(g[2:] - g[:-2]) > 12 if axis == 0 else np.abs(g[:, 2:] - g[:, :-2]) > 12
    share = jumps.mean(axis=1 - axis)
    size = len(share)
    rows = np.flatnonzero(share >= reach)
    return _runs(rows[(rows > 0.02 * size) & (rows < 0.98 * size)])


def layout(image: Image.Image) -> dict[str, int]:
    # Near full size: shrinking a scan fades its thin rules below the darkness threshold.
    gray, _scale = _small_gray(image, 1600)
    return {
        # Edge to edge (window bars, a sidebar's border): a screen.
        "ui_edges": _edge_runs(gray, 0, 0.93) + _edge_runs(gray, 1, 0.93),
        # Dark rows across most of the width: the rules of a table or a form (a line of
        # text is never dark across half its width).
        "rules": _runs(np.flatnonzero((gray < 110).mean(axis=1) >= 0.5)),
    }


def scene_labels(
    image: Image.Image,
    words: list[Word],
    *,
    pages: int = 1,
    camera: bool = False,
) -> list[tuple[str, float]]:
    """document / poster / sign / screenshot from how much text there is, how large, in how
    many lines, with what lines around it; [] for a picture without readable text.

    Text height is relative to the picture's height. The thresholds were set on the pictures
    of benchmarks/data/image_labels.csv (no separate held-out set: see docs/media.md)."""
    if len(words) < 2 and not (pages > 1 and words):
        return []
    covered = sum(w.width * w.height for w in words) / (image.width * image.height)
    if covered < 0.005:  # a word or two in a photo (a label, a number plate) makes no text scene
        return []
    heights = [w.height / image.height for w in words]
    median_h, max_h = statistics.median(heights), max(heights)
    n, n_lines = len(words), len({w.line for w in words})
    per_line = n / n_lines
    shape = layout(image)
    ui, ruled = shape["ui_edges"] > 0, shape["rules"] >= 3
    # A page: running text (many words a line) in small type, or a ruled table or form.
    document = (
        0.3 * (median_h < 0.03)
        + 0.3 * min(1.0, n / 30)
        + 0.2 * min(1.0, n_lines / 6)
        + 0.3 * (per_line >= 5)
        + 0.3 * ruled
    )
    # A screen: edge-to-edge bars and panels around the text; never a camera's photo.
    screenshot = 0.6 * ui + 0.2 * min(1.0, n / 20) + 0.15 * (median_h < 0.03) - 0.5 * camera
    # A poster: a few short lines of large type, a title larger than the rest, no ruling.
    poster = (
        (max_h >= 0.05)
        * (not ruled)
        * (0.35 + 0.25 * (2 <= n_lines <= 10) + 0.15 * (max_h > 1.5 * median_h) + 0.1 * (per_line <= 4))
    )
    # A sign: one or two lines of large type, often photographed.
    sign = (median_h >= 0.07) * (0.4 + 0.3 * (n_lines <= 2) + 0.1 * (n <= 8) + 0.2 * camera)
    if ui:
        document *= 0.6  # text on a screen is a screenshot first
    scores = {"document": document, "screenshot": screenshot, "poster": poster, "sign": sign}
    if pages > 1:  # a multi-page TIFF is a scan or a fax
        scores = {k: v * 0.6 for k, v in scores.items()}
        scores["document"] += 0.5
    return sorted(((label, round(min(0.95, s), 4)) for label, s in scores.items() if s >= 0.3), key=lambda t: -t[1])


def fuse(
    persons: list[Found],
    scenes: list[tuple[str, float]],
    classes: list[tuple[str, float]],
    top_k: int,
) -> list[tuple[str, float, str]]:
    """One ranked list: (label, score, source). A person and a text scene are what a person
    names first; the classifier's labels follow by probability."""
    out: list[tuple[str, float, str]] = []
    if persons:
        out.append(("person", max(p.score for p in persons), "people"))
    out.extend((label, score, "scene") for label, score in scenes)
    seen = {label for label, _s, _src in out}
    out.extend((label, score, "classifier") for label, score in classes if label not in seen)
    out.sort(key=lambda t: (t[2] == "classifier", -t[1]))
    return out[:top_k]
