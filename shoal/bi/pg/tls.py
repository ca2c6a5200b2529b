"""TLS for the PostgreSQL endpoint: the configured certificate, or a self-signed one made once.

With `[server] pg_tls` on (the default) the endpoint answers a client's SSLRequest with 'S' and
speaks TLS. The certificate and key are `[server] pg_tls_cert` / `pg_tls_key` when set; otherwise
a self-signed pair is generated on first start into `<workspace>/secrets/pg-tls/` (folder 0700,
files 0600) and kept, so clients that pin it (`sslmode=verify-ca` with `sslrootcert=` that file)
keep working across restarts. A self-signed certificate encrypts but proves nothing about the
server: clients with `sslmode=require` accept it; for verify-full, configure a real certificate.
"""

from __future__ import annotations

import datetime as dt
import os
import shutil
import socket
import ssl
import subprocess
import tempfile
from pathlib import Path

from shoal.config import Settings
from shoal.exceptions import ShoalError
from shoal.private import private_dir


def tls_files(settings: Settings) -> tuple[Path, Path]:
    """(certificate, key): the configured pair, or the workspace's self-signed one (made if missing)."""
    s = settings.server
    if s.pg_tls_cert or s.pg_tls_key:
        if not (s.pg_tls_cert and s.pg_tls_key):
            raise ShoalError(
                "[server] pg_tls_cert and pg_tls_key go together", hint="set both, or neither for a self-signed pair"
            )
        return Path(s.pg_tls_cert).expanduser(), Path(s.pg_tls_key).expanduser()
    folder = private_dir(settings.workspace_dir / "secrets" / "pg-tls")
    cert, key = folder / "server.crt", folder / "server.key"
    if not (cert.exists() and key.exists()):
        _self_signed(cert, key)
    return cert, key


def server_context(settings: Settings) -> ssl.SSLContext | None:
    """The server-side TLS context, or None when `[server] pg_tls` is off."""
    if not settings.server.pg_tls:
        return None
    cert, key = tls_files(settings)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(cert, key)
    except (OSError, ssl.SSLError) as exc:
        raise ShoalError(
            f"cannot load the PostgreSQL endpoint's TLS certificate {cert} / key {key}: {exc}",
            hint="check [server] pg_tls_cert and pg_tls_key (PEM files), or set pg_tls = false",
        ) from exc
    return context


def _self_signed(cert: Path, key: Path) -> None:
    """Write a self-signed certificate (10 years, this host's name) and its key, key first as 0600."""
    name = socket.gethostname() or "localhost"
    try:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import NameOID
    except ImportError:
        _self_signed_openssl(cert, key, name)
        return
    private = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = dt.datetime.now(dt.UTC)
    alt = x509.SubjectAlternativeName([x509.DNSName(name), x509.DNSName("localhost")])
    certificate = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(private.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=3650))
        .add_extension(alt, critical=False)
        .sign(private, hashes.SHA256())
    )
    key_pem = private.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    _write_private(key, key_pem)
    _write_private(cert, certificate.public_bytes(serialization.Encoding.PEM))


def _self_signed_openssl(cert: Path, key: Path, name: str) -> None:
    openssl = shutil.which("openssl")
    if openssl is None:
        raise ShoalError(
            "cannot make a TLS certificate for the PostgreSQL endpoint: neither the cryptography package"
            " nor the openssl command is available",
            hint="install cryptography, set [server] pg_tls_cert and pg_tls_key, or set pg_tls = false",
        )
    with tempfile.TemporaryDirectory(dir=cert.parent) as tmp:  # inside the 0700 folder
        k, c = Path(tmp) / "k.pem", Path(tmp) / "c.pem"
        subprocess.run(
            [openssl, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
             "-keyout", str(k), "-out", str(c), "-days", "3650", "-subj", f"/CN={name}"],
            check=True, capture_output=True,
        )  # fmt: skip
        _write_private(key, k.read_bytes())
        _write_private(cert, c.read_bytes())


def _write_private(path: Path, data: bytes) -> None:
    # Written under a temporary name and moved into place: a reader never sees half a file.
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
    os.replace(tmp, path)
