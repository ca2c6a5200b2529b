"""Image extractors: decode (properties, EXIF, colours, perceptual hash), then the analysers
(faces, labels, unsafe content, OCR) over every decoded frame: image pages or video keyframes.

Models load lazily, once per sandbox child: ONNX Runtime and OpenCV start thread pools
that do not survive a fork, so they must not be created in the parent worker.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import numpy as np
from PIL import ExifTags, Image

from shoal.extract.base import Context, ExtractedTable, Extraction, ExtractionSkipped, Extractor, TextPart
from shoal.extract.media import models, scene
from shoal.extract.media.frames import Frame, image_frames, open_image

IMAGE_TYPES = (
    "image/png",
    "image/jpeg",
    "image/tiff",
    "image/gif",
    "image/webp",
    "image/bmp",
    "image/x-ms-bmp",
    # Phone photos (HEIC/HEIF): decoded by pillow-heif (libheif), see frames.open_image.
    "image/heic",
    "image/heif",
)
# NudeNet classes reported as unsafe; the others (faces, covered parts, feet) are not.
UNSAFE_CLASSES = frozenset(
    {
        "FEMALE_GENITALIA_EXPOSED",
        "MALE_GENITALIA_EXPOSED",
        "FEMALE_BREAST_EXPOSED",
        "BUTTOCKS_EXPOSED",
        "ANUS_EXPOSED",
    }
)
_models: dict[str, Any] = {}
_lock = threading.Lock()


def _model(key: str, build: Callable[[], Any]) -> Any:
    with _lock:
        if key not in _models:
            _models[key] = build()
        return _models[key]


def _frames(ctx: Context) -> list[Frame]:
    if not ctx.frames:
        raise ExtractionSkipped("no decoded picture (the decoder step did not run or found none)")
    return ctx.frames


def _place(frame: Frame) -> dict[str, Any]:
    return {"part": frame.part, "time_s": None if frame.time_s is None else round(frame.time_s, 3)}


class ImageDecoder(Extractor):
    """Decodes the image; records size, format, colours, EXIF (capture time, GPS) and a perceptual hash."""

    name = "image"
    version = "1"
    preload = ("PIL.Image", "imagehash")

    def run(self, ctx: Context) -> Extraction:
        import imagehash

        media = ctx.settings.media
        img = open_image(ctx.data, media.max_pixels)
        try:
            frames = image_frames(img, media.max_frames)
        except (OSError, SyntaxError, ValueError) as exc:  # what Pillow raises for damaged data
            raise ValueError(f"damaged {img.format or 'image'} data: {exc}") from None
        if not frames:
            raise ValueError("the image has no readable frame")
        ctx.frames.extend(frames)
        exif = _exif(img)
        ctx.shared["exif_camera"] = bool(exif.get("camera"))  # a scene cue for the labeller
        rows = []
        for i, f in enumerate(frames):
            row = {
                **_place(f),
                "width": f.image.width,
                "height": f.image.height,
                "format": img.format,
                "mode": img.mode,
                "frame_count": getattr(img, "n_frames", 1),
                "dominant_colors": dominant_colors(f.image),
                "phash": str(imagehash.phash(f.image)),
                "captured_at": None,
                "gps_latitude": None,
                "gps_longitude": None,
                "camera": None,
                "exif": {},
            }
            if i == 0:
                row.update(exif)
            rows.append(row)
        first = rows[0]
        return Extraction(
            rows={"image_properties": rows},
            properties={
                "width": first["width"],
                "height": first["height"],
                "image_format": img.format,
                "frame_count": first["frame_count"],
                "phash": first["phash"],
                "captured_at": first["captured_at"],
                "page_count": len(frames) if len(frames) > 1 else None,
            },
        )


def dominant_colors(image: Image.Image, k: int = 5) -> list[dict[str, Any]]:
    """The k main colours (median cut on a thumbnail) with their share of the picture."""
    small = image.convert("RGB").resize((64, 64))
    q = small.quantize(colors=k, method=Image.Quantize.MEDIANCUT)
    palette = q.getpalette() or []
    counts = sorted(q.getcolors() or [], reverse=True)
    total = sum(c for c, _ in counts) or 1
    return [
        {"color": "#{:02x}{:02x}{:02x}".format(*palette[idx * 3 : idx * 3 + 3]), "share": round(c / total, 4)}
        for c, idx in counts
        if isinstance(idx, int)  # always, in a palette image: each colour is its palette index
    ]


def _exif(img: Image.Image) -> dict[str, Any]:
    raw = img.getexif()
    if not raw:
        return {}
    tags: dict[str, Any] = {ExifTags.TAGS.get(k, str(k)): v for k, v in raw.items()}
    tags.update({ExifTags.TAGS.get(k, str(k)): v for k, v in raw.get_ifd(ExifTags.IFD.Exif).items()})
    gps = {ExifTags.GPSTAGS.get(k, str(k)): v for k, v in raw.get_ifd(ExifTags.IFD.GPSInfo).items()}
    flat = {
        name: _text(value)
        for name, value in tags.items()
        if name not in ("MakerNote", "UserComment", "ExifOffset", "GPSInfo") and _text(value)
    }
    camera = " ".join(str(tags[t]).strip("\x00 ") for t in ("Make", "Model") if tags.get(t)) or None
    return {
        "captured_at": _capture_time(tags),
        "gps_latitude": _gps(gps.get("GPSLatitude"), gps.get("GPSLatitudeRef"), "S"),
        "gps_longitude": _gps(gps.get("GPSLongitude"), gps.get("GPSLongitudeRef"), "W"),
        "camera": camera,
        "exif": flat,
    }


def _text(value: Any) -> str | None:
    if isinstance(value, bytes):
        return None  # binary blobs (thumbnails, vendor data) are not metadata anyone searches
    s = str(value).strip("\x00 ")
    return s[:200] or None


def _capture_time(tags: dict[str, Any]) -> str | None:
    """DateTimeOriginal with OffsetTimeOriginal when present; EXIF without an offset is taken as UTC."""
    raw = tags.get("DateTimeOriginal") or tags.get("DateTime")
    if not raw:
        return None
    try:
        dt = datetime.strptime(str(raw).strip("\x00 "), "%Y:%m:%d %H:%M:%S")
    except ValueError:
        return None
    tz = UTC
    offset = str(tags.get("OffsetTimeOriginal") or tags.get("OffsetTime") or "").strip("\x00 ")
    if len(offset) == 6 and offset[0] in "+-" and offset[3] == ":":
        try:
            delta = timedelta(hours=int(offset[1:3]), minutes=int(offset[4:6]))
            tz = timezone(delta if offset[0] == "+" else -delta)
        except ValueError:
            pass
    return dt.replace(tzinfo=tz).astimezone(UTC).isoformat(timespec="microseconds")


def _gps(value: Any, ref: Any, negative: str) -> float | None:
    try:
        d, m, s = (float(x) for x in value)
    except (TypeError, ValueError):
        return None
    deg = d + m / 60 + s / 3600
    return round(-deg if str(ref).strip("\x00 ").upper() == negative else deg, 7)


class Faces(Extractor):
    """Frontal faces with OpenCV's Haar cascade: a box per face and the count."""

    name = "faces"
    version = "1"
    optional = True
    preload = ("cv2",)
    MAX_SIDE = 1280

    def run(self, ctx: Context) -> Extraction:
        import cv2

        path = models.face_cascade(ctx.settings.media)
        cascade = _model(f"faces:{path}", lambda: cv2.CascadeClassifier(str(path)))
        if cascade.empty():
            raise ValueError(f"face model {path} could not be loaded by OpenCV")
        rows = []
        for frame in _frames(ctx):
            gray = np.asarray(frame.image.convert("L"))
            scale = min(1.0, self.MAX_SIDE / max(gray.shape))
            if scale < 1:
                gray = cv2.resize(gray, None, fx=scale, fy=scale, interpolation=cv2.INTER_AREA)
            gray = cv2.equalizeHist(gray)
            m = ctx.settings.media.face_min_px
            boxes, _levels, weights = cascade.detectMultiScale3(
                gray, scaleFactor=1.1, minNeighbors=5, minSize=(m, m), outputRejectLevels=True
            )
            order = sorted(range(len(boxes)), key=lambda i: (boxes[i][1], boxes[i][0]))
            for n, i in enumerate(order):
                x, y, w, h = (int(round(v / scale)) for v in boxes[i])
                rows.append(
                    {
                        **_place(frame),
                        "face_index": n,
                        "x": x,
                        "y": y,
                        "width": w,
                        "height": h,
                        "confidence": round(float(np.ravel(weights)[i]), 4),
                    }
                )
        return Extraction(rows={"faces": rows}, properties={"face_count": len(rows)})


