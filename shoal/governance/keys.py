"""The deployment's secret key and the keys derived from it, one per purpose.

The signing key is `[governance] signing_key`, or `<workspace>/secrets/signing.key`, created
once (0600 in a 0700 folder) and kept. Each use gets its own derived key, so a value
revealed for one purpose (a signed URL) says nothing about another (the hash mask).
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets

from shoal.config import Settings
from shoal.private import private_dir


def signing_key(settings: Settings) -> bytes:
    configured = settings.governance.signing_key
    if configured is not None:
        return configured.get_secret_value().encode()
    path = settings.workspace_dir / "secrets" / "signing.key"
    if not path.exists():
        private_dir(path.parent)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            pass  # another process created it first: use theirs
        else:
            with os.fdopen(fd, "w") as fh:
                fh.write(secrets.token_hex(32))
    return path.read_text().strip().encode()


def derived_key(settings: Settings, purpose: str) -> bytes:
    return hmac.new(signing_key(settings), f"shoal/{purpose}/v1".encode(), hashlib.sha256).digest()
