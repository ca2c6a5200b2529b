"""`shoal doctor`: check that this machine has what Shoal needs, and say what to install.

Each check is cheap (no SparkSession, no model inference): it finds the program, jar, package
or file a capability needs and, where that is quick, asks it for its version. A check that
fails names the capability it blocks and the command that installs the missing part.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import sqlite3
import subprocess
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal

from shoal.config import Settings
from shoal.exceptions import ShoalError

Status = Literal["ok", "warn", "fail"]


@dataclass(frozen=True)
class Check:
    name: str
    status: Status
    detail: str
    needed_for: str
    hint: str | None = None

    def to_dict(self) -> dict[str, str | None]:
        return asdict(self)


def _program_version(argv: list[str], timeout: float = 15) -> str:
    """First non-empty line a program prints about its version (stdout or stderr)."""
    done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    text = (done.stdout or "") + "\n" + (done.stderr or "")
    for line in text.splitlines():
        if line.strip():
            return line.strip()
    return f"exit code {done.returncode}"


def _program(
    name: str, program: str, version_args: list[str], needed_for: str, hint: str, required: bool = True
) -> Check:
    path = shutil.which(program)
    if path is None:
        return Check(name, "fail" if required else "warn", f"{program} not found on PATH", needed_for, hint)
    try:
        version = _program_version([path, *version_args])
    except (OSError, subprocess.TimeoutExpired) as exc:
        return Check(name, "fail" if required else "warn", f"{path} does not run: {exc}", needed_for, hint)
    return Check(name, "ok", f"{path}: {version}", needed_for)


def _java(settings: Settings) -> Check:
    hint = "apt-get install -y openjdk-17-jre-headless (Spark 3.5 runs on Java 8, 11 or 17)"
    java_home = os.environ.get("JAVA_HOME")
    program = str(Path(java_home) / "bin" / "java") if java_home else "java"
    if java_home and not Path(program).is_file():
        return Check("java", "fail", f"JAVA_HOME={java_home} has no bin/java", "Spark (every table)", hint)
    return _program("java", program, ["-version"], "Spark (every table)", hint)


def _jars(settings: Settings) -> list[Check]:
    from shoal import spark

    checks = []
    try:
        checks.append(Check("iceberg jar", "ok", spark.iceberg_runtime_jar(), "Iceberg tables"))
    except ShoalError as exc:
        checks.append(Check("iceberg jar", "fail", str(exc).splitlines()[0], "Iceberg tables", exc.hint))
    jdbc = Path(settings.catalog_jdbc_jar)
    pkg = "libxerial-sqlite-jdbc-java" if settings.catalog.type == "sqlite" else "libpostgresql-jdbc-java"
    if jdbc.is_file():
        checks.append(Check("catalog jdbc jar", "ok", str(jdbc), "the Iceberg catalog"))
    else:
        checks.append(
            Check("catalog jdbc jar", "fail", f"{jdbc} not found", "the Iceberg catalog", f"apt-get install -y {pkg}")
        )
    if spark.uses_object_store(settings):
        try:
            checks.append(Check("s3 jars", "ok", f"{len(spark.s3_jars())} jars", "s3:// warehouse and sources"))
        except ShoalError as exc:
            checks.append(Check("s3 jars", "fail", str(exc).splitlines()[0], "s3:// storage", exc.hint))
    return checks


def _catalog_database(settings: Settings) -> Check:
    needed = "tables, grants, workflows, audit"
    sqlite_file = settings.catalog_sqlite_file
    if sqlite_file is not None:
        folder = sqlite_file.parent
        if sqlite_file.exists():
            try:
                with sqlite3.connect(f"file:{sqlite_file}?mode=ro", uri=True) as conn:
                    conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
            except sqlite3.Error as exc:
                return Check("catalog database", "fail", f"{sqlite_file}: {exc}", needed, "restore it from a backup")
            if not os.access(sqlite_file, os.W_OK):
                return Check("catalog database", "fail", f"{sqlite_file} is not writable", needed, "fix its owner")
            return Check("catalog database", "ok", f"sqlite {sqlite_file}", needed)
        existing = next((p for p in [folder, *folder.parents] if p.exists()), None)
        if existing is None or not os.access(existing, os.W_OK):
            return Check("catalog database", "fail", f"cannot create {sqlite_file}", needed, "set [workspace]")
        return Check("catalog database", "ok", f"sqlite {sqlite_file} (created on first use)", needed)
    try:
        import sqlalchemy

        engine = sqlalchemy.create_engine(settings.catalog_sqlalchemy_uri, pool_pre_ping=True)
        with engine.connect() as conn:
            version = conn.execute(sqlalchemy.text("SELECT version()")).scalar()
        engine.dispose()
    except Exception as exc:  # noqa: BLE001 - the driver's own words say what is wrong (auth, host, database)
        return Check(
            "catalog database",
            "fail",
            f"{settings.catalog.type}: {str(exc).splitlines()[0]}",
            needed,
            "check [catalog] uri, user and password, and that the server is reachable",
        )
    return Check("catalog database", "ok", f"{settings.catalog.type}: {str(version).split(',')[0]}", needed)


def _package(name: str, module: str, needed_for: str, hint: str) -> Check:
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        spec = None
    if spec is None:
        return Check(name, "fail", f"Python package {module} is not installed", needed_for, hint)
    where = spec.origin or next(iter(spec.submodule_search_locations or []), "")
    return Check(name, "ok", where, needed_for)


def _resolved(name: str, needed_for: str, resolve: Callable[[], object]) -> Check:
    try:
        found = resolve()
    except ShoalError as exc:
        return Check(name, "fail", str(exc).splitlines()[0], needed_for, exc.hint)
    except Exception as exc:  # noqa: BLE001 - a model that fails to resolve for any reason blocks its capability
        return Check(name, "fail", f"{type(exc).__name__}: {exc}", needed_for)
    return Check(name, "ok", str(found), needed_for)


def _has(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def _models(settings: Settings) -> list[Check]:
    """One check per model; a capability whose extra is not installed is a warning, not a
    failure (the core runs without it)."""
    m = settings.extract.media
    spacy_model = settings.extract.spacy_model

    def embedding() -> object:
        from shoal.search import embed

        return embed.model_dir(settings.search.model)

    def media(resolver: str) -> Callable[[], object]:
        def resolve() -> object:
            from shoal.extract.media import models

            return getattr(models, resolver)(m)

        return resolve

    wanted = [
        ("embedding model", "semantic search", "search", "tokenizers", embedding),
        ("speech model", "speech-to-text", "media", "faster_whisper", media("speech_model_dir")),
        ("image label model", "image labels", "media", "onnxruntime", media("label_weights")),
        ("face model", "faces", "media", "cv2", media("face_cascade")),
        ("unsafe-content model", "unsafe-content flags", "media", "onnxruntime", media("unsafe_detector")),
    ]
    checks = []
    if not _has("spacy"):
        checks.append(_absent("spacy model", "entities and PII", "documents"))
    elif Path(spacy_model).exists():
        checks.append(Check("spacy model", "ok", spacy_model, "entities and PII"))
    else:
        checks.append(
            _package("spacy model", spacy_model, "entities and PII", f"pip install {spacy_model.replace('_', '-')}")
        )
    for name, needed_for, extra, module, resolve in wanted:
        checks.append(_resolved(name, needed_for, resolve) if _has(module) else _absent(name, needed_for, extra))
    return checks


def _absent(name: str, needed_for: str, extra: str) -> Check:
    return Check(
        name,
        "warn",
        f"the {extra} capability is not installed",
        needed_for,
        f"pip install 'shoal[{extra}]' && shoal model install",
    )


# Optional capabilities: the extra that brings each, what it is for, and the modules it needs
# (import names). Missing ones are warnings unless the configuration relies on them.
CAPABILITIES: tuple[tuple[str, str, str, tuple[str, ...]], ...] = (
    ("documents", "documents", "document extraction (PDF, Office, e-mail, OCR)",
     ("magic", "pdfplumber", "pypdf", "pypdfium2", "docx", "pptx", "openpyxl", "trafilatura", "pytesseract", "yake")),
    ("media", "media", "images, audio and video", ("faster_whisper", "cv2", "onnxruntime", "imagehash")),
    ("search", "search", "semantic search", ("tokenizers", "faiss", "bm25s", "scipy", "onnxruntime")),
    ("web", "web", "shoal serve: the HTTP API and the console",
     ("fastapi", "fastapi_offline", "uvicorn", "jinja2", "multipart")),
    ("postgres endpoint", "web", "shoal serve --pg: the PostgreSQL endpoint for BI tools",
     ("duckdb", "cryptography")),
    ("iceberg-rest", "iceberg-rest", "shoal serve --iceberg-rest", ("pyiceberg",)),
    ("postgres catalog", "postgres", "a PostgreSQL catalog database", ("psycopg",)),
    ("custom models", "models", "shoal model: ONNX and skops models", ("sklearn", "skops", "onnxruntime")),
    ("llm", "llm", "type: llm enrichment steps", ("jinja2",)),
    ("avro", "avro", "Debezium Avro change files", ("fastavro",)),
    ("outlook msg", "msg", "Outlook .msg e-mails", ("extract_msg",)),
)  # fmt: skip


def _capabilities(settings: Settings) -> list[Check]:
    """One check per optional capability, naming the modules that are missing and the extra."""
    required = {"postgres catalog": settings.catalog.type == "postgresql", "llm": bool(settings.llm.endpoints)}
    checks = []
    for name, extra, needed_for, modules in CAPABILITIES:
        missing = [m for m in modules if not _has(m)]
        if not missing:
            checks.append(Check(name, "ok", f"installed ({', '.join(modules)})", needed_for))
            continue
        status: Status = "fail" if required.get(name) else "warn"
        detail = f"missing Python module(s): {', '.join(missing)}"
        if required.get(name):
            detail += " (the configuration uses it)"
        checks.append(Check(name, status, detail, needed_for, f"pip install 'shoal[{extra}]'"))
    return checks


def _object_storage(settings: Settings) -> Check | None:
    from shoal import spark

    if not spark.uses_object_store(settings) and settings.storage.endpoint is None:
        return None
    from shoal import storage

    target = settings.warehouse_uri if "://" in settings.warehouse_uri else None
    if target is None:
        return Check("object storage", "ok", f"endpoint {settings.storage.endpoint} (no s3:// warehouse)", "s3://")
    try:
        storage.configure(settings.storage)
        fs, base = storage.filesystem(target)
        fs.get_file_info(base.split("/", 1)[0])  # the bucket: credentials and endpoint answer here
    except Exception as exc:  # noqa: BLE001 - credentials, endpoint or bucket: the client's message says which
        return Check(
            "object storage",
            "fail",
            f"{target}: {str(exc).splitlines()[0]}",
            "s3:// warehouse",
            "check [storage] endpoint and credentials, and that the bucket exists",
        )
    return Check("object storage", "ok", target, "s3:// warehouse")


def _spark_master(settings: Settings) -> Check | None:
    """A `spark://` master answers on its port, and its web UI shows alive workers with free cores."""
    import socket

    master = settings.spark.master
    if not master.startswith("spark://"):
        return None
    needed = "every table (the configured cluster)"
    hint = "start it (shoal cluster up on this machine) or fix [spark] master"
    for address in master.removeprefix("spark://").split(","):
        host, _, port = address.rpartition(":")
        try:
            socket.create_connection((host, int(port)), timeout=5).close()
        except (OSError, ValueError) as exc:
            return Check("spark master", "fail", f"{address} does not answer: {exc}", needed, hint)
    from shoal.cluster import guard

    state = guard.describe(settings, master)
    if " has 0 alive workers" in state or "does not answer" in state:
        return Check("spark master", "warn", state, needed, "start workers: shoal cluster up (or on their hosts)")
    return Check("spark master", "ok", state, needed)


def run_checks(settings: Settings, *, include_tests: bool = False) -> list[Check]:
    """Every check, in the order a person would fix them."""
    checks = [_java(settings), *_jars(settings), _catalog_database(settings)]
    master_check = _spark_master(settings)
    checks += [master_check] if master_check is not None else []
    checks += [
        # Required only where the capability that runs them is installed.
        _program(
            "tesseract",
            "tesseract",
            ["--version"],
            "OCR of scans and images",
            "apt-get install -y tesseract-ocr",
            required=_has("pytesseract"),
        ),
        _program(
            "ffmpeg",
            "ffmpeg",
            ["-version"],
            "audio and video",
            "apt-get install -y ffmpeg",
            required=_has("faster_whisper"),
        ),
        _program("graphviz", "dot", ["-V"], "state-machine pictures", "apt-get install -y graphviz", required=False),
        _program(
            "catdoc",
            "catdoc",
            ["-V"],
            "legacy Office (.doc/.xls/.ppt)",
            "apt-get install -y catdoc",
            required=False,
        ),
    ]
    checks += _models(settings)
    checks += _capabilities(settings)
    storage_check = _object_storage(settings)
    if storage_check is not None:
        checks.append(storage_check)
    if include_tests:
        checks.append(
            _program(
                "chromium",
                "chromium",
                ["--version"],
                "the browser tests",
                "apt-get install -y chromium",
                required=False,
            )
        )
    return checks
