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


def write_changes(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "LOAD00000001.csv").write_text(LOAD)
