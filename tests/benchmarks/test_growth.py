"""benchmarks/growth.py at its tiniest sizes, on the shared session: the report's shape and the
sizes each lake really reached (timings are the benchmark's business, not a test's)."""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("growth_benchmark", ROOT / "benchmarks" / "growth.py")
assert spec is not None and spec.loader is not None
growth = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = growth  # dataclasses look their module up by name
spec.loader.exec_module(growth)


@pytest.mark.slow
def test_tiny_growth_run_reports_every_operation_at_every_size(spark, tmp_path: Path, capsys) -> None:
    before = spark.catalog.currentCatalog()
    # Sizes are not the point here (timings are the benchmark's): two seed objects copied to 4 and 8,
    # 2 and 3 change files (a lake of 3 takes two applies, so the batching is still checked).
    cfg = growth.Config(
        objects=[4, 8], files=[2, 3], chunks=[4, 8], new=2, reps=1, seed=2, files_per_apply=2, warmup=False
    )
    rep = growth.run(spark, cfg, tmp_path)

    assert spark.catalog.currentCatalog() == before  # the shared session is handed back as it was
    names = [o["operation"] for o in rep["operations"]]
    assert names == [
        "extract, no new object",
        "extract, catch-up after the copy (info)",
        "extract, 2 new objects",
        "ingest, 2 new files (info)",
        "cdc apply, no new file",
        "cdc apply, 1 new file",
        "search-index, no new chunk",
        "search-index, 2 new chunks",
    ]
    for op in rep["operations"]:
        sizes = {"objects": ["4", "8"], "files": ["2", "3"], "chunks": ["4", "8"]}[op["axis"]]
        assert list(op["seconds"]) == sizes
        assert all(s > 0 for s in op["seconds"].values())
        assert op["ratio_largest_to_smallest"] == pytest.approx(
            op["seconds"][sizes[-1]] / op["seconds"][sizes[0]], abs=0.02
        )
        if op["operation"].endswith("(info)"):
            assert op["target"] is None and op["meets_target"] is None
        else:
            assert op["target"] == 2.0
            assert op["meets_target"] == (op["ratio_largest_to_smallest"] <= 2.0)
    # Each lake reached its size: seed objects copied, chunks indexed, files in the ledger.
    lakes = rep["lakes"]
    assert lakes["objects"]["8"]["lake_objects"] == 8
    assert lakes["objects"]["8"]["lake_chunks"] == 8
    assert lakes["objects"]["8"]["lake_chunks_after"] == 10  # one timed run indexed the 2 new chunks
    assert lakes["cdc"]["3"]["applied_files"] == 3
    assert lakes["cdc"]["3"]["applies"] == 2  # 2 + 1 files

    growth.print_table(rep)
    out = capsys.readouterr().out
    assert out.count("PASS") + out.count("MISS") == 6
    assert "(no target)" in out


def test_size_lists_are_checked() -> None:
    assert growth._sizes("1_000,10,10") == [10, 1000]
    with pytest.raises(argparse.ArgumentTypeError, match="whole numbers"):
        growth._sizes("10k")
    with pytest.raises(argparse.ArgumentTypeError, match="at least 1"):
        growth._sizes("0,5")
