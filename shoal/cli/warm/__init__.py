"""The warm engine: one long-lived process per workspace that keeps a SparkSession (and its
Python workers) running, so that CLI commands skip the JVM's start-up.

`client` is the thin side every `shoal` call goes through first (standard library only);
`server` is the engine process. The channel is a 0600 Unix socket in the workspace, and the
engine also checks each peer's uid (SO_PEERCRED) before it reads a request.
"""
