"""Decoding: image pages with Pillow, and audio/video with ffmpeg (probe, keyframes, PCM).

ffmpeg and ffprobe run as child processes with argument lists (never a shell) on a private
temporary copy of the object, so a file name or stream tag can never reach a command line.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from PIL import Image, ImageSequence

from shoal.exceptions import DependencyError
from shoal.extract.base import ExtractionRefused

if TYPE_CHECKING:
    import numpy as np

SAMPLE_RATE = 16_000  # what the speech models expect


@dataclass
class Frame:
    """One picture to analyse: an image page or a video keyframe (time_s set)."""

    part: str  # "image", "page 2", "keyframe 3"
    image: Image.Image  # RGB
    time_s: float | None = None


# ISO-BMFF major brands of HEIF still images (HEIC phone photos, AVIF is left to Pillow).
_HEIF_BRANDS = {b"heic", b"heix", b"heim", b"heis", b"hevc", b"hevx", b"mif1", b"msf1"}


def open_image(data: bytes, max_pixels: int) -> Image.Image:
    import io

    Image.MAX_IMAGE_PIXELS = max_pixels
    if data[4:8] == b"ftyp" and data[8:12] in _HEIF_BRANDS:
        import pillow_heif  # HEIC/HEIF: Pillow opens it once libheif's plugin is registered

        pillow_heif.register_heif_opener()
    try:
        img = Image.open(io.BytesIO(data))
        img.size  # noqa: B018 - the header is parsed lazily; bombs are caught here
    except Image.DecompressionBombError as exc:
        raise ExtractionRefused(f"image too large (decompression bomb?): {exc}") from None
    except (OSError, SyntaxError) as exc:  # UnidentifiedImageError is an OSError
        raise ValueError(f"not a readable image: {exc}") from None
    if img.width * img.height > max_pixels:
        raise ExtractionRefused(f"image of {img.width}x{img.height} pixels exceeds the {max_pixels} pixel limit")
    return img


def image_frames(img: Image.Image, max_frames: int) -> list[Frame]:
    """RGB pages of an image: every page of a multi-page TIFF, frames of an animation."""
    n = getattr(img, "n_frames", 1)
    frames = []
    for i, page in enumerate(ImageSequence.Iterator(img)):
        if i >= max_frames:
            break
        frames.append(Frame("image" if n == 1 else f"page {i + 1}", page.convert("RGB")))
    return frames


def tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise DependencyError(f"{name} is not installed", hint="apt-get install ffmpeg")
    return path


@contextmanager
def spooled(data: bytes, suffix: str = "") -> Iterator[Path]:
    """The object's bytes in a private temporary file (ffmpeg needs to seek in MP4/M4A)."""
    safe = re.sub(r"[^A-Za-z0-9.]", "", suffix)[:10]
    fd, name = tempfile.mkstemp(prefix="shoal-media-", suffix=safe)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        yield Path(name)
    finally:
        os.unlink(name)


def probe(path: Path) -> dict[str, Any]:
    """Container and stream facts from ffprobe; a file ffprobe cannot read is this object's error."""
    done = subprocess.run(
        [tool("ffprobe"), "-v", "error", "-print_format", "json", "-show_format", "-show_streams", str(path)],
        capture_output=True,
        timeout=120,
    )
    if done.returncode != 0:
        raise ValueError(f"not a readable audio/video file: {_ffmpeg_reason(done.stderr, path) or 'ffprobe failed'}")
    info = json.loads(done.stdout or b"{}")
    fmt = info.get("format", {})
    streams = info.get("streams", [])
    video = next((s for s in streams if s.get("codec_type") == "video" and not _is_cover(s)), None)
    audio = next((s for s in streams if s.get("codec_type") == "audio"), None)
    if video is None and audio is None:
        raise ValueError("no audio or video stream in the file")
    return {
        "duration_s": _float(fmt.get("duration")) or _float((video or audio or {}).get("duration")),
        "container": fmt.get("format_name"),
        "bit_rate": _int(fmt.get("bit_rate")),
        "video_codec": video.get("codec_name") if video else None,
        "width": _int(video.get("width")) if video else None,
        "height": _int(video.get("height")) if video else None,
        "fps": _rate(video.get("avg_frame_rate")) if video else None,
        "audio_codec": audio.get("codec_name") if audio else None,
        "sample_rate": _int(audio.get("sample_rate")) if audio else None,
        "channels": _int(audio.get("channels")) if audio else None,
        "has_audio": audio is not None,
        "has_video": video is not None,
    }


_ADDRESS = re.compile(r" @ 0x[0-9a-f]+")


