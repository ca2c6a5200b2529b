"""Dashboards as files: named SQL datasets, filters and charts, rendered with Vega-Lite.

    name: sales-revenue
    title: Sales and marketing revenue
    refresh_after: [sales-marketing-refresh]     # workflows that feed it
    datasets:
      monthly: SELECT year, month, total_weighted_revenue FROM sales_db.revenue_summary
    filters:
      - {field: year, dataset: monthly}          # a select box of the field's values
    charts:
      - {type: kpi, title: Revenue, dataset: monthly, value: total_weighted_revenue, agg: sum}
      - {type: line, dataset: monthly, x: period, y: total_weighted_revenue, x_type: temporal}
      - {type: pie, dataset: segments, theta: weighted_revenue, color: segment}
      - {type: table, dataset: monthly, columns: [year, month, total_weighted_revenue]}

Datasets run as the viewer, through governed SQL, every time the page is drawn: a dashboard
shows each person what their grants allow. A filter wraps the dataset in an outer query built
with sqlglot (the value is a quoted literal, never spliced text). Files come from the built-in
folder, `<workspace>/dashboards` and `[server] dashboards_dir`; later folders win by name.
"""

from __future__ import annotations

import math
import re
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import sqlglot
import yaml
from pydantic import BaseModel, Field, ValidationError, model_validator
from sqlglot import exp

from shoal import definitions
from shoal.config import Settings
from shoal.exceptions import ShoalError

BUILT_IN = Path(__file__).resolve().parent.parent / "dashboards"
IDENT = r"^[A-Za-z_][A-Za-z0-9_]*$"
MAX_ROWS = 5000


class DashboardError(ShoalError):
    """A dashboard file is invalid."""


class Filter(BaseModel):
    model_config = {"extra": "forbid"}
    field: str = Field(pattern=IDENT)
    label: str | None = None
    dataset: str


class Chart(BaseModel):
    model_config = {"extra": "forbid"}
    type: Literal["bar", "line", "area", "pie", "kpi", "table"]
    title: str = ""
    dataset: str
    x: str | None = Field(default=None, pattern=IDENT)
    y: str | None = Field(default=None, pattern=IDENT)
    x_type: Literal["ordinal", "nominal", "temporal", "quantitative"] = "ordinal"
    color: str | None = Field(default=None, pattern=IDENT)
    theta: str | None = Field(default=None, pattern=IDENT)  # pie: the size of each slice
    value: str | None = Field(default=None, pattern=IDENT)  # kpi: the column to aggregate
    agg: Literal["sum", "avg", "min", "max", "count", "last"] = "sum"
    format: str = ",.0f"  # kpi: a d3-format string, e.g. ",.2f"
    columns: list[str] = Field(default_factory=list)  # table: the columns shown (default all)
    sort: str | None = Field(default=None, pattern=r"^-?[A-Za-z_][A-Za-z0-9_]*$")  # table: "col" or "-col"
    x_title: str | None = None  # axis titles; default: the column name in words
    y_title: str | None = None
    unit: str = ""  # appended to numbers in axes and tooltips, e.g. "EUR"

    @model_validator(mode="after")
    def _fields(self) -> Chart:
        needs = {
            "bar": ("x", "y"),
            "line": ("x", "y"),
            "area": ("x", "y"),
            "pie": ("theta", "color"),
            "kpi": ("value",),
        }
        missing = [f for f in needs.get(self.type, ()) if not getattr(self, f)]
        if missing:
            raise ValueError(f"a {self.type} chart needs {', '.join(missing)}")
        return self


