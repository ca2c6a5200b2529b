"""The PostgreSQL endpoint's listener: the pre-sign-in stage, connection slots, cancel requests.

Accepting is asyncio (one thread, one event loop): a socket that has not sent its first startup
packet costs a few hundred bytes, so many may wait at once (`[server] pg_max_pending`), and each
client address holds at most `pg_max_pending_per_address` of them: one address opening idle
sockets (and reconnecting when dropped) exhausts its own share, not everyone's. A socket that
sends no complete startup packet within `pg_startup_timeout_s` is closed. Once the packet is in,
the connection gets a thread (`session.Connection`) for TLS, sign-in and its statements; it keeps
its place in the pre-sign-in counts until it signs in or gives up.

Signed-in connections take one of `pg_max_connections` slots (only after a successful sign-in, so
strangers cannot hold them); one principal takes at most `pg_max_connections_per_principal`, and
the last `pg_reserved_admin_connections` slots are for admins (PostgreSQL's
`superuser_reserved_connections`), so no one user can lock the admins out.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import functools
import hmac
import ipaddress
import itertools
import logging
import secrets
import socket
import struct
import threading
import time
from collections.abc import Iterator
from typing import Any

from shoal.bi.pg.codec import MAX_STARTUP, error_message
from shoal.bi.pg.session import Connection
from shoal.bi.pg.tls import server_context
from shoal.config import Settings
from shoal.exceptions import ShoalError
from shoal.governance import Principals
from shoal.governance.sessions import Sessions

log = logging.getLogger("shoal.pgwire")
_CANCEL_FOR_S = 10.0
_BACKLOG = 1024


class PgServer:
    """The endpoint: `serve_forever()` (or `start()` for a background thread), `stop()`."""

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
        self._pending: dict[int, str] = {}  # id(socket) -> client address, for sockets not signed in
        self._per_address: collections.Counter[str] = collections.Counter()
        # id(socket) -> the task awaiting its startup packet (the event loop's stage only).
        self._unstarted: dict[int, asyncio.Task[None]] = {}
        self._sessions: dict[int, Connection] = {}
        # pid -> (Spark job group, statement serial) of the statement running on that connection.
        self._running: dict[int, tuple[str, int]] = {}
        self._serial = itertools.count(1)
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._started = threading.Event()
        bind = (host or settings.server.pg_host, settings.server.pg_port if port is None else port)
        try:
            self._listener = socket.create_server(bind, backlog=_BACKLOG)
        except OSError as exc:
            raise ShoalError(
                f"cannot listen on {bind[0]}:{bind[1]}: {exc.strerror}",
                hint="pass --pg-port or set [server] pg_port",
            ) from exc
        self.server_address = self._listener.getsockname()

    @property
    def address(self) -> tuple[str, int]:
        host, port = self.server_address[:2]
        return str(host), int(port)

    def start(self) -> PgServer:
        if self.settings.sql.point_lookup:  # PyIceberg and Arrow imported before the first lookup
            from shoal.governance import point_lookup

            threading.Thread(target=point_lookup.warm, args=(self.settings,), name="shoal-pg-warm", daemon=True).start()
        self._thread = threading.Thread(target=self.serve_forever, name="shoal-pg", daemon=True)
        self._thread.start()
        self._started.wait(10)
        return self

    def serve_forever(self) -> None:
        asyncio.run(self._serve())

    def stop(self) -> None:
        loop, stop = self._loop, self._stop
        if loop is not None and stop is not None:
            with contextlib.suppress(RuntimeError):  # the loop has ended already
                loop.call_soon_threadsafe(stop.set)
        if self._thread is not None:
            self._thread.join(10)
        self._listener.close()

    # ---- before the startup packet (the event loop) ----------------------------------------------
    async def _serve(self) -> None:
        self._loop, self._stop = asyncio.get_running_loop(), asyncio.Event()
        self._listener.setblocking(False)
        waiting: set[asyncio.Task[None]] = set()
        acceptor = asyncio.create_task(self._accept(waiting))
        self._started.set()
        await self._stop.wait()
        acceptor.cancel()
        for task in list(waiting):
            task.cancel()
        await asyncio.gather(acceptor, *waiting, return_exceptions=True)

    async def _accept(self, waiting: set[asyncio.Task[None]]) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                sock, address = await loop.sock_accept(self._listener)
            except OSError as exc:  # out of file descriptors, a reset before accept: go on
                log.warning("PostgreSQL endpoint: accept failed: %s", exc)
                await asyncio.sleep(0.05)
                continue
            if self._admit(sock, address):
                task = asyncio.create_task(self._await_startup(sock, address))
                waiting.add(task)
                task.add_done_callback(waiting.discard)
                self._unstarted[id(sock)] = task
                task.add_done_callback(functools.partial(self._started_or_gone, id(sock)))

    def _admit(self, sock: socket.socket, address: Any) -> bool:
        """Count a new socket against the pre-sign-in limits, or refuse it (53300) and close it."""
        client = _address_group(address)
        server = self.settings.server
        with self._lock:
            if len(self._pending) >= server.pg_max_pending:
                self._evict_for(client)
            if len(self._pending) >= server.pg_max_pending:
                refusal = "sorry, too many connections are signing in at once ([server] pg_max_pending); try again"
            elif self._per_address[client] >= server.pg_max_pending_per_address:
                refusal = (
                    f"sorry, too many connections from {client} are signing in at once"
                    " ([server] pg_max_pending_per_address); try again"
                )
            else:
                self._pending[id(sock)] = client
                self._per_address[client] += 1
                return True
        log.warning("PostgreSQL endpoint: refused %s: %s", client, refusal)
        _close(sock, error_message("FATAL", "53300", refusal))
        return False

    def _started_or_gone(self, key: int, _task: asyncio.Task[None]) -> None:
        self._unstarted.pop(key, None)

    def _evict_for(self, client: str) -> None:
        """The pool is full: make room by dropping the oldest socket still waiting for its startup
        packet from the address group holding the most, if that group holds more than the
        newcomer's would. Many addresses flooding (each within its share) then crowd out one
        another, not a newcomer from elsewhere. Called with the lock held, on the event loop."""
        if not self._per_address:
            return
        biggest, held = max(self._per_address.items(), key=lambda kv: kv[1])
        if held <= self._per_address.get(client, 0) + 1:
            return
        victim = next((k for k, a in self._pending.items() if a == biggest and k in self._unstarted), None)
        if victim is None:
            return
        del self._pending[victim]
        self._per_address[biggest] -= 1
        if self._per_address[biggest] <= 0:
            del self._per_address[biggest]
        self._unstarted.pop(victim).cancel()  # its clean-up closes the socket; the counts are done here
        log.warning("PostgreSQL endpoint: pre-sign-in pool full: dropped an idle socket from %s", biggest)

    async def _await_startup(self, sock: socket.socket, address: Any) -> None:
        """Wait, cheaply, for the first startup packet; then hand the socket to a thread."""
        server = self.settings.server
        accepted = time.monotonic()
        timeout = min(server.pg_startup_timeout_s, server.pg_handshake_timeout_s)
        handed = False
        try:
            first = await asyncio.wait_for(_first_packet(sock), timeout)
            sock.setblocking(True)
            thread = threading.Thread(target=self._handle, args=(sock, address, first, accepted), daemon=True)
            thread.start()
            handed = True
        except TimeoutError:
            message = (
                f"canceling authentication due to timeout: no startup packet within {timeout:g} s"
                " ([server] pg_startup_timeout_s, pg_handshake_timeout_s)"
            )
            _close(sock, error_message("FATAL", "57014", message))
        except (OSError, ConnectionError):
            pass
        finally:
            if not handed:
                self._forget(sock)
                _close(sock)

    # ---- after it (one thread per connection) -----------------------------------------------------
    def _handle(self, sock: socket.socket, address: Any, first: bytes, accepted: float) -> None:
        try:
            Connection(sock, address, self, first=first, accepted=accepted)
        except Exception:  # never let a connection's error reach stderr raw
            log.exception("PostgreSQL endpoint: error on a connection from %s", address)
        finally:
            self._forget(sock)
            _close(sock)

    def _forget(self, sock: socket.socket) -> None:
        with self._lock:
            client = self._pending.pop(id(sock), None)
            if client is not None:
                self._per_address[client] -= 1
                if self._per_address[client] <= 0:
                    del self._per_address[client]

    def handshake_done(self, conn: Connection) -> None:
        """The connection signed in or gave up: it no longer counts against the pre-sign-in limits."""
        self._forget(conn.request)

    # ---- signed-in slots ------------------------------------------------------------------------------
    def acquire(self, conn: Connection) -> str | None:
        """Take a slot for a connection that just signed in; None, or why not (PostgreSQL's words)."""
        server = self.settings.server
        name, admin = conn.principal.name, bool(conn.principal.is_admin)
        # As PostgreSQL: the reserve is smaller than the whole, and admins are exempt from the per-role cap.
        reserved = min(server.pg_reserved_admin_connections, server.pg_max_connections - 1)
        with self._lock:
            total = len(self._sessions)
            mine = sum(1 for c in self._sessions.values() if c.principal.name == name)
            if total >= server.pg_max_connections:
                return f"sorry, too many clients already ([server] pg_max_connections = {server.pg_max_connections})"
            if not admin and total >= server.pg_max_connections - reserved:
                return (
                    "remaining connection slots are reserved for admin connections"
                    f" ([server] pg_reserved_admin_connections = {reserved} of pg_max_connections ="
                    f" {server.pg_max_connections})"
                )
            if not admin and mine >= server.pg_max_connections_per_principal:
                return (
                    f'too many connections for role "{name}"'
                    f" ([server] pg_max_connections_per_principal = {server.pg_max_connections_per_principal})"
                )
            while True:
                pid = secrets.randbelow(2**31 - 2) + 1
                if pid not in self._sessions:
                    break
            conn.pid, conn.secret = pid, secrets.randbelow(2**31 - 1) - (2**30)
            self._sessions[pid] = conn
            return None

    def release(self, conn: Connection) -> None:
        """Give back conn's slot, if it holds one (only its own: pids are reused)."""
        with self._lock:
            if self._sessions.get(conn.pid) is conn:
                del self._sessions[conn.pid]
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


async def _first_packet(sock: socket.socket) -> bytes:
    """The first startup packet, read exactly (nothing after it: an SSLRequest is followed by TLS).
    A length no client sends is returned as is, for the connection to refuse (08P01)."""
    head = await _recv_exact(sock, 4)
    length = struct.unpack("!i", head)[0]
    if not 8 <= length <= MAX_STARTUP:
        return head
    return head + await _recv_exact(sock, length - 4)


async def _recv_exact(sock: socket.socket, n: int) -> bytes:
    loop = asyncio.get_running_loop()
    data = b""
    while len(data) < n:
        chunk = await loop.sock_recv(sock, n - len(data))
        if not chunk:
            raise ConnectionError("client closed the connection")
        data += chunk
    return data


def _close(sock: socket.socket, last: bytes = b"") -> None:
    """Send a last message if the socket takes it now (never wait on a stranger), then close."""
    with contextlib.suppress(OSError):
        if last:
            sock.setblocking(False)
            sock.send(last)
        sock.shutdown(socket.SHUT_WR)
    with contextlib.suppress(OSError):
        sock.close()


def _address_group(address: Any) -> str:
    """What a pre-sign-in share is counted by: an IPv4 address, or an IPv6 address's /64 (one
    host is given a whole /64 and could take a new address per socket)."""
    host = str(address[0]) if isinstance(address, tuple) else str(address)
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return host
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.ip_network(f"{ip}/64", strict=False))
    return str(ip)
