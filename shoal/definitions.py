"""Definition files (YAML or JSON) read into pydantic models, with errors that name the file."""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from shoal.exceptions import ShoalError

M = TypeVar("M", bound=BaseModel)


def describe(exc: ValidationError) -> str:
    """pydantic's errors as `field.path: message; ...`."""
    return "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors())


def load(path: Path, model: type[M], error: type[ShoalError], what: str, **extra: Any) -> M:
    """Read `path` as `model`; `extra` fields join the file's mapping (e.g. where it came from)."""
    if not path.is_file():
        raise error(f"{what} file {path} does not exist")
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise error(f"{path}: not valid YAML/JSON: {exc}") from None
    if extra:
        data = {**(data if isinstance(data, dict) else {}), **extra}
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise error(f"{path}: invalid {what}: {describe(exc)}") from None
