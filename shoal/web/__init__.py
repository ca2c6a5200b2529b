"""Shoal over HTTP: the API (`api.py`); the web console builds on it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from shoal.web.api import create_app

if TYPE_CHECKING:
    import uvicorn

    from shoal.config import Settings


def server_config(settings: Settings, app: Any, host: str | None = None, port: int | None = None) -> uvicorn.Config:
    """The one uvicorn configuration for Shoal's server (`shoal serve` and the tests).

    X-Forwarded-For is believed only from `[server] trusted_proxies`; with none (the default)
    proxy headers are ignored, so no client can forge the address that audit rows and
    access-point networks use.
    """
    import uvicorn

    trusted = list(settings.server.trusted_proxies)
    return uvicorn.Config(
        app,
        host=host or settings.server.host,
        port=port or settings.server.port,
        log_level="warning",
        proxy_headers=bool(trusted),
        forwarded_allow_ips=trusted or [],
        server_header=False,
    )


__all__ = ["create_app", "server_config"]
