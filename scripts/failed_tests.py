"""Node ids of the tests that failed or errored in a JUnit XML report, one per line.

scripts/test.sh runs them again, one process, after the parallel run (see there why)."""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from pathlib import Path


def failed(report: Path) -> list[str]:
    ids = []
    for case in ET.parse(report).iter("testcase"):
        if case.find("failure") is None and case.find("error") is None:
            continue
        parts = (case.get("classname") or "").split(".")
        # classname is the module's dotted path, then any test classes: find the module file.
        for cut in range(len(parts), 0, -1):
            module = Path(*parts[:cut]).with_suffix(".py")
            if module.is_file():
                ids.append("::".join([module.as_posix(), *parts[cut:], case.get("name") or ""]))
                break
        else:
            raise SystemExit(f"failed_tests: no module for {case.get('classname')!r} in {report}")
    return list(dict.fromkeys(ids))


if __name__ == "__main__":
    print("\n".join(failed(Path(sys.argv[1]))))
