"""The REST catalog's own HTTP server: uvicorn in a thread, beside `shoal serve`'s API."""

from __future__ import annotations

import threading
import time
from typing import Any

from shoal.config import Settings
from shoal.exceptions import ShoalError


class IcebergRestServer:
    """`IcebergRestServer(settings, port=0).start()`; `.address` is (host, port) once started."""

    def __init__(
        self, settings: Settings, *, host: str | None = None, port: int | None = None, catalog: Any = None
    ) -> None:
        self.settings = settings
        self.host = host or settings.server.iceberg_rest_host
        self.port = settings.server.iceberg_rest_port if port is None else port
        self.catalog = catalog
        self._server: Any = None
        self._thread: threading.Thread | None = None

    def start(self, timeout: float = 30) -> IcebergRestServer:
        import uvicorn

        from shoal.iceberg_rest.app import create_app

        trusted = list(self.settings.server.trusted_proxies)
        config = uvicorn.Config(
            create_app(self.settings, catalog=self.catalog),
            host=self.host,
            port=self.port,
            log_level="warning",
            access_log=False,  # request lines carry no secrets, but keep the log to the audit table
            proxy_headers=bool(trusted),
            forwarded_allow_ips=trusted or [],
            server_header=False,
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, name="iceberg-rest", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise ShoalError(f"the Iceberg REST catalog did not start on {self.host}:{self.port}")
            time.sleep(0.05)
        return self

    @property
    def address(self) -> tuple[str, int]:
        sock = self._server.servers[0].sockets[0]
        host, port = sock.getsockname()[:2]
        return host, port

    @property
    def url(self) -> str:
        host, port = self.address
        return f"http://{host}:{port}"

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)
