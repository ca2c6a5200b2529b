"""Dedup/ordering logic checked property-based against the pure-Python reference model."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from shoal.cdc.batch import ACTION_COL, classify, latest_events
from tests.support import cdc_model as model
from tests.support.helpers import apply, rows, write_csv

ops = st.sampled_from(["I", "U", "D"])


@st.composite
def event_lists(draw, max_files: int = 3):
    events = []
    for file_order in range(draw(st.integers(1, max_files))):
        for line in range(2, 2 + draw(st.integers(0, 6))):
            events.append(
                model.Event(
                    key=draw(st.integers(1, 4)),
                    seq=draw(st.integers(0, 4)),  # small range: many ties
                    op=draw(ops),
                    file_order=file_order,
                    line=line,
                    value=f"v{file_order}-{line}",
                )
            )
    return events


states = st.dictionaries(st.integers(1, 4), st.tuples(st.integers(0, 4), st.just("old")), max_size=4)
tombstone_maps = st.dictionaries(st.integers(1, 4), st.integers(0, 4), max_size=4)


@hsettings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(events=event_lists(), target=states, tombstones=tombstone_maps)
def test_latest_and_classify_match_the_model(spark, events, target, tombstones) -> None:
    schema = "id bigint, seq bigint, _op string, _file_order int, _line bigint, value string"
    df = spark.createDataFrame([(e.key, e.seq, e.op, e.file_order, e.line, e.value) for e in events], schema)
    tdf = spark.createDataFrame([(k, s) for k, (s, _) in target.items()], "id bigint, seq bigint")
    got = {
        r.id: (r.value, r[ACTION_COL]) for r in classify(latest_events(df, ["id"], "seq"), tdf, ["id"], "seq").collect()
    }
    want = {k: (e.value, model.action(e, target)) for k, e in model.latest(events).items()}
    assert got == want


@pytest.mark.slow
@hsettings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batches=st.lists(event_lists(max_files=2), min_size=1, max_size=3))
def test_applying_batches_to_iceberg_matches_the_model(spark, settings, tmp_path_factory, batches) -> None:
    """Whole batches through CSV files, Spark and Iceberg MERGE, against the model's state."""
    import uuid

    source: Path = tmp_path_factory.mktemp("model")
    table = f"m{uuid.uuid4().hex[:8]}.items"
    expected: dict[int, tuple[int, str]] = {}
    tombstones: dict[int, int] = {}
    name_counter = 0
    for batch in batches:
        by_file: dict[int, list[model.Event]] = {}
        for e in batch:
            by_file.setdefault(e.file_order, []).append(e)
        for order in sorted(by_file):
            name_counter += 1
            lines = sorted(by_file[order], key=lambda e: e.line)
            write_csv(
                source,
                f"20220101-{name_counter:010d}.csv",
                [[e.op, e.key, f"2022-01-01 00:00:0{e.seq}", e.value] for e in lines],
                header=["op", "id", "ts", "value"],
            )
        # Line numbers in the files are 2.. in order, as in the model's events.
        renumbered = []
        name_base = name_counter - len(by_file)
        for i, order in enumerate(sorted(by_file)):
            for line, e in enumerate(sorted(by_file[order], key=lambda e: e.line), start=2):
                renumbered.append(model.Event(e.key, e.seq, e.op, name_base + i, line, e.value))
        expected = model.apply(expected, renumbered, tombstones)
        apply(settings, source, table, keys=["id"], sequence="ts")
    exists = spark.catalog.tableExists(table)  # a batch without any event writes no file
    got = {r[0]: r[1] for r in rows(spark, f"SELECT id, value FROM {table}")} if exists else {}
    assert got == {k: v for k, (_, v) in expected.items()}