class Dashboard(BaseModel):
    model_config = {"extra": "forbid"}
    name: str = Field(pattern=r"^[a-z0-9][a-z0-9_-]{0,62}$")
    title: str
    description: str = ""
    refresh_after: list[str] = Field(default_factory=list)
    datasets: dict[str, str] = Field(min_length=1)
    filters: list[Filter] = Field(default_factory=list)
    charts: list[Chart] = Field(min_length=1)
    owner: str = ""  # who built it in the console's chart builder: only they add charts to it there
    source: str = ""

    @model_validator(mode="after")
    def _datasets_known(self) -> Dashboard:
        for name, sql in self.datasets.items():
            if not re.match(IDENT, name):
                raise ValueError(f"dataset name {name!r} must be an identifier")
            try:
                parsed = sqlglot.parse_one(sql, read="spark")
            except sqlglot.errors.ParseError as exc:
                raise ValueError(f"dataset {name}: not valid SQL: {str(exc).splitlines()[0]}") from None
            if not isinstance(parsed, exp.Query):
                raise ValueError(f"dataset {name} must be a query (SELECT ...)")
        items: list[Filter | Chart] = [*self.filters, *self.charts]
        for item in items:
            if item.dataset not in self.datasets:
                raise ValueError(f"{item.dataset!r} is not one of the datasets ({', '.join(self.datasets)})")
        return self


def folders(settings: Settings) -> list[Path]:
    out = [BUILT_IN, settings.workspace_dir / "dashboards"]
    if settings.server.dashboards_dir:
        out.append(Path(settings.server.dashboards_dir).expanduser())
    return out


def load_file(path: Path) -> Dashboard:
    return definitions.load(path, Dashboard, DashboardError, "dashboard", source=str(path))


def load_all(settings: Settings) -> tuple[dict[str, Dashboard], list[str]]:
    """Every dashboard by name, and the errors of files that could not be read."""
    found: dict[str, Dashboard] = {}
    errors: list[str] = []
    for folder in folders(settings):
        if not folder.is_dir():
            continue
        for path in sorted([*folder.glob("*.yaml"), *folder.glob("*.yml")]):
            try:
                d = load_file(path)
            except DashboardError as exc:
                errors.append(str(exc))
                continue
            found[d.name] = d
    return found, errors


def filtered_sql(sql: str, filters: dict[str, str]) -> str:
    """The dataset with `field = value` conditions around it (values as string literals)."""
    if not filters:
        return sql
    inner = sqlglot.parse_one(sql, read="spark")
    assert isinstance(inner, exp.Query)  # every dataset is checked to be a query when a dashboard loads
    query = exp.select("*").from_(inner.subquery("d"))
    for field, value in filters.items():
        col = exp.cast(exp.column(field, table="d"), "string")
        query = query.where(exp.EQ(this=col, expression=exp.Literal.string(value)))
    return query.sql(dialect="spark")


def chart_columns(chart: Chart) -> set[str] | None:
    """The dataset columns a chart draws; None when it draws them all (a table without a list)."""
    if chart.type == "table" and not chart.columns:
        return None
    named = [chart.x, chart.y, chart.color, chart.theta, chart.value, *chart.columns]
    if chart.sort:
        named.append(chart.sort.lstrip("-"))
    return {n.lower() for n in named if n}


def narrowed_sql(sql: str, columns: set[str]) -> str | None:
    """The dataset selecting only `columns` (a plain SELECT's own output columns), so a card
    that draws none of the columns the viewer may not read is drawn; None where the dataset
    cannot be narrowed that way (a star, a set operation, a column it does not name)."""
    tree = sqlglot.parse_one(sql, read="spark")
    if not isinstance(tree, exp.Select) or any(isinstance(e, exp.Star) for e in tree.expressions):
        return None
    # GROUP BY 1 / ORDER BY 2 count select-list positions, which dropping columns would shift.
    for clause in ("group", "order"):
        node = tree.args.get(clause)
        items = [getattr(i, "this", i) if isinstance(i, exp.Ordered) else i for i in (node.expressions if node else [])]
        if any(isinstance(i, exp.Literal) and i.is_number for i in items):
            return None
    kept = [e for e in tree.expressions if e.alias_or_name.lower() in columns]
    if {e.alias_or_name.lower() for e in kept} != columns:
        return None
    narrowed = tree.copy()
    narrowed.set("expressions", kept)
    return narrowed.sql(dialect="spark")


def _number(v: Any) -> float | None:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(f) else f