def _ffmpeg_reason(stderr: bytes, path: Path) -> str:
    """ffmpeg's complaint without its temporary file name or memory addresses (last 3 lines)."""
    text = _ADDRESS.sub("", stderr.decode("utf-8", "replace")).replace(str(path), "input")
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return "; ".join(lines[-3:])


def _is_cover(stream: dict[str, Any]) -> bool:
    # MP3/M4A cover art is a one-picture "video" stream.
    return bool(stream.get("disposition", {}).get("attached_pic"))


def _float(v: Any) -> float | None:
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def _int(v: Any) -> int | None:
    try:
        return int(v)
    except (TypeError, ValueError):
        return None


def _rate(v: Any) -> float | None:
    if not isinstance(v, str) or "/" not in v:
        return _float(v)
    num, den = v.split("/", 1)
    try:
        return round(float(num) / float(den), 3) if float(den) else None
    except ValueError:
        return None


_PTS = re.compile(r"\bn:\s*(\d+).*?\bpts_time:\s*([0-9.]+)")


def keyframes(path: Path, *, threshold: float, limit: int, interval_s: float = 0, max_side: int = 1280) -> list[Frame]:
    """The first frame, every scene change (ffmpeg's scene score above `threshold`) and, with
    `interval_s`, a frame whenever that long has passed since the last one kept."""
    with tempfile.TemporaryDirectory(prefix="shoal-frames-") as out:
        every = f"+gte(t-prev_selected_t\\,{interval_s:.3f})" if interval_s > 0 else ""
        chain = (
            f"select='eq(n\\,0)+gt(scene\\,{threshold:.3f}){every}',showinfo,"
            f"scale='min({max_side},iw)':'min({max_side},ih)':force_original_aspect_ratio=decrease"
        )
        done = subprocess.run(
            [tool("ffmpeg"), "-hide_banner", "-nostdin", "-i", str(path), "-an", "-vf", chain, "-fps_mode", "vfr"]
            + ["-frames:v", str(limit), os.path.join(out, "frame-%05d.png")],
            capture_output=True,
            timeout=1800,
        )
        if done.returncode != 0:
            raise ValueError(f"ffmpeg could not decode the video: {_ffmpeg_reason(done.stderr, path) or 'failed'}")
        times = [float(m.group(2)) for m in _PTS.finditer(done.stderr.decode("utf-8", "replace"))]
        files = sorted(Path(out).glob("frame-*.png"))
        frames = []
        for i, f in enumerate(files):
            with Image.open(f) as img:
                frames.append(Frame(f"keyframe {i + 1}", img.convert("RGB"), times[i] if i < len(times) else None))
        return frames


def pcm_windows(path: Path, window_s: float) -> Iterator[tuple[float, Any]]:
    """(offset_s, float32 mono 16 kHz samples) windows, each cut at the quietest moment near its end.

    ffmpeg decodes as a stream, so memory holds about one window whatever the file's length.
    """
    import numpy as np

    proc = subprocess.Popen(
        [tool("ffmpeg"), "-hide_banner", "-nostdin", "-v", "error", "-i", str(path), "-vn", "-map", "0:a:0"]
        + ["-ac", "1", "-ar", str(SAMPLE_RATE), "-f", "s16le", "-"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None
    want = int(window_s * SAMPLE_RATE)
    carry = np.zeros(0, dtype=np.float32)
    offset = 0.0
    try:
        while True:
            raw = proc.stdout.read((want - len(carry)) * 2)
            chunk = np.frombuffer(raw[: len(raw) // 2 * 2], dtype="<i2").astype(np.float32) / 32768.0
            buf = np.concatenate([carry, chunk])
            if not raw:
                if len(buf):
                    yield offset, buf
                break
            if len(buf) < want:
                carry = buf
                continue
            cut = _quiet_cut(buf)
            yield offset, buf[:cut]
            offset += cut / SAMPLE_RATE
            carry = buf[cut:]
    finally:
        proc.stdout.close()
        err = proc.stderr.read() if proc.stderr else b""
        code = proc.wait()
    if code != 0:
        raise ValueError(f"ffmpeg could not decode the audio: {_ffmpeg_reason(err, path) or code}")


def _quiet_cut(buf: np.ndarray, search_s: float = 8.0, frame_s: float = 0.2) -> int:
    """Index of the quietest 200 ms frame in the last seconds of a window (so no word is split)."""
    import numpy as np

    frame = int(frame_s * SAMPLE_RATE)
    start = max(0, len(buf) - int(search_s * SAMPLE_RATE))
    tail = buf[start : start + (len(buf) - start) // frame * frame]
    if len(tail) < frame:
        return len(buf)
    energy = (tail.reshape(-1, frame) ** 2).mean(axis=1)
    return start + int(np.argmin(energy)) * frame + frame // 2
