"""The model registry: versioned records in the catalog database, files in the warehouse.

Versions are immutable: registering an existing NAME@VERSION again is accepted only with
the same content (same SHA-256), so a version always means the same model. Executors copy
a version's file once per process into a local cache keyed by its hash and verify it.
"""

from __future__ import annotations

import getpass
import hashlib
import io
import json
import os
import re
import shutil
import tarfile
import tempfile
import threading
from dataclasses import asdict, dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from sqlalchemy import Column, DateTime, MetaData, String, Table, Text, insert, select

from shoal import storage
from shoal.config import Settings
from shoal.lake import database
from shoal.models import entrypoint
from shoal.models.base import ModelError, Predictor

KINDS = ("onnx", "sklearn", "spacy", "entrypoint")
NAME = re.compile(r"^[a-z][a-z0-9_]{0,62}$")
VERSION = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,39}$")

state_tables = MetaData()
models = Table(
    "shoal_models",
    state_tables,
    Column("name", String(64), primary_key=True),
    Column("version", String(40), primary_key=True),
    Column("kind", String(20), nullable=False),
    Column("uri", Text, nullable=False),  # warehouse file, or the entry point itself
    Column("sha256", String(64), nullable=False),
    Column("size_bytes", String(20), nullable=False),
    Column("info", Text, nullable=False),  # JSON: inputs, outputs, labels, trusted types...
    Column("description", Text, nullable=False),
    Column("registered_by", String(200), nullable=False),
    Column("registered_at", DateTime, nullable=False),
)


@dataclass
class ModelVersion:
    name: str
    version: str
    kind: str
    uri: str
    sha256: str
    size_bytes: int
    info: dict[str, Any]
    description: str
    registered_by: str
    registered_at: str

    @property
    def ref(self) -> str:
        return f"{self.name}@{self.version}"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def detect_kind(source: str) -> str:
    path = Path(source)
    if path.is_file() and path.suffix == ".onnx":
        return "onnx"
    if path.is_file() and path.suffix == ".skops":
        return "sklearn"
    if path.is_dir() and (path / "config.cfg").is_file():
        return "spacy"
    if entrypoint.PATTERN.match(source) and not path.exists():
        return "entrypoint"
    if source.isidentifier() and not path.exists():
        return "spacy"  # an installed pipeline package
    raise ModelError(
        f"cannot tell what kind of model {source} is",
        hint="pass --kind onnx|sklearn|spacy|entrypoint (files: .onnx, .skops; spaCy: a pipeline folder)",
    )


def _backend(kind: str) -> ModuleType:
    mod: ModuleType
    if kind == "onnx":
        from shoal.models import onnx as mod
    elif kind == "sklearn":
        from shoal.models import sklearn as mod
    elif kind == "spacy":
        from shoal.models import spacy as mod
    elif kind == "entrypoint":
        mod = entrypoint
    else:
        raise ModelError(f"unknown model kind {kind!r}; one of {', '.join(KINDS)}")
    return mod


