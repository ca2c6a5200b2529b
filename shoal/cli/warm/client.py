"""The thin side of the warm engine: decide, connect, hand over the terminal, wait.

Every `shoal` call runs `maybe_delegate` before anything heavy is imported, so this module
imports the standard library only: a delegated command must not pay for pyspark, pydantic
or rich. The client passes its own stdin/stdout/stderr descriptors to the engine
(SCM_RIGHTS), so the command writes to the very same terminal, pipe or file as it would in
process: isatty, encodings and buffering are those of the caller, and output is identical.

Protocol (one connection per command): 4-byte big-endian length + UTF-8 JSON per message.
  client -> {"op": "run", ...} with fds 0, 1, 2 attached
  engine -> {"ready": true} or {"ready": false, "reason": ...}   (refused: run in process)
  client -> {"go": true}                                         (from here the engine owns it)
  engine -> {"exit": CODE}                                       (after the command ends)
Closing the connection before "exit" cancels the command's Spark jobs.
"""

from __future__ import annotations

import json
import os
import socket
import struct
import sys
import tempfile
from pathlib import Path
from typing import Any

PROTOCOL = 1
SOCKET_NAME = "engine.sock"
# The commands the engine runs; every other command (and --help) runs in the calling process.
DELEGATED: frozenset[tuple[str, ...]] = frozenset(
    {("sql",), ("cdc", "apply"), ("ingest",), ("extract",), ("search",), ("workflow", "run"), ("recipe", "run")}
)
# Environment the command may depend on: Shoal's settings, and what decides how output looks.
DISPLAY_ENV = (
    "TERM",
    "COLORTERM",
    "NO_COLOR",
    "FORCE_COLOR",
    "COLUMNS",
    "LINES",
    "TTY_COMPATIBLE",
    "TTY_INTERACTIVE",
    "CLICOLOR",
    "CLICOLOR_FORCE",
    "JUPYTER_COLUMNS",
    "JUPYTER_LINES",
)
_OFF = {"off", "0", "false", "no"}
_MAX_MESSAGE = 16 << 20
# Unix socket paths are limited to 108 bytes; longer workspace paths use a private runtime dir.
_MAX_SOCKET_PATH = 100


def engine_disabled(environ: dict[str, str] | os._Environ[str] = os.environ) -> bool:
    return environ.get("SHOAL_ENGINE", "").strip().lower() in _OFF


def forwarded_env(environ: dict[str, str] | os._Environ[str] = os.environ) -> dict[str, str]:
    return {k: v for k, v in environ.items() if k.upper().startswith("SHOAL_") or k in DISPLAY_ENV}


# ---- argv ----------------------------------------------------------------------------------------


def parse_root(argv: list[str]) -> tuple[str | None, bool, list[str] | None]:
    """(--config value, --no-engine given, the words from the command on).

    The last item is None when the root options cannot be read here (--help, an unknown
    option): such calls always run in process, where Typer explains them.
    """
    config: str | None = None
    no_engine = False
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--no-engine":
            no_engine = True
        elif arg in ("--config", "-c"):
            if i + 1 >= len(argv):
                return config, no_engine, None
            config = argv[i + 1]
            i += 1
        elif arg.startswith("--config="):
            config = arg.split("=", 1)[1]
        elif arg.startswith("-c") and not arg.startswith("--"):
            config = arg[2:]
        elif arg.startswith("-"):
            return config, no_engine, None
        else:
            return config, no_engine, argv[i:]
        i += 1
    return config, no_engine, None


def is_delegated(words: list[str] | None) -> bool:
    if not words or "--help" in words:
        return False
    return (words[0],) in DELEGATED or tuple(words[:2]) in DELEGATED


# ---- where the engine listens ------------------------------------------------------------------


def workspace_dir(config: str | None, environ: dict[str, str] | os._Environ[str], cwd: Path) -> Path | None:
    """The workspace the command will use, as `shoal.config.load_settings` would find it.

    A light copy of that logic (no pydantic): the engine checks the full settings again
    and refuses a request whose settings differ from its own, so a mismatch here can only
    cost the warm start, never run a command against the wrong lake.
    """
    env = {k.upper(): v for k, v in environ.items()}
    if env.get("SHOAL_WORKSPACE"):
        return _resolve(cwd, env["SHOAL_WORKSPACE"])
    toml = config or env.get("SHOAL_CONFIG") or ("shoal.toml" if (cwd / "shoal.toml").is_file() else None)
    if toml:
        path = _resolve(cwd, toml)
        try:
            import tomllib

            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None  # in process, load_settings reports it
        if isinstance(data.get("workspace"), str):
            return _resolve(path.parent, data["workspace"])
    return _resolve(cwd, ".shoal")


def _resolve(base: Path, value: str) -> Path:
    return (base / Path(value).expanduser()).resolve()


def socket_path(workspace: Path) -> Path:
    path = workspace / "engine" / SOCKET_NAME
    if len(str(path).encode()) <= _MAX_SOCKET_PATH:
        return path
    import hashlib

    digest = hashlib.sha256(str(workspace).encode()).hexdigest()[:24]
    runtime = os.environ.get("XDG_RUNTIME_DIR") or tempfile.gettempdir()
    return Path(runtime) / f"shoal-engine-{os.getuid()}" / f"{digest}.sock"


