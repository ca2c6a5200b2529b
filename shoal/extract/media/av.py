"""Audio and video extractors: decode and describe (ffprobe), keyframes, and speech-to-text.

Chains (router): audio -> audio, speech, NLP; video -> video, faces, image_labels,
unsafe_content, ocr, speech, NLP. The decoder steps fail an unreadable file; the
analysers after them are optional, so a video without sound still gets its keyframes read.
"""

from __future__ import annotations

import posixpath
from typing import Any

from shoal.config import ExtractSettings
from shoal.extract.base import Context, Extraction, ExtractionSkipped, Extractor, TextPart
from shoal.extract.media import frames, models

AUDIO_TYPES = (
    "audio/wav",
    "audio/x-wav",
    "audio/vnd.wave",
    "audio/mpeg",
    "audio/flac",
    "audio/x-flac",
    "audio/ogg",
    "audio/mp4",
    "audio/x-m4a",
    "audio/m4a",
    "audio/webm",
)
VIDEO_TYPES = ("video/mp4", "video/quicktime", "video/x-matroska", "video/webm", "video/x-msvideo")


def _suffix(ctx: Context) -> str:
    return posixpath.splitext(ctx.obj.file_name)[1]


def _media_row(info: dict[str, Any], keyframes: int | None) -> dict[str, Any]:
    return {**info, "keyframes": keyframes}


class _Media(Extractor):
    def time_limit(self, settings: ExtractSettings) -> float:
        return max(settings.timeout_s, settings.media.timeout_s)


class AudioDecoder(_Media):
    """Describes a recording: duration, codec, sample rate, channels."""

    name = "audio"
    version = "1"

    def run(self, ctx: Context) -> Extraction:
        with frames.spooled(ctx.data, _suffix(ctx)) as path:
            info = frames.probe(path)
        if not info["has_audio"]:
            raise ValueError("no audio stream in the file")
        ctx.properties["has_audio"] = True
        return Extraction(rows={"media_properties": [_media_row(info, None)]}, properties=_props(info))


class VideoDecoder(_Media):
    """Describes a video and decodes its scene keyframes for the image analysers."""

    name = "video"
    version = "1"

    def run(self, ctx: Context) -> Extraction:
        media = ctx.settings.media
        with frames.spooled(ctx.data, _suffix(ctx)) as path:
            info = frames.probe(path)
            keys = []
            # MP4/WebM holding only sound (a recording saved as .mp4) is audio: speech still runs.
            if info["has_video"]:
                keys = frames.keyframes(
                    path,
                    threshold=media.scene_threshold,
                    limit=media.max_keyframes,
                    interval_s=media.keyframe_interval_s,
                )
        ctx.frames.extend(keys)
        ctx.properties["has_audio"] = info["has_audio"]
        return Extraction(
            rows={"media_properties": [_media_row(info, len(keys))]},
            properties={**_props(info), "keyframes": len(keys)},
            details={"keyframes": [{"part": k.part, "time_s": k.time_s} for k in keys]},
        )


def _props(info: dict[str, Any]) -> dict[str, Any]:
    keep = ("duration_s", "container", "video_codec", "audio_codec", "width", "height", "fps", "sample_rate")
    return {k: info[k] for k in keep if info.get(k) is not None}


class Speech(_Media):
    """Speech-to-text with timestamps per segment and word, language and confidence (faster-whisper)."""

    name = "speech"
    version = "3"  # 3: voice activity detection, temperature 0 only
    optional = True
    preload = ("faster_whisper",)

    def warm(self, settings: ExtractSettings) -> None:
        super().warm(settings)
        # Join and verify the model files here, once per worker; the model itself loads
        # in the sandbox child (CTranslate2's threads do not survive a fork).
        models.speech_model_dir(settings.media)

    def run(self, ctx: Context) -> Extraction:
        from shoal.extract.media.speech import join_text, transcribe_file

        if ctx.properties.get("has_audio") is False:
            raise ExtractionSkipped("no audio track")
        with frames.spooled(ctx.data, _suffix(ctx)) as path:
            t = transcribe_file(path, ctx.settings.media)
        rows = [
            {
                "segment": i,
                "start_s": s.start_s,
                "end_s": s.end_s,
                "text": s.text,
                "confidence": s.confidence,
                "language": t.language,
                "model": t.model,
                "words": [
                    {"word": w.word, "start_s": w.start_s, "end_s": w.end_s, "probability": w.probability}
                    for w in s.words
                ],
            }
            for i, s in enumerate(t.segments)
        ]
        text = join_text(t.segments)
        # How surely each word was heard, for the entity step's clean-up (same chain, same process).
        ctx.shared["transcript_words"] = [(w.word, w.probability) for s in t.segments for w in s.words]
        return Extraction(
            text=[TextPart("transcript", text)] if text else [],
            rows={"transcripts": rows},
            properties={
                "speech_language": t.language,
                "speech_language_probability": None
                if t.language_probability is None
                else round(t.language_probability, 4),
                "speech_segments": len(rows),
                "speech_model": t.model,
            },
        )


AV_EXTRACTORS: tuple[type[Extractor], ...] = (AudioDecoder, VideoDecoder, Speech)
