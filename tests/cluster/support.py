"""What the scale-out tests share: `shoal` run as a separate process with only SHOAL_* variables changed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

LOAD = (
    "product_id,name,price,op,last_update_time\n1,apple,1.5,I,2024-01-01T00:00:00\n2,pear,2.0,I,2024-01-01T00:00:00\n"
)
CHANGES = "product_id,name,price,op,last_update_time\n2,pear,2.5,U,2024-01-02T00:00:00\n1,,,D,2024-01-02T00:00:00\n"


def run(args: list[str], env: dict[str, str], timeout: float = 400) -> subprocess.CompletedProcess:
    done = subprocess.run(
        [sys.executable, "-m", "shoal.cli.console", *args], env=env, capture_output=True, text=True, timeout=timeout
    )
    assert done.returncode == 0, f"shoal {' '.join(args)} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


def run_json(args: list[str], env: dict[str, str], timeout: float = 400):
    return json.loads(run([*args, "--json"] if "--json" not in args else args, env, timeout).stdout)


def base_env(workspace: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SHOAL_")}
    env.update({"SHOAL_WORKSPACE": str(workspace), "SHOAL_SPARK__SHUFFLE_PARTITIONS": "2"})
    return env


def s3_env(env: dict[str, str], s3, pg) -> dict[str, str]:
    """`env` with the warehouse on SeaweedFS (S3) and the catalog in PostgreSQL, as the
    deployment guide configures a team's lake."""
    return {
        **env,
        "SHOAL_WAREHOUSE": f"s3://{s3.bucket}/warehouse",
        "SHOAL_STORAGE__ENDPOINT": s3.endpoint,
        "SHOAL_STORAGE__ACCESS_KEY": s3.access_key,
        "SHOAL_STORAGE__SECRET_KEY": s3.secret_key,
        "SHOAL_CATALOG__TYPE": "postgresql",
        "SHOAL_CATALOG__URI": pg.jdbc_uri,
        "SHOAL_CATALOG__USER": pg.user,
        "SHOAL_CATALOG__PASSWORD": pg.password,
    }


def write_changes(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "LOAD00000001.csv").write_text(LOAD)


# A query whose tasks each sleep 0.5 s in the executor (60 rows, 4 tasks): a job that runs long
# enough to be interrupted or to lose its workers.
SLOW_SQL = "SELECT id, reflect('java.lang.Thread', 'sleep', CAST(500 AS BIGINT)) AS s FROM range(0, 60, 1, 4)"


def shoal_proc(args: list[str], env: dict[str, str]) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "shoal.cli.console", *args], env=env, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def wait_running_app(webui_url: str, before: set[str], timeout: float = 120) -> str:
    """The id of an application not in `before` once it holds cores (its job can run)."""
    import time

    import httpx

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        apps = httpx.get(webui_url + "/json/", timeout=10).json()["activeapps"]
        new = [a["id"] for a in apps if a["id"] not in before and a["cores"] > 0]
        if new:
            return new[0]
        time.sleep(0.5)
    raise TimeoutError("no new application got cores")


def wait_tasks_running(workspace: str, app_id: str, timeout: float = 120) -> None:
    """Until an executor of `app_id` runs a task (its log under the workers' work folders says so):
    a job in progress, not executors still starting."""
    import time
    from pathlib import Path

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for log in Path(workspace, "cluster", "work").glob(f"*/{app_id}/*/stderr"):
            if "Got assigned task" in log.read_text(errors="replace"):
                return
        time.sleep(0.5)
    raise TimeoutError(f"no executor of {app_id} ran a task")


def active_apps(webui_url: str) -> list[dict]:
    import httpx

    return httpx.get(webui_url + "/json/", timeout=10).json()["activeapps"]
