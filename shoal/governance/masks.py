"""Mask functions that need a secret, registered on the SparkSession that runs governed SQL.

`shoal_mask_hmac(value)` is HMAC-SHA256 under a key derived from the deployment's signing
key. Its name is refused in user SQL and row filters (grants.forbidden_function), so only the
rewrite calls it, and the key never appears in SQL text, plans or error messages.
"""

from __future__ import annotations

import hashlib
import hmac
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from shoal.config import Settings
from shoal.governance.keys import derived_key

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

MASK_HMAC = "shoal_mask_hmac"
_registered: dict[int, bytes] = {}
_lock = threading.Lock()


def register_mask_functions(spark: SparkSession, settings: Settings) -> None:
    """Once per SparkSession (again if the deployment's key changed)."""
    key = derived_key(settings, "mask-hash")
    with _lock:
        if _registered.get(id(spark)) == key:
            return
        spark.udf.register(MASK_HMAC, _hmac_function(key), "string")
        _registered[id(spark)] = key


def _hmac_function(key: bytes) -> Callable[[str | None], str | None]:
    def mask(value: str | None) -> str | None:
        if value is None:
            return None
        return hmac.new(key, value.encode("utf-8"), hashlib.sha256).hexdigest()

    return mask


def mask_hash(settings: Settings, value: str) -> str:
    """The `hash` mask of one value, as governed SQL computes it (tests, support)."""
    return _hmac_function(derived_key(settings, "mask-hash"))(value) or ""
