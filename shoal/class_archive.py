"""A JVM class archive (AppCDS) of the classes a Shoal command's Spark loads: a cold start faster.

A cold `shoal` command spends most of its first seconds loading and verifying the same few
thousand classes from Spark's 250-odd jars. Java 17 can dump the classes a run loaded into an
archive (`-XX:ArchiveClassesAtExit`) and map it into later JVMs (`-XX:SharedArchiveFile`):
measured here, a cold session plus its first Iceberg statements took 16 s instead of 24-30 s on
a loaded 2-core machine. `shoal engine archive` (run by scripts/setup.sh) builds it with a small
Iceberg workload in a throwaway workspace; `get_spark` then uses it when it exists and matches
this Java and class path. An archive that does not match (another JDK, other jars, a classpath
with a configuration folder) is ignored by the JVM, silently: commands only lose the speed-up.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from shoal.config import Settings
from shoal.exceptions import ShoalError

# The JVM logs archive mismatches on stdout, which would break a command's --json output.
QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"


def _java() -> Path | None:
    home = os.environ.get("JAVA_HOME")
    java = Path(home) / "bin" / "java" if home else None
    found = str(java) if java and java.is_file() else shutil.which("java")
    return Path(found).resolve() if found else None


def driver_classpath(settings: Settings) -> list[str]:
    """What the driver JVM's own class path holds besides Spark's jars: `[spark] conf`'s
    spark.driver.extraClassPath. Not spark.jars (Iceberg, JDBC drivers, S3): Spark loads those
    through a class loader of its own, whose classes a dynamic archive never holds, so one
    archive serves the embedded, PostgreSQL and S3 configurations alike."""
    extra = settings.spark.conf.get("spark.driver.extraClassPath", "")
    return [p for p in extra.split(os.pathsep) if p]


def archive_key(classpath: list[str]) -> str:
    """What the archive depends on: the Java binary, Spark's jars and the driver's extra class path."""
    import pyspark

    digest = hashlib.sha256()
    java = _java()
    for item in [java, *sorted((Path(pyspark.__file__).parent / "jars").glob("*.jar")), *map(Path, classpath)]:
        if item is None:
            continue
        try:
            st = item.stat()
        except OSError:
            continue
        digest.update(f"{item}\0{st.st_size}\0{int(st.st_mtime)}\n".encode())
    return digest.hexdigest()[:16]


def archive_path(settings: Settings) -> Path | None:
    """Where this Java and class path's archive lives (None: `[spark] class_archive = "off"`)."""
    choice = settings.spark.class_archive
    if choice == "off":
        return None
    if choice != "auto":
        return Path(choice).expanduser()
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "shoal" / "jvm" / f"spark-{archive_key(driver_classpath(settings))}.jsa"


def java_options(settings: Settings) -> str:
    """The driver JVM options that map the archive in, or "" when there is none to use."""
    if "SPARK_CONF_DIR" in os.environ or "HADOOP_CONF_DIR" in os.environ:
        return ""  # a configuration folder on the classpath: the JVM would refuse the archive
    path = archive_path(settings)
    if path is None or not path.is_file():
        return ""
    return f"-XX:SharedArchiveFile={path} {QUIET}"


def build(settings: Settings, timeout_s: float = 900) -> Path:
    """Dump the archive for `settings`' Spark: a child process
    runs a small Iceberg workload (shoal.warmup) in a throwaway workspace with
    `-XX:ArchiveClassesAtExit`, then the file replaces any older one."""
    target = archive_path(settings)
    if target is None:
        raise ShoalError('[spark] class_archive is "off"', hint='set it to "auto" or a file path')
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="shoal-archive-") as work:
        tmp = Path(work) / "spark.jsa"
        env = {k: v for k, v in os.environ.items() if k not in ("SPARK_CONF_DIR", "HADOOP_CONF_DIR")}
        cmd = [sys.executable, "-m", "shoal.warmup", work, str(tmp), os.pathsep.join(driver_classpath(settings))]
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout_s)
        if done.returncode != 0 or not tmp.is_file():
            raise ShoalError(
                f"could not build the JVM class archive (exit {done.returncode}): {done.stderr.strip()[-1500:]}",
                hint="commands still run, without the faster start",
            )
        shutil.move(str(tmp), str(target))
    return target
