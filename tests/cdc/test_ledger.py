"""The compacted ledger on real files (no Spark): what a batch's check reads stays bounded."""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path

import pytest

from shoal.cdc import ledger
from shoal.cdc.source import discover
from shoal.lake import TableName


@pytest.fixture
def small(monkeypatch) -> None:
    """Small tails and segments, so a few hundred files span many segments."""
    monkeypatch.setattr(ledger, "TAIL_MAX", 16)
    monkeypatch.setattr(ledger, "SEG_MAX", 64)


def table() -> TableName:
    return TableName(f"t{uuid.uuid4().hex[:8]}", "products")


def change_file(source: Path, i: int, body: str = "op,id\nI,1\n") -> str:
    name = f"2022{i:010d}.csv"
    (source / name).write_text(body)
    return name


def apply_all(settings, tbl: TableName, source: Path, state: ledger.Ledger) -> ledger.Ledger:
    """What one batch does with the ledger: check the listing, record the new files."""
    check = state.check(discover(str(source)))
    batch = uuid.uuid4().hex
    added = {f.name: ledger.entry_meta(f, batch, "2022-03-02T00:00:00+00:00") for f in check.new}
    return ledger.read(ledger.write(settings, tbl, state, added, batch, check.verified(set(added))))


def grow(settings, tbl: TableName, source: Path, n: int, per_batch: int) -> ledger.Ledger:
    state = ledger.Ledger()
    for start in range(0, n, per_batch):
        for i in range(start, min(n, start + per_batch)):
            change_file(source, i)
        state = apply_all(settings, tbl, source, state)
    return state


@pytest.mark.usefixtures("small")
@pytest.mark.parametrize("n", [100, 1000])
def test_checking_a_new_file_reads_no_more_after_many_files(settings, source, n) -> None:
    tbl = table()
    state = grow(settings, tbl, source, n, per_batch=25)
    assert len(state.segments) >= n // ledger.SEG_MAX  # folded into segments, not one growing list
    assert len(ledger.read(state.uri).all_entries()) == n  # type: ignore[arg-type]
    new = change_file(source, n)
    fresh = ledger.read(state.uri)  # type: ignore[arg-type]
    check = fresh.check(discover(str(source)))
    assert [f.name for f in check.new] == [new] and check.rewritten == []
    # Bounded whatever n is: the head's tail only, no segment read.
    assert fresh.segments_read == 0
    assert fresh.entries_read <= ledger.TAIL_MAX
    # The head holds the tail and one short line per segment.
    assert fresh.bytes_read <= ledger.TAIL_MAX * 200 + len(fresh.segments) * 600


@pytest.mark.usefixtures("small")
def test_a_late_file_reads_only_the_segment_of_its_range(settings, source) -> None:
    tbl = table()
    state = grow(settings, tbl, source, 400, per_batch=50)
    late = "2022" + f"{150:010d}".replace("150", "15a") + ".csv"  # sorts between files 150 and 160
    (source / late).write_text("op,id\nU,1\n")
    fresh = ledger.read(state.uri)  # type: ignore[arg-type]
    check = fresh.check(discover(str(source)))
    assert [f.name for f in check.new] == [late]
    assert fresh.segments_read == 1 and fresh.entries_read <= ledger.TAIL_MAX + ledger.SEG_MAX
    # Once applied (in the tail, later folded into its segment) it is no longer new, and the
    # range's fingerprint was recorded: the next check reads no segment again.
    after = apply_all(settings, tbl, source, fresh)
    again = ledger.read(after.uri)  # type: ignore[arg-type]
    assert again.check(discover(str(source))).new == [] and again.segments_read == 0


@pytest.mark.usefixtures("small")
def test_files_removed_from_the_source_cost_one_read_then_none(settings, source) -> None:
    tbl = table()
    state = grow(settings, tbl, source, 300, per_batch=50)
    for i in range(0, 200, 3):  # a lifecycle rule removed old change files
        (source / f"2022{i:010d}.csv").unlink()
    first = ledger.read(state.uri)  # type: ignore[arg-type]
    assert first.check(discover(str(source))).new == [] and first.segments_read > 0
    after = apply_all(settings, tbl, source, first)
    second = ledger.read(after.uri)  # type: ignore[arg-type]
    assert second.check(discover(str(source))).new == [] and second.segments_read == 0
    # The removed files are still recorded as applied: put back, they are not new.
    change_file(source, 3)
    assert ledger.read(after.uri).check(discover(str(source))).new == []  # type: ignore[arg-type]


@pytest.mark.usefixtures("small")
@pytest.mark.parametrize("where", ["tail", "segment"])
def test_a_rewritten_file_is_reported_until_taken(settings, source, where) -> None:
    tbl = table()
    state = grow(settings, tbl, source, 200, per_batch=50)
    for i in range(200, 205):
        change_file(source, i)
    state = apply_all(settings, tbl, source, state)
    name = f"2022{(202 if where == 'tail' else 10):010d}.csv"
    assert (name in state.tail) == (where == "tail")
    (source / name).write_text("op,id\nI,1\nU,2\n")  # rewritten: other size
    check = ledger.read(state.uri).check(discover(str(source)))  # type: ignore[arg-type]
    assert check.new == [] and [r.file.name for r in check.rewritten] == [name]
    message = check.rewritten[0].message()
    assert name in message and "size 10 -> 14 bytes" in message and "--reapply" in message
    # Not taken: still reported by the next batch.
    skipped = apply_all(settings, tbl, source, ledger.read(state.uri))  # type: ignore[arg-type]
    assert [r.file.name for r in skipped.check(discover(str(source))).rewritten] == [name]
    # Same size, new modification time: rewritten too.
    change_file(source, 5, "op,id\nI,9\n")
    os.utime(source / f"2022{5:010d}.csv", (1.0e9, 1.0e9))
    check = ledger.read(skipped.uri).check(discover(str(source)))  # type: ignore[arg-type]
    assert sorted(r.file.name for r in check.rewritten) == sorted([name, f"2022{5:010d}.csv"])
    assert "same size, modified" in next(r for r in check.rewritten if "0005" in r.file.name).message()
    # Taken (--reapply): recorded with its new size and time, then quiet.
    batch = uuid.uuid4().hex
    taken = {r.file.name: ledger.entry_meta(r.file, batch, "now") for r in check.rewritten}
    uri = ledger.write(settings, tbl, ledger.read(skipped.uri), taken, batch, check.verified(set(taken)))  # type: ignore[arg-type]
    quiet = ledger.read(uri)
    assert quiet.check(discover(str(source))).rewritten == [] and quiet.segments_read == 0
    assert quiet.all_entries()[name]["size"] == 14


def test_a_full_ledger_of_the_first_format_is_read_and_compacted(settings, source, monkeypatch) -> None:
    monkeypatch.setattr(ledger, "TAIL_MAX", 8)
    tbl = table()
    names = [change_file(source, i) for i in range(20)]
    old = Path(settings.warehouse_uri) / "old-ledger.json"
    files = {n: {"size": 10, "batch_id": "b1", "applied_at": "2022-03-01T00:00:00+00:00"} for n in names}
    old.write_text(json.dumps({"table": str(tbl), "batch_id": "b1", "written_at": "x", "files": files}))
    state = ledger.read(str(old))
    new = change_file(source, 20)
    check = state.check(discover(str(source)))
    assert [f.name for f in check.new] == [new] and check.rewritten == []  # no mtime recorded: size decides
    after = apply_all(settings, tbl, source, state)
    assert after.tail == {} and after.segments and len(after.all_entries()) == 21
