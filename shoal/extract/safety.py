"""Checks that run before a parser touches untrusted bytes: decompression bombs and sizes."""

from __future__ import annotations

import io
import zipfile
from typing import IO

from shoal.config import ExtractSettings
from shoal.extract.base import ExtractionRefused, ExtractionSkipped


def check_zip(data: bytes, settings: ExtractSettings, what: str = "archive") -> zipfile.ZipFile:
    """Open a ZIP container after refusing bombs: too many members, too large unpacked, or too dense."""
    try:
        zf = zipfile.ZipFile(io.BytesIO(data))
    except zipfile.BadZipFile as exc:
        raise ValueError(f"corrupt {what}: {exc}") from exc
    infos = zf.infolist()
    if len(infos) > settings.max_members:
        raise ExtractionRefused(f"{what} has {len(infos)} members (limit {settings.max_members})")
    if any(i.flag_bits & 0x1 for i in infos):
        raise ExtractionSkipped(f"encrypted {what} (password required)")
    unpacked = sum(i.file_size for i in infos)
    if unpacked > settings.max_unpacked_mb << 20:
        raise ExtractionRefused(
            f"{what} would unpack to {unpacked >> 20} MiB (limit {settings.max_unpacked_mb} MiB): decompression bomb"
        )
    packed = max(1, sum(i.compress_size for i in infos))
    if unpacked > 1 << 20 and unpacked / packed > settings.max_ratio:
        raise ExtractionRefused(
            f"{what} compression ratio {unpacked / packed:.0f}:1 exceeds {settings.max_ratio:.0f}:1: decompression bomb"
        )
    return zf


def bounded_read(stream: IO[bytes] | io.BufferedIOBase, limit_bytes: int, what: str) -> bytes:
    """Read a decompressing stream, refusing it once it exceeds `limit_bytes`."""
    out = io.BytesIO()
    while block := stream.read(1 << 20):
        out.write(block)
        if out.tell() > limit_bytes:
            raise ExtractionRefused(f"{what} unpacks to more than {limit_bytes >> 20} MiB: decompression bomb")
    return out.getvalue()