def kpi_value(chart: Chart, rows: list[dict[str, Any]]) -> float | None:
    values = [_number(r.get(chart.value or "")) for r in rows]
    nums = [v for v in values if v is not None]
    if chart.agg == "count":
        return float(len(rows))
    if not nums:
        return None
    if chart.agg == "sum":
        return sum(nums)
    if chart.agg == "avg":
        return sum(nums) / len(nums)
    if chart.agg == "min":
        return min(nums)
    if chart.agg == "max":
        return max(nums)
    return nums[-1]


# A pie with more slices than this is drawn as a sorted bar chart: repeated colours and a
# clipped legend make many slices unreadable.
MAX_PIE_SLICES = 8


def words(column: str | None) -> str:
    """A column name as an axis title: total_weighted_revenue -> Total weighted revenue."""
    text = (column or "").replace("_", " ").strip()
    return text[:1].upper() + text[1:]


def vega_lite(chart: Chart, rows: list[dict[str, Any]]) -> dict[str, Any]:
    """A Vega-Lite spec with the rows inline (no data URL: nothing is fetched by the browser).
    Axis titles in words (or the chart's own), numbers in the chart's format, pies with many
    slices as sorted bars."""
    spec: dict[str, Any] = {
        "$schema": "https://vega.github.io/schema/vega-lite/v6.json",
        "data": {"values": rows},
        "width": "container",
        "height": 240,
        "config": {"legend": {"orient": "bottom", "columns": 4, "labelLimit": 160}},
    }
    unit = f" {chart.unit}" if chart.unit else ""
    if chart.type == "pie":
        slices = {r.get(chart.color or "") for r in rows}
        value_title = (chart.y_title or words(chart.theta)) + unit
        if len(slices) <= MAX_PIE_SLICES:
            spec["mark"] = {"type": "arc", "tooltip": True}
            spec["encoding"] = {
                "theta": {"field": chart.theta, "type": "quantitative", "aggregate": "sum", "title": value_title},
                "color": {"field": chart.color, "type": "nominal", "title": chart.x_title or words(chart.color)},
                "tooltip": [
                    {"field": chart.color, "type": "nominal", "title": chart.x_title or words(chart.color)},
                    {
                        "field": chart.theta,
                        "type": "quantitative",
                        "aggregate": "sum",
                        "format": chart.format,
                        "title": value_title,
                    },
                ],
            }
            return spec
        spec["mark"] = {"type": "bar", "tooltip": True}
        spec["encoding"] = {
            "y": {"field": chart.color, "type": "nominal", "sort": "-x", "title": chart.x_title or words(chart.color)},
            "x": {
                "field": chart.theta,
                "type": "quantitative",
                "aggregate": "sum",
                "title": value_title,
                "axis": {"format": chart.format},
            },
        }
        spec["height"] = {"step": 18}
        return spec
    spec["mark"] = {"type": chart.type, "tooltip": True, **({"point": True} if chart.type == "line" else {})}
    spec["encoding"] = {
        "x": {"field": chart.x, "type": chart.x_type, "title": chart.x_title or words(chart.x)},
        "y": {
            "field": chart.y,
            "type": "quantitative",
            "aggregate": "sum",
            "title": (chart.y_title or words(chart.y)) + unit,
            "axis": {"format": chart.format},
        },
    }
    if chart.color:
        spec["encoding"]["color"] = {"field": chart.color, "type": "nominal", "title": words(chart.color)}
    return spec


def table_rows(chart: Chart, columns: list[str], rows: list[dict[str, Any]]) -> list[list[Any]]:
    """A table chart's rows: sorted by `sort` ("-col" descending; NULLs last), fractional
    numbers in the chart's format (integers such as years and counts as they are)."""
    if chart.sort:
        key = chart.sort.lstrip("-")
        present = [r for r in rows if r.get(key) is not None]
        missing = [r for r in rows if r.get(key) is None]
        rows = sorted(present, key=lambda r: r[key], reverse=chart.sort.startswith("-")) + missing

    def show(v: Any) -> Any:
        if not isinstance(v, float):
            return v
        return format(v, chart.format) + (f" {chart.unit}" if chart.unit else "")

    return [[show(r.get(c)) for c in columns] for r in rows[:500]]


