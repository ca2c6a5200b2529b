"""`shoal serve --iceberg-rest-only --iceberg-rest-port N` as a user runs it: a process that
serves the catalog (no Spark), signs a client in, and stops on TERM."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import httpx

from shoal.governance import Principals
from tests.support.servers import free_port


def test_serve_iceberg_rest_only(tmp_path):
    from shoal.config import load_settings

    workspace = tmp_path / "ws"
    settings = load_settings(workspace=workspace)
    token = Principals(settings).create_token("admin")[1]
    port = free_port()
    env = {**os.environ, "SHOAL_WORKSPACE": str(workspace)}
    env.pop("SHOAL_CONFIG", None)
    cmd = [sys.executable, "-m", "shoal", "serve", "--iceberg-rest-only", "--iceberg-rest-port", str(port)]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        url, deadline = f"http://127.0.0.1:{port}", time.monotonic() + 60
        while True:
            try:
                r = httpx.post(
                    f"{url}/v1/oauth/tokens", data={"grant_type": "client_credentials", "client_secret": token}
                )
                break
            except httpx.TransportError:
                assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read() if proc.stderr else ""
                time.sleep(0.3)
        assert r.status_code == 200
        bearer = r.json()["access_token"]
        config = httpx.get(f"{url}/v1/config", headers={"Authorization": f"Bearer {bearer}"}).json()
        assert "GET /v1/{prefix}/namespaces/{namespace}/tables/{table}" in config["endpoints"]
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert f"Iceberg REST catalog (governed) on http://127.0.0.1:{port}" in err
    assert token not in err and bearer not in err  # secrets are never printed
