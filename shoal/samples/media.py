"""Media samples with known content: rendered text, synthesized speech, a video made of both.

Tests measure OCR and speech accuracy against these, the demo ingests them and
benchmarks/media.py scales them up. Speech comes from espeak-ng and video from ffmpeg
(Debian packages); the face photo is scikit-image's bundled astronaut portrait.
"""

from __future__ import annotations

import importlib.util
import io
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from PIL import Image, ImageDraw

from shoal.exceptions import DependencyError
from shoal.samples.corpus import _font

SIGN_TEXT = "Warehouse 7 closes at noon on Friday"
POSTER_LINES = ["Quarterly inventory count", "Rotterdam depot", "Starts Monday at eight"]
SPEECH_SENTENCE = (
    "The quarterly revenue report was sent to Maria Garcia in Berlin on Tuesday. "
    "Please call the Rotterdam warehouse before Friday."
)
VIDEO_SLIDES = ["Shoal product update", "Search across every recording", "Questions and answers"]
# Distinct backgrounds make each slide a scene change ffmpeg's detector sees.
SLIDE_COLOURS = [(250, 248, 240), (20, 40, 90), (250, 200, 120)]
CAPTURED_AT = "2024:05:17 14:30:00"  # EXIF local time, with offset +02:00
GPS = (52.520008, 13.404954)  # Berlin


def text_image(
    lines: list[str] | str,
    size: tuple[int, int] = (1200, 400),
    font_px: int = 56,
    background: tuple[int, int, int] = (250, 248, 240),
) -> Image.Image:
    """Dark text on a light background, one line per entry."""
    lines = [lines] if isinstance(lines, str) else lines
    img = Image.new("RGB", size, background)
    draw = ImageDraw.Draw(img)
    font = _font(font_px)
    y = (size[1] - len(lines) * int(font_px * 1.5)) // 2
    for line in lines:
        draw.text((60, y), line, fill=(20, 20, 30) if sum(background) > 380 else (245, 245, 245), font=font)
        y += int(font_px * 1.5)
    return img


TABLE_ROWS = [
    ["Item", "Depot", "Quantity", "Price"],
    ["Pallet wrap", "Rotterdam", "120", "14.50"],
    ["Label printer", "Berlin", "3", "289.00"],
    ["Safety gloves", "Lisbon", "450", "2.75"],
    ["Forklift battery", "Oslo", "2", "1830.00"],
]