# ---- the chart builder ------------------------------------------------------------------------
# Charts the builder makes (pies fall back to sorted bars past MAX_PIE_SLICES, as in files).
BUILDER_TYPES = ("bar", "line", "area", "pie", "table", "kpi")
# Number formats offered by the builder, with an example of each: d3-format strings that
# Python's format() reads the same way (KPIs and tables are formatted on the server).
NUMBER_FORMATS = {",.0f": "1,235", ",.1f": "1,234.6", ",.2f": "1,234.56", ".1%": "12.3%"}
_write_lock = threading.Lock()
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}([T ][\d:.]+Z?)?$")


def builder_chart(
    *,
    type: str,
    dataset: str,
    x: str = "",
    y: str = "",
    series: str = "",
    title: str = "",
    agg: str = "sum",
    format: str = ",.0f",
    unit: str = "",
    rows: list[dict[str, Any]] | None = None,
) -> Chart:
    """The chart the builder's fields describe, in the dashboard file's own terms (x/y/series
    become theta/color for a pie, value for a KPI, the columns and sort of a table). Raises
    DashboardError saying what is missing."""
    fields: dict[str, Any] = {"type": type, "title": title.strip(), "dataset": dataset}
    if format in NUMBER_FORMATS:
        fields["format"] = format
    if unit.strip():
        fields["unit"] = unit.strip()
    if type == "pie":
        fields.update(theta=y or None, color=x or series or None)
    elif type == "kpi":
        fields.update(value=y or None, agg=agg)
    elif type == "table":
        fields["columns"] = [c for c in (x, series, y) if c]
        if y:
            fields["sort"] = f"-{y}"  # largest first, as people read a ranking
    else:
        fields.update(x=x or None, y=y or None, color=series or None)
        sample = next((r.get(x) for r in rows or [] if r.get(x) is not None), None)
        if isinstance(sample, str) and _DATE.match(sample):
            fields["x_type"] = "temporal"  # dates on a time axis, spaced by time
    try:
        return Chart(**fields)
    except ValidationError as exc:
        raise DashboardError(definitions.describe(exc)) from None


def dataset_name(query_name: str) -> str:
    """A saved query's name as a dataset name (an identifier)."""
    name = re.sub(r"[^A-Za-z0-9_]+", "_", query_name).strip("_").lower() or "query"
    return name if re.match(IDENT, name) else f"q_{name}"


def save_chart(
    settings: Settings, owner: str, board_name: str, board_title: str, query_name: str, sql: str, chart: Chart
) -> Path:
    """Add a chart (and the saved query's SQL as its dataset) to a dashboard file in
    `<workspace>/dashboards`, creating it for `owner` if new; the same YAML as hand-written files.
    Refuses a name another folder already uses (one file would hide the other) and a file
    someone else owns."""
    if not re.match(r"^[a-z0-9][a-z0-9_-]{0,62}$", board_name) or board_name == "new":
        raise DashboardError(
            f"dashboard name {board_name!r}: use lower-case letters, digits, '-' and '_' (not 'new'), e.g. sales-q3"
        )
    folder = settings.workspace_dir / "dashboards"
    path = folder / f"{board_name}.yaml"
    with _write_lock:
        others = [f for f in folders(settings) if f != folder and any(f.glob(f"{board_name}.y*ml"))]
        if others:
            raise DashboardError(f"dashboard {board_name} is defined in {others[0]}; pick another name")
        if path.exists():
            board = load_file(path)
            if board.owner != owner:
                raise DashboardError(
                    f"dashboard {board_name} belongs to {board.owner or 'its file'}; "
                    "pick another name to make a dashboard of your own"
                )
            data = board.model_dump(exclude={"source"}, exclude_defaults=True)
        else:
            data = {"name": board_name, "title": board_name, "owner": owner, "datasets": {}, "charts": []}
        if board_title.strip():
            data["title"] = board_title.strip()
        datasets: dict[str, str] = data["datasets"]
        base = name = dataset_name(query_name)
        n = 1
        while name in datasets and datasets[name] != sql:
            n += 1
            name = f"{base}_{n}"
        datasets[name] = sql
        data["charts"].append(chart.model_copy(update={"dataset": name}).model_dump(exclude_defaults=True))
        _write(path, data)
    return path