class ImageLabels(Extractor):
    """What the picture shows: people and text scenes (document, poster, sign, screenshot)
    first, then the ImageNet classes (MobileNetV2 or EfficientNet-Lite in NumPy); people and
    text blocks also as boxes (kind 'detection'). `label_scenes = false` gives ImageNet only."""

    name = "image_labels"
    version = "2"
    optional = True
    preload = ("cv2", "pytesseract")

    def run(self, ctx: Context) -> Extraction:
        media = ctx.settings.media
        net = models.label_classifier(media)
        frames = _frames(ctx)
        pages = sum(1 for f in frames if f.time_s is None)
        rows: list[dict[str, Any]] = []
        for frame in frames:
            best = net.classify(frame.image, media.label_top_k)
            kept = [(label, score) for label, score in best if score >= media.label_min_score] or best[:1]
            ranked = [(label, score, media.label_model) for label, score in kept]
            boxes: list[scene.Found] = []
            if media.label_scenes:
                words = ctx.shared.get("ocr_words", {}).get(frame.part)
                if words is None:  # the OCR step is off or after this one: read the words here
                    words = scene.read_words(frame.image, ctx.settings.ocr_languages)
                persons = self._people(ctx, frame, words)
                scenes = scene.scene_labels(frame.image, words, pages=pages, camera=bool(ctx.shared.get("exif_camera")))
                fused = scene.fuse(persons, scenes, kept, media.label_top_k)
                source = {"people": "opencv_people", "scene": "text_scene", "classifier": media.label_model}
                ranked = [(label, score, source[src]) for label, score, src in fused]
                boxes = persons + scene.text_blocks(words)
            for rank, (label, score, model) in enumerate(ranked, 1):
                rows.append(
                    {
                        **_place(frame),
                        "kind": "object",
                        "rank": rank,
                        "label": label,
                        "score": round(score, 5),
                        "model": model,
                        **_NO_BOX,
                    }
                )
            for rank, f in enumerate(boxes, 1):
                rows.append(
                    {
                        **_place(frame),
                        "kind": "detection",
                        "rank": rank,
                        "label": f.label,
                        "score": round(f.score, 5),
                        "model": "opencv_people" if f.label == "person" else "tesseract",
                        "x": f.x,
                        "y": f.y,
                        "width": f.width,
                        "height": f.height,
                    }
                )
        top = next((r["label"] for r in rows if r["kind"] == "object"), None)
        people = sum(1 for r in rows if r["kind"] == "detection" and r["label"] == "person")
        return Extraction(rows={"image_labels": rows}, properties={"top_label": top, "person_count": people})

    @staticmethod
    def _people(ctx: Context, frame: Frame, words: list[scene.Word]) -> list[scene.Found]:
        import cv2

        media = ctx.settings.media
        path = models.face_cascade(media)
        cascade = _model(f"faces:{path}", lambda: cv2.CascadeClassifier(str(path)))
        if cascade.empty():
            raise ValueError(f"face model {path} could not be loaded by OpenCV")

        def build_hog() -> Any:
            hog = cv2.HOGDescriptor()
            hog.setSVMDetector(np.asarray(cv2.HOGDescriptor.getDefaultPeopleDetector(), dtype=np.float32))
            return hog

        hog = _model("hog_people", build_hog)
        return scene.people(frame.image, cascade, hog, media.person_face_min_weight, media.person_hog_min_score, words)


