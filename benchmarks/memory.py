"""Peak resident memory of a benchmark's driver (issue 21 asks for it next to the timings).

Imported by the benchmark scripts that sit beside it (`python benchmarks/X.py` puts this
folder on sys.path). Linux only: elsewhere the JVM figure is None."""

from __future__ import annotations

import contextlib
import resource
from pathlib import Path


def _jvm_pid(spark) -> int | None:
    proc = getattr(spark.sparkContext._gateway, "proc", None)
    return proc.pid if proc is not None else None


def reset_peak_rss(spark) -> None:
    """Restart the JVM driver's peak-RSS counter (Linux: clear_refs 5 resets VmHWM)."""
    pid = _jvm_pid(spark)
    if pid is not None and Path(f"/proc/{pid}/clear_refs").exists():
        with contextlib.suppress(OSError):
            Path(f"/proc/{pid}/clear_refs").write_text("5")


def peak_rss_mb(spark) -> dict[str, float | None]:
    """Peak resident memory of the driver: the JVM (which in local mode also runs the
    executors' tasks) since the last reset, and this Python process over its life."""
    jvm = None
    pid = _jvm_pid(spark)
    if pid is not None:
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    jvm = round(int(line.split()[1]) / 1024, 1)
    python = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)  # KiB on Linux
    return {"jvm_mb": jvm, "python_mb": python}