def _write(path: Path, data: dict[str, Any]) -> None:
    """Write a dashboard file the console built, refused unless it loads as written."""
    try:
        Dashboard(**data)
    except ValidationError as exc:
        raise DashboardError(definitions.describe(exc)) from None
    path.parent.mkdir(parents=True, exist_ok=True)
    text = "# Written by the console's chart builder; hand edits are kept.\n" + yaml.safe_dump(
        data, sort_keys=False, allow_unicode=True, width=120
    )
    tmp = path.with_suffix(".yaml.tmp")
    tmp.write_text(text)
    tmp.replace(path)  # readers see the old file or the new one, never half of it


def builder_board(settings: Settings, owner: str, board_name: str) -> Dashboard:
    """A dashboard `owner` built in the console (its file in `<workspace>/dashboards`, its
    `owner` them): the only ones whose charts the console edits, removes or moves. Raises
    DashboardError for any other (a hand-written file, the built-in ones, another's)."""
    path = settings.workspace_dir / "dashboards" / f"{board_name}.yaml"
    if not re.match(r"^[a-z0-9][a-z0-9_-]{0,62}$", board_name) or not path.is_file():
        raise DashboardError(f"no dashboard {board_name} made in the console")
    board = load_file(path)
    boards, _ = load_all(settings)
    if board.owner != owner or boards.get(board_name, board).source != board.source:
        raise DashboardError(f"dashboard {board_name} is not one of yours: only its owner changes its charts")
    return board


def change_charts(
    settings: Settings, owner: str, board_name: str, change: Callable[[list[dict[str, Any]]], None]
) -> bool:
    """Apply `change` to the chart list of a dashboard `owner` built (builder_board), drop the
    datasets no chart or filter uses any more, and write it back; False when its last chart
    went, and with it the dashboard (its file is removed)."""
    with _write_lock:
        board = builder_board(settings, owner, board_name)
        path = Path(board.source)
        data = board.model_dump(exclude={"source"}, exclude_defaults=True)
        change(data["charts"])
        if not data["charts"]:
            path.unlink()
            return False
        used = {c["dataset"] for c in data["charts"]} | {f["dataset"] for f in data.get("filters", [])}
        data["datasets"] = {k: v for k, v in data["datasets"].items() if k in used}
        _write(path, data)
    return True


def builder_fields(chart: Chart) -> dict[str, str]:
    """The builder's fields for a chart (the reverse of builder_chart), to edit it."""
    fields = {"type": chart.type, "x": "", "y": "", "series": "", "title": chart.title, "agg": chart.agg}
    fields.update(format=chart.format if chart.format in NUMBER_FORMATS else ",.0f", unit=chart.unit)
    if chart.type == "pie":
        fields.update(x=chart.color or "", y=chart.theta or "")
    elif chart.type == "kpi":
        fields["y"] = chart.value or ""
    elif chart.type == "table":
        columns = list(chart.columns)
        if chart.sort and chart.sort.startswith("-") and chart.sort[1:] in columns:
            fields["y"] = chart.sort[1:]  # the builder sorts a table by its value, largest first
            columns.remove(fields["y"])
        fields.update(x=columns[0] if columns else "", series=columns[1] if len(columns) > 1 else "")
    else:
        fields.update(x=chart.x or "", y=chart.y or "", series=chart.color or "")
    return fields


# Spark's simple type names: what the builder preselects x (text, dates) and y (numbers) from.
_NUMERIC = ("tinyint", "smallint", "int", "bigint", "float", "double", "decimal")
_CATEGORY = ("string", "varchar", "char", "date", "timestamp")


def preselected(columns: list[str], types: list[str]) -> dict[str, str]:
    """x: the first text or date column; y: the first numeric one (either may be missing)."""
    out: dict[str, str] = {}
    for name, kind in zip(columns, types, strict=False):
        if "x" not in out and kind.startswith(_CATEGORY):
            out["x"] = name
        if "y" not in out and kind.startswith(_NUMERIC):
            out["y"] = name
    return out


def numeric_columns(columns: list[str], types: list[str]) -> list[str]:
    return [name for name, kind in zip(columns, types, strict=False) if kind.startswith(_NUMERIC)]