_NO_BOX = {"x": None, "y": None, "width": None, "height": None}


class UnsafeContent(Extractor):
    """Nudity detection (NudeNet's ONNX detector): unsafe labels with boxes and scores."""

    name = "unsafe_content"
    version = "1"
    optional = True

    def run(self, ctx: Context) -> Extraction:
        media = ctx.settings.media
        path = models.unsafe_detector(media)

        def build() -> Any:
            from nudenet import NudeDetector

            return NudeDetector(model_path=str(path))

        detector = _model(f"unsafe:{path}", build)
        rows = []
        for frame in _frames(ctx):
            bgr = np.ascontiguousarray(np.asarray(frame.image)[:, :, ::-1])
            found = [d for d in detector.detect(bgr) if d["class"] in UNSAFE_CLASSES]
            found = [d for d in found if d["score"] >= media.unsafe_min_score]
            for rank, d in enumerate(sorted(found, key=lambda d: -d["score"]), 1):
                x, y, w, h = (int(v) for v in d["box"])
                rows.append(
                    {
                        **_place(frame),
                        "kind": "unsafe",
                        "rank": rank,
                        "label": d["class"].lower(),
                        "score": round(float(d["score"]), 5),
                        "model": media.unsafe_model,
                        "x": x,
                        "y": y,
                        "width": w,
                        "height": h,
                    }
                )
        return Extraction(rows={"image_labels": rows}, properties={"unsafe": bool(rows)})


