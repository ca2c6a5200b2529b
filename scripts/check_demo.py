#!/usr/bin/env python3
"""Checks a log of `bash scripts/demo.sh` for the demo's key results (used by `.ci/run`).

Usage: python3 scripts/check_demo.py demo.log
Exits 1 naming each missing result. Standard library only: it runs before and without the venv.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path


def section(log: str, start: str, end: str | None) -> str:
    """The text from the line holding `start` up to the next line holding `end`."""
    i = log.find(start)
    if i < 0:
        return ""
    j = log.find(end, i + len(start)) if end else -1
    return log[i : j if j >= 0 else len(log)]


def rows(text: str) -> list[str]:
    """Table body lines (rich draws them between vertical bars)."""
    return [line for line in text.splitlines() if line.count("│") >= 3]


def problems(log: str) -> list[str]:
    found: list[str] = []
    if "Traceback (most recent call last)" in log:
        found.append("the demo printed a Python traceback")
    for line in log.splitlines():
        if re.match(r"\s*(error|Error):", line) and "quantity_available" not in line:
            found.append(f"unexpected error line: {line.strip()}")

    current = section(log, "4. Current table", "5. Time travel")
    if not any("102" in r and "61" in r for r in rows(current)) or any("Desk lamp" in r for r in rows(current)):
        found.append("current table: expected product 102 with 61 in stock and product 103 deleted")

    travel = section(log, "5. Time travel", "6. History")
    if not any("103" in r and "Desk lamp" in r for r in rows(travel)):
        found.append("time travel: product 103 (Desk lamp) missing from the first snapshot")
    if not any("102" in r and "80" in r for r in rows(travel)):
        found.append("time travel: product 102 should have 80 in stock as of the first snapshot")

    search = section(log, "11. Semantic search", "12. Governance")
    hits = [r for r in rows(search) if ".pdf" in r or ".txt" in r or ".eml" in r or ".html" in r]
    if not hits or "invoice-1001.pdf" not in hits[0]:
        found.append("search: 'bill for coffee equipment' did not rank invoices/invoice-1001.pdf first")

    governed = section(log, "12. Governance", "shoal audit list")
    analyst_rows = rows(section(governed, 'shoal sql --as analyst "SELECT *', 'shoal sql --as analyst "SELECT name'))
    if not any("Hose reel" in r for r in analyst_rows) or any("USB-C" in r for r in analyst_rows):
        found.append("governance: the analyst should see garden products only")
    if not re.search(r"error:.*quantity_available", governed):
        found.append("governance: the refused column (quantity_available) was not refused")

    if "Demo summary" not in log:
        found.append("the closing summary is missing")
    return found


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    log = Path(argv[1]).read_text(encoding="utf-8", errors="replace")
    found = problems(log)
    for p in found:
        print(f"check-demo: {p}", file=sys.stderr)
    if not found:
        print("check-demo: the demo's key results are all there")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