def _archive(folder: Path) -> bytes:
    """A folder as a reproducible tar.gz (sorted names, zeroed times), so equal folders hash equal."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", compresslevel=6) as tar:
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                info = tar.gettarinfo(str(path), arcname=str(path.relative_to(folder)))
                info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
                with path.open("rb") as fh:
                    tar.addfile(info, fh)
    # gzip stamps a time in its header: zero it for a stable hash.
    data = bytearray(buf.getvalue())
    data[4:8] = b"\0\0\0\0"
    return bytes(data)


def _row(r: Any) -> ModelVersion:
    return ModelVersion(
        name=r.name,
        version=r.version,
        kind=r.kind,
        uri=r.uri,
        sha256=r.sha256,
        size_bytes=int(r.size_bytes),
        info=json.loads(r.info),
        description=r.description,
        registered_by=r.registered_by,
        registered_at=r.registered_at.isoformat(timespec="seconds"),
    )


def list_models(settings: Settings, name: str | None = None) -> list[ModelVersion]:
    eng = database.engine(settings, state_tables)
    q = select(models).order_by(models.c.name, models.c.registered_at)
    if name:
        q = q.where(models.c.name == name)
    with eng.connect() as conn:
        return [_row(r) for r in conn.execute(q)]


def get_model(settings: Settings, ref: str) -> ModelVersion:
    """`NAME` (the newest version) or `NAME@VERSION`."""
    name, _, version = ref.partition("@")
    found = list_models(settings, name)
    if version:
        found = [m for m in found if m.version == version]
    if not found:
        known = sorted({m.name for m in list_models(settings)})
        raise ModelError(
            f"no model {ref} in the registry",
            hint=f"registered: {', '.join(known) or 'none'}; see shoal model list",
        )
    return found[-1]


def _next_version(existing: list[ModelVersion]) -> str:
    numbers = [int(m.version) for m in existing if m.version.isdigit()]
    return str(max(numbers, default=0) + 1)


def register_model(
    settings: Settings,
    name: str,
    source: str,
    *,
    kind: str | None = None,
    version: str | None = None,
    description: str = "",
    labels: list[str] | None = None,
    trust: list[str] | None = None,
) -> tuple[ModelVersion, bool]:
    """Register `source` as NAME@VERSION. Returns the record and whether it is new."""
    if not NAME.match(name):
        raise ModelError(f"model name {name!r} must be lower-case letters, digits and _ (starting with a letter)")
    if version is not None and not VERSION.match(version):
        raise ModelError(f"version {version!r} must be letters, digits, '.', '_' or '-' (at most 40)")
    kind = kind or detect_kind(source)
    backend = _backend(kind)
    options = {"labels": labels or [], "trust": trust or []}
    if kind == "entrypoint":
        info = backend.inspect(source, options)
        # The "content" of an entry point: its reference and the installed code's version.
        data, uri_name = f"{source}\n{info['distribution_version']}".encode(), None
    else:
        path = backend.resolve(source) if kind == "spacy" else Path(source)
        if not path.exists():
            raise ModelError(f"model file {source} does not exist")
        info = backend.inspect(path, options)
        if kind == "spacy":
            data, uri_name = _archive(path), "pipeline.tar.gz"
        else:
            data, uri_name = path.read_bytes(), f"model{path.suffix}"
    if labels and kind != "onnx":
        info["labels"] = labels
    sha = hashlib.sha256(data).hexdigest()
    existing = list_models(settings, name)
    if version is None:
        # Registering the same content again is a no-op, not a new version.
        same_content = [m for m in existing if m.sha256 == sha and m.kind == kind]
        if same_content:
            return same_content[-1], False
    version = version or _next_version(existing)
    same = [m for m in existing if m.version == version]
    if same:
        if same[0].sha256 == sha and same[0].kind == kind:
            return same[0], False
        raise ModelError(
            f"model {name}@{version} is already registered with different content",
            hint="versions are immutable: register it under a new --version",
        )
    if uri_name is None:
        uri = source
    else:
        uri = storage.join(settings.warehouse_uri, "models", name, version, uri_name)
        storage.write_bytes(uri, data)
    record = {
        "name": name,
        "version": version,
        "kind": kind,
        "uri": uri,
        "sha256": sha,
        "size_bytes": str(len(data)),
        "info": json.dumps(info, sort_keys=True),
        "description": description,
        "registered_by": _user(),
        "registered_at": database.utcnow(),
    }
    with database.engine(settings, state_tables).begin() as conn:
        conn.execute(insert(models).values(**record))
    return get_model(settings, f"{name}@{version}"), True


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return str(os.getuid())


# ---- executor side -----------------------------------------------------------------
_loaded: dict[str, Predictor] = {}
_load_lock = threading.Lock()


def _local_copy(record: dict[str, Any]) -> Path:
    """The version's file in this machine's cache, verified by hash (spaCy: unpacked)."""
    root = Path(os.environ.get("SHOAL_MODEL_CACHE") or Path(tempfile.gettempdir()) / "shoal-models")
    target = root / record["sha256"]
    name = record["uri"].rsplit("/", 1)[-1]
    done = target / ".complete"
    if not done.exists():
        data = storage.read_bytes(record["uri"])
        if hashlib.sha256(data).hexdigest() != record["sha256"]:
            raise ModelError(f"model file {record['uri']} does not match its registered SHA-256 (changed or damaged)")
        tmp = Path(tempfile.mkdtemp(prefix=".incoming-", dir=_mkdir(root)))
        if name.endswith(".tar.gz"):
            with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
                tar.extractall(tmp / "pipeline", filter="data")
        else:
            (tmp / name).write_bytes(data)
        (tmp / ".complete").write_text(record["sha256"])
        try:
            tmp.rename(target)
        except OSError:  # another process won the race: its copy is as good
            shutil.rmtree(tmp, ignore_errors=True)
    return target / "pipeline" if name.endswith(".tar.gz") else target / name


def _mkdir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path


def load_predictor(record: dict[str, Any] | ModelVersion) -> Predictor:
    """A ready predictor for a registry record, loaded once per process."""
    if isinstance(record, ModelVersion):
        record = record.to_dict()
    key = f"{record['name']}@{record['version']}:{record['sha256']}"
    with _load_lock:
        if key not in _loaded:
            backend = _backend(record["kind"])
            info = record["info"] if isinstance(record["info"], dict) else json.loads(record["info"])
            target: Any = record["uri"] if record["kind"] == "entrypoint" else _local_copy(record)
            _loaded[key] = backend.load(target, info)
        return _loaded[key]
