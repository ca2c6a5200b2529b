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


def test_dashboard_charts_read_like_reports():
    from shoal.web.console import dashboards as dash

    rows = [{"segment": f"s{i}", "weighted_revenue": i * 1.5, "year": 2024} for i in range(24)]
    pie = dash.Chart(type="pie", dataset="d", theta="weighted_revenue", color="segment", unit="EUR")
    many, few = dash.vega_lite(pie, rows), dash.vega_lite(pie, rows[: dash.MAX_PIE_SLICES])
    assert many["mark"]["type"] == "bar" and many["encoding"]["y"]["sort"] == "-x"  # 24 slices: sorted bars
    assert few["mark"]["type"] == "arc" and few["encoding"]["theta"]["title"] == "Weighted revenue EUR"
    bar = dash.vega_lite(dash.Chart(type="bar", dataset="d", x="segment", y="weighted_revenue", format=",.1f"), rows)
    assert bar["encoding"]["y"]["title"] == "Weighted revenue" and bar["encoding"]["y"]["axis"]["format"] == ",.1f"
    assert bar["encoding"]["x"]["title"] == "Segment"
    table = dash.Chart(type="table", dataset="d", sort="-weighted_revenue", format=",.2f")
    out = dash.table_rows(table, ["segment", "weighted_revenue", "year"], [*rows[:3], {"segment": "none"}])
    assert out == [["s2", "3.00", 2024], ["s1", "1.50", 2024], ["s0", "0.00", 2024], ["none", None, None]]
