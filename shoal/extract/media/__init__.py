"""Media extraction: images (OCR, faces, labels, unsafe content, properties), audio
(speech-to-text) and video (keyframes through the image analysers, audio through speech).

Public API: `EXTRACTORS` (the extractor classes), `ROUTES` (media type -> chain head,
followed by the NLP enrichers in the router) and `models.check` (verify model files).
"""

from __future__ import annotations

from shoal.extract.base import Extractor
from shoal.extract.media.av import AUDIO_TYPES, AV_EXTRACTORS, VIDEO_TYPES
from shoal.extract.media.image import IMAGE_EXTRACTORS, IMAGE_TYPES

EXTRACTORS: tuple[type[Extractor], ...] = (*IMAGE_EXTRACTORS, *AV_EXTRACTORS)
# OCR before the labels: the labeller reads text scenes (document, sign...) from its words.
_PICTURE = ["faces", "ocr", "image_labels", "unsafe_content"]
ROUTES: dict[str, list[str]] = {
    **{mt: ["image", *_PICTURE] for mt in IMAGE_TYPES},
    **{mt: ["audio", "speech"] for mt in AUDIO_TYPES},
    **{mt: ["video", *_PICTURE, "speech"] for mt in VIDEO_TYPES},
}
# Extractors whose models are checked before a run that routes objects to them.
MODEL_STEPS = frozenset({"speech", "image_labels", "faces", "unsafe_content"})