class Ocr(Extractor):
    """Text in the picture (Tesseract): words with boxes and confidence; lines feed shoal.text and NLP.
    Ruled tables in the picture (img2table) come out as tables, filled with the same words."""

    name = "ocr"
    version = "2"
    optional = True
    preload = ("pytesseract", "img2table.document")

    def run(self, ctx: Context) -> Extraction:
        import pytesseract

        from shoal.extract.media.tables import cell_reader, find_tables, table_words, words_from_tesseract

        settings = ctx.settings
        rows: list[dict[str, Any]] = []
        parts = []
        tables: list[ExtractedTable] = []
        problems: list[str] = []
        for frame in _frames(ctx):
            data = pytesseract.image_to_data(
                frame.image, lang=settings.ocr_languages, output_type=pytesseract.Output.DICT
            )
            # The labeller after this step reads the scene (document, sign...) from these words.
            ctx.shared.setdefault("ocr_words", {})[frame.part] = scene.words_from_tesseract(data)
            if settings.media.ocr_tables:
                try:
                    found = find_tables(
                        frame.image,
                        functools.partial(
                            table_words,
                            frame.image,
                            settings.ocr_languages,
                            settings.media.ocr_min_confidence,
                            words_from_tesseract(data, settings.media.ocr_min_confidence),
                        ),
                        borderless=settings.media.ocr_borderless_tables,
                        read_cell=cell_reader(settings.ocr_languages),
                    )
                except Exception as exc:  # noqa: BLE001 - tables are a bonus: the words are kept
                    problems.append(f"{frame.part}: tables: {type(exc).__name__}: {exc}")
                    found = []
                tables.extend(ExtractedTable(frame.part, t) for t in found)
            lines: dict[tuple[int, int, int], list[str]] = {}
            word_index = 0
            for i, word in enumerate(data["text"]):
                word = (word or "").strip()
                conf = float(data["conf"][i])
                if not word or conf < max(0.0, settings.media.ocr_min_confidence):
                    continue
                key = (int(data["block_num"][i]), int(data["par_num"][i]), int(data["line_num"][i]))
                lines.setdefault(key, []).append(word)
                rows.append(
                    {
                        **_place(frame),
                        "block": key[0],
                        "line": len(lines) - 1,
                        "word_index": word_index,
                        "word": word,
                        "confidence": round(conf, 2),
                        "x": int(data["left"][i]),
                        "y": int(data["top"][i]),
                        "width": int(data["width"][i]),
                        "height": int(data["height"][i]),
                    }
                )
                word_index += 1
            text = "\n".join(" ".join(words) for words in lines.values())
            if text.strip():
                label = frame.part if frame.time_s is None else f"{frame.part} at {frame.time_s:.2f} s"
                parts.append(TextPart(label, text))
        return Extraction(
            text=parts,
            tables=tables,
            rows={"ocr": rows},
            properties={"ocr_words": len(rows), "ocr_tables": len(tables)},
            details={"problems": problems} if problems else {},
        )


IMAGE_EXTRACTORS: tuple[type[Extractor], ...] = (ImageDecoder, Faces, ImageLabels, UnsafeContent, Ocr)
ANALYSERS = ["faces", "ocr", "image_labels", "unsafe_content"]
