"""Speech-to-text backends: faster-whisper (the default) and PocketSphinx (for comparison).

Both take windows of 16 kHz mono samples (frames.pcm_windows) and return timed segments,
so memory stays bounded whatever the recording's length. faster-whisper's CTranslate2
engine starts worker threads when a model loads; threads do not survive fork, so a model
is loaded lazily inside the sandbox child (once per child, reused for every object it serves).
"""

from __future__ import annotations

import math
import os
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from shoal.config import MediaSettings
from shoal.exceptions import DependencyError
from shoal.extract.media import models
from shoal.extract.media.frames import SAMPLE_RATE, pcm_windows

_models: dict[str, Any] = {}
_lock = threading.Lock()


@dataclass
class Word:
    word: str
    start_s: float
    end_s: float
    probability: float | None


@dataclass
class Segment:
    start_s: float
    end_s: float
    text: str
    confidence: float | None
    # Word timings where the backend gives them (faster-whisper's word_timestamps).
    words: list[Word] = field(default_factory=list)


@dataclass
class Transcript:
    segments: list[Segment]
    language: str | None
    language_probability: float | None
    audio_s: float
    model: str


class Backend(Protocol):
    name: str

    def transcribe(
        self, samples: Any, offset_s: float, language: str | None
    ) -> tuple[list[Segment], str | None, float | None]: ...


def speech_threads(settings: MediaSettings) -> int:
    """`speech_threads`, but never more than OpenMP may start (OMP_THREAD_LIMIT): CTranslate2
    asked for 2 threads under a limit of 1 decoded garbage (a WAV read as Chinese, then nothing)."""
    limit = os.environ.get("OMP_THREAD_LIMIT", "").strip()
    return min(settings.speech_threads, int(limit)) if limit.isdigit() and int(limit) > 0 else settings.speech_threads


class FasterWhisper:
    def __init__(self, settings: MediaSettings) -> None:
        self.settings = settings
        self.name = f"faster-whisper:{settings.speech_model}"
        folder = models.speech_model_dir(settings)
        threads = speech_threads(settings)
        key = f"{folder}:{settings.speech_compute_type}:{threads}"
        with _lock:
            if key not in _models:
                try:
                    from faster_whisper import WhisperModel
                except ImportError:
                    raise DependencyError(
                        "faster-whisper is not installed", hint="pip install 'shoal[media]'"
                    ) from None
                _models[key] = WhisperModel(
                    str(folder),
                    device="cpu",
                    compute_type=settings.speech_compute_type,
                    cpu_threads=threads,
                    local_files_only=True,
                )
            self.model = _models[key]

    def transcribe(
        self, samples: Any, offset_s: float, language: str | None
    ) -> tuple[list[Segment], str | None, float | None]:
        segments, info = self.model.transcribe(
            samples,
            language=language,
            beam_size=self.settings.speech_beam_size,
            condition_on_previous_text=False,
            word_timestamps=self.settings.speech_word_timestamps,
            # No sampling fallback at higher temperatures: it is random, so the same speech
            # could be written two ways on two runs.
            temperature=0.0,
            # Silero VAD (its ONNX model ships inside faster-whisper, run by onnxruntime): silence
            # and noise between utterances are cut before decoding, which is where Whisper makes up
            # words ("Thank you."); timestamps still refer to the original audio.
            vad_filter=self.settings.speech_vad,
            vad_parameters={"min_silence_duration_ms": self.settings.speech_vad_min_silence_ms},
        )
        out = []
        for s in segments:
            if not s.text.strip():
                continue
            start, end = round(offset_s + s.start, 3), round(offset_s + s.end, 3)
            out.append(
                Segment(
                    start,
                    end,
                    s.text.strip(),
                    round(math.exp(s.avg_logprob), 4) if s.avg_logprob is not None else None,
                    _words(s.words or [], offset_s, start, end),
                )
            )
        return out, info.language, info.language_probability


def _words(found: list[Any], offset_s: float, seg_start: float, seg_end: float) -> list[Word]:
    """Words with absolute times, kept in order and inside their segment.

    Whisper's alignment can put a word a few milliseconds outside the segment it belongs
    to (the two come from different passes), or give a word a start before the previous
    word's end; clamping keeps `start_s <= end_s`, monotonic starts and segment bounds.
    """
    out: list[Word] = []
    floor = seg_start
    for w in found:
        text = w.word.strip()
        if not text:
            continue
        start = min(max(round(offset_s + w.start, 3), floor), seg_end)
        end = min(max(round(offset_s + w.end, 3), start), seg_end)
        prob = None if w.probability is None else round(float(w.probability), 4)
        out.append(Word(text, start, end, prob))
        floor = start
    return out


class PocketSphinx:
    """CMU PocketSphinx with its bundled US-English model: fast, far less accurate (benchmark baseline)."""

    def __init__(self, settings: MediaSettings) -> None:
        self.name = "pocketsphinx:en-us"
        with _lock:
            if "pocketsphinx" not in _models:
                try:
                    from pocketsphinx import Decoder
                except ImportError:
                    raise DependencyError("pocketsphinx is not installed", hint="pip install pocketsphinx") from None
                _models["pocketsphinx"] = Decoder(samprate=SAMPLE_RATE, loglevel="FATAL")
            self.decoder = _models["pocketsphinx"]

    def transcribe(
        self, samples: Any, offset_s: float, language: str | None
    ) -> tuple[list[Segment], str | None, float | None]:
        import numpy as np

        pcm = (np.clip(samples, -1, 1) * 32767).astype("<i2").tobytes()
        d = self.decoder
        d.start_utt()
        d.process_raw(pcm, full_utt=True)
        d.end_utt()
        hyp = d.hyp()
        if hyp is None or not hyp.hypstr.strip():
            return [], "en", None
        words = [s for s in d.seg() if not s.word.startswith(("<", "[")) and s.word != "<sil>"]
        frame_s = 0.01
        start = words[0].start_frame * frame_s if words else 0.0
        end = words[-1].end_frame * frame_s if words else len(samples) / SAMPLE_RATE
        return [Segment(round(offset_s + start, 3), round(offset_s + end, 3), hyp.hypstr.strip(), None)], "en", None


BACKENDS: dict[str, Callable[[MediaSettings], Backend]] = {
    "faster-whisper": FasterWhisper,
    "pocketsphinx": PocketSphinx,
}


def backend(settings: MediaSettings, name: str = "faster-whisper") -> Backend:
    if name not in BACKENDS:
        raise DependencyError(f"unknown speech backend {name!r}", hint="one of " + ", ".join(BACKENDS))
    return BACKENDS[name](settings)


def transcribe_file(path: Path, settings: MediaSettings, engine: Backend | None = None) -> Transcript:
    """Transcribe a file window by window; the first window's language holds for the rest."""
    engine = engine or backend(settings)
    segments: list[Segment] = []
    language, probability = settings.speech_language, None
    audio_s = 0.0
    for offset, samples in pcm_windows(path, settings.speech_window_s):
        audio_s = offset + len(samples) / SAMPLE_RATE
        if len(samples) < SAMPLE_RATE // 10:
            continue
        found, lang, prob = engine.transcribe(samples, offset, language)
        segments.extend(found)
        if language is None and lang:
            language, probability = lang, prob
    return Transcript(segments, language, probability, round(audio_s, 3), engine.name)


def join_text(segments: Iterable[Segment]) -> str:
    return " ".join(s.text for s in segments).strip()
