"""The PostgreSQL endpoint's listener: connection slots, the pre-sign-in cap, cancel requests.

One thread per connection (socketserver.ThreadingTCPServer). Two separate limits bound what
clients hold: `[server] pg_max_pending` connections may be in their handshake at once (more are
refused on accept, before a thread is started for them), and `pg_max_connections` signed-in
sessions (a slot is taken only after a successful sign-in, so strangers trickling bytes cannot
keep real users out).
"""

from __future__ import annotations

import contextlib
import hmac
import itertools
import logging
import secrets
import socket
import socketserver
import struct
import threading
import time
from collections.abc import Iterator
from typing import Any

from shoal.bi.pg.codec import error_message
from shoal.bi.pg.session import Connection
from shoal.bi.pg.tls import server_context
from shoal.config import Settings
from shoal.exceptions import ShoalError
from shoal.governance import Principals
from shoal.governance.sessions import Sessions

log = logging.getLogger("shoal.pgwire")
_CANCEL_FOR_S = 10.0


class PgServer(socketserver.ThreadingTCPServer):
    """The endpoint: `serve_forever()` (or `start()` for a background thread), `stop()`."""

    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 64

    def __init__(
        self, settings: Settings, *, spark: Any = None, host: str | None = None, port: int | None = None
    ) -> None:
        from shoal.spark import get_spark

        self.settings = settings
        self.spark = spark if spark is not None else get_spark(settings)
        # A sign-in is a governance session, like the console's (checked before each statement).
        self.sessions = Sessions(settings)
        self.principals = Principals(settings)
        # Made (or the self-signed pair generated) before listening: a bad certificate stops the
        # start with a clear error rather than failing each client's handshake.
        self.tls_context = server_context(settings)
        self._lock = threading.Lock()
        self._pending: set[int] = set()  # ids of the sockets still in their handshake
        self._sessions: dict[int, Connection] = {}
        # pid -> (Spark job group, statement serial) of the statement running on that connection.
        self._running: dict[int, tuple[str, int]] = {}
        self._serial = itertools.count(1)
        self._thread: threading.Thread | None = None
        try:
            super().__init__(
                (host or settings.server.pg_host, settings.server.pg_port if port is None else port), Connection
            )
        except OSError as exc:
            raise ShoalError(
                f"cannot listen on {host or settings.server.pg_host}:{port or settings.server.pg_port}: {exc.strerror}",
                hint="pass --pg-port or set [server] pg_port",
            ) from exc

    @property
    def address(self) -> tuple[str, int]:
        host, port = self.server_address[:2]
        return str(host), int(port)

    def start(self) -> PgServer:
        self._thread = threading.Thread(target=self.serve_forever, name="shoal-pg", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self.shutdown()
        self.server_close()
        if self._thread is not None:
            self._thread.join(10)

    def process_request(self, request: Any, client_address: Any) -> None:
        """Admit a new socket into the handshake, or refuse it here, before a thread exists."""
        with self._lock:
            admitted = len(self._pending) < self.settings.server.pg_max_pending
            if admitted:
                self._pending.add(id(request))
        if not admitted:
            log.warning("PostgreSQL endpoint: refused %s: pg_max_pending connections are signing in", client_address)
            with contextlib.suppress(OSError):
                request.settimeout(1)
                request.sendall(
                    error_message(
                        "FATAL",
                        "53300",
                        "sorry, too many connections are signing in at once ([server] pg_max_pending); try again",
                    )
                )
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except Exception:
            self._forget(request)
            raise

    def shutdown_request(self, request: Any) -> None:
        # Whatever ended the connection (even a setup() that raised before handle() ran), it no
        # longer holds a handshake place.
        self._forget(request)
        super().shutdown_request(request)

    def _forget(self, request: socket.socket) -> None:
        with self._lock:
            self._pending.discard(id(request))

    def handshake_done(self, conn: Connection) -> None:
        """The connection signed in or gave up: it no longer counts against pg_max_pending."""
        self._forget(conn.request)

    def acquire(self, conn: Connection) -> bool:
        with self._lock:
            if len(self._sessions) >= self.settings.server.pg_max_connections:
                return False
            while True:
                pid = secrets.randbelow(2**31 - 2) + 1
                if pid not in self._sessions:
                    break
            conn.pid, conn.secret = pid, secrets.randbelow(2**31 - 1) - (2**30)
            self._sessions[pid] = conn
            return True

    def release(self, conn: Connection) -> None:
        with self._lock:
            self._sessions.pop(conn.pid, None)
            self._running.pop(conn.pid, None)

    @contextlib.contextmanager
    def running(self, conn: Connection, group: str) -> Iterator[None]:
        with self._lock:
            self._running[conn.pid] = (group, next(self._serial))
        try:
            yield
        finally:
            with self._lock:
                self._running.pop(conn.pid, None)

    def cancel(self, pid: int, secret: int) -> None:
        with self._lock:
            conn = self._sessions.get(pid)
            running = self._running.get(pid)
        if (
            conn is None
            or running is None
            or not hmac.compare_digest(struct.pack("!i", conn.secret), struct.pack("!i", secret))
        ):
            return
        conn.canceled = True
        self.spark.sparkContext.cancelJobGroup(running[0])
        # cancelJobGroup stops only the jobs running now: a statement still being checked (or
        # between two jobs) would start its job after the cancel and run on. So the group is
        # canceled again while the statement runs, for a short while, without keeping the
        # client's cancel connection open (libpq waits for it to close).
        threading.Thread(target=self._keep_canceling, args=(pid, running), name="shoal-pg-cancel", daemon=True).start()

    def _keep_canceling(self, pid: int, running: tuple[str, int]) -> None:
        # The serial tells the canceled statement from the connection's next one (same group).
        deadline = time.monotonic() + _CANCEL_FOR_S
        while time.monotonic() < deadline:
            time.sleep(0.25)
            with self._lock:
                if self._running.get(pid) != running:
                    return
            self.spark.sparkContext.cancelJobGroup(running[0])

    def handle_error(
        self, request: Any, client_address: Any
    ) -> None:  # never let a connection's error reach stderr raw
        log.exception("PostgreSQL endpoint: error on a connection from %s", client_address)
