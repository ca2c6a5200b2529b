"""Seconds each test module took in a JUnit XML report, as tests/module_seconds.json holds them.

tests/conftest.py starts the longest modules first from that file (a parallel run then does not
end with one process busy on a long module). Refresh it from a full run's report:
    python scripts/module_seconds.py test-artifacts/junit.xml > tests/module_seconds.json
"""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET
from pathlib import Path


def module_seconds(report: Path) -> dict[str, int]:
    seconds: dict[str, float] = {}
    for case in ET.parse(report).iter("testcase"):
        parts = (case.get("classname") or "").split(".")
        # classname is the module's dotted path, then any test classes: find the module file.
        for cut in range(len(parts), 0, -1):
            module = Path(*parts[:cut]).with_suffix(".py")
            if module.is_file():
                key = module.as_posix()
                seconds[key] = seconds.get(key, 0.0) + float(case.get("time") or 0)
                break
    return {k: round(v) for k, v in sorted(seconds.items(), key=lambda kv: (-kv[1], kv[0]))}


if __name__ == "__main__":
    print(json.dumps(module_seconds(Path(sys.argv[1])), indent=1))
