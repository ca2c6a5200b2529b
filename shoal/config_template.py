"""A commented `shoal.toml` written from the settings models themselves (`shoal config init`).

The template is generated, not kept by hand, so it lists every key a release accepts with the
default and the explanation that sits beside the field in `shoal/config.py`. Every key is
written commented out: an untouched file means "all defaults", and upgrading Shoal moves the
defaults with it.
"""

from __future__ import annotations

import inspect
import json
import re
from pathlib import Path
from typing import Any

from pydantic import BaseModel, SecretStr

from shoal import config as config_module

_FIELD_LINE = re.compile(r"^\s{4}(\w+)\s*:")

# Fields whose default depends on the machine or that are lists of sections: shown with an example.
_EXAMPLES: dict[str, str] = {
    "catalog.uri": '"jdbc:postgresql://db.example:5432/shoal"',
    "catalog.user": '"shoal"',
    "catalog.password": '"..."',
    "catalog.jdbc_jar": '"/usr/share/java/postgresql.jar"',
    "warehouse": '"s3://bucket/warehouse"',
    "storage.endpoint": '"http://127.0.0.1:8333"',
    "storage.access_key": '"..."',
    "storage.secret_key": '"..."',
    "notify.smtp.user": '"shoal"',
    "notify.smtp.password": '"..."',
    "governance.signing_key": '"..."',
    "search.index_dir": '"/srv/shoal/search"',
    "server.dashboards_dir": '"/srv/shoal/dashboards"',
    "server.pg_tls_cert": '"/etc/shoal/pg.crt"',
    "server.pg_tls_key": '"/etc/shoal/pg.key"',
    "extract.media.model_cache": '"~/.cache/shoal/models"',
    "extract.media.speech_language": '"en"',
    "workflows.failure_topic": '"ops"',
}


def _comments(model: type[BaseModel]) -> tuple[str | None, dict[str, list[str]]]:
    """The class docstring and, per field, the `#` comment lines written above or beside it."""
    try:
        source = inspect.getsource(model)
    except (OSError, TypeError):
        return model.__doc__, {}
    notes: dict[str, list[str]] = {}
    pending: list[str] = []
    for line in source.splitlines()[1:]:
        stripped = line.strip()
        if stripped.startswith("#"):
            pending.append(stripped.lstrip("#").strip())
            continue
        match = _FIELD_LINE.match(line)
        if match and match.group(1) in model.model_fields:
            inline = line.split("  # ", 1)[1].strip() if "  # " in line else None
            notes[match.group(1)] = [*pending, *([inline] if inline else [])]
        if stripped:
            pending = []
    doc = inspect.getdoc(model) if model.__doc__ else None
    return doc, notes


def _toml_value(value: Any) -> str | None:
    """A default as TOML, or None where TOML has no spelling for it (unset)."""
    if value is None:
        return None
    if isinstance(value, SecretStr):
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, (str, Path)):
        return json.dumps(str(value))
    if isinstance(value, list):
        items = [i for i in (_toml_value(v) for v in value) if i is not None]
        return "[" + ", ".join(items) + "]"
    if isinstance(value, dict):
        items = [f"{json.dumps(str(k))} = {_toml_value(v)}" for k, v in value.items()]
        return "{" + ", ".join(items) + "}"
    return json.dumps(str(value))


def _section_model(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    return None


def _render(model: type[BaseModel], instance: BaseModel, prefix: str, out: list[str]) -> None:
    doc, notes = _comments(model)
    if prefix:
        out.append("")
        for line in (doc or "").splitlines():
            out.append(f"# {line}".rstrip())
        out.append(f"[{prefix}]")
    nested: list[tuple[str, type[BaseModel]]] = []
    for name, field in model.model_fields.items():
        sub = _section_model(field.annotation)
        if sub is not None:
            nested.append((name, sub))
            continue
        key = f"{prefix}.{name}" if prefix else name
        for note in notes.get(name, []):
            out.append(f"# {note}".rstrip())
        value = _toml_value(getattr(instance, name))
        if value is None:
            example = _EXAMPLES.get(key, '"..."')
            out.append(f"# {name} = {example}    (not set by default)")
        else:
            out.append(f"# {name} = {value}")
    for name, sub in nested:
        key = f"{prefix}.{name}" if prefix else name
        _render(sub, getattr(instance, name), key, out)


def render_template() -> str:
    """The whole commented configuration file."""
    # model_construct fills the defaults without reading the environment or a file.
    defaults = config_module.Settings.model_construct()
    out = [
        "# shoal.toml: Shoal's configuration (written by `shoal config init`).",
        "# Every key is shown with its default, commented out: uncomment a line to change it.",
        "# Relative paths are relative to this file's folder. Environment variables override",
        "# this file: SHOAL_<SECTION>__<KEY>, e.g. SHOAL_SPARK__MASTER=spark://host:7077.",
        "# `shoal config show` prints the effective values; `shoal doctor` checks the machine.",
    ]
    # Top-level keys first (workspace, warehouse), then one [section] each.
    _render(config_module.Settings, defaults, "", out)
    out.append("")
    out.append("# An OpenAI-compatible endpoint that `type: llm` enrichment steps may use, by name:")
    out.append("#   [llm.endpoints.local]")
    out.append('#   base_url = "http://127.0.0.1:8000/v1"')
    out.append('#   model = "default"')
    return "\n".join(out) + "\n"
