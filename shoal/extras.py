"""Which optional extra (`pip install 'shoal[EXTRA]'`) brings a Python module.

A core-only install meets a missing module only when a command needs a capability; the CLI
turns that ImportError into an error naming the extra, not a traceback naming a package.
"""

from __future__ import annotations

import re
from functools import cache
from importlib import metadata

from shoal.exceptions import DependencyError

# Import names that differ from their distribution's name.
_DISTRIBUTION = {
    "magic": "python-magic",
    "cv2": "opencv-contrib-python-headless",
    "PIL": "pillow",
    "docx": "python-docx",
    "pptx": "python-pptx",
    "odf": "odfpy",
    "sklearn": "scikit-learn",
    "faiss": "faiss-cpu",
    "Stemmer": "pystemmer",
    "multipart": "python-multipart",
    "python_multipart": "python-multipart",
    "markdown_it": "markdown-it-py",
}
# Extras that only gather others, or are not for users.
_NOT_CAPABILITIES = {"all", "test", "bench"}


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


@cache
def _extras_by_distribution() -> dict[str, tuple[str, ...]]:
    found: dict[str, list[str]] = {}
    try:
        requirements = metadata.requires("shoal") or []
    except metadata.PackageNotFoundError:  # running from a source tree that was never installed
        return {}
    for req in requirements:
        name = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", req)
        extra = re.search(r"""extra\s*==\s*["']([\w-]+)["']""", req)
        # `shoal[documents]` inside `media` names this project, not a module to install.
        if name and extra and extra.group(1) not in _NOT_CAPABILITIES and _normal(name.group(0)) != "shoal":
            found.setdefault(_normal(name.group(0)), []).append(extra.group(1))
    return {k: tuple(dict.fromkeys(v)) for k, v in found.items()}


def extras_for_module(module: str) -> tuple[str, ...]:
    """The extras whose packages provide `module` (its top-level name), in pyproject order."""
    top = module.split(".")[0]
    return _extras_by_distribution().get(_normal(_DISTRIBUTION.get(top, top)), ())


def dependency_error(exc: ImportError, doing: str | None = None) -> DependencyError | None:
    """The error to show for a module an extra would have brought; None for any other import
    failure (a real bug, left as it is)."""
    module = getattr(exc, "name", None)
    extras = extras_for_module(module) if module else ()
    if not extras:
        return None
    need = extras[0] if len(extras) == 1 else "all"
    which = f"the {extras[0]} extra" if len(extras) == 1 else f"one of the extras {', '.join(extras)}"
    what = f"{doing} needs" if doing else "this needs"
    return DependencyError(
        f"{what} the Python module {module}, which {which} installs; it is not installed",
        hint=f"pip install 'shoal[{need}]'",
    )