def table_image(
    rows: list[list[str]] = TABLE_ROWS,
    font_px: int = 28,
    col_px: int = 260,
    row_px: int = 56,
    margin: int = 80,
    title: str | None = "Stock count, week 12",
) -> Image.Image:
    """A ruled table (a scanned form or a screenshot of a spreadsheet): dark grid, one text per cell."""
    cols = max(len(r) for r in rows)
    top = margin + (row_px if title else 0)
    size = (2 * margin + cols * col_px, top + margin + len(rows) * row_px)
    img = Image.new("RGB", size, (252, 252, 250))
    draw = ImageDraw.Draw(img)
    font = _font(font_px)
    if title:
        draw.text((margin, margin), title, fill=(20, 20, 30), font=font)
    for r in range(len(rows) + 1):
        y = top + r * row_px
        draw.line([(margin, y), (margin + cols * col_px, y)], fill=(30, 30, 30), width=2)
    for c in range(cols + 1):
        x = margin + c * col_px
        draw.line([(x, top), (x, top + len(rows) * row_px)], fill=(30, 30, 30), width=2)
    for r, row in enumerate(rows):
        for c, text in enumerate(row):
            draw.text(
                (margin + c * col_px + 14, top + r * row_px + (row_px - font_px) // 2 - 2),
                text,
                fill=(20, 20, 30),
                font=font,
            )
    return img


def cell_accuracy(expected: list[list[str]], got: list[list[str]]) -> float:
    """Share of expected cells read back exactly (whitespace and case folded), position by position;
    missing rows or columns count as wrong cells."""
    total = sum(len(r) for r in expected)
    right = 0
    for r, row in enumerate(expected):
        for c, want in enumerate(row):
            have = got[r][c] if r < len(got) and c < len(got[r]) else None
            right += have is not None and " ".join(have.split()).lower() == " ".join(want.split()).lower()
    return right / max(1, total)


def encode(img: Image.Image, fmt: str, **kw: Any) -> bytes:
    buf = io.BytesIO()
    img.save(buf, format=fmt, **kw)
    return buf.getvalue()


def _dms(value: float) -> tuple[float, float, float]:
    value = abs(value)
    d = int(value)
    m = int((value - d) * 60)
    s = round((value - d - m / 60) * 3600, 4)
    return (float(d), float(m), s)


def photo_with_exif() -> bytes:
    """A JPEG 'photo' (a sign) with camera, capture time, offset and GPS position in EXIF."""
    img = text_image(SIGN_TEXT, (1400, 300), 60)
    exif = Image.Exif()
    exif[0x010F] = "ShoalCam"  # Make
    exif[0x0110] = "Model 7"  # Model
    ifd = exif.get_ifd(0x8769)
    ifd[0x9003] = CAPTURED_AT  # DateTimeOriginal
    ifd[0x9011] = "+02:00"  # OffsetTimeOriginal
    gps = exif.get_ifd(0x8825)
    gps[1], gps[2] = "N", _dms(GPS[0])
    gps[3], gps[4] = "E", _dms(GPS[1])
    return encode(img, "JPEG", quality=92, exif=exif)


def multipage_tiff(pages: list[str]) -> bytes:
    frames = [text_image(p) for p in pages]
    buf = io.BytesIO()
    frames[0].save(buf, format="TIFF", save_all=True, append_images=frames[1:], compression="tiff_deflate")
    return buf.getvalue()


def face_photo() -> bytes:
    """scikit-image's astronaut portrait (one face), read from the installed package's data folder."""
    spec = importlib.util.find_spec("skimage")
    if spec is None or not spec.submodule_search_locations:
        raise DependencyError("scikit-image is not installed", hint="pip install --no-deps scikit-image")
    return (Path(next(iter(spec.submodule_search_locations))) / "data" / "astronaut.png").read_bytes()


def _need(tool: str, package: str) -> str:
    path = shutil.which(tool)
    if path is None:
        raise DependencyError(f"{tool} is not installed", hint=f"apt-get install {package}")
    return path


def speech_wav(sentence: str = SPEECH_SENTENCE, *, speed: int = 150, repeat: int = 1, voice: str = "en-us") -> bytes:
    """The sentence spoken by espeak-ng (22 kHz mono WAV), `repeat` times with pauses between."""
    text = " ... ".join([sentence] * repeat)
    done = subprocess.run(
        [_need("espeak-ng", "espeak-ng"), "-v", voice, "-s", str(speed), "--stdout", text],
        capture_output=True,
        check=True,
    )
    return done.stdout


# Lossy encodes at the quality people share speech in. ffmpeg's defaults for espeak's 22 kHz mono
# are far lower (MP3 32 kbit/s, AAC about 73 kbit/s: 18 and 22 dB signal-to-noise against the
# WAV), and that codec noise alone flipped Whisper between near-tied readings of the same
# speech ("Rotterdam warehouse" / "Roger Damware House", "Garcia" / "Darcia"): issue 33.
_AUDIO_CODECS = {
    "mp3": ["-c:a", "libmp3lame", "-q:a", "2"],
    "flac": [],
    "ogg": ["-c:a", "libvorbis", "-q:a", "6"],
    "m4a": ["-c:a", "aac", "-b:a", "160k"],
}


def convert_audio(wav: bytes, ext: str) -> bytes:
    """The WAV re-encoded by ffmpeg as mp3 (VBR ~q2), flac, ogg (Vorbis q6) or m4a (AAC 160 kbit/s)."""
    codec = _AUDIO_CODECS[ext]
    with tempfile.TemporaryDirectory() as tmp:
        src, dst = Path(tmp) / "in.wav", Path(tmp) / f"out.{ext}"
        src.write_bytes(wav)
        subprocess.run([_need("ffmpeg", "ffmpeg"), "-v", "error", "-y", "-i", str(src), *codec, str(dst)], check=True)
        return dst.read_bytes()


def slideshow_video(
    slides: list[str] = VIDEO_SLIDES, speech: bytes | None = None, seconds_per_slide: float = 3.0, ext: str = "mp4"
) -> bytes:
    """A video of text slides (hard cuts, so each is a scene) with the speech as its soundtrack."""
    codecs = {
        "mp4": ["-c:v", "libx264", "-pix_fmt", "yuv420p", "-c:a", "aac", "-b:a", "160k"],
        "mov": ["-c:v", "libx264", "-pix_fmt", "yuv420p", "-c:a", "aac", "-b:a", "160k"],
        "mkv": ["-c:v", "libx264", "-pix_fmt", "yuv420p", "-c:a", "libvorbis", "-q:a", "6"],
        "webm": ["-c:v", "libvpx-vp9", "-b:v", "0", "-crf", "40", "-deadline", "realtime"]
        + ["-c:a", "libopus", "-b:a", "96k"],
    }[ext]
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        cmd = [_need("ffmpeg", "ffmpeg"), "-v", "error", "-y"]
        for i, slide in enumerate(slides):
            colour = SLIDE_COLOURS[i % len(SLIDE_COLOURS)]
            (d / f"s{i}.png").write_bytes(encode(text_image(slide, (960, 540), 48, colour), "PNG"))
            cmd += ["-loop", "1", "-framerate", "10", "-t", str(seconds_per_slide), "-i", f"s{i}.png"]
        if speech is not None:
            (d / "speech.wav").write_bytes(speech)
            cmd += ["-i", "speech.wav"]
        joined = "".join(f"[{i}:v]" for i in range(len(slides))) + f"concat=n={len(slides)}:v=1:a=0[v]"
        cmd += ["-filter_complex", joined, "-map", "[v]"]
        if speech is not None:
            cmd += ["-map", f"{len(slides)}:a"]
        cmd += ["-r", "10", *codecs, "-t", str(seconds_per_slide * len(slides)), f"out.{ext}"]
        subprocess.run(cmd, check=True, cwd=d)
        return (d / f"out.{ext}").read_bytes()


def edit_distance(a: list, b: list) -> int:
    """Levenshtein distance between two sequences (words or characters)."""
    prev = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        cur = [i]
        for j, y in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (x != y)))
        prev = cur
    return prev[-1]