# ---- messages ------------------------------------------------------------------------------------


def send_message(sock: socket.socket, data: dict[str, Any], fds: list[int] | None = None) -> None:
    body = json.dumps(data).encode()
    payload = struct.pack(">I", len(body)) + body
    if fds:
        sent = socket.send_fds(sock, [payload], fds)
        payload = payload[sent:]
    if payload:
        sock.sendall(payload)


def recv_message(sock: socket.socket, first: bytes = b"") -> dict[str, Any] | None:
    """The next message, or None when the peer closed the connection."""
    buf = first
    while len(buf) < 4:
        chunk = sock.recv(65536)
        if not chunk:
            return None
        buf += chunk
    (size,) = struct.unpack(">I", buf[:4])
    if size > _MAX_MESSAGE:
        raise ValueError(f"message of {size} bytes is too large")
    while len(buf) < 4 + size:
        chunk = sock.recv(min(65536, 4 + size - len(buf)))
        if not chunk:
            return None
        buf += chunk
    data = json.loads(buf[4 : 4 + size])
    if not isinstance(data, dict):
        raise ValueError("message is not a JSON object")
    return data


def peer_uid(sock: socket.socket) -> int:
    """The uid of the process at the other end of a Unix socket (SO_PEERCRED)."""
    creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    _pid, uid, _gid = struct.unpack("3i", creds)
    return uid


def same_owner(uid: int, owner: int | None = None) -> bool:
    """Deny by default: only the uid that runs this process may talk to it."""
    return uid == (os.getuid() if owner is None else owner)


def connect(path: Path, timeout: float = 5.0) -> socket.socket | None:
    """A connection to the engine at `path` run by this user, or None."""
    if not path.exists():
        return None
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(timeout)
        sock.connect(str(path))
        # Never hand our terminal to a process of another user listening at that path.
        if not same_owner(peer_uid(sock)):
            sock.close()
            return None
    except OSError:
        sock.close()
        return None
    return sock


def control(workspace: Path, op: str, timeout: float = 5.0) -> dict[str, Any] | None:
    """Send a control request ("status", "stop"); None when no engine answers."""
    return control_at(socket_path(workspace), op, timeout)


def control_at(path: Path, op: str, timeout: float = 5.0) -> dict[str, Any] | None:
    sock = connect(path, timeout)
    if sock is None:
        return None
    try:
        send_message(sock, {"op": op, "v": PROTOCOL})
        return recv_message(sock)
    except (OSError, ValueError):
        return None
    finally:
        sock.close()


# ---- delegation ----------------------------------------------------------------------------------


def _program_name() -> str:
    try:  # the name click puts in usage lines ("shoal", "python -m shoal")
        from click.utils import _detect_program_name

        return _detect_program_name()
    except Exception:  # noqa: BLE001 - a cosmetic detail must never stop the command
        return os.path.basename(sys.argv[0] or "shoal")


def _stdio() -> list[int] | None:
    fds = [0, 1, 2]
    try:
        for fd in fds:
            os.fstat(fd)
    except OSError:
        return None  # a closed standard stream: let the process handle it its own way
    return fds


def maybe_delegate(argv: list[str]) -> int | None:
    """Run the command in the warm engine and return its exit code; None: run it here."""
    if engine_disabled():
        return None
    config, no_engine, words = parse_root(argv)
    if no_engine or not is_delegated(words):
        return None
    cwd = Path.cwd()
    workspace = workspace_dir(config, os.environ, cwd)
    fds = _stdio()
    if workspace is None or fds is None:
        return None
    sock = connect(socket_path(workspace))
    if sock is None:
        return None
    try:
        request = {
            "op": "run",
            "v": PROTOCOL,
            "argv": argv,
            "prog": _program_name(),
            "cwd": str(cwd),
            "env": forwarded_env(),
            "encoding": [_enc(sys.stdin), _enc(sys.stdout), _enc(sys.stderr)],
        }
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        send_message(sock, request, fds)
        # The engine may wait for a request from another folder to finish first.
        sock.settimeout(120)
        reply = recv_message(sock)
        if not reply or not reply.get("ready"):
            return None
        send_message(sock, {"go": True})
    except (OSError, ValueError):
        sock.close()
        return None
    try:
        sock.settimeout(None)
        done = recv_message(sock)
    except KeyboardInterrupt:
        sock.close()  # the engine sees the closed socket and cancels the command's jobs
        sys.stderr.write("error: interrupted\n")
        return 130
    except (OSError, ValueError):
        done = None
    finally:
        sock.close()
    if done is None or not isinstance(done.get("exit"), int):
        sys.stderr.write(
            f"error: the warm engine for {workspace} stopped while running this command\n"
            f"  hint: see {workspace / 'engine' / 'engine.log'}; run the command again "
            "(with SHOAL_ENGINE=off to run it in this process)\n"
        )
        return 1
    return int(done["exit"])


def _enc(stream: Any) -> list[str | None]:
    return [getattr(stream, "encoding", None), getattr(stream, "errors", None)]
