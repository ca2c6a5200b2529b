"""The governed SQL endpoint for BI tools: the PostgreSQL wire protocol (v3) over Shoal's grants.

Clients (psql, psycopg, JDBC/ODBC drivers for PostgreSQL, BI tools) sign in as a Shoal principal
with one of their API tokens (`shoal_<id>_<secret>`) as the password, or their password:

* over TLS (the endpoint answers SSLRequest; a self-signed certificate is made on first start
  unless `[server] pg_tls_cert`/`pg_tls_key` are set) the client sends the password message,
  encrypted by TLS: a token or the user's password;
* over a plain connection (loopback only, unless `pg_require_tls_non_loopback = false`) the
  sign-in is SCRAM-SHA-256: the client proves it holds a token, which never crosses the wire.
  Only tokens made by this release or later have the SCRAM verifier this needs.

`[server] pg_auth` overrides the choice (docs/bi.md). Every statement runs through `GovernedSql`
(refused, rewritten, audited exactly as in `shoal sql --as` and the HTTP API), as the signed-in
principal re-read before each statement, on the process's one SparkSession.

Modules: `codec` (type OIDs, values, literals, the message reader), `session` (one connection's
protocol state machine: handshake, sign-in, simple and extended query), `server` (the asyncio
listener and pre-sign-in limits, slots, cancel requests), `tls` (certificates).
"""

from shoal.bi.pg.codec import (
    CANCEL_REQUEST,
    GSSENC_REQUEST,
    MAX_AUTH_MESSAGE,
    MAX_STARTUP,
    PROTOCOL_3,
    SERVER_VERSION,
    SSL_REQUEST,
    PgError,
    ProtocolError,
    SessionEnded,
)
from shoal.bi.pg.server import PgServer
from shoal.bi.pg.session import Connection, Result

__all__ = [
    "CANCEL_REQUEST",
    "GSSENC_REQUEST",
    "MAX_AUTH_MESSAGE",
    "MAX_STARTUP",
    "PROTOCOL_3",
    "SERVER_VERSION",
    "SSL_REQUEST",
    "Connection",
    "PgError",
    "PgServer",
    "ProtocolError",
    "Result",
    "SessionEnded",
]