def words(text: str) -> list[str]:
    """Lower-case words without punctuation: how transcripts are compared."""
    return "".join(c.lower() if c.isalnum() or c.isspace() else " " for c in text).split()


def wer(ref: str, hyp: str) -> float:
    """Word error rate of a transcript against the known sentence."""
    return edit_distance(words(ref), words(hyp)) / max(1, len(words(ref)))


def cer(ref: str, hyp: str) -> float:
    """Character error rate of OCR text against the rendered text (whitespace normalised)."""
    r, h = " ".join(ref.split()).lower(), " ".join(hyp.split()).lower()
    return edit_distance(list(r), list(h)) / max(1, len(r))


def write_media_corpus(folder: Path) -> dict[str, dict]:
    """Images, recordings and a video with known content; returns source path -> known facts."""
    speech = speech_wav()
    files: dict[str, tuple[bytes, dict]] = {
        "images/sign.jpg": (photo_with_exif(), {"text": SIGN_TEXT, "captured_at": "2024-05-17T12:30:00"}),
        "images/poster.png": (encode(text_image(POSTER_LINES), "PNG"), {"text": " ".join(POSTER_LINES)}),
        "images/poster-copy.webp": (
            encode(text_image(POSTER_LINES).resize((600, 200)), "WEBP", quality=70),
            {"duplicate_of": "images/poster.png"},
        ),
        "images/pages.tiff": (multipage_tiff(POSTER_LINES), {"pages": 3}),
        "images/astronaut.png": (face_photo(), {"faces": 1}),
        "audio/briefing.wav": (speech, {"text": SPEECH_SENTENCE}),
        "audio/briefing.mp3": (convert_audio(speech, "mp3"), {"text": SPEECH_SENTENCE}),
        "video/update.mp4": (slideshow_video(speech=speech), {"text": SPEECH_SENTENCE, "slides": VIDEO_SLIDES}),
    }
    for rel, (data, _facts) in files.items():
        path = folder / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return {rel: facts for rel, (_d, facts) in files.items()}
