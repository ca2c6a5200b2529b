"""The service files under deploy/ run commands that exist, with the options they pass."""

from __future__ import annotations

import configparser
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from shoal.config import load_settings

DEPLOY = Path(__file__).resolve().parent.parent / "deploy"


def _units() -> list[Path]:
    return sorted((DEPLOY / "systemd").glob("*.service"))


def _help(argv: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "shoal.cli.console", *argv, "--help"], capture_output=True, text=True, timeout=120
    )


def _check_shoal_command(argv: list[str]) -> None:
    """`shoal A B --opt` exists and accepts its options: its --help lists each one."""
    words = [a for a in argv if not a.startswith("-")]
    done = _help(words)
    assert done.returncode == 0, done.stderr
    for option in (a for a in argv if a.startswith("--")):
        assert option.split("=")[0] in done.stdout, f"shoal {' '.join(words)} has no option {option}"


@pytest.mark.parametrize("unit", _units(), ids=lambda p: p.name)
def test_systemd_unit(unit: Path) -> None:
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    parser.optionxform = str  # keys are case-sensitive in systemd
    parser.read(unit)
    assert {"Unit", "Service", "Install"} <= set(parser.sections())
    service = parser["Service"]
    assert service["User"] == "shoal" and service["Restart"] == "on-failure"
    argv = shlex.split(service["ExecStart"])
    program = Path(argv[0]).name
    if program == "shoal":
        _check_shoal_command(argv[1:])
        assert service["UMask"] == "0077"  # the lake's files stay private to the service user
    else:
        assert program == "spark-class"
        assert argv[1].startswith("org.apache.spark.deploy.")
        # The script ships with pyspark, in the same environment as `shoal`.
        assert (Path(sys.executable).parent / "spark-class").exists()


def test_compose_file_services_and_config() -> None:
    compose = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    services = compose["services"]
    assert {"catalog", "serve", "scheduler", "spark-master", "spark-worker"} <= set(services)
    for name in ("serve", "scheduler"):
        command = services[name]["command"]
        assert command[0] == "shoal"
        _check_shoal_command(command[1:])
    # serve exits 75 when its Spark JVM dies, for its supervisor to restart it (issue 43).
    assert services["serve"]["restart"] == "on-failure"
    assert "Restart=on-failure" in (DEPLOY / "systemd" / "shoal-serve.service").read_text()
    # The config file it mounts is a valid shoal.toml.
    settings = load_settings(DEPLOY / "shoal.compose.toml")
    assert settings.catalog.type == "postgresql" and settings.spark.master == "spark://spark-master:7077"
    assert "bash scripts/setup.sh" in (DEPLOY / "Dockerfile").read_text()  # the same setup as a bare machine
