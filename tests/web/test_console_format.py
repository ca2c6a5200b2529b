"""How the console writes values: one time format, sizes, durations, cells (no server needed)."""

from __future__ import annotations

import datetime as dt

from markupsafe import Markup

from shoal.web.console.base import cell, duration_ms, human_bytes, when


def test_values_are_written_for_people():
    stamp = when(dt.datetime(2026, 1, 2, 3, 4, 5, 678901))  # naive: UTC, as the lake keeps it
    assert 'datetime="2026-01-02T03:04:05+00:00"' in stamp and 'title="2026-01-02 03:04:05 UTC"' in stamp
    berlin = dt.timezone(dt.timedelta(hours=1))
    assert 'datetime="2026-01-02T02:04:05+00:00"' in when(dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=berlin))
    assert 'datetime="2026-01-02T03:04:05+00:00"' in when("2026-01-02T03:04:05.5Z")
    assert 'datetime="1970-01-01T00:01:40+00:00"' in when(100)
    assert when(None) == "" and when("not a time") == "not a time"
    assert not isinstance(when("<script>"), Markup)  # plain text: the template escapes it

    assert [human_bytes(n) for n in (0, 1023, 1024, 14_540, 3 * 1024**2 + 1, 5 * 1024**4)] == [
        "0 B",
        "1023 B",
        "1.0 KiB",
        "14.2 KiB",
        "3.0 MiB",
        "5.0 TiB",
    ]
    assert [duration_ms(n) for n in (0, 999, 2_400, 185_000)] == ["0 ms", "999 ms", "2.4 s", "3 min 5 s"]
    assert cell({"team": "ops", "ok": True}) == "team=ops, ok=true"
    assert cell([1, None, False]) == "[1, ∅, false]" and cell(None) == "∅" and cell(2.5) == "2.5"
