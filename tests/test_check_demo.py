"""CI's check of the demo's output (scripts/check_demo.py) passes a real log and fails broken ones."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location("check_demo", ROOT / "scripts" / "check_demo.py")
check_demo = importlib.util.module_from_spec(spec)
spec.loader.exec_module(check_demo)
LOG = (Path(__file__).parent / "support" / "data" / "demo.log").read_text(encoding="utf-8")


def test_a_real_demo_log_passes(tmp_path: Path) -> None:
    assert check_demo.problems(LOG) == []
    log = tmp_path / "demo.log"
    log.write_text(LOG, encoding="utf-8")
    assert check_demo.main(["check_demo.py", str(log)]) == 0


def test_each_missing_result_is_named(tmp_path: Path) -> None:
    broken = {
        "traceback": LOG + "\nTraceback (most recent call last):\n  File x\nValueError: boom\n",
        "time travel": LOG.replace(
            "│ 103        │ home        │ Desk lamp ", "│ 107        │ home        │ Desk lamp "
        ),
        "search": LOG.replace("invoices/invoice-1001.pdf    │ page 1", "reviews/other.txt            │ page 1"),
        "refused column": LOG.replace("error: column quantity_available", "note: column quantity_available"),
        "garden products only": LOG.replace("Hose reel", "Hose rail"),
        "summary": LOG.replace("Demo summary", "Demo recap"),
    }
    for what, text in broken.items():
        found = check_demo.problems(text)
        assert found, what
        log = tmp_path / "demo.log"
        log.write_text(text, encoding="utf-8")
        assert check_demo.main(["check_demo.py", str(log)]) == 1, what
